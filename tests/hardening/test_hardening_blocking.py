"""Nothing the daemon reads may stall its event loop, whatever appears under
the agents' roots or at the config path."""

from __future__ import annotations

import os
import time
import uuid

from daemon_proc import Home, wait_for

GiB = 1024**3


def test_a_huge_transcript_appearing_does_not_stall_other_hooks(home: Home) -> None:
    """A 4 GiB (sparse) transcript appearing under the watched Claude root
    blocked every hook for 15 s: the watcher, sweep and track paths read to the end of a file
    without yielding (only hooks are capped). Long reads must yield in slices."""
    home.start()
    probes = [home.claude() for _ in range(8)]
    for session in probes:
        session.assistant(650_000)  # each session's first call above the line warns

    big = home.claude_projects / "x" / f"{uuid.uuid4()}.jsonl"
    big.parent.mkdir(parents=True)
    with big.open("wb") as f:
        f.truncate(4 * GiB)  # sparse: costs no disk, reads as 4 GiB of zeros
    time.sleep(0.3)  # the watcher reports it within tens of milliseconds

    timings = []
    try:
        for session in probes:  # another session's hooks, for about 3 s
            started = time.monotonic()
            result = home.hook(session.payload("PostToolUse"))
            timings.append(
                (round(time.monotonic() - started, 2), b"CONTEXT WARNING" in result.stdout)
            )
            time.sleep(0.3)
    finally:
        home.kill()  # a daemon stuck reading would take SIGTERM's whole grace to end

    slow = [t for t in timings if t[0] >= 1.0 or not t[1]]
    assert not slow, (
        f"hooks of another session while a 4 GiB transcript was read, (seconds, answered): "
        f"{timings}"
    )


def test_a_fifo_at_the_config_path_neither_hangs_nor_passes_for_a_config(home: Home) -> None:
    """A FIFO at the config path hung the daemon (a blocking `read_text` on the
    event loop). Config reading must never block the loop, and what is not a regular file is a
    config error."""
    proc = home.start()
    home.config_file.parent.mkdir(mode=0o700, parents=True)
    os.mkfifo(home.config_file, 0o600)

    try:
        deadline = time.monotonic() + 3.0  # housekeeping checks the config every second
        while time.monotonic() < deadline:
            assert home.ping(timeout=1.0) is not None, "the daemon stopped answering pings"
            time.sleep(0.25)

        def config_error() -> str | None:
            error: str | None = home.status(timeout=1.0)["config_error"]
            return error

        error = wait_for(config_error, 5, "config_error in status")
        assert str(home.config_file) in error, error
        assert proc.poll() is None
    finally:
        home.kill()  # a daemon stuck in open() of the FIFO does not handle SIGTERM
