"""GitHub Copilot CLI: its hook event names and the JSON its hooks answer with.

Verified against real runs of 1.0.102 (tests/data/payloads/copilot/1.0.102/). Hooks are listed
per event in settings.json `hooks` (`{"type": "command", "bash": ..., "timeoutSec": ...}`, the
schema of `.github/hooks/*.json`); the payload is camelCase (`sessionId`, `timestamp`, `cwd`,
per event `toolName`/`toolArgs`/`toolResult`, `error`, `prompt`, `source`, `reason`) and does not
name its event, so the command does. Only agentStop and preCompact name the transcript
(`transcriptPath`); agentStop also carries `stop_hook_active`.

A tool call fires postToolUse only when it succeeds (since 1.0.15); one whose result is a
failure (a missing file, an unknown tool, invalid arguments) fires postToolUseFailure instead,
with `error` (the message) in place of `toolResult`. Both are a tool call to ctxd, so the
debounce counts every call the model made, as it did when postToolUse fired for all. A shell
command that exits non-zero is a success (the exit code is in its result); a call denied,
rejected or timed out fires neither.

What reaches the model (1.0.102): a top-level `additionalContext` (not `hookSpecificOutput`'s)
from sessionStart (a user message of its own), userPromptSubmitted (a `<system_reminder>` in the
user's turn), postToolUse (appended to the tool's result: "Additional guidance from postToolUse
hooks:"), postToolUseFailure (a user message after the failed result: "Tool \"X\" failed.
Additional guidance from postToolUseFailure hooks:") and preToolUse (a user message after the
result). agentStop `{"decision": "block", "reason": R}` starts a new turn with R as the user's
text (and userPromptSubmitted fires for it). Nothing a hook prints is shown to the user.

Compaction runs in the background and fires preCompact before it starts; nothing fires after
it, so its reset comes from the events file (`session.compaction_complete`).
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "postToolUse": "tool_call",
            "postToolUseFailure": "tool_call",
            "userPromptSubmitted": "prompt",
            "agentStop": "stop",
            "sessionStart": "session_start",
            "sessionEnd": "session_end",
        }
    ),
    context_events=frozenset(
        {"postToolUse", "postToolUseFailure", "userPromptSubmitted", "sessionStart"}
    ),
    block_events=frozenset({"agentStop"}),
    user_message_events=frozenset(),
    session_start_compact=False,
    payload_keys=MappingProxyType(
        {
            "sessionId": "session_id",
            "transcriptPath": "transcript_path",
            "stopHookActive": "stop_hook_active",
            # postToolUse(Failure) names no call; its `timestamp` (ms) names the hook's own
            # record in the events file (`hook.start` input), which the reader waits for.
            "timestamp": "tool_use_id",
        }
    ),
    flat_context=True,
)
