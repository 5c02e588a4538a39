"""Codex CLI: its hook event names and the JSON its hooks answer with.

Verified against real runs of 0.171.0 (captured in tests/data/payloads/): `additionalContext`
from SessionStart, UserPromptSubmit and PostToolUse reaches the next request as a developer
message; Stop `{"decision": "block", "reason": R}` adds R as a user message and runs the model
again. Codex validates hook output against per-event schemas with `additionalProperties: false`
and rejects a block without a non-blank reason, so only fields the event's schema lists are
written. `systemMessage` is shown to the user as a hook warning; SessionEnd gets nothing, as the
session is over and its hook timeout is clamped to 3 s.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "PostToolUse": "tool_call",
            "UserPromptSubmit": "prompt",
            "Stop": "stop",
            "PreCompact": "compaction",
            "PostCompact": "compaction",
            "SessionStart": "session_start",
            "SessionEnd": "session_end",
            "SubagentStop": "subagent_stop",
        }
    ),
    # Events whose `hookSpecificOutput.additionalContext` reaches the model.
    context_events=frozenset({"PostToolUse", "UserPromptSubmit", "SessionStart"}),
    # Events where `{"decision": "block", "reason": ...}` makes the agent keep going.
    block_events=frozenset({"Stop"}),
    # Events whose output schema has `systemMessage`.
    user_message_events=frozenset(
        {
            "SessionStart",
            "UserPromptSubmit",
            "PreToolUse",
            "PostToolUse",
            "Stop",
            "PreCompact",
            "PostCompact",
        }
    ),
)
