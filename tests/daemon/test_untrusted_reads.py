"""The daemon's readers of agents' files, in process: whatever is planted at a path (a FIFO, a
link to /dev/zero, a directory), each answers at once, says what was wrong, and tries a refused
file again only once it changed."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from at_once import within_a_second

from ctxd import agents, untrusted
from ctxd.agents.opencode_family import store as opencode_store
from ctxd.core import session as core
from ctxd.daemon import agent_settings
from ctxd.daemon.agent_settings import AgentSettings
from ctxd.daemon.files import TranscriptFile
from ctxd.untrusted import RefusedFile


def _planted(tmp_path: Path, kind: str, name: str = "planted.jsonl") -> Path:
    path = tmp_path / name
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    return path


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
@pytest.mark.parametrize("agent", sorted(agents.AGENTS))
def test_a_transcript_that_is_no_file_is_refused_at_once(
    tmp_path: Path, agent: str, kind: str
) -> None:
    """Opening a reader sniffs the file's format for some agents (Gemini CLI's): that open
    waited forever on a FIFO."""
    path = str(_planted(tmp_path, kind))
    tracked = within_a_second(lambda: TranscriptFile(path, agent))
    with pytest.raises(RefusedFile, match="not a regular file"):
        within_a_second(tracked.read_appended)
    resumed = within_a_second(
        lambda: TranscriptFile.resume(path, agent, {"offset": 10, "identity": [1, 2]})
    )
    assert resumed.offset == 0


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory"])
def test_opencode_database_that_is_no_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    """SQLite opens the database by name and would wait on a FIFO."""
    path = str(_planted(tmp_path, kind, "opencode.db"))
    assert within_a_second(lambda: opencode_store.recognises(path)) is False
    with pytest.raises(RefusedFile, match="not a regular file"):
        within_a_second(lambda: opencode_store.OpenCodeStore(path).read())


def test_an_opencode_wal_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "opencode.db"
    sqlite3.connect(path).close()
    os.mkfifo(str(path) + "-wal")
    with pytest.raises(RefusedFile, match="-wal: not a regular file"):
        within_a_second(lambda: opencode_store.connect(str(path)))


def test_a_refused_settings_file_is_tried_again_only_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reads: list[Path] = []
    real = untrusted.read_untrusted

    def counted(path: Path, limit: int) -> bytes:
        reads.append(path)
        return real(path, limit)

    monkeypatch.setattr(agent_settings, "read_untrusted", counted)
    project = tmp_path / "project"
    (project / ".pi").mkdir(parents=True)
    planted = project / ".pi" / "settings.json"
    os.mkfifo(planted)
    now = [0.0]
    cache = AgentSettings({"HOME": str(tmp_path / "home")}, clock=lambda: now[0])
    state = core.new_session("pi", "s", None, 0.0, cwd=str(project))
    with caplog.at_level(logging.WARNING):
        for step in range(20):  # 20 hooks over 10 s
            now[0] = step / 2
            assert within_a_second(lambda: cache.config(state)) == {}
    assert reads.count(planted) == 1
    assert [r.message for r in caplog.records].count(
        f"not reading {planted} (pi coding agent settings): not a regular file (a FIFO)"
    ) == 1
    assert [r.path for r in cache.refused_for(state)] == [str(planted)]
    # a regular file in its place: read, and no longer named
    planted.unlink()
    planted.write_text('{"compaction": {"enabled": false}}')
    now[0] += 2
    assert cache.config(state) != {}
    assert cache.refused_for(state) == []
    assert len(cache.refused) == 0
