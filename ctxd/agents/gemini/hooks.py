"""Gemini CLI: its hook event names and the JSON its hooks answer with.

Verified against real runs of 0.61.0 (captured in tests/data/payloads/): `additionalContext`
from AfterTool is appended to the tool's result in the next request, from BeforeAgent it becomes
an extra part of the user turn, from SessionStart it is prepended to the prompt. AfterAgent
`{"decision": "deny", "reason": R}` starts a new turn with R as the prompt, then AfterAgent
fires again with `stop_hook_active: true`. `systemMessage` is the documented user-visible field
(the CLI prints hook messages as "Hook system message: ..."); BeforeToolSelection does not take
it.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

# PreCompress is deliberately absent: it fires with trigger "auto" before every model turn,
# whether or not anything is compressed, so it says nothing about a real compaction.
DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "AfterTool": "tool_call",
            "BeforeAgent": "prompt",
            "AfterAgent": "stop",
            "SessionStart": "session_start",
            "SessionEnd": "session_end",
        }
    ),
    # Events whose `hookSpecificOutput.additionalContext` reaches the model.
    context_events=frozenset({"AfterTool", "BeforeAgent", "SessionStart"}),
    # Events where `{"decision": "deny", "reason": ...}` makes the agent take another turn.
    block_events=frozenset({"AfterAgent"}),
    # Events whose `systemMessage` Gemini CLI shows to the user.
    user_message_events=frozenset(
        {
            "SessionStart",
            "SessionEnd",
            "BeforeAgent",
            "AfterAgent",
            "BeforeTool",
            "AfterTool",
            "PreCompress",
            "Notification",
        }
    ),
    block_decision="deny",
    # Gemini's SessionStart sources are startup|resume|clear: none follows a compaction.
    session_start_compact=False,
)
