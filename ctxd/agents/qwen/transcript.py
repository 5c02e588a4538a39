"""Qwen Code transcripts (`projects/<cwd>/chats/<session>.jsonl`) -> usage updates.

Every line is a record `{"uuid", "parentUuid", "sessionId", "timestamp", "type", ...}`, appended
in order; the records form a tree through `parentUuid`, and the last record appended is the head
of the conversation in force.

- An `assistant` record carries the usage of the response it records, in Gemini's shape:
  `usageMetadata.promptTokenCount` is the API's `prompt_tokens` (the whole prompt, cached part
  included; 0.24.4 samples match the mock's usage field for field), and `contextWindowSize` the
  window Qwen Code runs the model with. The figure is that prompt, as Qwen Code's own
  `context_usage` (Stop payload) counts it; it is reported with the window as
  `reported_window`, `turn_id` the record's uuid, and the response's output tokens
  (`totalTokenCount - promptTokenCount`) as `pending`: the next request carries them, and Qwen
  Code adds them to the prompt when it checks its compression threshold.
- A `system` record with subtype `chat_compression` marks a compression:
  `systemPayload.info.newTokenCount` is Qwen Code's own estimate of the compressed prompt (the
  figure it carries on with until the next response); it is reported with `compaction=True`,
  `estimated` as the record says, and for an automatic one (`triggerReason: "token_limit"`) the
  count it compressed at (`originalTokenCount`) as `compacted_from`.
- A `/rewind` appends a `system`/`rewind` record whose parent is the record just before the
  user turn it went back to: the figure in force there applies again. So the figure in force
  after each user turn's parent is remembered (one entry per user turn); every other record
  inherits its parent's figure.
- Other records (user, tool results, telemetry, titles) carry no usage: their uuid, parent and
  type are read from the line's head, as Qwen Code writes the keys, without decoding the rest;
  a line whose head is laid out otherwise is decoded.

Qwen Code queues its transcript writes: a hook may run before the answer it follows is on disk
(seen with 0.24.4 for PostToolUse and for Stop). Its PostToolUse names the call by an id of its
own (`tool_use_id: "toolu_..."`) that the transcript never holds, so `saw_tool_use` answers
whether the last answer read made tool calls whose results are not recorded yet: true from the
answer to its tool results (recorded as a batch, after every PostToolUse of that answer), false
before the answer is written.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import orjson

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["QwenReader"]

_HEAD = re.compile(
    rb'\{"uuid":"([^"\\]{1,128})","parentUuid":(?:null|"([^"\\]{1,128})"),'
    rb'"sessionId":"[^"\\]*","timestamp":"[^"\\]*","type":"([a-z_]{1,32})"'
)
_USAGE_KEY = b'"usageMetadata"'
_COMPRESSION = b'"subtype":"chat_compression"'
_TOOL_CALL = b'"functionCall"'
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4


class QwenReader:
    """Incremental reader for Qwen Code transcripts; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        #: Qwen Code keeps no digest yet; a listener that wants records gets every line decoded.
        self.facts = facts
        self._lines = LineSplitter()
        self._head: str | None = None
        self._current: UsageUpdate | None = None
        # The figure in force at each user turn's parent: where a rewind may lead back to.
        self._turn_parents: dict[str, UsageUpdate | None] = {}
        self._calls_open = False  # the last answer read made tool calls not answered yet
        self._answered = False  # the last conversation record read is an answer with no calls
        self._reported = Changes()

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        for line in self._lines.feed(data):
            if line:
                update = self._on_line(line)
                if update is not None:
                    updates.append(update)
                if wants_records and (record := decode(line)) is not None:
                    facts.take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._head = None
        self._current = None
        self._turn_parents = {}
        self._calls_open = False
        self._answered = False
        self._reported.reset()
        self.facts.reset()

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the answer that made the tool calls now running is read (any id: Qwen Code's
        hook ids are not in the transcript; see the module docstring)."""
        return self._calls_open

    def saw_answer(self) -> bool:
        """Whether the turn's final answer is read: Qwen Code queues its transcript writes, and
        a Stop hook can run before the answer is on disk (1 Stop in 5 in the captures' runs)."""
        return self._answered

    def _on_line(self, line: bytes) -> UsageUpdate | None:
        head = _HEAD.match(line)
        record: dict[str, Any] | None = None
        if head is not None:
            uuid = head.group(1).decode()
            parent = head.group(2).decode() if head.group(2) is not None else None
            kind = head.group(3).decode()
        else:
            record = decode(line)
            if record is None or not isinstance(record.get("uuid"), str):
                return None
            uuid = record["uuid"]
            parent_value = record.get("parentUuid")
            parent = parent_value if isinstance(parent_value, str) else None
            kind = str(record.get("type"))

        if kind == "assistant":
            self._calls_open = _TOOL_CALL in line
            self._answered = not self._calls_open
        elif kind in ("user", "tool_result"):
            self._calls_open = False
            self._answered = False
        inherited = self._in_force_at(parent)
        if kind == "user" and parent is not None:
            self._turn_parents[parent] = inherited
        own: UsageUpdate | None = None
        if kind == "assistant" and _USAGE_KEY in line:
            own = _answer(record if record is not None else decode(line), uuid)
        elif kind == "system" and _COMPRESSION in line:
            own = _compression(record if record is not None else decode(line), uuid)
        self._head = uuid
        if own is None and inherited is not None and inherited.compaction:
            # Carried forward (or returned to by a rewind), a compaction is just a figure.
            inherited = replace(inherited, compaction=False)
        self._current = own or inherited
        if self._current is None:
            return None
        forced = own is not None and own.compaction
        key = (self._current.tokens, self._current.pending, self._current.turn_id)
        if self._reported.is_new(key, force=forced):
            return self._current
        return None

    def _in_force_at(self, parent: str | None) -> UsageUpdate | None:
        if parent is None:
            return None
        if parent == self._head:
            return self._current
        if parent in self._turn_parents:
            return self._turn_parents[parent]
        # A parent never seen (a file read from the middle, a record type unknown here): the
        # figure in force stays the best one known.
        return self._current


def _answer(record: dict[str, Any] | None, uuid: str) -> UsageUpdate | None:
    if record is None:
        return None
    usage = record.get("usageMetadata")
    if not isinstance(usage, dict):
        return None
    prompt = count(usage.get("promptTokenCount"))
    if prompt is None:
        return None
    model, version = record.get("model"), record.get("version")
    return UsageUpdate(
        tokens=prompt,
        at=epoch_seconds(record.get("timestamp")),
        model=model if isinstance(model, str) else None,
        reported_window=count(record.get("contextWindowSize")) or None,
        turn_id=uuid,
        pending=_output(usage, prompt),
        agent_version=version if isinstance(version, str) and version else None,
    )


def _output(usage: dict[str, Any], prompt: int) -> int:
    """The response's output tokens as Qwen Code counts them for its threshold (`total - prompt`,
    else candidates + thoughts)."""
    total = count(usage.get("totalTokenCount"))
    if total is not None:
        return max(0, total - prompt)
    return (count(usage.get("candidatesTokenCount")) or 0) + (
        count(usage.get("thoughtsTokenCount")) or 0
    )


def _compression(record: dict[str, Any] | None, uuid: str) -> UsageUpdate | None:
    if record is None or record.get("subtype") != "chat_compression":
        return None
    payload = record.get("systemPayload")
    if not isinstance(payload, dict):
        return None
    info = payload.get("info")
    if not isinstance(info, dict):
        info = {}
    tokens = count(info.get("newTokenCount"))
    estimated = info.get("newTokenCountIsEstimated") is True
    if tokens is None:
        history = payload.get("compressedHistory")
        if history is None:
            return None
        tokens, estimated = len(orjson.dumps(history)) // _CHARS_PER_TOKEN, True
    automatic = info.get("triggerReason") == "token_limit"
    return UsageUpdate(
        tokens=tokens,
        at=epoch_seconds(record.get("timestamp")),
        compaction=True,
        turn_id=uuid,
        estimated=estimated,
        compacted_from=count(info.get("originalTokenCount")) if automatic else None,
    )
