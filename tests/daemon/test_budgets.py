"""Reading in slices under a deadline, and seeing a rewrite for what it is, in
process: `TranscriptFile` and the transcripts room's backlog."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import anyio
import pytest

from ctxd.daemon.centre import Centre
from ctxd.daemon.files import CHUNK, TranscriptFile

LINES: dict[str, dict[str, object]] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "daemon" / "lines.json").read_text()
)


def assistant(tokens: int, pad: int = 0) -> bytes:
    record = json.loads(json.dumps(LINES["claude-assistant"]))
    message = record["message"]
    assert isinstance(message, dict)
    message["id"] = f"msg_{uuid.uuid4().hex[:20]}"
    message["usage"].update(
        input_tokens=tokens, cache_creation_input_tokens=0, cache_read_input_tokens=0
    )
    record.update(uuid=str(uuid.uuid4()), pad="x" * pad)
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def test_a_deadline_stops_reading_after_the_slice_that_crosses_it(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(assistant(10_000, pad=200_000) * 40 + assistant(20_000))  # ~8 MB
    tracked = TranscriptFile(str(path), "claude")
    tracked.read_appended(until=time.monotonic())  # already passed: one slice, no more
    assert tracked.offset == CHUNK and tracked.behind == path.stat().st_size - CHUNK
    updates = tracked.read_appended()
    assert tracked.behind == 0 and updates[-1].tokens == 20_000


def test_a_copy_truncate_rewrite_longer_than_the_offset_is_read_afresh(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(assistant(100_000) + assistant(400_002))
    tracked = TranscriptFile(str(path), "claude")
    assert tracked.read_appended()[-1].tokens == 400_002
    old = tracked.offset
    rewritten = assistant(50_000, pad=old) + assistant(90_000)
    assert len(rewritten) > old
    with path.open("r+b") as f:  # same inode, truncated and written at once
        f.truncate(0)
        f.write(rewritten)
    assert [u.tokens for u in tracked.read_appended()] == [50_000, 90_000]


def test_a_resume_with_the_readers_state_reads_only_what_was_appended(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(assistant(100_000, pad=50_000) * 20)
    tracked = TranscriptFile(str(path), "claude")
    tracked.read_appended()
    saved = json.loads(json.dumps(tracked.position(with_state=True)))  # as the snapshot has it
    turn = assistant(120_000)
    with path.open("ab") as f:
        f.write(turn)
    resumed = TranscriptFile.resume(str(path), "claude", saved)
    assert resumed.behind == len(turn)
    assert [u.tokens for u in resumed.read_appended()] == [120_000]

    # A state written by other code (another version of ctxd) is not taken: read again.
    saved["state"]["code"] = "another version"
    resumed = TranscriptFile.resume(str(path), "claude", saved)
    assert resumed.behind == path.stat().st_size
    assert [u.tokens for u in resumed.read_appended()] == [120_000]


def test_an_append_after_a_saved_position_is_read_on_resume(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(assistant(100_000))
    tracked = TranscriptFile(str(path), "claude")
    tracked.read_appended()
    saved = tracked.position()  # no reader state: the bytes before are read again
    with path.open("ab") as f:
        f.write(assistant(120_000))
    resumed = TranscriptFile.resume(str(path), "claude", saved)
    assert resumed.behind > 0  # the saved part is read again, its updates dropped
    assert [u.tokens for u in resumed.read_appended()] == [120_000]
    # Rewritten while the daemon was down: the fingerprint no longer matches, read from 0.
    path.write_bytes(assistant(7_000, pad=len(path.read_bytes())))
    assert [
        u.tokens for u in TranscriptFile.resume(str(path), "claude", saved).read_appended()
    ] == [7_000]


@pytest.mark.anyio
async def test_a_scan_of_many_transcripts_is_carried_on_in_the_background(tmp_path: Path) -> None:
    root = tmp_path / "projects"
    for n in range(40):
        project = root / f"-p{n}"
        project.mkdir(parents=True)
        for _ in range(50):
            (project / f"{uuid.uuid4()}.jsonl").write_bytes(assistant(10_000 + n))
    centre = Centre.open({"HOME": str(tmp_path)}, {"claude": root})
    started = time.monotonic()
    found = centre.transcripts.discover([root], until=time.monotonic() + 0.005)
    assert time.monotonic() - started < 0.5
    assert found < 2000
    async with anyio.create_task_group() as tg:
        tg.start_soon(centre.transcripts.drain_backlog)
        with anyio.fail_after(30):
            while len(centre.sessions) < 2000 or centre.transcripts.backlog_size():
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    assert {state.tokens for state in centre.sessions} == {10_000 + n for n in range(40)}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_nothing_is_left_open(tmp_path: Path) -> None:
    before = len(os.listdir("/proc/self/fd"))
    path = tmp_path / "t.jsonl"
    path.write_bytes(assistant(1) * 3)
    tracked = TranscriptFile(str(path), "claude")
    tracked.read_appended(until=time.monotonic())
    TranscriptFile.resume(str(path), "claude", tracked.position())
    assert len(os.listdir("/proc/self/fd")) == before
