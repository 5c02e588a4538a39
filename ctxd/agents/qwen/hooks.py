"""Qwen Code: its hook event names and the JSON its hooks answer with.

Verified against real runs of 0.24.4 (tests/data/payloads/qwen/0.24.4/): the events and payloads
are Claude Code's (`session_id, transcript_path, cwd, hook_event_name`, ...), in settings.json
`hooks` like Gemini CLI's. `hookSpecificOutput.additionalContext` reaches the model from
PostToolUse (appended to the tool's result), UserPromptSubmit (a
`<qwen:user-prompt-submit-context>` part of the user turn) and SessionStart (a
`<qwen:session-start-context>` message). Stop `{"decision": "block", "reason": R}` starts a new
turn with R as the user's text, then Stop fires again with `stop_hook_active: true`. Only Stop's
`systemMessage` reaches the user (stderr in `-p` text mode, a history item in the UI); the other
events' goes to the debug log.

PostToolUse fires only after a call that succeeded; one that fails as it runs (a read_file of a
missing file, a shell command exiting non-zero) fires PostToolUseFailure instead, with `error` in
place of `tool_response`: a tool call to ctxd too, whose `additionalContext` is appended to the
failed result as PostToolUse's is to a success's (0.24.4). A call of a tool that does not exist
fires no hook.

UserPromptSubmit also fires, with `prompt: ""`, before every continuation of a turn (after each
batch of tool results). A compression fires PreCompact (before the summary request, so also
when it then fails), PostCompact and SessionStart with source "compact" (both after it).
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.dialect import Dialect

__all__ = ["DIALECT"]

# PreCompact is left out: it fires before the summary request, and a compression may still fail.
DIALECT = Dialect(
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
    context_events=frozenset(
        {"PostToolUse", "PostToolUseFailure", "UserPromptSubmit", "SessionStart"}
    ),
    block_events=frozenset({"Stop"}),
    user_message_events=frozenset({"Stop"}),
    # SessionStart with source "compact" follows a real compression (seen with 0.24.4).
    session_start_compact=True,
)
