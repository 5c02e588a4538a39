"""Kimi Code: its hook event names and the JSON its hooks answer with.

Read from 2.1.0's bundle (agent-core-v2 `externalHooks`) and verified against real runs
(tests/e2e/test_kimi_e2e.py). Hooks are `[[hooks]]` tables in `config.toml` (`event`, `matcher`,
`command`, `timeout` in seconds, 30 by default). Each command gets one JSON object on stdin, its
keys in snake_case: `hook_event_name`, `session_id`, `cwd`, `client_type`, `session_title`, and per
event `prompt` (UserPromptSubmit: the input's parts), `tool_name`/`tool_input`/`tool_call_id`/
`tool_output` or `error` (PostToolUse, PostToolUseFailure), `stop_hook_active` (Stop, always
false), `trigger`/`token_count` (PreCompact), `trigger`/`estimated_token_count` (PostCompact),
`source`/`model` (SessionStart; `model` is the model's alias in config.toml). No payload names
the transcript: the session id does (`files.implied_transcript`).

What a hook's answer does (exit 0, stdout one JSON object `{"message", "hookSpecificOutput":
{"message", "permissionDecision", "permissionDecisionReason"}}`, or plain text):

- UserPromptSubmit: the `message` (else the whole stdout) goes to the model as a user message of
  its own, `<hook_result hook_event="UserPromptSubmit">…</hook_result>`, before the turn's first
  request. It is the one event whose output reaches the model.
- Stop: `permissionDecision: "deny"` with a `permissionDecisionReason` (or exit code 2 with the
  reason on stderr) adds the reason as a user message and lets the model go on; Stop then fires
  no more until the next turn, whose Stop says `stop_hook_active: false` like every other: the
  block is delivered, and there is no echo of it to wait for (`block_echo`).
- PreToolUse: a deny refuses the call. Every other event is fired and forgotten (PostToolUse,
  PostToolUseFailure, PostCompact, ...) or has its answer ignored (SessionStart, PreCompact).

A compaction fires PreCompact before the summary request and PostCompact after it (fired and
forgotten, so it may arrive before or after the wire file says so).
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect
from ctxd.core.events import Reply

__all__ = ["DIALECT", "KimiDialect"]


class KimiDialect(Dialect):
    """Kimi's answer envelope: context as `message`, a block as a `deny` of Stop."""

    __slots__ = ()

    def render(self, name: str, reply: Reply) -> dict[str, object] | None:
        out: dict[str, object] = {}
        if reply.context and name in self.context_events:
            out["message"] = reply.context
        reason = reply.block_reason if name in self.block_events else None
        if reply.deny_reason and name in self.deny_events:
            reason = reply.deny_reason
        if reason:
            out["hookSpecificOutput"] = {
                "hookEventName": name,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason,
            }
        return out or None


# PreCompact is left out: it fires before the summary request, and a compaction may still fail.
DIALECT = KimiDialect(
    kinds=MappingProxyType(
        {
            "PostToolUse": "tool_call",
            "PostToolUseFailure": "tool_call",
            "UserPromptSubmit": "prompt",
            "Stop": "stop",
            "PostCompact": "compaction",
            "SessionStart": "session_start",
            "SessionEnd": "session_end",
        }
    ),
    context_events=frozenset({"UserPromptSubmit"}),
    block_events=frozenset({"Stop"}),
    user_message_events=frozenset(),
    session_start_compact=False,
    block_echo=False,
)
