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

Per message only its id and, for gemini messages, its usage figure are kept.

One pass serves both listeners of a reader. The `$set` metadata lines (half of all lines) hold
neither usage nor facts: a byte test skips them. Given a listener that wants records (the
session digest, `digest.py`), every other line is decoded once, read for usage and handed over.
Without one (`ctxd replay`), a message line is decoded only when its head, in Gemini CLI's own
key order, does not show its id and usage (`_gemini_line`: a gemini message line is 2-14 KB in
real recordings, thoughts, tool calls and their results, for a few fields). Opened for the
facts alone (`usage=False`, `ctxd handoff`), it hands the records over and keeps no message list;
once it has handed over a message, it skips a `$set` of messages whose bytes hold no summary
(`may_hold_summary`), since the digest reads a later rewrite only for a new summary.

Older versions (up to at least early 2026) write one JSON object, `{sessionId, projectHash,
startTime, lastUpdated, messages: [...]}`, rewritten whole on every change: `GeminiJsonReader`
parses the whole file each time it is read (`rewritten_whole`: the daemon reads it again from 0
whenever it changes) and reports the gemini messages it has not reported yet, in order.
"""

from __future__ import annotations

from typing import Any

import orjson

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = [
    "GeminiJsonReader",
    "GeminiReader",
    "is_summary",
    "is_summary_text",
    "may_hold_summary",
    "message_texts",
]

_SNAPSHOT = "<state_snapshot>"
_ACK = "Got it. Thanks for the additional context!"
_SNAPSHOT_BYTES = _SNAPSHOT.encode()
_ACK_BYTES = _ACK.encode()
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


#: A gemini message's usage: (tokens, its raw timestamp, model). The timestamp is read only for
#: the figures reported (a message is written several times, and most never are).
_Figure = tuple[int, object, str | None]


class GeminiReader:
    """Incremental reader for Gemini CLI chat recordings; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS, usage: bool = True) -> None:
        #: Told every record decoded (the session digest), if it wants them.
        self.facts = facts
        #: False: only the listener's facts are wanted (`ctxd handoff`), no usage work is done.
        self.usage = usage
        self._lines = LineSplitter()
        #: The message list: id -> its usage figure (None: none), in the list's order.
        self._messages: dict[str, _Figure | None] = {}
        self._changed = False  # the list changed since the figure was last looked at
        self._reported = Changes()
        #: A message was handed to the listener: a `$set` of messages is no longer the start.
        self._begun = False

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed (the
        records decoded on the way handed to the listener, which is flushed at the end)."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        take = facts.take if facts.wants_records else None
        on_record = self._on_record
        usage = self.usage
        loads = orjson.loads
        begun = self._begun
        # For the facts alone, a rewrite after the start matters only by a new summary
        # (`digest.py`): one whose bytes hold none is not decoded (measured).
        skip_rewrites = begun and not usage
        for line in self._lines.feed(data):
            if not line or (
                line.startswith(_SET_PREFIX)
                # `lastUpdated`, `sessionId`, `summary`: metadata, half of all lines, for no
                # listener: not decoding them pays (measured), with the digest too.
                and (_MESSAGES_KEY not in line or (skip_rewrites and not may_hold_summary(line)))
            ):
                continue
            if take is None:
                compaction = self._on_line(line)
            else:
                try:
                    record = loads(line)
                except orjson.JSONDecodeError:
                    continue
                if type(record) is not dict:
                    continue
                take(record)
                if not begun:
                    begun = self._begun = _is_message(record)
                    skip_rewrites = begun and not usage
                if not usage:
                    continue
                compaction = on_record(record)
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
            turn_id, (tokens, at, model) = current
            if self._reported.is_new((tokens, turn_id)):
                updates.append(
                    UsageUpdate(tokens=tokens, at=epoch_seconds(at), model=model, turn_id=turn_id)
                )
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything (the listener too): the file was truncated or replaced and is
        read again from 0."""
        self._lines.reset()
        self._messages = {}
        self._changed = False
        self._reported.reset()
        self._begun = False
        self.facts.reset()

    def saw_answer(self) -> bool:
        """Gemini CLI records the answer before it runs AfterAgent hooks."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Gemini CLI records the model turn before it runs the tool."""
        return True

    # ------------------------------------------------------------------ records

    def _on_line(self, line: bytes) -> UsageUpdate | None:
        """A line for usage alone: decoded only when its head does not show what it says."""
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
        return self._on_record(record)

    def _on_record(self, record: dict[str, Any]) -> UsageUpdate | None:
        """Apply one record to the message list; return an update only for a compression."""
        if "$rewindTo" in record:
            self._rewind(record["$rewindTo"])
        elif "$set" in record:
            changes = record["$set"]
            if isinstance(changes, dict) and isinstance(changes.get("messages"), list):
                return self._replace(changes["messages"], changes.get("lastUpdated"))
        else:
            message_id = record.get("id")
            if isinstance(message_id, str) and "type" in record:
                self._put(message_id, _figure(record))
        return None

    def _put(self, message_id: str, figure: _Figure | None) -> None:
        # A repeated id replaces the earlier record in place: last write wins. The figure to
        # report changes only with a message's figure (a user message appended changes none).
        messages = self._messages
        if figure != messages.get(message_id):
            self._changed = True
        messages[message_id] = figure

    def _rewind(self, message_id: object) -> None:
        if not isinstance(message_id, str) or message_id not in self._messages:
            return
        self._changed = True
        ids = list(self._messages)
        for dropped in ids[ids.index(message_id) :]:
            del self._messages[dropped]

    def _replace(self, messages: list[Any], updated: object) -> UsageUpdate | None:
        old = self._messages
        new: dict[str, _Figure | None] = {}
        compressed = False
        for message in messages:
            if not isinstance(message, dict):
                continue
            message_id = message.get("id")
            if not isinstance(message_id, str):
                continue
            figure = _figure(message)
            if message_id in old:
                new[message_id] = figure or old[message_id]
            else:
                new[message_id] = figure
                compressed = compressed or is_summary(message)
        self._messages = new
        self._changed = True
        if not compressed or not new:
            return None
        # Pin the estimate to the last rebuilt message, so that it outranks any pre-compression
        # figure a kept message still carries until the next answer arrives.
        last_id = next(reversed(new))
        estimate = _estimate(messages)
        new[last_id] = (estimate, updated, None)
        return UsageUpdate(
            tokens=estimate, at=epoch_seconds(updated), compaction=True, turn_id=last_id
        )

    def _current(self) -> tuple[str, _Figure] | None:
        for message_id, figure in reversed(self._messages.items()):
            if figure is not None:
                return message_id, figure
        return None


def _figure(message: dict[str, Any]) -> _Figure | None:
    if message.get("type") != "gemini":
        return None
    tokens = message.get("tokens")
    if not isinstance(tokens, dict):
        return None
    prompt = count(tokens.get("input"))
    if prompt is None or not any(tokens.values()):
        return None
    model = message.get("model")
    return prompt, message.get("timestamp"), model if isinstance(model, str) else None


def _gemini_line(line: bytes) -> tuple[str, _Figure | None] | None:
    """(id, figure) of a gemini message line in Gemini CLI's own key order, found without
    decoding the whole line; None when the line is not in that shape (decode it instead)."""
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
        # "tokens" must occur once, so that no nested object can be mistaken for it.
        or line.find(_TOKENS, close + 1) >= 0
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
    return line[start:id_end].decode("utf-8", "replace"), _figure(message)


def _is_message(record: dict[str, Any]) -> bool:
    """A record is a message (not a rewrite of the list, a rewind or the metadata)."""
    return "$set" not in record and "$rewindTo" not in record and isinstance(record.get("id"), str)


def may_hold_summary(line: bytes) -> bool:
    """Whether a line's bytes could hold a summary message (`is_summary`): False when neither
    text occurs in them. Gemini CLI writes its JSON with `JSON.stringify`, which escapes
    neither text's characters."""
    return _SNAPSHOT_BYTES in line or _ACK_BYTES in line


def message_texts(message: dict[str, Any]) -> list[str]:
    """The texts of a message's `content`: the string, or its parts' `text`s."""
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


def is_summary_text(text: str) -> bool:
    """A message's first text is a compression's summary, or the CLI's acknowledgement of one."""
    return text.lstrip().startswith(_SNAPSHOT) or text.strip() == _ACK


def is_summary(message: dict[str, Any]) -> bool:
    """A message of a compressed history that stands for what was compressed."""
    content = message.get("content")
    if isinstance(content, list):  # its first text (`message_texts`, without the others)
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str):
                return is_summary_text(text)
        return False
    return isinstance(content, str) and is_summary_text(content)


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
            if is_summary(message):
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
            tokens, at, model = figure
            updates.append(
                UsageUpdate(tokens=tokens, at=epoch_seconds(at), model=model, turn_id=message_id)
            )
        return updates
