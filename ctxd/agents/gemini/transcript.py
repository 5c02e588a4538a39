"""Gemini CLI chat recordings (`chats/session-*.jsonl`, and the older `session-*.json`) ->
usage updates.

The file is a log of edits to a message list: message lines `{id, timestamp, type, ...}` append a
message or replace the one with the same id; `{"$rewindTo": id}` drops that message and all after
it; `{"$set": {"messages": [...]}}` replaces the whole list; other `$set` keys and the metadata
line (`{sessionId, projectHash, startTime, ...}`) say nothing about usage.

The figure is `tokens.input` of the last gemini message still in the list. `tokens.input` is the
API's `promptTokenCount` (the 0.61.0 samples match the mock's usageMetadata field for field), the
whole prompt of that request with the cached part included (`tokens.cached` is a part of it, never
an addition). It is also the figure Gemini CLI itself compares with its compression threshold.

Compression shows as a `$set` of messages that brings in a new `<state_snapshot>` summary, or the
CLI's fixed acknowledgement of one. The rebuilt messages carry no tokens, so the update reports an
estimate of the rebuilt history, characters / 4, with `compaction=True` (in the interactive
sample Gemini CLI printed "compressed from 13000 to 168 tokens"; this gives 154); the next gemini
message replaces it. When a rewind leaves no gemini message with tokens, no update is made.
A resume also rewrites the list, keeping the ids: that is not a compaction, and tokens already
known for a kept id stay known.

A gemini message whose `tokens` are all 0 (seen in 2025-10 recordings: a request that reported
no usage) says nothing about the context and is passed over.

Per message only its id and, for gemini messages, its usage figure are kept. A gemini message
line (2-14 KB in real recordings: thoughts, tool calls and their results) is not decoded whole
when Gemini CLI's own key order shows where its few fields are (`_gemini_line`); anything else
is decoded.

Given `facts` (the session digest, `digest.py`), the same pass keeps them too: each message line
is handed over once its kind is known (a user or a gemini message), a `$set` of messages
decoded, as is any line the fallback decodes. A gemini message line's head is read as above,
and the facts read the rest of it, its tool calls to the end of the line: that also shows that
no second `tokens` key follows, which the usage-only path searches the whole line for (one
search instead of two over a line that is mostly tool results). Without facts (`ctxd replay`)
no more is done.

Older versions (up to at least early 2026) write one JSON object, `{sessionId, projectHash,
startTime, lastUpdated, messages: [...]}`, rewritten whole on every change: `GeminiJsonReader`
parses the whole file each time it is read (`rewritten_whole`: the daemon reads it again from 0
whenever it changes) and reports the gemini messages it has not reported yet, in order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.core.events import UsageUpdate

if TYPE_CHECKING:
    from ctxd.agents.gemini.digest import GeminiFacts

__all__ = ["GeminiJsonReader", "GeminiReader"]

_SNAPSHOT = "<state_snapshot>"
_ACK = "Got it. Thanks for the additional context!"
_COMPRESSION_MARKERS = (_SNAPSHOT.encode(), _ACK.encode())
_MESSAGE_PREFIX = b'{"id":"'
_TOKENS_KEY = b'"tokens"'
_SET_PREFIX = b'{"$set":'
_MESSAGES_KEY = b'"messages"'
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4
# Gemini CLI writes a message's keys in this order: id, timestamp, type, content, thoughts,
# tokens, model, toolCalls. Quotes inside JSON strings are escaped, so these byte sequences
# can only be keys; "tokens" must occur once, so that no nested object can be mistaken for it.
_TIMESTAMP = b'","timestamp":"'
_GEMINI_TYPE = b'","type":"gemini",'
_TOKENS_OBJECT = b'"tokens":{'
_TOKENS = b'"tokens":'
_MODEL_NEXT = b',"model":"'


@dataclass(frozen=True, slots=True)
class _Figure:
    tokens: int
    at: float | None
    model: str | None


class GeminiReader:
    """Incremental reader for Gemini CLI chat recordings; see the module docstring."""

    def __init__(self, facts: GeminiFacts | None = None) -> None:
        #: The session digest kept in the same pass, if any.
        self.facts = facts
        self._lines = LineSplitter()
        self._ids: list[str] = []
        self._position: dict[str, int] = {}
        self._figures: dict[str, _Figure] = {}
        self._changed = False  # the list changed since the figure was last looked at
        self._reported = Changes()

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        for line in self._lines.feed(data):
            if not line:
                continue
            compaction = self._on_line(line) if facts is None else self._on_line_both(line, facts)
            if compaction is not None:
                self._changed = False
                self._reported.is_new((compaction.tokens, compaction.turn_id), force=True)
                updates.append(compaction)
                continue
            if not self._changed:
                continue
            self._changed = False
            current = self._current()
            if current is None:
                # No message with usage left (fresh list, rewind past the first answer): the
                # last figure reported stays the best one known.
                continue
            turn_id, figure = current
            key = (figure.tokens, turn_id)
            if self._reported.is_new(key):
                updates.append(
                    UsageUpdate(
                        tokens=figure.tokens, at=figure.at, model=figure.model, turn_id=turn_id
                    )
                )
        if facts is not None:
            facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._ids = []
        self._position = {}
        self._figures = {}
        self._changed = False
        self._reported.reset()
        if self.facts is not None:
            self.facts.reset()

    def saw_answer(self) -> bool:
        """Gemini CLI records the answer before it runs AfterAgent hooks."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Gemini CLI records the model turn before it runs the tool."""
        return True

    # ------------------------------------------------------------------ records

    def _on_line(self, line: bytes) -> UsageUpdate | None:
        """Apply one line to the message list; return an update only for a compression."""
        if line.startswith(_SET_PREFIX) and _MESSAGES_KEY not in line:
            return None  # `lastUpdated`, `sessionId`, `summary`: metadata, half of all lines
        if line.startswith(_MESSAGE_PREFIX) and line.endswith(b"}"):
            if _TOKENS_KEY not in line:
                # User and info messages matter only by id (a rewind names one): no decode.
                end = line.find(b'"', len(_MESSAGE_PREFIX))
                if end > 0 and line.find(b"\\", 0, end) < 0:
                    self._put(line[len(_MESSAGE_PREFIX) : end].decode("utf-8", "replace"), None)
                    return None
            else:
                fast = _gemini_line(line)
                if fast is not None:
                    self._put(*fast)
                    return None
        record = decode(line)
        if record is None:
            return None
        return self._on_record(record, line)

    def _on_line_both(self, line: bytes, facts: GeminiFacts) -> UsageUpdate | None:
        """`_on_line`, with the digest's lines and records handed over."""
        if line.startswith(_SET_PREFIX):
            if _MESSAGES_KEY not in line:
                return None
        elif line.startswith(_MESSAGE_PREFIX):
            facts.messages += 1  # a `$set` after a message line is no longer the file's start
            if line.endswith(b"}"):
                if _TOKENS_KEY not in line:
                    end = line.find(b'"', len(_MESSAGE_PREFIX))
                    if end > 0 and line.find(b"\\", 0, end) < 0:
                        facts.take_user_line(line)
                        self._put(line[len(_MESSAGE_PREFIX) : end].decode("utf-8", "replace"), None)
                        return None
                else:
                    # The rest of the line after `model` is read by the facts (its tool calls,
                    # to the end of the line): that also shows no second `tokens` key follows,
                    # which `_gemini_line` would otherwise search the whole line for.
                    head = _gemini_head(line)
                    if head is not None and facts.take_model_line(
                        line, head.content_at, head.rest_at
                    ):
                        self._put(head.message_id, head.figure)
                        return None
        record = decode(line)
        if record is None:
            return None
        if "$set" in record:
            facts.take_rewrite(record, line)
        elif "$rewindTo" not in record and isinstance(record.get("id"), str):
            facts.take_message(record)
        return self._on_record(record, line)

    def _on_record(self, record: dict[str, Any], line: bytes) -> UsageUpdate | None:
        if "$rewindTo" in record:
            self._rewind(record["$rewindTo"])
        elif "$set" in record:
            changes = record["$set"]
            if isinstance(changes, dict) and isinstance(changes.get("messages"), list):
                compressed = any(marker in line for marker in _COMPRESSION_MARKERS)
                return self._replace(changes["messages"], changes.get("lastUpdated"), compressed)
        elif isinstance(record.get("id"), str) and "type" in record:
            self._put(record["id"], _figure(record))
        return None

    def _put(self, message_id: str, figure: _Figure | None) -> None:
        # A repeated id replaces the earlier record in place: last write wins.
        self._changed = True
        if message_id not in self._position:
            self._position[message_id] = len(self._ids)
            self._ids.append(message_id)
        if figure is None:
            self._figures.pop(message_id, None)
        else:
            self._figures[message_id] = figure

    def _rewind(self, message_id: object) -> None:
        if not isinstance(message_id, str) or message_id not in self._position:
            return
        self._changed = True
        cut = self._position[message_id]
        for dropped in self._ids[cut:]:
            del self._position[dropped]
            self._figures.pop(dropped, None)
        del self._ids[cut:]

    def _replace(
        self, messages: list[Any], updated: object, maybe_compressed: bool
    ) -> UsageUpdate | None:
        old_figures = self._figures
        old_ids = self._position
        self._ids, self._position, self._figures = [], {}, {}
        self._changed = True
        compressed = False
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                continue
            message_id: str = message["id"]
            known = message_id in old_ids
            figure = _figure(message) or (old_figures.get(message_id) if known else None)
            self._put(message_id, figure)
            if maybe_compressed and not known and _is_summary(message):
                compressed = True
        if not compressed or not self._ids:
            return None
        # Pin the estimate to the last rebuilt message, so that it outranks any pre-compression
        # figure a kept message still carries until the next answer arrives.
        last_id = self._ids[-1]
        estimate = _estimate(messages)
        self._figures[last_id] = _Figure(estimate, epoch_seconds(updated), None)
        return UsageUpdate(
            tokens=estimate, at=epoch_seconds(updated), compaction=True, turn_id=last_id
        )

    def _current(self) -> tuple[str, _Figure] | None:
        for message_id in reversed(self._ids):
            figure = self._figures.get(message_id)
            if figure is not None:
                return message_id, figure
        return None


def _figure(message: dict[str, Any]) -> _Figure | None:
    tokens = message.get("tokens")
    if message.get("type") != "gemini" or not isinstance(tokens, dict):
        return None
    prompt = count(tokens.get("input"))
    if prompt is None or not any(tokens.values()):
        return None
    model = message.get("model")
    return _Figure(
        prompt, epoch_seconds(message.get("timestamp")), model if isinstance(model, str) else None
    )


class _Head(NamedTuple):
    """A gemini message line's head, as `_gemini_head` finds it."""

    message_id: str
    figure: _Figure | None
    #: Where `"content":` is (right after the type).
    content_at: int
    #: Where the line goes on after the model's name (`}` or `,"toolCalls":[…]}`).
    rest_at: int
    #: Where the tokens object ends.
    tokens_end: int


def _gemini_line(line: bytes) -> tuple[str, _Figure | None] | None:
    """(id, figure) of a gemini message line in Gemini CLI's own key order, found without
    decoding the whole line; None when the line is not in that shape (decode it instead)."""
    head = _gemini_head(line)
    # "tokens" must occur once, so that no nested object can be mistaken for it.
    if head is None or line.find(_TOKENS, head.tokens_end) >= 0:
        return None
    return head.message_id, head.figure


def _gemini_head(line: bytes) -> _Head | None:
    """`_gemini_line` without its search of the rest of the line for another `tokens` key."""
    start = len(_MESSAGE_PREFIX)
    id_end = line.find(b'"', start)
    if id_end < 0 or line.find(b"\\", start, id_end) >= 0:
        return None
    if not line.startswith(_TIMESTAMP, id_end):
        return None
    at_start = id_end + len(_TIMESTAMP)
    at_end = line.find(b'"', at_start)
    if at_end < 0 or not line.startswith(_GEMINI_TYPE, at_end):
        return None
    tokens_at = line.find(_TOKENS_OBJECT, at_end)
    if tokens_at < 0:
        return None
    body = tokens_at + len(_TOKENS)
    close = line.find(b"}", body)
    if (
        close < 0
        or line.find(b"{", body + 1, close) >= 0
        or not line.startswith(_MODEL_NEXT, close + 1)
    ):
        return None
    model_start = close + 1 + len(_MODEL_NEXT)
    model_end = line.find(b'"', model_start)
    if model_end < 0 or line.find(b"\\", model_start, model_end) >= 0:
        return None
    try:
        tokens = orjson.loads(line[body : close + 1])
    except orjson.JSONDecodeError:
        return None
    message = {
        "type": "gemini",
        "tokens": tokens,
        "timestamp": line[at_start:at_end].decode("utf-8", "replace"),
        "model": line[model_start:model_end].decode("utf-8", "replace"),
    }
    return _Head(
        line[start:id_end].decode("utf-8", "replace"),
        _figure(message),
        at_end + len(_GEMINI_TYPE),
        model_end + 1,
        close + 1,
    )


def _texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [
        part["text"]
        for part in content
        if isinstance(part, dict) and isinstance(part.get("text"), str)
    ]


def _is_summary(message: dict[str, Any]) -> bool:
    texts = _texts(message)
    return bool(texts) and (texts[0].lstrip().startswith(_SNAPSHOT) or texts[0].strip() == _ACK)


def _estimate(messages: list[Any]) -> int:
    """Tokens of a rebuilt history, estimated from its characters."""
    chars = 0
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
                else:
                    # Function calls and responses: count their JSON text.
                    chars += len(orjson.dumps(part))
    return chars // _CHARS_PER_TOKEN


class GeminiJsonReader:
    """Reader for the older single-object recordings (`chats/session-*.json`); see the module
    docstring. Holds the file's bytes until they parse as a whole."""

    #: The file is rewritten whole: read it again from the start whenever it changes.
    rewritten_whole = True

    def __init__(self) -> None:
        self._data = bytearray()
        self._reported: set[str] = set()  # ids of the messages already reported, in any role

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; the updates once it parses as a whole."""
        self._data += data
        if not self._data.rstrip().endswith(b"}"):
            return []  # mid-write, or not this format
        try:
            doc = orjson.loads(self._data)
        except orjson.JSONDecodeError:
            return []
        messages = doc.get("messages") if isinstance(doc, dict) else None
        if not isinstance(messages, list):
            return []
        return self._new_updates(messages, doc.get("lastUpdated"))

    def reset(self) -> None:
        """Start the file over (it was rewritten). What was reported stays reported."""
        self._data = bytearray()

    def saw_answer(self) -> bool:
        """Gemini CLI records the answer before it runs AfterAgent hooks."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Gemini CLI records the model turn before it runs the tool."""
        return True

    def _new_updates(self, messages: list[Any], updated: object) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        for index, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                continue
            message_id: str = message["id"]
            if message_id in self._reported:
                continue
            if _is_summary(message):
                self._reported.add(message_id)
                updates.append(
                    UsageUpdate(
                        tokens=_estimate(messages[index:]),
                        at=epoch_seconds(message.get("timestamp") or updated),
                        compaction=True,
                        turn_id=message_id,
                        estimated=True,
                    )
                )
                continue
            if message.get("type") != "gemini":
                self._reported.add(message_id)
                continue
            figure = _figure(message)
            if figure is None:
                continue  # no usage yet: it may be rewritten with it
            self._reported.add(message_id)
            updates.append(
                UsageUpdate(
                    tokens=figure.tokens, at=figure.at, model=figure.model, turn_id=message_id
                )
            )
        return updates
