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

Copilot CLI queues its writes to the file: a hook can run before the request it follows is on
disk (seen with 1.0.102 for postToolUse and agentStop: the usage record lands some 10-300 ms
later). Its postToolUse (postToolUseFailure after a call that failed) names no call, but each
hook's own `hook.start` event is written before the hook runs, with the payload's `timestamp` in
its input: `saw_tool_use(id)` answers whether the `hook.start` of the postToolUse or
postToolUseFailure whose timestamp is `id` is read (everything before it is then read too).
`saw_answer` answers whether the last answer read made no tool calls (the turn's final answer,
which agentStop follows).
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ctxd.agents.lines import Changes, LineSplitter, count, decode, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.core.events import UsageUpdate

__all__ = ["CopilotReader"]

_USAGE = b'{"type":"session.usage_record"'
_COMPACTED = b'{"type":"session.compaction_complete"'
_ANSWER = b'{"type":"assistant.message"'
_HOOK_START = b'{"type":"hook.start"'
#: postToolUse after a call that succeeded, postToolUseFailure after one that failed.
_TOOL_HOOKS = (b'"hookType":"postToolUse"', b'"hookType":"postToolUseFailure"')
#: How many tool hooks' timestamps are remembered (parallel calls run theirs together).
_KEEP_HOOKS = 64
#: Events after which the turn's final answer is still to come.
_TURN_STARTS = (b'{"type":"assistant.turn_start"', b'{"type":"user.message"')
_AGENT_LOOP = "conversation-agent"


class CopilotReader:
    """Incremental reader for Copilot CLI events files; see the module docstring."""

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        self.facts = facts
        self._lines = LineSplitter()
        self._reported = Changes()
        self._answered = False  # the last answer read made no tool calls
        self._tool_hooks: deque[str] = deque(maxlen=_KEEP_HOOKS)

    def feed(self, data: bytes) -> list[UsageUpdate]:
        updates: list[UsageUpdate] = []
        facts = self.facts
        wants_records = facts.wants_records
        for line in self._lines.feed(data):
            if not line:
                continue
            if line.startswith(_ANSWER):
                self._answered = not _made_calls(decode(line))
            elif line.startswith(_TURN_STARTS):
                self._answered = False
            elif line.startswith(_HOOK_START) and any(hook in line for hook in _TOOL_HOOKS):
                stamp = _hook_stamp(decode(line))
                if stamp is not None:
                    self._tool_hooks.append(stamp)
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
        self._answered = False
        self._tool_hooks.clear()
        self.facts.reset()

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the postToolUse hook with timestamp `tool_use_id` is read (see the module
        docstring)."""
        return tool_use_id in self._tool_hooks

    def saw_answer(self) -> bool:
        return self._answered


def _hook_stamp(record: dict[str, Any] | None) -> str | None:
    data = record.get("data") if record is not None else None
    hook_input = data.get("input") if isinstance(data, dict) else None
    stamp = hook_input.get("timestamp") if isinstance(hook_input, dict) else None
    return str(stamp) if type(stamp) is int else None


def _made_calls(record: dict[str, Any] | None) -> bool:
    data = record.get("data") if record is not None else None
    return isinstance(data, dict) and bool(data.get("toolRequests"))


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
