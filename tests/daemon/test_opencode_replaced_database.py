"""OpenCode's database replaced under a real daemon, or while it was down: a backup of the same
database restored (a new inode), another database copied over it, another put there while ctxd
was stopped. Each session's compactions are counted once, its handoff asked once, and no
session of the new database is skipped."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opencode_db import Writer, copy_capture

from ctxd.agents.opencode import database_path

if TYPE_CHECKING:
    from conftest import World

CONFIG = '[windows]\n"mock-model" = 200000\n'
LONG = "ses_long"  # compacted once, then past the handoff point (70 % of 168,000)
OTHER = "ses_other"


def build(path: Path) -> None:
    """The database as the daemon first reads it: the capture, then a long session."""
    path.parent.mkdir(parents=True, exist_ok=True)
    copy_capture(path.parent, path.name)
    w = Writer(path)
    w.session(LONG)
    w.step(LONG, 150_000)
    w.compaction(LONG, 2_000)
    w.step(LONG, 130_000)
    w.close()


def idle(world: World, session_id: str, active: bool = False) -> Any:
    """What ctxd's plugin gets when session `session_id` goes idle (None: nothing)."""
    payload = {
        "hook_event_name": "session_idle",
        "session_id": session_id,
        "cwd": "/w",
        "stop_hook_active": active,
    }
    return world.hook_out("opencode", payload)


def row(world: World, session_id: str) -> dict[str, Any] | None:
    rows = [r for r in world.status()["sessions"] if r["session_id"] == session_id]
    return rows[0] if rows else None


def read_to(world: World, session_id: str, tokens: int) -> None:
    """Waits until the daemon has read session `session_id` up to `tokens` of context."""
    world.wait_for(
        lambda: (r := row(world, session_id)) is not None and r["tokens"] == tokens,
        10,
        f"{session_id} read to {tokens:,} tokens",
    )


def asked_once(world: World) -> None:
    """The long session, read, asks for its handoff at its idle; the plugin sends it on, and
    the idle after that turn is not asked again."""
    read_to(world, LONG, 130_000)
    answer = idle(world, LONG)
    assert answer is not None and answer["decision"] == "block", answer
    assert "CONTEXT HANDOFF:" in answer["reason"]
    assert idle(world, LONG, active=True) is None


def started_and_asked(world: World) -> Path:
    """A daemon started on the built database, the long session's handoff asked once (as
    `asked_once` checks); the database's path."""
    world.write_config(CONFIG)
    path = database_path(world.env)
    build(path)
    world.start()
    asked_once(world)
    return path


def checkpointed(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("pragma wal_checkpoint(truncate)")
    db.close()


def replacement(path: Path, tmp: Path, extra: int) -> Path:
    """Another database with the long session's rows in it too, at other rowids: the capture,
    `extra` steps of another session first, then the long session's rows copied over."""
    new = tmp / "new.db"
    copy_capture(tmp, "new.db")
    w = Writer(new)
    w.n += 10_000  # ids of its own
    w.session(OTHER)
    for i in range(extra):
        w.step(OTHER, 10_000 + i)
    w.close()
    checkpointed(path)
    db = sqlite3.connect(new)
    db.execute("attach ? as old", (str(path),))
    db.execute("insert into session select * from old.session where id = ?", (LONG,))
    db.execute("insert into message select * from old.message where session_id = ?", (LONG,))
    copied = "insert into part select * from old.part where session_id = ? order by rowid"
    db.execute(copied, (LONG,))
    db.commit()
    db.execute("detach old")
    db.execute("pragma wal_checkpoint(truncate)")
    db.close()
    return new


def assert_counted_once(world: World) -> None:
    long = row(world, LONG)
    assert long is not None and long["compactions"] == 1 and long["tokens"] == 130_000, long
    assert idle(world, LONG) is None  # asked once already
    assert long["handoff_asked"] is True


def test_a_backup_restored_under_a_new_inode_is_read_on_not_again(world: World) -> None:
    path = started_and_asked(world)
    checkpointed(path)
    backup = path.parent / "backup.db"
    shutil.copy(path, backup)
    before = os.stat(path).st_ino
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        (path.parent / name).unlink(missing_ok=True)
    shutil.copy(backup, path)
    assert os.stat(path).st_ino != before
    w = Writer(path)  # the session goes on in the restored database
    w.step(LONG, 131_000)
    w.close()
    read_to(world, LONG, 131_000)
    long = row(world, LONG)
    assert long is not None and long["compactions"] == 1, long
    assert idle(world, LONG) is None


def test_another_database_copied_over_it_is_read_whole_without_counting_twice(
    world: World, tmp_path: Path
) -> None:
    path = started_and_asked(world)
    new = replacement(path, tmp_path, extra=2)
    for name in (path.name + "-wal", path.name + "-shm"):
        (path.parent / name).unlink(missing_ok=True)
    inode = os.stat(path).st_ino
    shutil.copyfile(new, path)  # written over in place: the same inode
    assert os.stat(path).st_ino == inode
    os.utime(path)
    # the other session's rows lie below where the daemon had read to
    read_to(world, OTHER, 10_001)
    assert_counted_once(world)


def test_another_database_put_there_while_ctxd_was_down_is_read_whole(
    world: World, tmp_path: Path
) -> None:
    path = started_and_asked(world)
    assert world.stop() == 0
    new = replacement(path, tmp_path, extra=2)
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        (path.parent / name).unlink(missing_ok=True)
    shutil.copy(new, path)
    world.start()
    read_to(world, OTHER, 10_001)
    assert_counted_once(world)
    assert json.dumps(row(world, LONG))  # still one row for it
    assert len([r for r in world.status()["sessions"] if r["session_id"] == LONG]) == 1
