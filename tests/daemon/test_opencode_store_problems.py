"""An OpenCode database ctxd cannot read as OpenCode's (not a database; a later OpenCode's
schema, a column renamed) is said once at WARNING in the log, in `ctxd status` and in `ctxd
doctor`, under a real daemon; and it is said by doctor without one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from opencode_db import copy_capture

from ctxd.agents.opencode import database_path

if TYPE_CHECKING:
    from conftest import World


def not_a_database(path: Path) -> None:
    path.write_bytes(b"this is not a database\n" * 200)


def renamed_column(path: Path) -> None:
    copy_capture(path.parent, path.name)
    db = sqlite3.connect(path)
    db.execute("alter table part rename column data to payload")
    db.commit()
    db.close()


# (What is not a regular file at all, a directory or a FIFO, is refused before it is opened:
# tests/hardening/test_hardening_untrusted.py.)
@pytest.mark.parametrize("make", [not_a_database, renamed_column])
def test_an_unreadable_database_is_said_at_warning_in_status_and_in_doctor(
    world: World, make: object
) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    assert callable(make)
    make(path)
    world.start()
    hook = {"hook_event_name": "tool_execute_after", "session_id": "s", "cwd": "/w"}
    for _ in range(3):  # every hook polls the database: said once all the same
        assert world.hook("opencode", json.dumps(hook).encode()).returncode == 0

    def problems() -> list[dict[str, str]] | None:
        found = world.status()["daemon"]["store_problems"]
        return found or None

    (problem,) = world.wait_for(problems, 5, "the store problem in status")
    assert problem["path"] == str(path) and problem["agent"] == "opencode"
    warnings = [
        line for line in world.log().splitlines() if "WARNING" in line and str(path) in line
    ]
    assert len(warnings) == 1, world.log()
    status = world.cli("status")
    assert f"cannot read OpenCode's database {path}" in status.stdout, status.stdout
    doctor = world.cli("doctor")
    line = next(x for x in doctor.stdout.splitlines() if "OpenCode database" in x)
    assert f"cannot read {path}" in line, doctor.stdout


def test_doctor_says_it_without_a_daemon(world: World) -> None:
    path = database_path(world.env)
    path.parent.mkdir(parents=True)
    renamed_column(path)
    doctor = world.cli("doctor")
    line = next(x for x in doctor.stdout.splitlines() if "OpenCode database" in x)
    assert "no part.data" in line, doctor.stdout
