"""Gemini CLI: its hook event names and the JSON its hooks answer with.

Verified against real runs of 0.61.0 (see the harness samples): `additionalContext` from
AfterTool is appended to the tool's result in the next request, from BeforeAgent it becomes an
extra part of the user turn, from SessionStart it is prepended to the prompt. AfterAgent
`{"decision": "deny", "reason": R}` starts a new turn with R as the prompt, then AfterAgent fires
again with `stop_hook_active: true`. `systemMessage` is the documented user-visible field (the
CLI prints hook messages as "Hook system message: ..."); BeforeToolSelection does not take it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxd.agents import EventKind, Reply

#: Events whose `hookSpecificOutput.additionalContext` Gemini CLI feeds to the model.
CONTEXT_EVENTS = frozenset({"AfterTool", "BeforeAgent", "SessionStart"})
#: Events where `{"decision": "deny", "reason": ...}` makes the agent take another turn.
BLOCK_EVENTS = frozenset({"AfterAgent"})
#: Events whose `systemMessage` Gemini CLI shows to the user.
USER_MESSAGE_EVENTS = frozenset(
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
)

# PreCompress is deliberately absent: it fires with trigger "auto" before every model turn,
# whether or not anything is compressed, so it says nothing about a real compaction.
_KINDS: dict[str, EventKind] = {
    "AfterTool": "tool_call",
    "BeforeAgent": "prompt",
    "AfterAgent": "stop",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
}


def event_kind(name: str, source: str | None) -> EventKind:
    """The kind of a Gemini CLI event (PreCompress is "other", see above)."""
    del source  # Gemini's SessionStart sources are startup|resume|clear: none is a compaction.
    return _KINDS.get(name, "other")


def render(name: str, reply: Reply) -> dict[str, object] | None:
    """The JSON object answering event `name`, or None when nothing is due.

    `reply` must already be normalised by `ctxd.agents.render_reply`.
    """
    out: dict[str, object] = {}
    if reply.block_reason and name in BLOCK_EVENTS:
        out["decision"] = "deny"
        out["reason"] = reply.block_reason
    if reply.context and name in CONTEXT_EVENTS:
        out["hookSpecificOutput"] = {"hookEventName": name, "additionalContext": reply.context}
    if reply.user_message and name in USER_MESSAGE_EVENTS:
        out["systemMessage"] = reply.user_message
    return out or None
