"""Kimi Code hooks: the real 2.1.0 payloads parse (tests/data/payloads/kimi/2.1.0/, made by
tests/e2e/capture_kimi.py) and ctxd answers each event in the shape Kimi honours."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from ctxd import agents
from ctxd.agents.kimi.files import implied_transcript
from ctxd.core.events import Reply

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "kimi" / "2.1.0"
ALL = sorted(PAYLOADS.glob("*/*.json"))
KINDS = {
    "PostToolUse": "tool_call",
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "PostCompact": "compaction",
    "SessionStart": "session_start",
}


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_captured_payload_parses(path: Path) -> None:
    event = agents.parse("kimi", path.read_bytes())
    data = json.loads(path.read_text())
    assert event.session_id == data["session_id"]
    assert event.name == data["hook_event_name"] == path.stem.split("-", 1)[1]
    assert event.kind == KINDS.get(event.name, "other")
    assert event.transcript_path is None  # no Kimi payload names it
    assert not event.stop_hook_active


def _event(name: str) -> object:
    payload = {"hook_event_name": name, "session_id": "session_1", "cwd": "/w"}
    return agents.parse("kimi", orjson.dumps(payload))


def test_the_prompts_context_goes_as_its_message_and_no_other_events() -> None:
    said = Reply(context="CONTEXT WARNING: x")
    assert orjson.loads(agents.render(_event("UserPromptSubmit"), said)) == {  # type: ignore[arg-type]
        "message": "CONTEXT WARNING: x"
    }
    for name in ("PostToolUse", "PostToolUseFailure", "SessionStart", "PostCompact"):
        assert agents.render(_event(name), said) == b""  # type: ignore[arg-type]


def test_the_handoff_denies_stop_with_its_reason_and_waits_for_no_echo() -> None:
    stop = _event("Stop")
    for reply in (
        Reply(user_message="CONTEXT HANDOFF: x"),
        Reply(block_reason="CONTEXT HANDOFF: x"),
    ):
        assert orjson.loads(agents.render(stop, reply)) == {  # type: ignore[arg-type]
            "hookSpecificOutput": {
                "hookEventName": "Stop",
                "permissionDecision": "deny",
                "permissionDecisionReason": "CONTEXT HANDOFF: x",
            }
        }
        # Kimi fires no Stop for the turn a block continued: nothing to wait for
        assert not agents.blocks(stop, reply)  # type: ignore[arg-type]


def test_a_hooks_session_is_found_in_its_workspace_folder(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    wire = tmp_path / ".kimi-code/sessions/wd_w_0123456789ab/session_1/agents/main/wire.jsonl"
    assert implied_transcript("session_1", env) is None
    wire.parent.mkdir(parents=True)
    (tmp_path / ".kimi-code/sessions/wd_other_0123456789ab").mkdir()
    wire.write_bytes(b"")
    assert implied_transcript("session_1", env) == str(wire)
    assert implied_transcript("session_2", env) is None
    assert implied_transcript("../session_1", env) is None
    other = {"KIMI_CODE_HOME": str(tmp_path / "elsewhere")}
    assert implied_transcript("session_1", other) is None
    assert agents.detect_agent_from_path(str(wire)) == "kimi"
    assert agents.detect_agent_from_path(str(wire.parent.parent / "agent_7/wire.jsonl")) is None
