"""pi sessions (`sessions/--<cwd>--/<time>_<id>.jsonl`) -> usage updates.

Every line is an entry `{"type", "id", "parentId", "timestamp", ...}` (0.73.1), appended with
`appendFileSync` as each message ends, so an answer is on disk before its tool calls run.

- A `message` entry whose `message.role` is `assistant` carries `usage {input, output,
  cacheRead, cacheWrite, totalTokens, cost}` (OpenAI-compatible providers: `input` is the prompt
  less its cached part, `cacheRead` that part). The figure is the prompt, `input + cacheRead +
  cacheWrite`; the rest of `totalTokens` (the output) is `pending`, since pi compares
  `totalTokens` with its compaction point. Answers that stopped with `aborted` or `error` are
  skipped, as pi skips them.
- A `compaction` entry (`summary`, `firstKeptEntryId`, `tokensBefore`) marks a compaction; pi
  itself knows no size for the context until the next answer, so the summary's length stands in
  (`estimated`).
- A `custom` entry of ctxd's extension (`customType: "ctxd"`, `data.contextWindow`) states the
  window pi runs the model with (`ctx.getContextUsage().contextWindow`): it is reported with
  every figure as `reported_window`.

Entries form a tree (`/tree` moves to another branch in the same file); the figure is the last
answer appended, whichever branch it is on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["CUSTOM_TYPE", "PiReader"]

#: The `customType` of the entries ctxd's extension appends.
CUSTOM_TYPE = "ctxd"
_WANTED = (b'"role":"assistant"', b'"type":"compaction"', b'"customType":"ctxd"')
#: The usual rough rate for English text and code: about four characters per token.
_CHARS_PER_TOKEN = 4
#: Tool call ids remembered (the newest answers'); a hook asks about a call just made.
_MAX_CALLS = 256


class PiReader:
    """Incremental reader for pi sessions; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        self.facts = facts
        self._lines = LineSplitter()
        self._window: int | None = None
        self._current: UsageUpdate | None = None
        self._calls: dict[str, None] = {}
        self._answered = False
        self._reported = Changes()

    def feed(self, data: bytes) -> list[UsageUpdate]:
        """Consume the next bytes of the file; return the usage updates they completed."""
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        for line in self._lines.feed(data):
            if not line:
                continue
            wanted = any(key in line for key in _WANTED)
            if not wanted and not wants_records:
                continue
            record = decode(line)
            if record is None:
                continue
            if wanted:
                update = self._on_record(record)
                if update is not None:
                    updates.append(update)
            if wants_records:
                facts.take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        """Forget everything: the file was truncated or replaced and is read again from 0."""
        self._lines.reset()
        self._window = None
        self._current = None
        self._calls = {}
        self._answered = False
        self._reported.reset()
        self.facts.reset()

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the answer that made tool call `tool_use_id` is read."""
        return tool_use_id in self._calls

    def saw_answer(self) -> bool:
        """Whether the last answer read made no tool calls (the turn's final answer)."""
        return self._answered

    def _on_record(self, record: dict[str, Any]) -> UsageUpdate | None:
        kind = record.get("type")
        own: UsageUpdate | None = None
        if kind == "message":
            own = self._answer(record)
        elif kind == "compaction":
            own = _compaction(record)
        elif kind == "custom" and record.get("customType") == CUSTOM_TYPE:
            data = record.get("data")
            window = count(data.get("contextWindow")) if isinstance(data, dict) else None
            if window:
                self._window = window
        if own is not None:
            self._current = own
        current = self._current
        if current is None:
            return None
        if current.reported_window != self._window:
            current = self._current = replace(current, reported_window=self._window)
        key = (current.tokens, current.pending, current.turn_id, current.reported_window)
        forced = own is not None and own.compaction
        return current if self._reported.is_new(key, force=forced) else None

    def _answer(self, record: dict[str, Any]) -> UsageUpdate | None:
        message = record.get("message")
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return None
        calls = [
            part["id"]
            for part in message.get("content") or ()
            if isinstance(part, dict)
            and part.get("type") == "toolCall"
            and isinstance(part.get("id"), str)
        ]
        for call in calls:
            self._calls[call] = None
        while len(self._calls) > _MAX_CALLS:
            del self._calls[next(iter(self._calls))]
        self._answered = not calls
        usage = message.get("usage")
        if not isinstance(usage, dict) or message.get("stopReason") in ("aborted", "error"):
            return None
        prompt = sum(count(usage.get(key)) or 0 for key in ("input", "cacheRead", "cacheWrite"))
        total = count(usage.get("totalTokens")) or prompt + (count(usage.get("output")) or 0)
        model = message.get("model")
        entry_id = record.get("id")
        return UsageUpdate(
            tokens=prompt,
            at=epoch_seconds(record.get("timestamp")),
            model=model if isinstance(model, str) else None,
            reported_window=self._window,
            turn_id=entry_id if isinstance(entry_id, str) else None,
            pending=max(0, total - prompt),
        )


def _compaction(record: dict[str, Any]) -> UsageUpdate | None:
    summary = record.get("summary")
    if not isinstance(summary, str):
        return None
    entry_id = record.get("id")
    return UsageUpdate(
        tokens=len(summary) // _CHARS_PER_TOKEN,
        at=epoch_seconds(record.get("timestamp")),
        compaction=True,
        turn_id=entry_id if isinstance(entry_id, str) else None,
        estimated=True,
    )
