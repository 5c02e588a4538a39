"""Claude Code: its hook event names and the JSON its hooks answer with.

Verified against real runs of 2.1.197 and 2.1.332 (see the harness samples): `additionalContext`
in `hookSpecificOutput` reaches the next API request from PostToolUse, UserPromptSubmit and
SessionStart; Stop `{"decision": "block", "reason": R}` makes the agent continue with R as
feedback; `systemMessage` is shown to the user. A PostToolUse envelope printed on Stop or
PreCompact is rejected, so every envelope names the event it answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxd.agents import EventKind, Reply

#: Events whose `hookSpecificOutput.additionalContext` Claude Code feeds to the model.
CONTEXT_EVENTS = frozenset({"PostToolUse", "UserPromptSubmit", "SessionStart"})
#: Events where `{"decision": "block", "reason": ...}` makes the agent keep going.
BLOCK_EVENTS = frozenset({"Stop"})
#: Events whose `systemMessage` Claude Code shows. SessionEnd is left out: the UI is closing.
USER_MESSAGE_EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "SessionStart",
        "Stop",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "Notification",
    }
)

_KINDS: dict[str, EventKind] = {
    "PostToolUse": "tool_call",
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "PreCompact": "compaction",
    "PostCompact": "compaction",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "SubagentStop": "subagent_stop",
}


def event_kind(name: str, source: str | None) -> EventKind:
    """The kind of a Claude Code event; SessionStart(source=compact) is a compaction."""
    if name == "SessionStart" and source == "compact":
        return "compaction"
    return _KINDS.get(name, "other")


def render(name: str, reply: Reply) -> dict[str, object] | None:
    """The JSON object answering event `name`, or None when nothing is due.

    `reply` must already be normalised by `ctxd.agents.render_reply` (blank strings dropped,
    no block when `stop_hook_active`).
    """
    out: dict[str, object] = {}
    if reply.block_reason and name in BLOCK_EVENTS:
        out["decision"] = "block"
        out["reason"] = reply.block_reason
    if reply.context and name in CONTEXT_EVENTS:
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": reply.context}
    if reply.user_message and name in USER_MESSAGE_EVENTS:
        out["systemMessage"] = reply.user_message
    return out or None
