"""Claude Code: its hook event names and the JSON its hooks answer with.

Verified against real runs of 2.1.197 and 2.1.332 (captured in tests/data/payloads/):
`additionalContext` in `hookSpecificOutput` reaches the next API request from PostToolUse,
UserPromptSubmit and SessionStart; Stop `{"decision": "block", "reason": R}` makes the agent
continue with R as feedback; `systemMessage` is shown to the user. A PostToolUse envelope
printed on Stop or PreCompact is rejected, so every envelope names the event it answers.

PostToolUse fires only after a tool call that succeeded (2.1.332). One that fails while it runs
(a Read of a missing file, a Bash command exiting non-zero) fires PostToolUseFailure instead, with
`error` (the message) and `is_interrupt` in place of `tool_response`, and the call's
`tool_use_id`: a tool call to ctxd too, so the debounce counts every call the model made. Its
`additionalContext` reaches the next request ("PostToolUseFailure:<tool> hook additional
context: ..."), its `systemMessage` is shown. A call refused before it runs (an unknown tool,
invalid input, an Edit whose `old_string` is not in the file) fires no hook at all, not even
PreToolUse.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "PostToolUse": "tool_call",
            "PostToolUseFailure": "tool_call",
            "UserPromptSubmit": "prompt",
            "Stop": "stop",
            "PreCompact": "compaction",
            "PostCompact": "compaction",
            "SessionStart": "session_start",
            "SessionEnd": "session_end",
            "SubagentStop": "subagent_stop",
            # 2.1.332 (its bundle's hook schema): from_model, to_model, source
            # (command/picker/sdk/auto/resume), context_tokens, cache_ttl.
            "PreModelSwitch": "model_switch",
            "PostModelSwitch": "model_switched",
            # 2.1.335: a main-conversation turn interrupted, without Stop; {source (user/session/
            # system), reason (stop/permission_denied/rewind/other), via}. Its output is ignored:
            # it is recorded as the session's activity, nothing is answered.
            "Interrupt": "other",
        }
    ),
    # PreModelSwitch takes PreToolUse's `permissionDecision` (allow/deny/ask).
    deny_events=frozenset({"PreModelSwitch"}),
    # Events whose `hookSpecificOutput.additionalContext` reaches the model.
    context_events=frozenset(
        {"PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart"}
    ),
    # Events where `{"decision": "block", "reason": ...}` makes the agent keep going.
    block_events=frozenset({"Stop"}),
    # Events whose `systemMessage` Claude Code shows. SessionEnd is left out: the UI is closing.
    user_message_events=frozenset(
        {
            "PreToolUse",
            "PostToolUse",
            "PostToolUseFailure",
            "UserPromptSubmit",
            "SessionStart",
            "Stop",
            "SubagentStop",
            "PreCompact",
            "PostCompact",
            "Notification",
            "PreModelSwitch",
        }
    ),
)
