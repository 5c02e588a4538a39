"""A restart reads what changed while the daemon was down, not the history: measured as the bytes
a real daemon process read (`rchar` of /proc/PID/io), over ~300 MB of recent transcripts."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.slow

#: A real Claude Code 2.1.332 capture, repeated to make transcripts of a heavy user's size.
CAPTURE = "tests/data/transcripts/claude-code-2.1.332/transcript.continuity.jsonl"
FILES = 30
FILE_BYTES = 10 * 1024 * 1024
MB = 1024 * 1024


def read_bytes_of(pid: int) -> int:
    """Bytes the process read through read(2) and kin so far, cache hits included."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/PID/io")


def caught_up(world: World, want: dict[str, int | None]) -> dict[str, Any] | None:
    """The status document once every transcript in `want` is listed, read to the end, with
    its figure (None: any)."""
    doc = world.status()
    rows = {row["transcript_path"]: row for row in doc["sessions"]}
    for path, tokens in want.items():
        row = rows.get(path)
        if row is None or row["catching_up"] is not None or row["tokens"] is None:
            return None
        if tokens is not None and row["tokens"] != tokens:
            return None
    return doc


def test_a_restart_reads_only_what_was_appended_while_down(world: World) -> None:
    capture = (world.repo / CAPTURE).read_bytes()
    body = capture * (FILE_BYTES // len(capture) + 1)
    paths = []
    for n in range(FILES):
        sid = str(uuid.uuid4())
        path = world.claude_projects / f"-work-p{n % 5}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        paths.append(path)
    history = FILES * len(body)

    started = time.monotonic()
    first = world.start()
    world.wait_for(lambda: caught_up(world, dict.fromkeys(map(str, paths))), 90, "first read")
    first_read, first_took = read_bytes_of(first.pid), time.monotonic() - started
    assert world.stop() == 0

    # While it is down, three sessions go on.
    grown = {}
    for n, path in enumerate(paths[:3]):
        t = world.claude(path.stem, slug=path.parent.name)
        t.assistant(200_000 + n * 1000)
        grown[str(path)] = 200_000 + n * 1000
    appended = sum(path.stat().st_size for path in paths) - history

    started = time.monotonic()
    again = world.start()
    want: dict[str, int | None] = {**dict.fromkeys(map(str, paths)), **grown}
    world.wait_for(lambda: caught_up(world, want), 60, "the restart to catch up")
    restart_read, restart_took = read_bytes_of(again.pid), time.monotonic() - started
    print(
        f"\nhistory {history / MB:.0f} MB in {FILES} files, {appended:,} bytes appended while "
        f"down: first start read {first_read / MB:.1f} MB (caught up in {first_took:.1f} s), "
        f"the restart {restart_read / MB:.1f} MB ({restart_took:.1f} s)"
    )
    assert first_read > history
    # Its own start-up (modules, config, snapshot) and the appended turns; not the history.
    assert restart_read < 40 * MB + appended, f"a restart read {restart_read / MB:.1f} MB"
