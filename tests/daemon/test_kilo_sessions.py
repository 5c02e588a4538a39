"""Kilo CLI's sessions in the daemon's centre, in process: the database the real CLI 7.7.7 wrote
(tests/data/transcripts/kilo-7.7.7/kilo.compact.db, a session compacted once) read from Kilo's
place, the note after its compaction and the handoff draft from its digest, answered to Kilo's
plugin as to OpenCode's."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from opencode_db import Writer

from ctxd.agents.kilo import FAMILY
from ctxd.agents.opencode_family.store import database_path
from ctxd.core.digest import COMPACT_HEADER
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.in_process

CAPTURE = Path(__file__).parents[1] / "data" / "transcripts" / "kilo-7.7.7" / "kilo.compact.db"
#: The daemon's clock: an hour after the capture's session, so that it is live (a first read
#: passes over sessions idle past the live window).
NOW = 1_796_558_000.0


def _hook(centre: Centre, payload: dict[str, object]) -> dict[str, object] | None:
    answer = centre.answers.handle_hook("kilo", None, json.dumps(payload).encode())
    assert isinstance(answer, bytes)
    return json.loads(answer) if answer else None


def test_kilos_compacted_session_gets_its_note_once_and_its_handoff_draft(world: World) -> None:
    path = database_path(FAMILY, world.env)
    path.parent.mkdir(parents=True)
    shutil.copy(CAPTURE, path)
    (sid,) = sqlite3.connect(path).execute("SELECT id FROM session").fetchone()
    settings = parse_settings('[windows]\n"mock-model" = 200000\n')
    centre = Centre.open(world.env, {}, lambda: NOW, lambda: 0.0, settings)
    tool = {"hook_event_name": "tool_execute_after", "session_id": sid, "cwd": "/w"}
    _hook(centre, tool)  # its WARNING (69.7 % of 168,000 used)
    [row] = centre.status.document()["sessions"]
    assert (row["agent"], row["tokens"], row["compactions"]) == ("kilo", 117_000, 1)

    w = Writer(path)  # Kilo compacts again, as it writes a compaction
    w.compaction(sid, 1_500)
    w.close()
    first = _hook(centre, tool)
    assert first is not None
    note = str(first["hookSpecificOutput"]["additionalContext"])  # type: ignore[index]
    assert note.startswith(COMPACT_HEADER) and "Run the steps" in note, note
    assert _hook(centre, tool) is None  # once

    w = Writer(path)  # one more step, past the handoff point (70 % of 168,000)
    w.step(sid, 125_000)
    w.close()
    idle = {"hook_event_name": "session_idle", "session_id": sid, "cwd": "/w"}
    answer = _hook(centre, idle)
    assert answer is not None and answer["decision"] == "block"
    draft = (centre.answers.continuity.dir / f"{sid}.md").read_text()
    assert "Run the steps" in draft and "`echo E2E-STEP-6` — ok" in draft, draft
