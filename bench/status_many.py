"""Benchmark 12: status and the dashboard's `/api/status` at 10,000 sessions.

A real `ctxd serve` with `[http]` on tracks --sessions sessions (real Claude Code transcripts
placed before it starts). Measured: `ctxd status`'s request over the Unix socket and the
dashboard's `GET /api/status` (--samples each, one at a time; their latency, and the daemon's
CPU time per request, which a loaded machine inflates less), and the owner's HTTP hooks for
--duration seconds with nobody polling, then while a dashboard polls `/api/status` twice a
second (as the page does): a status that holds the event loop holds every hook behind it.
Last, the snapshot saves: for --duration seconds a hook every 50 ms keeps the state changing
(so it is saved every few seconds) while a `ping` over the socket every 5 ms measures how long
the event loop is held; the saves are counted as the state file is replaced.

    .venv/bin/python bench/status_many.py [--sessions 10000] [--samples 10] [--duration 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import common as c
from http_flood import free_port, one_hook, owner_run


def timed(action: Any, samples: int) -> list[float]:
    took = []
    for _ in range(samples):
        begin = time.perf_counter()
        action()
        took.append(time.perf_counter() - begin)
    return took


def snapshot_stalls(box: c.Sandbox, port: int, hook: list[bytes], duration: float) -> Any:
    """Pings' latencies while hooks keep the state changing, and how many snapshots were
    written meanwhile (the state file replaced)."""
    state = Path(box.env["XDG_STATE_HOME"]) / "ctxd" / "state.json"
    stop = threading.Event()
    saves = 0

    def changing() -> None:
        while not stop.is_set():
            one_hook(port, hook[0])
            stop.wait(0.05)

    def counting() -> None:
        nonlocal saves
        seen = state.stat().st_ino
        while not stop.wait(0.02):
            try:
                inode = state.stat().st_ino
            except FileNotFoundError:
                continue
            saves += inode != seen
            seen = inode

    threads = [threading.Thread(target=changing), threading.Thread(target=counting)]
    for thread in threads:
        thread.start()
    pings = []
    end = time.monotonic() + duration
    try:
        while time.monotonic() < end:
            begin = time.perf_counter()
            c.request(box.socket, "ping")
            pings.append(time.perf_counter() - begin)
            time.sleep(0.005)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return pings, saves


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--duration", type=float, default=10.0)
    args = parser.parse_args()
    c.header("status at many sessions", " ".join(["bench/status_many.py", *sys.argv[1:]]))
    with c.sandbox("status-many") as box:
        port = free_port()
        config = Path(box.env["CTXD_CONFIG"])
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"[http]\nenabled = true\nport = {port}\n")
        content = c.small_transcript()
        payload = b""
        for i in range(args.sessions):
            sid = str(uuid.uuid4())
            cwd = f"/work/bench-{i % 500}"
            path = c.place_claude_transcript(box, content, sid, cwd)
            if not payload:
                payload = c.claude_payload(sid, path, cwd)
        head = (
            f"POST /ctxd/hook/claude HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
            "Connection: close\r\n\r\n"
        )
        hook = [head.encode() + payload]
        api = f"http://127.0.0.1:{port}/api/status"

        def get_api() -> None:
            with urllib.request.urlopen(api, timeout=60) as answer:
                answer.read()

        with c.running_daemon(box) as proc:
            found, waited = c.wait_sessions(box, args.sessions, 300)
            get_api()  # the first builds every row
            cpu_at = c.proc_cpu_seconds(proc.pid)
            status_s = timed(lambda: c.status(box), args.samples)
            status_cpu = (c.proc_cpu_seconds(proc.pid) - cpu_at) / args.samples
            cpu_at = c.proc_cpu_seconds(proc.pid)
            api_s = timed(get_api, args.samples)
            api_cpu = (c.proc_cpu_seconds(proc.pid) - cpu_at) / args.samples
            quiet, _ = owner_run(port, hook, args.duration, 0.01)
            stop = threading.Event()

            def dashboard() -> None:
                while not stop.is_set():
                    get_api()
                    stop.wait(0.5)

            poller = threading.Thread(target=dashboard)
            cpu0 = c.proc_cpu_seconds(proc.pid)
            poller.start()
            try:
                polled, _ = owner_run(port, hook, args.duration, 0.01)
            finally:
                stop.set()
                poller.join()
            cpu = c.proc_cpu_seconds(proc.pid) - cpu0
            pings, saves = snapshot_stalls(box, port, hook, args.duration)
    ms = [c.summarize([x * 1000 for x in xs]) for xs in (status_s, api_s, quiet, polled, pings)]
    rows = [
        [
            "`status` over the socket",
            ms[0].n,
            f"{ms[0].p50:.1f}",
            f"{ms[0].max:.1f}",
            f"{status_cpu * 1000:.0f}",
        ],
        [
            "`GET /api/status`",
            ms[1].n,
            f"{ms[1].p50:.1f}",
            f"{ms[1].max:.1f}",
            f"{api_cpu * 1000:.0f}",
        ],
    ]
    print(f"{found} sessions tracked ({waited:.0f} s to find them)\n")
    print(c.table(["request", "samples", "p50 ms", "max ms", "daemon CPU ms each"], rows))
    print()
    hooks = [
        ["nobody polling", ms[2].n, f"{ms[2].p50:.2f}", f"{ms[2].p99:.2f}", f"{ms[2].max:.1f}"],
        [
            "a dashboard polling twice a second",
            ms[3].n,
            f"{ms[3].p50:.2f}",
            f"{ms[3].p99:.2f}",
            f"{ms[3].max:.1f}",
        ],
    ]
    print(c.table(["HTTP hooks", "hooks", "p50 ms", "p99 ms", "max ms"], hooks))
    print(f"\ndaemon CPU while the dashboard polled: {cpu:.1f} s in {args.duration:g} s\n")
    print(
        f"snapshot saves: {saves} in {args.duration:g} s; pings every 5 ms meanwhile: "
        f"p50 {ms[4].p50:.2f} ms, p99 {ms[4].p99:.2f} ms, max (the loop held) {ms[4].max:.1f} ms\n"
    )
    results = {
        "machine": c.machine(),
        "args": vars(args),
        "sessions": found,
        "status_ms": ms[0].__dict__,
        "status_cpu_s": status_cpu,
        "api_status_cpu_s": api_cpu,
        "api_status_ms": ms[1].__dict__,
        "hooks_quiet_ms": ms[2].__dict__,
        "hooks_polled_ms": ms[3].__dict__,
        "daemon_cpu_s": cpu,
        "snapshot_saves": saves,
        "pings_while_saving_ms": ms[4].__dict__,
    }
    print(f"raw: {c.save_json('status_many', results)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
