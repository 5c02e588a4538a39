"""Kimi Code wire files (`sessions/<workspace>/<session>/agents/main/wire.jsonl`) -> usage updates.

Every line is one record `{"type": <dotted name>, "agentId", ..., "time": <epoch ms>}`, appended
in order (2.1.0). Each line is decoded (orjson), so key order and spacing do not matter; a line
with a crash's hole in it is read after its last NUL (`JsonlReader`).

The figures, as 2.1.0 writes them:

- `usage.record` follows each model request with what the provider reported:
  `usage: {inputOther, inputCacheRead, inputCacheCreation, output}`. Only the agent loop's
  requests (`usageScope: "turn"`) measure the context; a compaction's summary request and other
  side requests are `"session"`. The figure is the prompt (the three input parts); the output is
  `pending`: Kimi's own count of the context (`token_counting.measured`, what it compacts on) is
  all four.
- A compaction is `full_compaction.begin`, the summary request, `context.apply_compaction`,
  `token_counting.rebased` (Kimi's count of the compacted context: `measured: false`, its own
  estimate) and `full_compaction.complete`; `full_compaction.cancel` ends one that was not
  applied. The figure after it is the rebased count, marked `estimated`.
- The model: `llm.request` of the loop (`kind: "loop"`) names it as the provider knows it
  (`model`), which is what a window is looked up by. No record states the window.

Kimi writes the step's records (`usage.record`, then `step.end`) before it runs its Stop hooks,
and `turn.ended` after them; the next turn's records start after its UserPromptSubmit hooks ran
(`turn.prompt`). So `saw_answer` answers whether the last step read ended without tool calls and
no turn ended since: at a Stop whose turn is not on disk yet (Kimi queues its writes, and a busy
machine shows it) the reader has read the last turn's `turn.ended`, and the daemon waits for the
answer instead of judging the turn before. PostToolUse reaches no model in Kimi (it is fired and
forgotten), so `saw_tool_use` has nothing to wait for.
"""

from __future__ import annotations

from typing import Any

from ctxd.agents.lines import count
from ctxd.agents.reader import NO_FACTS, FactListener, JsonlReader
from ctxd.core.events import UsageUpdate

__all__ = ["KimiReader"]

_MAIN = "main"
_TURN = "turn"
_INPUT_PARTS = ("inputOther", "inputCacheRead", "inputCacheCreation")
#: The bulk of a file (system prompts, tool snapshots, messages), in the form Kimi writes them
#: and with nothing the figures need: not decoded unless the listener wants every record.
_BULK = (
    b'{"type":"profile.bind"',
    b'{"type":"llm.tools_snapshot"',
    b'{"type":"context.append_message"',
    b'{"message":',
)
#: The end of a turn (written after its Stop hooks ran) and the start of the next: an answer
#: read before either is not the one the next Stop follows.
_TURN_BOUNDS = frozenset({"turn.ended", "turn.prompt"})
#: Step ends whose answer made tool calls: the turn goes on.
_TOOL_FINISH = frozenset({"tool_use", "tool_calls"})


class KimiReader(JsonlReader):
    """Incremental reader for Kimi Code wire files; see the module docstring."""

    bulk = _BULK

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        super().__init__(facts)
        self._model: str | None = None
        self._answered = False
        self._compacting = False
        self._rebased: tuple[int, bool] | None = None  # (tokens, measured) within a compaction
        self._compacted_from: int | None = None
        self._last_total: int | None = None

    def _forget(self) -> None:
        self._model = None
        self._answered = self._compacting = False
        self._rebased = None
        self._compacted_from = self._last_total = None

    def saw_tool_use(self, tool_use_id: str) -> bool:
        return True

    def saw_answer(self) -> bool:
        return self._answered

    # ------------------------------------------------------------------------ one record

    def _take(self, record: dict[str, Any]) -> UsageUpdate | None:
        kind = record.get("type")
        if not isinstance(kind, str) or record.get("agentId", _MAIN) != _MAIN:
            return None
        if kind == "usage.record":
            return self._usage(record)
        if kind == "full_compaction.begin":
            self._compacting, self._rebased = True, None
            self._compacted_from = self._last_total
        elif kind == "token_counting.rebased" and self._compacting:
            tokens = count(record.get("tokens"))
            if tokens is not None:
                self._rebased = (tokens, record.get("measured") is True)
        elif kind == "full_compaction.complete":
            return self._compacted(record)
        elif kind == "full_compaction.cancel":
            self._compacting, self._rebased = False, None
        elif kind == "context.append_loop_event":
            self._loop_event(record.get("event"))
        elif kind == "llm.request" and record.get("kind") == "loop":
            model = record.get("model")
            self._model = model if isinstance(model, str) and model else self._model
        elif kind in _TURN_BOUNDS:
            self._answered = False
        return None

    def _loop_event(self, event: object) -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "step.begin":
            self._answered = False
        elif kind == "step.end":
            self._answered = event.get("finishReason") not in _TOOL_FINISH

    def _usage(self, record: dict[str, Any]) -> UsageUpdate | None:
        usage = record.get("usage")
        if record.get("usageScope") != _TURN or not isinstance(usage, dict):
            return None
        parts = [count(usage.get(key)) for key in _INPUT_PARTS]
        if all(p is None for p in parts):
            return None
        prompt = sum(p for p in parts if p is not None)
        output = count(usage.get("output")) or 0
        self._last_total = prompt + output
        return UsageUpdate(
            tokens=prompt, at=_seconds(record.get("time")), model=self._model, pending=output
        )

    def _compacted(self, record: dict[str, Any]) -> UsageUpdate | None:
        rebased, self._compacting, self._rebased = self._rebased, False, None
        if rebased is None:
            return None
        tokens, measured = rebased
        self._last_total = tokens
        return UsageUpdate(
            tokens=tokens,
            at=_seconds(record.get("time")),
            model=self._model,
            compaction=True,
            estimated=not measured,
            compacted_from=self._compacted_from,
        )


def _seconds(value: object) -> float | None:
    """Kimi's `time`: milliseconds since the epoch."""
    ms = count(value)
    return ms / 1000 if ms is not None else None
