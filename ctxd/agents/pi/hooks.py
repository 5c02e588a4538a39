"""pi: the events its ctxd extension (clients/pi/ctxd.ts) forwards, and the JSON it honours.

pi runs no command hooks: TypeScript extensions subscribe to its events (0.73.1,
dist/core/extensions/types.d.ts). ctxd's extension forwards five of them with a Claude-style
payload (`session_id`, `transcript_path` = the session file, `cwd`, `hook_event_name` = pi's
event name, `tool_use_id` = the call's `toolCallId`, `model`):

- `tool_result`: the extension appends `hookSpecificOutput.additionalContext` to the tool's
  result as one more text part, which the model reads in its next request (verified);
- `agent_end` (the prompt's agent loop ended): `systemMessage` is shown to the user
  (`ctx.ui.notify`, or stderr in print mode); `{"decision": "block", "reason": R}` makes the
  extension send R as a new user message (pi runs one more loop, `pi -p` too), and the next
  `agent_end` carries `stop_hook_active: true`;
- `session_compact` (a compaction was written), `session_start`, `session_shutdown`.

pi checks for auto-compaction after the agent_end handlers, and `pi -p` exits without waiting
for either (0.73.1): the compaction may then be written at the start of the next run instead,
and `session_compact` may never reach the extension. The `compaction` entry in the session
file is what resets ctxd's warnings (the reader's compaction update).
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "tool_result": "tool_call",
            "agent_end": "stop",
            "session_compact": "compaction",
            "session_start": "session_start",
            "session_shutdown": "session_end",
        }
    ),
    context_events=frozenset({"tool_result"}),
    block_events=frozenset({"agent_end"}),
    user_message_events=frozenset({"agent_end"}),
    session_start_compact=False,
)
