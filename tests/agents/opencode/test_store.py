"""OpenCode's database reader, on the capture the real CLI 1.18.33 wrote and on copies of it
being written to while read."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from opencode_db import Writer, copy_capture

from ctxd.agents import spec
from ctxd.agents.opencode import database_path
from ctxd.agents.opencode_family import store
from ctxd.agents.opencode_family.digest import session_digest
from ctxd.agents.opencode_family.store import OpenCodeStore
from ctxd.agents.store import StoreProblem

CAPTURE = Path(__file__).parents[2] / "data" / "transcripts" / "opencode-1.18.33" / "opencode.db"
SESSION = "ses_dcc44cf90ffeorGSkkrofIPjZq"


def copy(tmp_path: Path) -> str:
    path = tmp_path / "opencode.db"
    shutil.copy(CAPTURE, path)
    db = sqlite3.connect(path)
    db.execute("pragma journal_mode=wal")  # as OpenCode keeps it
    db.close()
    return str(path)


def test_the_capture_gives_each_step_the_mock_prompt_tokens() -> None:
    rows = OpenCodeStore(str(CAPTURE)).read()
    # the mock reported prompt_tokens 10,000, 15,000, 20,000 (4,000 of them cached)
    assert [(r.session_id, r.update.tokens, r.update.pending) for r in rows] == [
        (SESSION, 10_000, 40),
        (SESSION, 15_000, 40),
        (SESSION, 20_000, 40),
    ]
    assert {r.update.model for r in rows} == {"mock-model"}
    assert {r.cwd for r in rows} == {"<WORK>"}
    assert {r.parent_id for r in rows} == {None}


def test_a_later_read_returns_only_the_new_step_and_resumes_from_its_position(
    tmp_path: Path,
) -> None:
    path = copy(tmp_path)
    reader = OpenCodeStore(path)
    assert len(reader.read()) == 3
    assert reader.read() == []
    writer = sqlite3.connect(path)  # a write while the reader's connection is open
    message = writer.execute("select id from message where data like '%assistant%'").fetchone()[0]
    writer.execute(
        "insert into part values ('prt_new', ?, ?, 1, 1, ?)",
        (
            message,
            SESSION,
            '{"type":"step-finish","tokens":{"input":1000,"output":5,"cache":{"read":30000,"write":7}}}',
        ),
    )
    writer.commit()
    (new,) = reader.read()
    assert new.update.tokens == 31_007 and new.update.turn_id == "prt_new"
    resumed = OpenCodeStore(path, reader.position())
    assert resumed.read() == []
    writer.close()


def test_a_compaction_summary_is_a_compaction_of_its_output(tmp_path: Path) -> None:
    path = copy(tmp_path)
    writer = sqlite3.connect(path)
    writer.execute(
        "insert into message values ('msg_sum', ?, 2, 2, ?)",
        (SESSION, '{"role":"assistant","summary":true,"mode":"compaction","modelID":"m"}'),
    )
    writer.execute(
        "insert into part values ('prt_sum', 'msg_sum', ?, 2, 2, ?)",
        (SESSION, '{"type":"step-finish","tokens":{"input":150000,"output":900,"cache":{}}}'),
    )
    writer.commit()
    last = OpenCodeStore(path).read()[-1]
    assert last.update.compaction and last.update.estimated and last.update.tokens == 900


def test_the_spec_finds_the_database() -> None:
    store = spec("opencode").store
    assert store is not None
    assert store.path({"HOME": "/h"}) == Path("/h/.local/share/opencode/opencode.db")
    assert database_path({"HOME": "/h", "OPENCODE_DB": "x.db"}) == Path(
        "/h/.local/share/opencode/x.db"
    )
    assert database_path({"XDG_DATA_HOME": "/d", "OPENCODE_DB": "/a/b.db"}) == Path("/a/b.db")


def test_a_step_written_after_the_newest_parts_were_deleted_is_read(tmp_path: Path) -> None:
    # OpenCode's revert deletes the last turns' rows; SQLite gives their rowids to the next.
    path = copy(tmp_path)
    reader = OpenCodeStore(path)
    assert len(reader.read()) == 3
    writer = sqlite3.connect(path)
    message = writer.execute("select message_id from part where rowid = 10").fetchone()[0]
    writer.execute("delete from part where rowid >= 8")
    writer.commit()
    assert reader.read() == []
    writer.execute(
        "insert into part values ('prt_after', ?, ?, 3, 3, ?)",
        (message, SESSION, '{"type":"step-finish","tokens":{"input":500,"output":1,"cache":{}}}'),
    )
    writer.commit()
    (new,) = reader.read()
    assert (new.update.turn_id, new.update.tokens) == ("prt_after", 500)
    writer.close()


def test_a_read_does_not_look_again_at_the_parts_after_the_last_step(tmp_path: Path) -> None:
    path = copy(tmp_path)
    reader = OpenCodeStore(path)
    reader.read()
    writer = sqlite3.connect(path)
    message = writer.execute("select message_id from part where rowid = 10").fetchone()[0]
    writer.execute(
        'insert into part values (\'prt_text\', ?, ?, 3, 3, \'{"type":"text","text":"x"}\')',
        (message, SESSION),
    )
    writer.commit()
    assert reader.read() == []
    assert reader.position()["rowid"] == 11
    writer.close()


DATA = CAPTURE.parent


def test_a_real_compaction_is_a_reset_to_the_summarys_output() -> None:
    # opencode.compact.db: the mock's prompts 50,000 and 170,000 (over OpenCode's 168,000 on a
    # 200,000 window), its summary request answered with 5 tokens, then 20,000 and 21,000.
    rows = OpenCodeStore(str(DATA / "opencode.compact.db")).read()
    assert [(r.update.tokens, r.update.compaction) for r in rows] == [
        (50_000, False),
        (170_000, False),
        (5, True),
        (20_000, False),
        (21_000, False),
    ]


def test_a_real_subagents_steps_come_before_its_parents_first_and_name_it() -> None:
    # opencode.subagent.db: a `task` call in the parent's first step (10,000), the subagent's
    # two steps (30,000, 31,000), then the parent's answer (12,000).
    rows = OpenCodeStore(str(DATA / "opencode.subagent.db")).read()
    parent = next(r.session_id for r in rows if r.parent_id is None)
    assert [(r.update.tokens, r.parent_id) for r in rows] == [
        (30_000, parent),
        (31_000, parent),
        (10_000, None),
        (12_000, None),
    ]


def test_a_read_past_its_deadline_stops_after_one_part_and_the_next_goes_on(
    tmp_path: Path,
) -> None:
    path = copy(tmp_path)
    writer = sqlite3.connect(path)
    message = writer.execute("select message_id from part where rowid = 10").fetchone()[0]
    for i in range(20):  # a long tool output's worth of other parts, then one step
        writer.execute(
            'insert into part values (?, ?, ?, 3, 3, \'{"type":"text","text":"x"}\')',
            (f"prt_{i:05d}", message, SESSION),
        )
    writer.execute(
        "insert into part values ('prt_last', ?, ?, 4, 4, ?)",
        (message, SESSION, '{"type":"step-finish","tokens":{"input":7,"output":1,"cache":{}}}'),
    )
    writer.commit()
    writer.close()
    reader = OpenCodeStore(path)
    reads = []
    while True:
        reads.append(reader.read(until=0.0, clock=lambda: 1.0))  # the deadline has passed
        if not reader.behind:
            break
    # each call read one part, whatever it held
    assert len(reads) == 31
    assert [r.update.tokens for s in reads for r in s] == [10_000, 15_000, 20_000, 7]


def _long(tmp_path: Path) -> tuple[str, Writer]:
    path = copy_capture(tmp_path)
    w = Writer(path)
    w.session("ses_a")
    ask = w.message("ses_a", "user")
    w.part("ses_a", ask, type="text", text="Fix the parser")
    w.step("ses_a", 50_000)
    w.compaction("ses_a", 900)
    return str(path), w


def test_a_resumed_reader_keeps_each_sessions_digest_and_reads_only_what_is_new(
    tmp_path: Path,
) -> None:
    path, w = _long(tmp_path)
    reader = OpenCodeStore(path)
    reader.read()
    saved = json.loads(json.dumps(reader.position()))  # as the snapshot keeps it
    w.step("ses_a", 60_000)
    resumed = OpenCodeStore(path, saved)
    (new,) = resumed.read()
    assert new.update.tokens == 60_000
    assert resumed.digest("ses_a") == session_digest(path, "ses_a")
    assert resumed.digest("ses_a").asks == ("Fix the parser",)  # type: ignore[union-attr]


def test_a_position_saved_without_its_database_or_digests_is_read_again_as_replayed(
    tmp_path: Path,
) -> None:
    path, _ = _long(tmp_path)
    reader = OpenCodeStore(path)
    first = reader.read()
    # what an older ctxd saved: the rowid alone
    again = OpenCodeStore(path, {"rowid": reader.position()["rowid"]}).read()
    assert [r.update for r in again] == [r.update for r in first]
    assert all(r.replayed for r in again) and not any(r.replayed for r in first)


def _put(source: Path, path: str) -> None:
    """`source`, checkpointed, put at `path` in place of what was there (a new inode)."""
    db = sqlite3.connect(source)
    db.execute("pragma wal_checkpoint(truncate)")
    db.close()
    for end in ("", "-wal", "-shm"):
        Path(path + end).unlink(missing_ok=True)
    shutil.copy(source, path)


def test_a_restored_copy_is_read_on_and_another_database_is_read_again(tmp_path: Path) -> None:
    path, w = _long(tmp_path)
    w.close()
    reader = OpenCodeStore(path)
    reader.read()
    backup = tmp_path / "backup.db"
    _put(Path(path), str(backup))
    _put(backup, path)  # the same parts under a new inode: read on
    assert reader.read() == []
    assert reader.digest("ses_a") == session_digest(path, "ses_a")
    _put(_other(tmp_path), path)  # other parts: read again from its first row
    _read_again_whole(reader)


def test_a_database_copied_over_it_in_place_during_a_read_is_read_again_whole(
    tmp_path: Path,
) -> None:
    """`cp other.db opencode.db` over the file being read (the same inode): pages of both may
    be read as one, so what that read saw is dropped and the next reads the new file whole."""
    path, w = _long(tmp_path)
    reader = OpenCodeStore(path)
    reader.read()
    w.step("ses_a", 60_000)
    w.step("ses_a", 61_000)
    w.close()
    other = _other(tmp_path)
    _put(other, str(other.with_suffix(".copy")))  # checkpointed: the file holds it all

    def copy_over_in_place() -> float:
        if Path(path + "-wal").exists():
            for end in ("-wal", "-shm"):
                Path(path + end).unlink()
            shutil.copyfile(other.with_suffix(".copy"), path)
        return 0.0

    inode = Path(path).stat().st_ino
    assert reader.read(until=1e9, clock=copy_over_in_place) == []
    assert Path(path).stat().st_ino == inode
    _read_again_whole(reader)


def _other(tmp_path: Path) -> Path:
    """Another database: the capture, then a session "ses_b" of one 7,000-token step."""
    (tmp_path / "other").mkdir()
    other = copy_capture(tmp_path / "other")
    w = Writer(other)
    w.n += 1000
    w.session("ses_b")
    w.step("ses_b", 7_000)
    w.close()
    return other


def _read_again_whole(reader: OpenCodeStore) -> None:
    """The next read is of `_other`'s database from its first row, its updates replayed."""
    rows = reader.read()
    assert [(r.session_id, r.update.tokens, r.replayed) for r in rows][-1] == ("ses_b", 7_000, True)
    assert reader.digest("ses_a") is None  # the digests are the new database's


def test_digests_are_saved_only_once_rebuilt_whole(tmp_path: Path) -> None:
    path, _ = _long(tmp_path)
    reader = OpenCodeStore(path)
    reader.read()
    old = {"rowid": reader.position()["rowid"]}  # an older ctxd's
    rebuilding = OpenCodeStore(path, old)
    assert "digests" not in rebuilding.position()
    rebuilding.read(until=0.0, clock=lambda: 1.0)  # one part of the pass
    assert rebuilding.behind and "digests" not in rebuilding.position()
    while rebuilding.behind:
        rebuilding.read()
    saved = rebuilding.position()
    assert "digests" in saved
    assert OpenCodeStore(path, saved).digest("ses_a") == session_digest(path, "ses_a")


def test_an_unreadable_database_is_not_opened_again_until_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = []
    connect = store.connect

    def counted(path: str) -> sqlite3.Connection:
        opened.append(path)
        return connect(path)

    monkeypatch.setattr(store, "connect", counted)
    path = tmp_path / "opencode.db"
    path.write_bytes(b"not a database\n" * 100)
    reader = OpenCodeStore(str(path))
    for _ in range(2):
        with pytest.raises(StoreProblem, match="not a database"):
            reader.read()
    assert len(opened) == 1  # the second read did not open it again
    path.unlink()
    copy_capture(tmp_path)  # OpenCode wrote it again
    assert len(reader.read()) == 3
