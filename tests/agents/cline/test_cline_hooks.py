"""Cline CLI's hook payloads (real ones, 3.0.65) in, `contextModification` out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxd import agents
from ctxd.core.events import Reply
from ctxd.errors import InvalidInput

PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "cline" / "3.0.65"


def _payload(name: str) -> bytes:
    return (PAYLOADS / f"{name}.json").read_bytes()


def test_a_tool_result_is_a_tool_call_of_the_root_session() -> None:
    event = agents.parse("cline", _payload("tool_result"))
    assert (event.name, event.kind) == ("tool_result", "tool_call")
    # the session is the folder of its messages, not the conversation id (`taskId`)
    assert event.session_id == "1796555003918_0ta12"
    assert event.cwd == "$SCRATCH/work"
    assert event.tool_use_id == "call_mock00013955ca2cd527"


@pytest.mark.parametrize(
    ("name", "kind"),
    [("tool_call", "other"), ("agent_start", "other"), ("session_shutdown", "session_end")],
)
def test_event_kinds(name: str, kind: str) -> None:
    assert agents.parse("cline", _payload(name)).kind == kind


def test_context_goes_as_context_modification_on_a_tool_result_only() -> None:
    event = agents.parse("cline", _payload("tool_result"))
    out = agents.render(event, Reply(context="CONTEXT WARNING: x"))
    assert json.loads(out) == {"contextModification": "CONTEXT WARNING: x"}
    start = agents.parse("cline", _payload("agent_start"))
    assert agents.render(start, Reply(context="x")) == b""


def test_a_stop_says_nothing_cline_would_not_read() -> None:
    event = agents.parse("cline", _payload("agent_end"))
    assert event.kind == "stop"
    assert agents.render(event, Reply(user_message="h", block_reason="h")) == b""


def test_a_nested_session_id_that_is_a_path_is_refused() -> None:
    payload = json.loads(_payload("tool_result"))
    payload["sessionContext"]["rootSessionId"] = "../../etc"
    with pytest.raises(InvalidInput, match="session_id"):
        agents.parse("cline", json.dumps(payload).encode())
    payload["sessionContext"] = "x"
    with pytest.raises(InvalidInput, match="no session_id"):
        agents.parse("cline", json.dumps(payload).encode())


def test_the_hook_names_its_transcript_by_the_layout(tmp_path: Path) -> None:
    spec = agents.spec("cline")
    env = {"HOME": str(tmp_path)}
    path = spec.implied_transcript("1796555003918_0ta12", env)
    assert path == str(
        tmp_path / ".cline/data/sessions/1796555003918_0ta12/1796555003918_0ta12.messages.json"
    )
    assert spec.implied_transcript("..", env) is None
    moved = spec.implied_transcript("a_b", {**env, "CLINE_DATA_DIR": str(tmp_path / "d")})
    assert moved == str(tmp_path / "d/sessions/a_b/a_b.messages.json")
    assert spec.files.is_transcript(path)
    assert agents.detect_agent_from_path(path) == "cline"
    assert not spec.files.is_transcript(path.replace(".messages.json", ".compaction.json"))


@pytest.mark.parametrize(
    ("moved", "sessions", "settings"),
    [
        ({"CLINE_DIR": "o"}, "o/data/sessions", "o/data/settings"),
        ({"CLINE_DIR": "o", "CLINE_DATA_DIR": "d"}, "d/sessions", "d/settings"),
        ({"CLINE_DATA_DIR": "d", "CLINE_SESSION_DATA_DIR": "s"}, "s", "d/settings"),
    ],
)
def test_the_folders_move_as_clines_own_variables_move_them(
    tmp_path: Path, moved: dict[str, str], sessions: str, settings: str
) -> None:
    """Cline's own folder, its data and its sessions, each variable over the one before it."""
    env = {"HOME": str(tmp_path), **{k: str(tmp_path / v) for k, v in moved.items()}}
    spec = agents.spec("cline")
    assert spec.implied_transcript("a_b", env) == str(tmp_path / sessions / "a_b/a_b.messages.json")
    assert spec.settings_files(env, None)[0] == tmp_path / settings / "providers.json"
    assert set(moved) <= set(spec.config_env)  # the hook passes them on
