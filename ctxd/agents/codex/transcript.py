"""Codex CLI rollouts (`sessions/YYYY/MM/DD/rollout-*.jsonl`) -> usage updates.

Every line is `{timestamp, ordinal, type, payload}`. Usage arrives twice per model response:

- `token_usage_record` (`payload.usage`, `payload.response_id`), written as soon as the response
  completes, so it is already on disk when the response's tool hooks run;
- `event_msg` / `token_count` (`payload.info.last_token_usage`, `info.model_context_window`),
  written only after the tool's output, and sometimes more than once for the same response.

The figure is the newest per-response `total_tokens`, from whichever of the two came last. It is
what Codex itself counts as context used ("context left" comes from
`last_token_usage.total_tokens`): `input_tokens + output_tokens`, where `cached_input_tokens` is
already a part of `input_tokens` (OpenAI's convention, unlike Anthropic's) and reasoning tokens a
part of `output_tokens`. A `token_count` repeating the usage of the last `token_usage_record`
carries that record's `response_id` as `turn_id`, so it never looks like a new turn.

A `compacted` line marks a compaction, reported at once so that it counts when it happens
(`compaction=True`), with ctxd's estimate (`estimated=True`): the smallest context seen
(instructions, tools, a prompt) plus the length / 4 of the `replacement_history` (or `message`)
it carries. The `token_count` after it has zeros everywhere but Codex's own estimate of the
rebuilt history in `total_tokens`; that replaces ctxd's under the same turn id (still
`estimated`), as does the next response's usage.

Around a compaction Codex writes `token_count`s whose categories are all 0 but
`total_tokens`: after the `compacted` line, its own estimate of the rebuilt history (reported
with `estimated=True`); but also impossible ones, larger than the window itself (940,499 on
258,400 seen in 0.104). A usage above the reported window is skipped and counted in `skipped`
(the reader is pure; the daemon logs the count).
`reported_window` is `model_context_window` (Codex reports 95 % of the catalog window); `model`
comes from `turn_context` lines.

The reader makes one pass for usage and for its `FactListener` (the session digest,
`digest.py`): given a listener that wants records, it decodes every line once and hands each
record over; without one (`ctxd replay`), it decodes only the lines whose kind, read from their
first bytes, may carry usage or the model. Opened for the facts alone (`usage=False`, `ctxd
handoff`), it hands every record over and reads none for usage.
"""

from __future__ import annotations

from typing import Any

import orjson

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["CodexReader"]

# Usage alone (a listener that wants no records) decodes only the line kinds worth it, by the
# value of their first "type" key: the line's own type, since Codex writes `timestamp, ordinal,
# type, payload` in that order. Lines of other known kinds (messages, tool calls and outputs,
# world state: the bulk of a rollout) are rejected from those few bytes; a line of unknown shape
# falls back to a search of the whole line. It pays on today's rollouts, whose response items
# are long, and costs a little on old ones of many short lines.
_WANTED = frozenset(
    {b"token_usage_record", b"compacted", b"turn_context", b"session_meta", b"token_count"}
)
_EVENT_MARKERS = (b'"token_count"', b'"task_started"')
_SKIPPED = frozenset({b"response_item", b"world_state"})
_TYPE = b'"type":"'
_MARKERS = (*(b'"%s"' % kind for kind in _WANTED), b'"task_started"')
#: The record types the usage logic reads (`CodexReader._on_record`).
_USAGE_KINDS = frozenset(
    {"token_usage_record", "event_msg", "compacted", "turn_context", "session_meta"}
)
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4


class CodexReader:
    """Incremental reader for Codex CLI rollouts; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS, usage: bool = True) -> None:
        #: Told every record decoded (the session digest), or NO_FACTS.
        self.facts = facts
        #: False: only the listener's facts are wanted (`ctxd handoff`), no usage work is done.
        self.usage = usage
        self._lines = LineSplitter()
        self._model: str | None = None
        self._window: int | None = None
        self._response: tuple[str, int] | None = None  # newest (response_id, total_tokens)
        self._compaction: str | None = None  # turn id of the last compaction, until usage
        # (the turn id a figure had, the compaction's it was reported under): its repeats too
        self._renamed: tuple[str | None, str] | None = None
        self._reported = Changes()
        self._baseline: int | None = None  # the smallest context seen: instructions, tools
        #: Records skipped as impossible figures (see the module docstring), since the start.
        self.skipped = 0

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed (and
        hand every record decoded to the listener, then flush it)."""
        facts = self.facts
        every_line = facts.wants_records
        take = facts.take
        usage = self.usage
        updates: list[UsageUpdate] = []
        for line in self._lines.feed(data):
            if not every_line and not _wanted(line):
                continue
            record = decode(line)
            if record is None:
                continue
            if usage:
                kind = record.get("type")
                if kind in _USAGE_KINDS:
                    payload = record.get("payload")
                    if isinstance(payload, dict):
                        update = self._on_record(kind, payload, record)
                        if update is not None:
                            updates.append(update)
            take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._model = None
        self._window = None
        self._response = None
        self._compaction = None
        self._renamed = None
        self._reported.reset()
        self._baseline = None
        self.skipped = 0
        self.facts.reset()

    def saw_answer(self) -> bool:
        """Codex writes the response before it runs its Stop hooks."""
        return True

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Codex writes the response's usage before it runs the tool (see the module docstring)."""
        return True

    def _on_record(
        self, kind: str, payload: dict[str, Any], record: dict[str, Any]
    ) -> UsageUpdate | None:
        if kind == "token_usage_record":
            return self._on_usage_record(payload, record)
        if kind == "event_msg":
            event = payload.get("type")
            if event == "token_count":
                return self._on_token_count(payload, record)
            if event == "task_started":
                self._window = count(payload.get("model_context_window")) or self._window
            return None
        if kind == "compacted":
            return self._on_compacted(payload, record)
        if kind in ("turn_context", "session_meta"):
            model = payload.get("model")
            if isinstance(model, str) and model:
                self._model = model
        return None

    def _on_usage_record(
        self, payload: dict[str, Any], record: dict[str, Any]
    ) -> UsageUpdate | None:
        usage = payload.get("usage")
        tokens = _total(usage)
        if tokens is None or self._impossible(usage, tokens):
            return None
        response_id = payload.get("response_id")
        turn_id = response_id if isinstance(response_id, str) else None
        if turn_id is not None:
            self._response = (turn_id, tokens)
        return self._update(tokens, turn_id, record)

    def _on_token_count(
        self, payload: dict[str, Any], record: dict[str, Any]
    ) -> UsageUpdate | None:
        info = payload.get("info")
        if not isinstance(info, dict):
            return None  # written before the first response: no usage yet
        self._window = count(info.get("model_context_window")) or self._window
        last = info.get("last_token_usage")
        tokens = _total(last)
        if tokens is None or self._impossible(last, tokens):
            return None
        if self._response is not None and self._response[1] == tokens:
            turn_id: str | None = self._response[0]
        else:
            # No record for this usage (older Codex, or an estimate): the thread's running total
            # tells repeated token_count lines of one response apart from new ones.
            cumulative = _total(info.get("total_token_usage"))
            turn_id = f"token_count:{cumulative}:{tokens}"
        return self._update(tokens, turn_id, record, _only_total(last))

    def _impossible(self, usage: object, tokens: int) -> bool:
        if self._window is not None and tokens > self._window:
            self.skipped += 1
            return True
        return False

    def _on_compacted(self, payload: dict[str, Any], record: dict[str, Any]) -> UsageUpdate:
        window_id = payload.get("window_id")
        turn_id = window_id if isinstance(window_id, str) else f"compacted:{record.get('ordinal')}"
        history = payload.get("replacement_history")
        if isinstance(history, list):
            chars = len(orjson.dumps(history))
        else:
            message = payload.get("message")
            chars = len(message) if isinstance(message, str) else 0
        self._compaction = turn_id
        tokens = (self._baseline or 0) + chars // _CHARS_PER_TOKEN
        self._reported.is_new((tokens, turn_id, self._model, self._window), force=True)
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            model=self._model,
            reported_window=self._window,
            compaction=True,
            turn_id=turn_id,
            estimated=True,
        )

    def _update(
        self, tokens: int, turn_id: str | None, record: dict[str, Any], estimated: bool = False
    ) -> UsageUpdate | None:
        """The update for a figure, None when it repeats the last one reported."""
        if not estimated and (self._baseline is None or tokens < self._baseline):
            self._baseline = tokens
        if self._compaction is not None:
            # The first figure after a compaction replaces ctxd's estimate under its turn id,
            # and so do the repeats of that figure (a token_count written twice).
            self._renamed = (turn_id, self._compaction)
            self._compaction = None
        if self._renamed is not None and turn_id is not None and turn_id == self._renamed[0]:
            turn_id = self._renamed[1]
        if not self._reported.is_new((tokens, turn_id, self._model, self._window)):
            return None
        return UsageUpdate(
            estimated=estimated,
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            model=self._model,
            reported_window=self._window,
            turn_id=turn_id,
        )


def _only_total(usage: Any) -> bool:
    """A usage with every category 0 but `total_tokens`: Codex's estimate, not a response's."""
    get = usage.get
    return not (
        get("input_tokens")
        or get("cached_input_tokens")
        or get("cache_write_input_tokens")
        or get("output_tokens")
        or get("reasoning_output_tokens")
    )


def _wanted(line: bytes) -> bool:
    """Whether a line may carry usage or the model, from the value of its first `"type"` key
    (a line of unknown shape is searched whole)."""
    begin = line.find(_TYPE)
    kind = b""
    if begin >= 0:
        begin += len(_TYPE)
        end = line.find(b'"', begin)
        if end > 0:
            kind = line[begin:end]
    if kind in _WANTED:
        return True
    if kind == b"event_msg":
        # Event lines are small: search them whole rather than trust the payload's key order.
        return any(marker in line for marker in _EVENT_MARKERS)
    if kind in _SKIPPED:
        return False
    return any(marker in line for marker in _MARKERS)


def _total(usage: object) -> int | None:
    """`total_tokens`, or input + output when a usage lacks it; None without either."""
    if not isinstance(usage, dict):
        return None
    total = count(usage.get("total_tokens"))
    if total is not None:
        return total
    prompt, output = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    if prompt is None and output is None:
        return None
    return (prompt or 0) + (output or 0)
