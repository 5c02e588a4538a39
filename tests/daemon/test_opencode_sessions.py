"""OpenCode's sessions in the daemon's centre, in process: its database (a copy of the one the
real CLI 1.18.33 wrote, with sessions added as OpenCode writes them) read as a session store,
each session on its own figures, a subagent marked as its parent's."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING

import pytest
from opencode_db import CAPTURE, CAPTURED, Writer, copy_capture

from ctxd.agents.opencode.store import database_path
from ctxd.core.digest import COMPACT_HEADER
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

# The world gives these tests files and an environment; no ctxd process runs.
pytestmark = pytest.mark.in_process


def test_a_subagent_whose_first_step_ends_before_its_parents_is_still_its_subagent(
    world: World,
) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent)
    w = Writer(path)
    w.session("ses_main")
    w.session("ses_sub", parent="ses_main")
    # OpenCode writes the parent's step-finish only once its task tool (the subagent) is done.
    w.step("ses_sub", 50_000)
    w.close()
    centre = Centre.open(world.env, {}, lambda: 1_800_000_000.0, lambda: 0.0, parse_settings(""))
    centre.transcripts.catch_up(str(path))
    w = Writer(path)
    w.step("ses_main", 30_000)
    w.close()
    centre.transcripts.catch_up(str(path))
    rows = {row["session_id"]: row for row in centre.status.document()["sessions"]}
    assert rows[CAPTURED]["tokens"] == 20_000 and rows[CAPTURED]["parent"] is None
    assert rows["ses_main"]["tokens"] == 30_000 and rows["ses_main"]["parent"] is None
    assert rows["ses_sub"]["tokens"] == 50_000
    # its parent's key, as `ctxd status` names it ("subagent of ...")
    assert rows["ses_sub"]["parent"] == "opencode:ses_main"


def _tool_call(centre: Centre, session_id: str) -> str:
    """The context ctxd's plugin would append to a tool's output ("" for none)."""
    payload = {"hook_event_name": "tool_execute_after", "session_id": session_id, "cwd": "/w"}
    answer = centre.answers.handle_hook("opencode", None, json.dumps(payload).encode())
    assert isinstance(answer, bytes)
    if not answer:
        return ""
    context: str = json.loads(answer)["hookSpecificOutput"]["additionalContext"]
    return context


def test_after_a_compaction_the_next_tool_output_carries_the_sessions_digest_once(
    world: World,
) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent)
    centre = Centre.open(world.env, {}, lambda: 1_800_000_000.0, lambda: 0.0, parse_settings(""))
    assert _tool_call(centre, CAPTURED) == ""
    w = Writer(path)
    w.compaction(CAPTURED, 1_500)
    w.close()
    note = _tool_call(centre, CAPTURED)  # the hook reads the database before it is judged
    assert note.startswith(COMPACT_HEADER)
    assert '## Last request\n"Run the steps"' in note
    assert _tool_call(centre, CAPTURED) == ""


def test_the_real_subagent_capture_read_at_once(world: World) -> None:
    # The real CLI wrote the subagent's two steps before its parent's first, all read in one poll.
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    shutil.copy(CAPTURE.parent / "opencode.subagent.db", path)
    centre = Centre.open(world.env, {}, lambda: 1_800_000_000.0, lambda: 0.0, parse_settings(""))
    centre.transcripts.catch_up(str(path))
    parent, child = sorted(centre.status.document()["sessions"], key=lambda r: r["parent"] or "")
    assert (parent["tokens"], parent["parent"]) == (12_000, None)
    assert (child["tokens"], child["parent"]) == (31_000, f"opencode:{parent['session_id']}")
