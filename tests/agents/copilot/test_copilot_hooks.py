"""Copilot CLI hooks: the real 1.0.102 payloads parse (tests/data/payloads/copilot/1.0.102/,
made by tests/e2e/capture_copilot.py) and ctxd answers each event in the shape it honours."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from ctxd import agents
from ctxd.agents.copilot.files import implied_transcript
from ctxd.core.events import Reply

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "copilot" / "1.0.102"
ALL = sorted(p for p in PAYLOADS.glob("*/*.json") if not p.name.endswith("-statusline.json"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_captured_payload_parses(path: Path) -> None:
    event_name = path.stem.split("-", 1)[1]
    event = agents.parse("copilot", path.read_bytes(), event_name)
    data = json.loads(path.read_text())
    assert event.session_id == data["sessionId"]
    assert event.cwd == data["cwd"]
    assert event.transcript_path == data.get("transcriptPath")
    expected = {
        "postToolUse": "tool_call",
        "postToolUseFailure": "tool_call",
        "userPromptSubmitted": "prompt",
        "agentStop": "stop",
        "sessionStart": "session_start",
        "sessionEnd": "session_end",
    }.get(event_name, "other")
    assert event.kind == expected
    if event_name in ("postToolUse", "postToolUseFailure"):
        assert event.tool_use_id == str(data["timestamp"])


def test_the_stop_after_a_block_says_so() -> None:
    first, second = sorted(PAYLOADS.glob("print/*-agentStop.json"))
    assert not agents.parse("copilot", first.read_bytes(), "agentStop").stop_hook_active
    again = agents.parse("copilot", second.read_bytes(), "agentStop")
    assert again.stop_hook_active
    # no block is rendered for it: the agent would loop
    assert agents.render(again, Reply(block_reason="CONTEXT HANDOFF: x")) == b""


def _event(name: str) -> object:
    payload = {"sessionId": "s1", "timestamp": 1796164271790, "cwd": "/w"}
    return agents.parse("copilot", orjson.dumps(payload), name)


def test_context_is_a_top_level_additional_context() -> None:
    for name in ("postToolUse", "postToolUseFailure", "userPromptSubmitted", "sessionStart"):
        out = agents.render(_event(name), Reply(context="CONTEXT WARNING: x"))  # type: ignore[arg-type]
        assert orjson.loads(out) == {"additionalContext": "CONTEXT WARNING: x"}
    for name in ("preToolUse", "sessionEnd", "agentStop", "preCompact"):
        assert agents.render(_event(name), Reply(context="x")) == b""  # type: ignore[arg-type]


def test_a_failed_tool_call_is_a_tool_call_answered_with_context() -> None:
    """A call that fails fires postToolUseFailure, not postToolUse (1.0.102): ctxd counts it
    and its warning reaches the model (a top-level additionalContext, as after a success)."""
    (path, *_) = sorted(PAYLOADS.glob("failure/*-postToolUseFailure.json"))
    event = agents.parse("copilot", path.read_bytes(), "postToolUseFailure")
    assert event.kind == "tool_call"
    assert event.tool_use_id == str(json.loads(path.read_text())["timestamp"])
    out = agents.render(event, Reply(context="CONTEXT WARNING: x"))
    assert orjson.loads(out) == {"additionalContext": "CONTEXT WARNING: x"}


def test_the_handoff_block_and_no_user_message() -> None:
    stop = _event("agentStop")
    out = agents.render(stop, Reply(block_reason="CONTEXT HANDOFF: x"))  # type: ignore[arg-type]
    assert orjson.loads(out) == {"decision": "block", "reason": "CONTEXT HANDOFF: x"}
    # Nothing a hook prints reaches the user: the default handoff (a message) is asked of the
    # model instead, through the block, and nowhere else a message goes.
    out = agents.render(stop, Reply(user_message="CONTEXT HANDOFF: x"))  # type: ignore[arg-type]
    assert orjson.loads(out) == {"decision": "block", "reason": "CONTEXT HANDOFF: x"}
    assert agents.render(_event("postToolUse"), Reply(user_message="x")) == b""  # type: ignore[arg-type]


def test_a_message_after_a_block_is_not_turned_into_another() -> None:
    _, second = sorted(PAYLOADS.glob("print/*-agentStop.json"))
    again = agents.parse("copilot", second.read_bytes(), "agentStop")
    assert agents.render(again, Reply(user_message="CONTEXT HANDOFF: x")) == b""


def test_the_implied_transcript() -> None:
    env = {"HOME": "/h"}
    assert implied_transcript("abc-1", env) == "/h/.copilot/session-state/abc-1/events.jsonl"
    assert implied_transcript("abc-1", {"HOME": "/h", "COPILOT_HOME": "/c"}) == (
        "/c/session-state/abc-1/events.jsonl"
    )
    assert implied_transcript("../x", env) is None
