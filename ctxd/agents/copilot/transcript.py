"""Copilot CLI session files (`session-state/<id>/events.jsonl`) -> usage updates.

Every line is one event `{"type", "data", "id", "timestamp", "parentId"}`, appended in order.
Each line is decoded (orjson): the keys may come in any order and with any spacing (files that
went through another JSON writer have `"type": "..."`); a line with a crash's hole in it is read
after its last NUL (`JsonlReader`).

Figures, by what each version writes:

- `session.usage_record` (1.0.102 with a bring-your-own model) follows each model request;
  `data.usage` holds what the provider reported: `inputTokens` is the request's whole prompt
  (the cached part included), `outputTokens` the answer's, `maxPromptTokens` the prompt limit
  Copilot CLI runs the model with, which is the `tokenLimit` its compaction compares against.
  Only the agent loop's requests count (`interactionType: "conversation-agent"`). The figure is
  the prompt; the output is `pending`.
- Sessions on GitHub-hosted models (1.0.34 to 1.0.91 seen) write no per-request usage. Their
  figures are Copilot's own: `session.compaction_start.currentTokens` (its count of the context
  when a compaction starts) and `session.shutdown`, written at every process exit, with
  `currentTokens` (its count of the context at exit) and `modelMetrics` per model (requests and
  summed `usage.inputTokens`). A process that made one request in all states that request's
  prompt as the API reported it: that is the figure (exact, with its output pending);
  otherwise `currentTokens` is, marked `estimated`. A process that wrote usage records gets
  nothing more from its shutdown. (1.0.93's `modelMetrics` count the whole session, a resumed
  one's earlier processes too: one request in all is still that request's prompt.)
- `session.usage_checkpoint` (1.0.93, after each turn on GitHub-hosted models) states, in its
  `promptCacheBreakState`, the main conversation's last model call: `prompt_tokens` (the cached
  part included) is that request's prompt as the provider reported it, exact. A process with
  such checkpoints gets nothing more from its shutdown, as with usage records.
- `session.compaction_complete` with `success: true` is a compaction that was applied (counted,
  its warnings reset). The figure after it is Copilot's own, as its UI takes it: the sum of
  `systemTokens`, `conversationTokens` and `toolDefinitionsTokens` (the context left, by the
  schema's words). `postCompactionTokens` counts "the conversation" only where it is not marked
  `tokenAccountingBasis: "local_full_context_estimate"` (1.0.102 marks it, and counts the whole
  context): a real completion wrote 11,193 beside system 10,271, conversation 11,189 and tools
  16,516. It stands alone only where no part is written, else `preCompactionTokens` less
  `tokensRemoved` (1.0.48, which wrote some removals below zero: those say nothing), else the
  compaction start's system and tool tokens plus the summary's length in tokens (4 characters
  each): `estimated` always. Where it compacted is the compaction start's count of the whole
  context (`currentTokens`, else its parts), else `preCompactionTokens`. A cancelled or failed
  one (`success: false`) changes nothing.
- `assistant.usage` (a usage record's fields, per request) and `session.usage_info` (Copilot's
  count of the context, `currentTokens`, and its `tokenLimit`) are ephemeral: streamed to the
  SDK and by `--output-format json`, never kept in events.jsonl. A capture of that stream has
  them: read as a usage record (the agent loop's: no `initiator`, no `agentId`) and as a
  compaction start's count. A count written as a float is rounded.
- The window: `maxPromptTokens` of a usage record, `tokenLimit` of a compaction, a truncation
  or a context change, or (1.0.91)
  `modelInfo.capabilities.limits.max_prompt_tokens` of `model.turn_started` /
  `model.model_call_started` (`max_context_window_tokens` where no prompt limit is given): the
  limit Copilot compacts against, carried by every figure after it.

Copilot CLI queues its writes to the file: a hook can run before the request it follows is on
disk (seen with 1.0.102 for postToolUse and agentStop: the usage record lands some 10-300 ms
later). Its postToolUse (postToolUseFailure after a call that failed) names no call, but each
hook's own `hook.start` event is written before the hook runs, with the payload's `timestamp` in
its input: `saw_tool_use(id)` answers whether the `hook.start` of the postToolUse or
postToolUseFailure whose timestamp is `id` is read (everything before it is then read too).
`saw_answer` answers whether the last answer read made no tool calls (the turn's final answer,
which agentStop follows); a subagent's events (with a top-level `agentId`, 1.0.55) count for
neither.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ctxd.agents.lines import count, epoch_seconds
from ctxd.agents.reader import NO_FACTS, FactListener, JsonlReader
from ctxd.core.events import UsageUpdate

__all__ = ["CopilotReader"]

#: postToolUse after a call that succeeded, postToolUseFailure after one that failed.
_TOOL_HOOKS = frozenset({"postToolUse", "postToolUseFailure"})
#: How many tool hooks' timestamps are remembered (parallel calls run theirs together).
_KEEP_HOOKS = 64
#: Events after which the turn's final answer is still to come.
_TURN_STARTS = frozenset({"assistant.turn_start", "user.message"})
#: A new process writes one of these first: its shutdown's metrics count from here.
_PROCESS_STARTS = frozenset({"session.start", "session.resume"})
_MODEL_CALLS = frozenset({"model.turn_started", "model.model_call_started"})
#: Events that name the limit Copilot holds the context to (`tokenLimit`) and no figure of the
#: whole context: a truncation counts the conversation's messages only.
_LIMIT_EVENTS = frozenset({"session.truncation", "session.context_changed"})
_AGENT_LOOP = "conversation-agent"
#: Per-request usage and the context's size as Copilot streams them (`ephemeral`).
_LIVE_EVENTS = frozenset({"assistant.usage", "session.usage_info"})
#: The conversation a usage checkpoint names for the agent loop (subagents have their own).
_MAIN_CONVERSATION = "main"
#: The bulk of a file (system prompts, tool results), in the form Copilot CLI writes them and
#: with nothing the figures need: not decoded unless the listener wants every record. A line
#: in another form is decoded (only the cost differs).
_BULK = (b'{"type":"system.message"', b'{"type":"tool.execution_')
#: How 1.0.102 marks a `postCompactionTokens` that counts the whole context, not only the
#: conversation.
_WHOLE_CONTEXT = "local_full_context_estimate"
#: Characters per token, for a compaction summary whose size no record states.
_CHARS_PER_TOKEN = 4


class CopilotReader(JsonlReader):
    """Incremental reader for Copilot CLI events files; see the module docstring."""

    bulk = _BULK

    def __init__(self, facts: FactListener = NO_FACTS) -> None:
        super().__init__(facts)
        self._answered = False  # the last answer read made no tool calls
        self._tool_hooks: deque[str] = deque(maxlen=_KEEP_HOOKS)
        self._usage_records = False  # this process wrote per-request usage
        self._window: int | None = None
        self._model: str | None = None
        self._version: str | None = None
        self._fixed_part: int | None = None  # system + tool tokens at the last compaction start
        self._compacting_from: int | None = None  # the whole context when it started

    def _forget(self) -> None:
        self._answered = False
        self._tool_hooks.clear()
        self._usage_records = False
        self._window = self._model = self._version = self._fixed_part = None
        self._compacting_from = None

    def saw_tool_use(self, tool_use_id: str) -> bool:
        """Whether the postToolUse hook with timestamp `tool_use_id` is read (see the module
        docstring)."""
        return tool_use_id in self._tool_hooks

    def saw_answer(self) -> bool:
        return self._answered

    # ------------------------------------------------------------------------ one record

    def _take(self, record: dict[str, Any]) -> UsageUpdate | None:
        kind = record.get("type")
        data = record.get("data")
        if not isinstance(kind, str) or not isinstance(data, dict):
            return None
        if kind == "session.usage_record":
            return self._usage_record(record, data)
        if kind in _LIVE_EVENTS:
            return self._live(kind, record, data)
        if kind == "session.usage_checkpoint":
            return self._checkpoint(record, data)
        if kind == "session.compaction_start":
            return self._compaction_start(record, data)
        if kind == "session.compaction_complete":
            return self._compaction_complete(record, data)
        if kind == "session.shutdown":
            return self._shutdown(record, data)
        if record.get("agentId") is None:  # a subagent's events say nothing of the main turn
            self._note(kind, data)
        return None

    def _note(self, kind: str, data: dict[str, Any]) -> None:
        """What an event without a figure says about the turn, the model or the window."""
        if kind == "assistant.message":
            self._answered = not data.get("toolRequests")
            # what answered (1.0.9x names it): the model behind "auto" or a changed setting
            self._model = _text(data.get("model")) or self._model
        elif kind in _TURN_STARTS:
            self._answered = False
        elif kind == "hook.start":
            stamp = _tool_hook_stamp(data)
            if stamp is not None:
                self._tool_hooks.append(stamp)
        elif kind in _PROCESS_STARTS:
            self._usage_records = False
            self._version = _text(data.get("copilotVersion")) or self._version
            self._model = _text(data.get("selectedModel")) or self._model
        elif kind == "session.model_change":
            self._model = _text(data.get("newModel")) or self._model
        elif kind in _MODEL_CALLS:
            self._window = _limit(data) or self._window
        elif kind in _LIMIT_EVENTS:
            self._window = _count(data.get("tokenLimit")) or self._window

    def _update(self, record: dict[str, Any], tokens: int, **fields: Any) -> UsageUpdate:
        turn_id = record.get("id")
        fields.setdefault("model", self._model)
        return UsageUpdate(
            tokens=tokens,
            at=epoch_seconds(record.get("timestamp")),
            reported_window=self._window,
            turn_id=turn_id if isinstance(turn_id, str) else None,
            agent_version=self._version,
            **fields,
        )

    def _live(self, kind: str, record: dict[str, Any], data: dict[str, Any]) -> UsageUpdate | None:
        """The events Copilot marks ephemeral (streamed to the SDK and `--output-format json`,
        not kept in events.jsonl): found in a capture of that stream, they are read too."""
        if record.get("agentId") is not None:
            return None  # a subagent's request or context
        if kind == "assistant.usage":
            if data.get("initiator") is not None:
                return None  # a sub-agent's or a sampling call, not the agent loop's
            return self._usage_record(record, {"usage": data})
        self._window = _count(data.get("tokenLimit")) or self._window
        current = _count(data.get("currentTokens"))
        if current is None or self._usage_records:
            return None
        return self._update(record, current, estimated=True)

    def _checkpoint(self, record: dict[str, Any], data: dict[str, Any]) -> UsageUpdate | None:
        """The main conversation's last model call, as a usage checkpoint states it (1.0.93):
        its prompt as the provider reported it (the cached part included)."""
        if record.get("agentId") is not None:
            return None
        call = _last_main_call(data)
        if call is None:
            return None
        model, state = call
        prompt = _count(state.get("prompt_tokens"))
        if prompt is None:
            return None
        self._usage_records = True
        return self._update(record, prompt, model=model)

    def _usage_record(self, record: dict[str, Any], data: dict[str, Any]) -> UsageUpdate | None:
        usage = data.get("usage")
        if not isinstance(usage, dict) or usage.get("interactionType", _AGENT_LOOP) != _AGENT_LOOP:
            return None
        prompt = _count(usage.get("inputTokens"))
        if prompt is None:
            return None
        self._usage_records = True
        self._window = _count(usage.get("maxPromptTokens")) or self._window
        self._model = _text(usage.get("model")) or self._model
        return self._update(record, prompt, pending=_count(usage.get("outputTokens")) or 0)

    def _compaction_start(self, record: dict[str, Any], data: dict[str, Any]) -> UsageUpdate | None:
        self._window = _count(data.get("tokenLimit")) or self._window
        system, tools = _count(data.get("systemTokens")), _count(data.get("toolDefinitionsTokens"))
        self._fixed_part = (system or 0) + (tools or 0) if system or tools else None
        current = _count(data.get("currentTokens")) or _parts(data)
        self._compacting_from = current
        if current is None or self._usage_records:
            return None  # the usage records' exact figures stand
        return self._update(record, current, estimated=True)

    def _compaction_complete(
        self, record: dict[str, Any], data: dict[str, Any]
    ) -> UsageUpdate | None:
        if data.get("success") is not True:
            return None
        self._window = _count(data.get("tokenLimit")) or self._window
        pre = _count(data.get("preCompactionTokens"))
        started_at, self._compacting_from = self._compacting_from, None
        tokens = _whole_context_after(data)
        if tokens is None:
            tokens = _after_removal(pre, data) or self._summary_estimate(data)
        return self._update(
            record,
            tokens,
            compaction=True,
            estimated=True,
            compacted_from=started_at or pre,
        )

    def _summary_estimate(self, data: dict[str, Any]) -> int:
        summary = data.get("summaryContent")
        length = len(summary) if isinstance(summary, str) else 0
        return (self._fixed_part or 0) + -(-length // _CHARS_PER_TOKEN)

    def _shutdown(self, record: dict[str, Any], data: dict[str, Any]) -> UsageUpdate | None:
        if self._usage_records:
            return None
        model = _text(data.get("currentModel")) or self._model
        metrics = _model_metrics(data)
        requests = {name: _count(m["requests"].get("count")) or 0 for name, m in metrics.items()}
        if sum(requests.values()) == 1:
            # One request in the whole process: its summed usage is that request's own.
            (name,) = (name for name, n in requests.items() if n == 1)
            usage = metrics[name].get("usage")
            prompt = _count(usage.get("inputTokens")) if isinstance(usage, dict) else None
            if prompt is not None and isinstance(usage, dict):
                output = _count(usage.get("outputTokens")) or 0
                return self._update(record, prompt, model=name, pending=output)
        current = _count(data.get("currentTokens"))
        if current is None:
            return None
        return self._update(record, current, model=model, estimated=True)


def _tool_hook_stamp(data: dict[str, Any]) -> str | None:
    """The payload timestamp of a postToolUse(Failure) hook's own record, as the hook's
    `tool_use_id` spells it (milliseconds, a number or its digits)."""
    if data.get("hookType") not in _TOOL_HOOKS:
        return None
    hook_input = data.get("input")
    stamp = hook_input.get("timestamp") if isinstance(hook_input, dict) else None
    if type(stamp) is int:
        return str(stamp)
    return stamp if isinstance(stamp, str) and stamp.isdigit() else None


def _limit(data: dict[str, Any]) -> int | None:
    info = data.get("modelInfo")
    capabilities = info.get("capabilities") if isinstance(info, dict) else None
    limits = capabilities.get("limits") if isinstance(capabilities, dict) else None
    if not isinstance(limits, dict):
        return None
    prompt = _count(limits.get("max_prompt_tokens"))
    return prompt or _count(limits.get("max_context_window_tokens"))


def _whole_context_after(data: dict[str, Any]) -> int | None:
    """The context a compaction left, as Copilot's UI counts it: `postCompactionTokens` where
    it is marked as the whole context, else the sum of the parts, else `postCompactionTokens`."""
    post = _count(data.get("postCompactionTokens"))
    if data.get("tokenAccountingBasis") == _WHOLE_CONTEXT and post is not None:
        return post
    return _parts(data) or post


def _parts(data: dict[str, Any]) -> int | None:
    parts = [
        _count(data.get(k)) for k in ("systemTokens", "conversationTokens", "toolDefinitionsTokens")
    ]
    return sum(p for p in parts if p is not None) if any(p is not None for p in parts) else None


def _last_main_call(data: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(model, its cache state) of the main conversation's last model call in a usage
    checkpoint's `promptCacheBreakState` (`[{conversation, models: {model: {prompt_tokens,
    cache_read, cache_write, …}}, lastActiveModel}]`), else None."""
    states = data.get("promptCacheBreakState")
    for entry in states if isinstance(states, list) else ():
        if not isinstance(entry, dict) or entry.get("conversation") != _MAIN_CONVERSATION:
            continue
        models = entry.get("models")
        if not isinstance(models, dict) or not models:
            return None
        name = _text(entry.get("lastActiveModel"))
        if name is None and len(models) == 1:
            (name,) = models
        state = models.get(name) if name is not None else None
        return (name, state) if name is not None and isinstance(state, dict) else None
    return None


def _after_removal(pre: int | None, data: dict[str, Any]) -> int | None:
    """What a compaction left, from what it started with and `tokensRemoved` (1.0.48 writes
    no post figure); a removal below zero (1.0.48 wrote some) or above the start says nothing."""
    removed = _count(data.get("tokensRemoved"))
    if pre is None or removed is None or removed > pre:
        return None
    return pre - removed or None


def _model_metrics(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`modelMetrics` per model (top level; 1.0.102 also nests it in `accountingSnapshot`)."""
    metrics = data.get("modelMetrics")
    if not isinstance(metrics, dict):
        snapshot = data.get("accountingSnapshot")
        metrics = snapshot.get("modelMetrics") if isinstance(snapshot, dict) else None
    if not isinstance(metrics, dict):
        return {}
    return {
        k: v
        for k, v in metrics.items()
        if isinstance(v, dict) and isinstance(v.get("requests"), dict)
    }


def _count(value: object) -> int | None:
    """A token count as Copilot writes it: an int, or a float where its JavaScript arithmetic
    made one (it wrote a float `totalPremiumRequests` in 1.0.4x), rounded; else None."""
    if type(value) is float and math.isfinite(value) and value >= 0:
        return round(value)
    return count(value)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
