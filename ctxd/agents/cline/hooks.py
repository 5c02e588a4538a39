"""Cline CLI: its hook events and the JSON its hooks answer with.

Read from 3.0.65 and verified against real runs: a hook is an executable in a hooks folder named
by its event (`PostToolUse`, `PostToolUse.sh`, `.py`, ...: `~/Documents/Cline/Hooks`,
`~/.cline/hooks`, `<workspace>/.clinerules/hooks`, `<workspace>/.cline/hooks`, and
`--hooks-dir`/`$CLINE_HOOKS_DIR`). It gets one JSON object on stdin, `{clineVersion, hookName,
timestamp, taskId, sessionContext: {rootSessionId}, workspaceRoots, workspaceInfo: {rootPath},
userId, agent_id, ...}` with `hookName` the runtime's own name of the event (TaskStart ->
"agent_start", PreToolUse -> "tool_call", PostToolUse -> "tool_result", UserPromptSubmit ->
"prompt_submit", TaskComplete -> "agent_end", SessionShutdown -> "session_shutdown"). The session
is `sessionContext.rootSessionId` (the folder of its messages); `taskId` is a conversation id.

Its stdout's JSON (or the last `HOOK_CONTROL\\t` line) may carry `contextModification`: from
PreToolUse and PostToolUse it reaches the model as a `<hook_context source="PostToolUse">` user
message after the tool's result (at most 50,000 characters). TaskStart, UserPromptSubmit,
TaskComplete and SessionShutdown hooks run detached in the CLI: nothing they print is read. So
Cline has no hook that can make the model go on at a stop, nor one that tells a user anything.
A PreCompact hook file is found but never run (the runtime maps it to no event), so a compaction
is read from the session's files (`transcript.py`).
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

DIALECT = Dialect(
    kinds=MappingProxyType(
        {
            "tool_result": "tool_call",
            "prompt_submit": "prompt",
            "agent_end": "stop",
            "session_shutdown": "session_end",
        }
    ),
    context_events=frozenset({"tool_result"}),
    block_events=frozenset(),
    user_message_events=frozenset(),
    session_start_compact=False,
    payload_keys=MappingProxyType(
        {
            "hookName": "hook_event_name",
            "sessionContext.rootSessionId": "session_id",
            "workspaceInfo.rootPath": "cwd",
            "tool_result.id": "tool_use_id",
        }
    ),
    flat_context=True,
    context_key="contextModification",
)
