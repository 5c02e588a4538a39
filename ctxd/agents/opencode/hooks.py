"""OpenCode: the events ctxd's plugin (clients/opencode/ctxd.js) forwards, and what it honours.

OpenCode 1.18.33 runs no command hooks; it loads JavaScript plugins (`@opencode-ai/plugin`'s
`Hooks`). The plugin sends `tool.execute.after` (input `{tool, sessionID, callID, args}`) after
every tool call and appends the answer's `hookSpecificOutput.additionalContext` to the tool's
`output.output`, which is what the model reads as the tool's result; and `session.compacted`
(an event `{sessionID}`) after a compaction. Both are sent as `{hook_event_name, session_id,
cwd, tool_use_id?}`, named `tool_execute_after` and `session_compacted` (ctxd takes plain
identifiers for event names). Nothing can block the end of a turn, and nothing reaches the user.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType({"tool_execute_after": "tool_call", "session_compacted": "compaction"}),
    context_events=frozenset({"tool_execute_after"}),
    block_events=frozenset(),
    user_message_events=frozenset(),
    session_start_compact=False,
)
