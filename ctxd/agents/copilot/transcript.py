"""Copilot CLI session files (`session-state/<id>/events.jsonl`) -> usage updates.

Every line is one event `{"type", "data", "id", "timestamp", "parentId"}`, appended in order.

- `session.usage_record` follows each model request; `data.usage` holds what the provider
  reported: `inputTokens` is the request's whole prompt (the API's `prompt_tokens`, the cached
  part included: 1.0.102 samples match the mock's usage field for field), `outputTokens` the
  answer's, `maxPromptTokens` the prompt limit Copilot CLI runs the model with, which is the
  `tokenLimit` its compaction compares against. Only the agent loop's requests count
  (`interactionType: "conversation-agent"`); a compaction's own requests are not recorded here.
  The figure is the prompt; the output is `pending` (the next request carries it: Copilot's
  `currentTokens` at a compaction's start is prompt + output + the tool results since).
- `session.compaction_complete` with `success: true` marks a compaction that was applied:
  `postCompactionTokens` is Copilot's own local estimate of the context left
  (`tokenAccountingBasis: "local_full_context_estimate"`), reported with `compaction=True` and
  `estimated`; a cancelled or failed one (`success: false`) changes nothing.
- Other events carry no usage and are not decoded (unless the listener wants records).

Copilot CLI writes each event before it runs the hooks that follow it (the answer before
preToolUse/postToolUse and agentStop), so `saw_tool_use` and `saw_answer` are always true.
"""

from __future__ import annotations

from typing import Any

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["CopilotReader"]

_USAGE = b'{"type":"session.usage_record"'
_COMPACTED = b'{"type":"session.compaction_complete"'
_AGENT_LOOP = "conversation-agent"


class CopilotReader:
    """Incremental reader for Copilot CLI events files; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        self.facts = facts
        self._lines = LineSplitter()
        self._reported = Changes()

    def feed(self, data: bytes) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        for line in self._lines.feed(data):
            if not line:
                continue
            carries = line.startswith((_USAGE, _COMPACTED))
            record = decode(line) if carries or wants_records else None
            if record is None:
                continue
            if carries:
                update = _update(record)
                if update is not None and self._reported.is_new(
                    (update.tokens, update.pending, update.turn_id), force=update.compaction
                ):
                    updates.append(update)
            if wants_records:
                facts.take(record)
        facts.flush()
        return updates

    def reset(self) -> None:
        self._lines.reset()
        self._reported.reset()
        self.facts.reset()

    def saw_tool_use(self, tool_use_id: str) -> bool:
        return True

    def saw_answer(self) -> bool:
        return True


def _update(record: dict[str, Any]) -> UsageUpdate | None:
    data = record.get("data")
    if not isinstance(data, dict):
        return None
    kind = record.get("type")
    turn_id = record.get("id") if isinstance(record.get("id"), str) else None
    at = epoch_seconds(record.get("timestamp"))
    if kind == "session.usage_record":
        usage = data.get("usage")
        if not isinstance(usage, dict) or usage.get("interactionType", _AGENT_LOOP) != _AGENT_LOOP:
            return None
        prompt = count(usage.get("inputTokens"))
        if prompt is None:
            return None
        model = usage.get("model")
        return UsageUpdate(
            tokens=prompt,
            at=at,
            model=model if isinstance(model, str) else None,
            reported_window=count(usage.get("maxPromptTokens")) or None,
            turn_id=turn_id,
            pending=count(usage.get("outputTokens")) or 0,
        )
    if kind == "session.compaction_complete" and data.get("success") is True:
        tokens = count(data.get("postCompactionTokens"))
        if tokens is None:
            return None
        return UsageUpdate(
            tokens=tokens,
            at=at,
            compaction=True,
            turn_id=turn_id,
            estimated=True,
            reported_window=count(data.get("tokenLimit")) or None,
        )
    return None
