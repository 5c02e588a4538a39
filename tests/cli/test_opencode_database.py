"""`ctxd replay` and `ctxd handoff` take OpenCode's database as they take a transcript file: the
captured one the real CLI 1.18.33 wrote, and copies of it with sessions added as OpenCode writes
them (a subagent's, a compaction, the tools a digest reads). Real `ctxd` processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
import pytest
from ctxd_process import ctxd, json_lines
from opencode_db import CAPTURE, CAPTURED, Writer, copy_capture

from ctxd.agents.opencode import database_path

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.slow


def test_replay_of_the_captured_database_names_opencode_and_the_mocks_figures(
    env: dict[str, str],
) -> None:
    result = ctxd(env, "replay", str(CAPTURE))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"OpenCode session {CAPTURED} in <WORK>"
    # the mock's prompt_tokens, one row per model call
    assert [line.split()[2] for line in lines[2:5]] == ["10,000", "15,000", "20,000"]
    assert lines[5].startswith("final") and "(OpenCode, 3 turns, 0 compactions" in lines[5]
    final = json_lines(ctxd(env, "replay", "--json", str(CAPTURE)))[-1]
    assert (final["agent"], final["model"], final["tokens"], final["session_id"]) == (
        "opencode",
        "mock-model",
        20_000,
        CAPTURED,
    )


@pytest.fixture
def family(tmp_path: Path) -> Path:
    """The capture, plus a session of its own whose subagent works between its two steps, and
    a compaction in the subagent."""
    path = copy_capture(tmp_path)
    w = Writer(path)
    w.session("ses_main")
    w.session("ses_sub", parent="ses_main", cwd="/w/sub")
    w.step("ses_sub", 50_000)  # the subagent's first step ends before its parent's
    w.step("ses_main", 30_000)
    w.step("ses_sub", 90_000)
    w.compaction("ses_sub", 1_500)
    w.step("ses_sub", 8_000)
    w.step("ses_main", 31_000)
    w.close()
    return path


def test_each_session_of_a_database_is_replayed_on_its_own_figures(
    env: dict[str, str], family: Path
) -> None:
    lines = json_lines(ctxd(env, "replay", "--json", str(family)))
    finals = [line for line in lines if line.get("final")]
    # Every session; each main one followed by its subagent, whatever the order of their steps.
    assert [(f["session_id"], f["parent_id"]) for f in finals] == [
        (CAPTURED, None),
        ("ses_main", None),
        ("ses_sub", "ses_main"),
    ]
    by_session: dict[str, list[tuple[int, bool]]] = {}
    for line in lines:
        if not line.get("final"):
            by_session.setdefault(line["session_id"], []).append(
                (line["tokens"], line["compaction"])
            )
    # The subagent's context is not counted into its parent's, and its compaction resets it.
    assert by_session["ses_main"] == [(30_000, False), (31_000, False)]
    assert by_session["ses_sub"] == [
        (50_000, False),
        (90_000, False),
        (1_500, True),
        (8_000, False),
    ]
    assert finals[2]["compactions"] == 1 and finals[1]["compactions"] == 0


def test_session_picks_one_session_and_text_marks_a_subagent(
    env: dict[str, str], family: Path
) -> None:
    result = ctxd(env, "replay", "--session", "ses_s", str(family))
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.splitlines()[0] == "OpenCode session ses_sub (subagent of ses_main) in /w/sub"
    )
    assert "ses_main in" not in result.stdout
    several = ctxd(env, "replay", "--session", "ses_", str(family))
    assert several.returncode == 2 and "start of 3 session ids" in several.stderr
    none = ctxd(env, "replay", "--session", "ses_nope", str(family))
    assert none.returncode == 2 and "ses_nope" in none.stderr and none.stdout == ""


def test_replay_refuses_another_agents_name_for_the_database(env: dict[str, str]) -> None:
    result = ctxd(env, "replay", "--agent", "claude", str(CAPTURE))
    assert result.returncode == 2
    assert "OpenCode database" in result.stderr and "--agent opencode" in result.stderr


def test_handoff_refuses_another_agents_name_for_the_database(env: dict[str, str]) -> None:
    result = ctxd(env, "handoff", "--agent", "gemini", "--transcript", str(CAPTURE))
    assert result.returncode == 2
    assert "OpenCode database" in result.stderr and result.stdout == ""


def test_handoff_of_the_captured_database_holds_its_request_and_commands(
    env: dict[str, str],
) -> None:
    doc = orjson.loads(ctxd(env, "handoff", "--json", "--transcript", str(CAPTURE)).stdout)
    assert doc["agent"] == "opencode" and doc["session_id"] == CAPTURED
    digest = doc["digest"]
    assert digest["asks"] == ['"Run the steps"'] and digest["last_reply"] == "Done."
    assert [(c["text"], c["exit_code"]) for c in digest["commands"]] == [
        ("echo MARK-1", 0),
        ("echo MARK-2", 0),
    ]


def test_handoff_of_a_database_takes_its_latest_main_session_and_its_tools(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = copy_capture(tmp_path)
    w = Writer(path)
    w.session("ses_work")
    ask = w.message("ses_work", "user")
    w.part("ses_work", ask, type="text", text="Fix the parser")
    w.part("ses_work", ask, type="text", text="<file contents>", synthetic=True)
    msg = w.step("ses_work", 12_000)
    state = {"status": "completed", "input": {"filePath": "/w/parse.py"}, "output": "ok"}
    w.part("ses_work", msg, type="tool", tool="edit", callID="c1", state=state)
    failing = {
        "status": "completed",
        "input": {"command": "pytest -q"},
        "output": "collected 3\n1 failed",
        "metadata": {"exit": 1},
    }
    w.part("ses_work", msg, type="tool", tool="bash", callID="c2", state=failing)
    todos = {"todos": [{"content": "add a test", "status": "in_progress", "priority": "high"}]}
    w.part(
        "ses_work",
        msg,
        type="tool",
        tool="todowrite",
        callID="c3",
        state={"status": "completed", "input": todos},
    )
    task = {"status": "running", "input": {"description": "look for callers", "prompt": "..."}}
    w.part("ses_work", msg, type="tool", tool="task", callID="c4", state=task)
    w.session("ses_helper", parent="ses_work")
    w.step("ses_helper", 9_000)  # a subagent heard from last is not the one handed off
    w.close()
    doc = orjson.loads(ctxd(env, "handoff", "--json", "--transcript", str(path)).stdout)
    assert doc["session_id"] == "ses_work"
    digest = doc["digest"]
    assert digest["asks"] == ["Fix the parser"]
    assert [(f["path"], f["edits"]) for f in digest["files"]] == [("/w/parse.py", 1)]
    assert [(c["text"], c["exit_code"], c["error"]) for c in digest["failed"]] == [
        ("pytest -q", 1, "1 failed")
    ]
    assert [(t["text"], t["status"]) for t in digest["todos"]] == [("add a test", "in_progress")]
    assert digest["subagents"] == ["look for callers"]
    helper = orjson.loads(
        ctxd(env, "handoff", "--json", "--transcript", str(path), "--session", "ses_h").stdout
    )
    assert helper["session_id"] == "ses_helper" and helper["digest"]["asks"] == []


def test_replay_measures_on_the_window_opencodes_config_gives_the_model(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    limit = {"context": 200_000, "output": 8_000}
    config.write_text(
        orjson.dumps({"provider": {"mock": {"models": {"mock-model": {"limit": limit}}}}}).decode()
    )
    final = json_lines(ctxd(env, "replay", "--json", str(CAPTURE)))[-1]
    # OpenCode's point: context - min(output, 32,000)
    assert (final["window"], final["window_source"], final["compaction_at"]) == (
        200_000,
        "config",
        192_000,
    )
    assert final["used_pct"] == 10.0


def test_handoff_of_an_opencode_session_the_daemon_tracks_reads_its_database(
    world: World,
) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent)
    world.start()
    deadline = time.monotonic() + 10
    while not any(r["session_id"] == CAPTURED for r in world.status()["sessions"]):
        assert time.monotonic() < deadline, "the daemon never read the database"
        time.sleep(0.05)
    result = world.cli("handoff", "--json", CAPTURED[:8])
    assert result.returncode == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert (doc["agent"], doc["session_id"]) == ("opencode", CAPTURED)
    assert [c["text"] for c in doc["digest"]["commands"]] == ["echo MARK-1", "echo MARK-2"]


def test_replay_of_real_captures_with_a_compaction_and_a_subagent(env: dict[str, str]) -> None:
    data = CAPTURE.parent
    compact = [
        (line["tokens"], line["compaction"])
        for line in json_lines(ctxd(env, "replay", "--json", str(data / "opencode.compact.db")))
        if not line.get("final")
    ]
    assert compact == [
        (50_000, False),
        (170_000, False),
        (5, True),
        (20_000, False),
        (21_000, False),
    ]
    lines = json_lines(ctxd(env, "replay", "--json", str(data / "opencode.subagent.db")))
    finals = [line for line in lines if line.get("final")]
    parent, child = finals
    assert parent["parent_id"] is None and child["parent_id"] == parent["session_id"]
    assert [line["tokens"] for line in lines if line.get("session_id") == parent["session_id"]] == [
        10_000,
        12_000,
        12_000,  # its final line
    ]
    assert child["tokens"] == 31_000 and child["turns"] == 2
