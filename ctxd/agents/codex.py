"""Codex CLI: its hook event names and the JSON its hooks answer with.

Verified against real runs of 0.171.0 (see the harness samples): `additionalContext` from
SessionStart, UserPromptSubmit and PostToolUse reaches the next request as a developer message;
Stop `{"decision": "block", "reason": R}` adds R as a user message and runs the model again.
Codex validates hook output against per-event schemas with `additionalProperties: false` and
rejects a block without a non-blank reason, so only fields the event's schema lists are
written. `systemMessage` is shown to the user as a hook warning; SessionEnd gets nothing, as the
session is over and its hook timeout is clamped to 3 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxd.agents import EventKind, Reply

#: Events whose `hookSpecificOutput.additionalContext` Codex CLI feeds to the model.
CONTEXT_EVENTS = frozenset({"PostToolUse", "UserPromptSubmit", "SessionStart"})
#: Events where `{"decision": "block", "reason": ...}` makes the agent keep going.
BLOCK_EVENTS = frozenset({"Stop"})
#: Events whose output schema has `systemMessage`.
USER_MESSAGE_EVENTS = frozenset(
    {
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "PreCompact",
        "PostCompact",
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
    """The kind of a Codex CLI event; SessionStart(source=compact) is a compaction."""
    if name == "SessionStart" and source == "compact":
        return "compaction"
    return _KINDS.get(name, "other")


def render(name: str, reply: Reply) -> dict[str, object] | None:
    """The JSON object answering event `name`, or None when nothing is due.

    `reply` must already be normalised by `ctxd.agents.render_reply`.
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
