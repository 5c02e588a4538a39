"""A snapshot damaged on disk (a broken disk, an editor, another version's field of another type):
a real daemon is stopped with a live session, one section of its snapshot is given the wrong JSON
type, and a new daemon must start, keep what the other sections hold, and say what it ignored.
A snapshot ctxd cannot start with is met again by every restart: the daemon would be gone for
good, every hook unanswered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from daemon_proc import Home, wait_for

DAMAGE: dict[str, Any] = {
    "files": "not a mapping",
    "journal": 2**64 - 1,  # the last journal line's number: the next one could not be written
    "learned": [1, 2],
    "proved": {"claude-opus-4": "many"},
    "sessions": 5,
    "position": {"identity": 5, "offset": "x", "tail": "not hex"},  # each file's read position
}


@pytest.mark.parametrize("section", sorted(DAMAGE))
def test_a_snapshot_section_of_the_wrong_type_costs_only_itself(home: Home, section: str) -> None:
    """Each raised out of the restore on main (ValueError, TypeError, AttributeError), so no
    daemon could start; a session whose read position was lost was never read again; and a
    journal number at 2**64 - 1 failed every journalled answer (no warning, no handoff)."""
    home.start()
    session = home.claude()
    session.assistant(650_000)
    assert "CONTEXT WARNING" in json.dumps(home.hook_out(session.payload("PostToolUse")))
    assert home.stop() == 0
    doc = json.loads(home.state_file.read_bytes())
    if section == "position":
        doc["files"] = {key: DAMAGE[section] for key in doc["files"]}
    else:
        doc[section] = DAMAGE[section]
    home.state_file.write_text(json.dumps(doc))

    home.start()
    row = home.row(session)
    if section == "sessions":
        assert "'sessions'" in home.log(), home.log_tail()
    else:
        assert row is not None and row["tokens"] == 650_000, row
    # The session is followed on, whatever was lost.
    session.assistant(660_000)
    home.hook_out(session.payload("PostToolUse"))
    wait_for(lambda: (home.row(session) or {}).get("tokens") == 660_000, 5, "the new usage")
    # And a new session is warned: its answer is journalled first.
    fresh = home.claude()
    fresh.assistant(650_000)
    assert "CONTEXT WARNING" in json.dumps(home.hook_out(fresh.payload("PostToolUse")))
    assert "hook failed" not in home.log(), home.log_tail()


def test_a_session_of_an_agent_from_a_newer_ctxd_is_said_once_not_every_status(
    home: Home,
) -> None:
    """A snapshot written by a newer ctxd can hold a session of an agent this one does not know.
    Its row says it cannot be computed; but the traceback went to the log on every status, and
    the dashboard asks twice a second: the log grew by a traceback a second, for good."""
    home.start()
    session = home.claude()
    session.assistant(650_000)
    home.hook_out(session.payload("PostToolUse"))
    assert home.stop() == 0
    doc = json.loads(home.state_file.read_bytes())
    newer = dict(doc["sessions"][0], agent="hologram", key="hologram:x", session_id="x")
    doc["sessions"].append(dict(newer, transcript_path=None))
    home.state_file.write_text(json.dumps(doc))

    home.start()
    for _ in range(20):
        rows = {row["session_id"]: row for row in home.status()["sessions"]}
    assert "error" in rows["x"] and rows[session.session_id]["tokens"] == 650_000, rows
    assert home.log().count("Traceback") == 1, home.log_tail()


def test_a_snapshot_from_a_newer_ctxd_is_kept_aside_not_written_over(home: Home) -> None:
    """A downgrade meets a snapshot of a format it does not know: it starts empty, as it must,
    but its first save wrote over the newer ctxd's sessions, lost for the upgrade back."""
    home.state_dir.mkdir(mode=0o700, parents=True)
    newer = json.dumps({"format": 99, "sessions": [{"a future": "session"}]})
    home.state_file.write_text(newer)
    home.state_file.chmod(0o600)
    home.start()
    session = home.claude()
    session.assistant(650_000)
    home.hook_out(session.payload("PostToolUse"))
    assert home.stop() == 0  # saves this version's snapshot
    aside = home.state_file.with_name(home.state_file.name + ".unknown")
    assert aside.read_text() == newer
    assert str(aside) in home.log(), home.log_tail()
    assert json.loads(home.state_file.read_text())["format"] != 99
