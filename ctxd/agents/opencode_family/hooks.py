"""OpenCode (and Kilo): the events ctxd's plugin (clients/opencode_family/plugin.js) forwards,
and what it honours.

OpenCode 1.18.33 runs no command hooks; it loads JavaScript plugins (`@opencode-ai/plugin`'s
`Hooks`). The plugin sends, as `{hook_event_name, session_id, cwd, ...}` under plain identifiers
(ctxd takes no dots in event names):

- `tool_execute_after` (its `tool.execute.after`, input `{tool, sessionID, callID, args}`, the
  call as `tool_use_id`), after every tool call: the answer's
  `hookSpecificOutput.additionalContext` is appended to the tool's `output.output`, which is what
  the model reads as the tool's result;
- `session_idle` (the `session.idle` event: the prompt's loop ended), with `stop_hook_active`
  when the plugin's own prompt caused this idle: `{"decision": "block", "reason": R}` makes the
  plugin send R as the user's next message (`client.session.prompt`), which starts one more
  loop, in `opencode run` too (the plugin's `dispose`, which OpenCode awaits, waits for it).
  Nothing a plugin does reaches the user there, so a handoff goes to the model as that message;
- `session_compacted` (the `session.compacted` event) after a compaction.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "tool_execute_after": "tool_call",
            "session_idle": "stop",
            "session_compacted": "compaction",
        }
    ),
    context_events=frozenset({"tool_execute_after"}),
    block_events=frozenset({"session_idle"}),
    user_message_events=frozenset(),
    session_start_compact=False,
)
