"""What ctxd answers to the events its OpenCode plugin forwards, as the plugin reads it."""

from __future__ import annotations

import orjson
import pytest

from ctxd.agents import parse, render
from ctxd.core.events import Reply

WARNING = "CONTEXT WARNING: ..."
HANDOFF = "CONTEXT HANDOFF: ..."


def answer(event: str, reply: Reply, **payload: object) -> object:
    hook = parse(
        "opencode", orjson.dumps({"hook_event_name": event, "session_id": "ses_1", **payload})
    )
    out = render(hook, reply)
    return orjson.loads(out) if out else None


def test_a_tool_call_gets_the_warning_as_context_for_the_tool_output() -> None:
    got = answer("tool_execute_after", Reply(context=WARNING), tool_use_id="call_1")
    assert got == {
        "hookSpecificOutput": {"hookEventName": "tool_execute_after", "additionalContext": WARNING}
    }


@pytest.mark.parametrize("action", ["message", "block"])
def test_an_idle_session_gets_the_handoff_as_the_message_the_plugin_sends(action: str) -> None:
    # OpenCode shows a plugin's messages to no one: either way the model is the reader
    reply = Reply(user_message=HANDOFF) if action == "message" else Reply(block_reason=HANDOFF)
    assert answer("session_idle", reply) == {"decision": "block", "reason": HANDOFF}


def test_the_idle_the_plugins_own_message_caused_is_never_asked_again() -> None:
    assert answer("session_idle", Reply(block_reason=HANDOFF), stop_hook_active=True) is None


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        ("tool_execute_after", "tool_call"),
        ("session_idle", "stop"),
        ("session_compacted", "compaction"),
    ],
)
def test_event_kinds(event: str, kind: str) -> None:
    hook = parse("opencode", orjson.dumps({"hook_event_name": event, "session_id": "ses_1"}))
    assert hook.kind == kind
