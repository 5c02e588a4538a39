"""OpenCode's sessions in the daemon's centre, in process: its database (a copy of the one the
real CLI 1.18.33 wrote, with sessions added as OpenCode writes them) read as a session store,
each session on its own figures, a subagent marked as its parent's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from opencode_db import CAPTURE, CAPTURED, Writer, copy_capture

from ctxd.agents.opencode import database_path
from ctxd.core.digest import COMPACT_HEADER
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

# The world gives these tests files and an environment; no ctxd process runs.
pytestmark = pytest.mark.in_process

#: The daemon's clock: an hour after the capture's session and the rows `Writer` adds, so that
#: they are live (a first read passes over sessions idle past the live window).
NOW = 1_796_168_000.0


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
    centre = Centre.open(world.env, {}, lambda: NOW, lambda: 0.0, parse_settings(""))
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
    centre = Centre.open(world.env, {}, lambda: NOW, lambda: 0.0, parse_settings(""))
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
    centre = Centre.open(world.env, {}, lambda: NOW, lambda: 0.0, parse_settings(""))
    centre.transcripts.catch_up(str(path))
    parent, child = sorted(centre.status.document()["sessions"], key=lambda r: r["parent"] or "")
    assert (parent["tokens"], parent["parent"]) == (12_000, None)
    assert (child["tokens"], child["parent"]) == (31_000, f"opencode:{parent['session_id']}")


def _idle(centre: Centre, session_id: str, active: bool = False) -> dict[str, object] | None:
    """What ctxd's plugin gets when the session goes idle (None: nothing)."""
    payload = {
        "hook_event_name": "session_idle",
        "session_id": session_id,
        "cwd": "/w",
        "stop_hook_active": active,
    }
    answer = centre.answers.handle_hook("opencode", None, json.dumps(payload).encode())
    assert isinstance(answer, bytes)
    return json.loads(answer) if answer else None


def _long_session(world: World) -> tuple[Centre, Path]:
    """The capture's session, then a long history of its own, past the handoff point; the
    daemon's centre under a clock of the test's, caught up with all of it."""
    world.write_config('[windows]\n"mock-model" = 200000\n')
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    copy_capture(path.parent)
    w = Writer(path)
    for i in range(200):
        ask = w.message(CAPTURED, "user")
        w.part(CAPTURED, ask, type="text", text=f"request {i}: " + "x" * 5000)
        msg = w.message(CAPTURED, "assistant")
        w.part(CAPTURED, msg, type="step-start")
        state = {"status": "completed", "input": {"command": f"make step-{i}"}, "output": ""}
        w.part(CAPTURED, msg, type="tool", tool="bash", callID=f"c{i}", state=state)
        tokens = {"input": 100_000 + i * 100, "output": 40, "cache": {"read": 0, "write": 0}}
        w.part(CAPTURED, msg, type="step-finish", tokens=tokens)
    w.close()
    settings = parse_settings('[windows]\n"mock-model" = 200000\n')
    monotonic = [0.0]
    centre = Centre.open(world.env, {}, lambda: NOW, lambda: monotonic[0], settings)
    while not centre.transcripts.catch_up(str(path)):
        monotonic[0] += 1.0
    return centre, path


def test_the_handoff_draft_is_the_digest_kept_as_rows_came_not_a_read_at_the_answer(
    world: World,
) -> None:
    centre, path = _long_session(world)
    # From here the database cannot be read: an answer that read the session would have
    # nothing to draft from (or wait on a slow disk, as it would on a long session).
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        (path.parent / name).unlink(missing_ok=True)
    path.write_bytes(b"gone\n")
    answer = _idle(centre, CAPTURED)
    assert answer is not None and answer["decision"] == "block"
    draft = (centre.answers.continuity.dir / f"{CAPTURED}.md").read_text()
    assert "request 199" in draft and "make step-199" in draft, draft


def test_a_handoff_the_plugin_never_received_is_asked_again_at_the_next_idle(
    world: World,
) -> None:
    centre, _ = _long_session(world)
    first = _idle(centre, CAPTURED)
    assert first is not None and first["decision"] == "block"
    # the plugin gave up waiting: it never sent the request on, and its next idle says so
    again = _idle(centre, CAPTURED)
    assert again is not None and again["decision"] == "block"
    assert "CONTEXT HANDOFF:" in str(again["reason"])
    assert _idle(centre, CAPTURED, active=True) is None  # sent on this time
    assert _idle(centre, CAPTURED) is None


def test_a_hook_reads_what_is_new_only_until_its_deadline_and_answers(world: World) -> None:
    """Under a clock that passes every deadline at once, the idle hook reads none of the parts
    written since the last poll (it has no time for them), leaves them to the background and
    answers with the digest kept so far: its answer waits on neither the history nor what is
    new (an answer that read the session whole would hold the later requests)."""
    centre, path = _long_session(world)
    w = Writer(path)
    for i in range(50):  # a long tool output's worth of parts, not read yet
        ask = w.message(CAPTURED, "user")
        w.part(CAPTURED, ask, type="text", text=f"later request {i}: " + "y" * 50_000)
    w.close()
    clock = [100.0]

    def passing() -> float:
        clock[0] += 1.0  # every look at the clock finds the deadline passed
        return clock[0]

    centre.transcripts.monotonic = passing
    answer = _idle(centre, CAPTURED)
    assert answer is not None and answer["decision"] == "block"
    assert centre.transcripts.backlog_size() == 1  # the rest is read in the background
    draft = (centre.answers.continuity.dir / f"{CAPTURED}.md").read_text()
    assert "request 199" in draft and "later request" not in draft
