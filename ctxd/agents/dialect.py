"""What one agent's hooks mean and what they accept, as data; the rules that read it, once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ctxd.core.events import EventKind, Reply

__all__ = ["Dialect"]


@dataclass(frozen=True, slots=True)
class Dialect:
    #: The agent's event name -> what it means to ctxd; anything else is "other".
    kinds: Mapping[str, EventKind]
    #: Events whose `hookSpecificOutput.additionalContext` the agent feeds to the model.
    context_events: frozenset[str]
    #: Events where `{"decision": <block_decision>, "reason": ...}` makes the agent keep going.
    block_events: frozenset[str]
    #: Events whose `systemMessage` the agent shows to the user.
    user_message_events: frozenset[str]
    block_decision: str = "block"
    #: Events where `hookSpecificOutput.permissionDecision: "deny"` refuses what is about to
    #: happen (with `permissionDecisionReason`).
    deny_events: frozenset[str] = frozenset()
    #: Whether SessionStart with source "compact" follows a real compaction.
    session_start_compact: bool = True
    #: The agent's own payload keys -> the shared keys they stand for ("sessionId" ->
    #: "session_id"), for payloads not in the shared shape; a shared key present wins.
    payload_keys: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    #: The agent reads `additionalContext` at the top level of the answer, not inside
    #: `hookSpecificOutput`.
    flat_context: bool = False
    #: The answer's key for that top-level context (Cline reads `contextModification`).
    context_key: str = "additionalContext"

    def event_kind(self, name: str, source: str | None) -> EventKind:
        if self.session_start_compact and name == "SessionStart" and source == "compact":
            return "compaction"
        return self.kinds.get(name, "other")

    def render(self, name: str, reply: Reply) -> dict[str, object] | None:
        """The JSON object answering event `name`, or None when nothing is due.

        `reply` must already be normalised by `ctxd.agents.hooks.render_reply` (blank strings
        dropped, no block when `stop_hook_active`).
        """
        out: dict[str, object] = {}
        if reply.block_reason and name in self.block_events:
            out["decision"] = self.block_decision
            out["reason"] = reply.block_reason
        if reply.context and name in self.context_events:
            if self.flat_context:
                out[self.context_key] = reply.context
            else:
                context = {"hookEventName": name, "additionalContext": reply.context}
                out["hookSpecificOutput"] = context
        if reply.deny_reason and name in self.deny_events:
            out["hookSpecificOutput"] = {
                "hookEventName": name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reply.deny_reason,
            }
        if reply.user_message and name in self.user_message_events:
            out["systemMessage"] = reply.user_message
        return out or None
