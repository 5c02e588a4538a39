"""What making "must not repeat" state durable costs.

The daemon journals a session (one JSON line, `fdatasync`) before an answer that said something
or changed the warning level or handoff flag leaves; every other hook pays nothing. Measured:

- in process, in a state dir on this machine's disk (the default temporary dir): what an
  answer waits for, `snapshot.Journal.append` of a real session state (the line's encoding and
  its write), and what a worker thread does after it, `Journal.sync` (fdatasync);
- end to end, against a real daemon: for each of SESSIONS sessions, the hook that gives its
  first warning (journaled) and the next hook (debounced: nothing said, nothing journaled), both
  after one new transcript line, as raw frames on the socket.

    .venv/bin/python bench/journal_cost.py [--appends 2000] [--sessions 300]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import common as c
import ctxd_wire

from ctxd.core.measure import Severity
from ctxd.core.policy import PolicyState
from ctxd.core.session import new_session
from ctxd.daemon.snapshot import Journal


def in_process(appends: int) -> tuple[c.Stats, c.Stats]:
    state = replace(
        new_session("claude", str(uuid.uuid4()), "/p/x.jsonl", time.time(), cwd="/w"),
        tokens=650_000,
        model="claude-opus-4-5",
        policy=PolicyState(warned=Severity.WARNING, recent=(1, 2, 3, 4, 5, 6, 7, 8)),
    )
    position = {"offset": 123_456, "identity": (2049, 1234567), "tail": "ab" * 64}
    with tempfile.TemporaryDirectory(prefix="ctxd-bench-journal-", ) as tmp:
        directory = Path(tmp) / "state"
        directory.mkdir(mode=0o700)
        journal = Journal(directory / "state.journal")
        journal.start()
        samples, syncs = [], []
        for _ in range(appends):
            started = time.perf_counter()
            journal.append(state, position)
            samples.append((time.perf_counter() - started) * 1e6)
            handle = journal.sync_handle()
            assert handle is not None
            started = time.perf_counter()
            Journal.sync(handle)
            syncs.append((time.perf_counter() - started) * 1e6)
        journal.close()
    return c.summarize(samples), c.summarize(syncs)


def ask(box: c.Sandbox, request: bytes) -> tuple[float, bytes]:
    started = time.perf_counter()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(box.socket))
        sock.sendall(request)
        body = ctxd_wire.read_frame(sock, ctxd_wire.MAX_RESPONSE)
    return (time.perf_counter() - started) * 1e6, ctxd_wire.ok_result(body) or b""


def end_to_end(sessions: int) -> tuple[c.Stats, c.Stats]:
    journaled: list[float] = []
    silent: list[float] = []
    template = c.assistant_line()
    with c.sandbox("journal") as box, c.running_daemon(box):
        for _ in range(sessions):
            sid = str(uuid.uuid4())
            path = c.place_claude_transcript(box, b"", sid, "/work/j")
            request = c.frame(
                "hook", c.claude_payload(sid, path, "/work/j"), agent="claude", event=None
            )
            for tokens, into in ((100_000, None), (650_000, journaled), (651_000, silent)):
                with path.open("ab") as f:
                    f.write(c.assistant_append(template, sid, tokens))
                took, result = ask(box, request)
                if into is not None:
                    if (b"CONTEXT WARNING" in result) != (into is journaled):
                        raise RuntimeError(f"unexpected answer at {tokens}: {result[:80]!r}")
                    into.append(took)
    return c.summarize(journaled), c.summarize(silent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--sessions", type=int, default=300)
    args = parser.parse_args()
    c.header("Journal cost", "bench/journal_cost.py " + " ".join(sys.argv[1:]))
    append, sync = in_process(args.appends)
    warned, quiet = end_to_end(args.sessions)
    print(
        c.table(
            ["what", "n", "p50 µs", "p99 µs", "max µs"],
            [
                [
                    "Journal.append (encode, write): the answer waits for it",
                    append.n,
                    append.p50,
                    append.p99,
                    append.max,
                ],
                ["Journal.sync (fdatasync, worker thread)", sync.n, sync.p50, sync.p99, sync.max],
                ["hook that warns (journaled)", warned.n, warned.p50, warned.p99, warned.max],
                ["next hook (debounced, not journaled)", quiet.n, quiet.p50, quiet.p99, quiet.max],
            ],
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
