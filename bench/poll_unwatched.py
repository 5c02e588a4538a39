"""What polling the folders past the inotify cap costs, with a month of history and 30 live
sessions.

The tree is real-shaped for Claude Code: --folders project folders under
$CLAUDE_CONFIG_DIR/projects holding --transcripts transcripts, all but --live of them 1-30 days
old (files and folders), the live ones written now. Two measures:

1. In process: a `Poller` told that no folder could be watched (the worst case) over the live
   sessions the centre found; the time of each poll, the usual ones and the full ones (every
   FULL_POLL_EVERY-th, which looks at old folders too) apart.
2. A real `ctxd serve`, once with the watch limit of its user namespace set to --limit (most
   folders then unwatched, so polled) and once without: the daemon's CPU seconds (utime + stime,
   /proc/PID/stat) over --idle seconds with nothing written.

    .venv/bin/python bench/poll_unwatched.py [--folders 790] [--transcripts 2800] [--live 30]
        [--limit 100] [--idle 60]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LINES: dict[str, Any] = json.loads((REPO / "tests" / "data" / "daemon" / "lines.json").read_text())
DAY = 86_400.0


def _line(session_id: str, tokens: int) -> bytes:
    record = copy.deepcopy(LINES["claude-assistant"])
    record.update(sessionId=session_id, uuid=str(uuid.uuid4()))
    record["message"]["id"] = f"msg_{uuid.uuid4().hex[:20]}"
    record["message"]["usage"].update(
        input_tokens=1000,
        cache_creation_input_tokens=2000,
        cache_read_input_tokens=tokens - 3000,
        output_tokens=100,
    )
    return json.dumps(record).encode() + b"\n"


def make_history(home: Path, folders: int, transcripts: int, live: int) -> list[Path]:
    """The tree described in the module docstring; the live transcripts' paths."""
    rng = random.Random(7)
    projects = home / ".claude" / "projects"
    dirs = [projects / f"-home-u-p{i:04d}" for i in range(folders)]
    for d in dirs:
        d.mkdir(parents=True)
    now = time.time()
    live_paths: list[Path] = []
    for n in range(transcripts):
        folder = dirs[n % folders]
        sid = str(uuid.uuid4())
        path = folder / f"{sid}.jsonl"
        path.write_bytes(_line(sid, 10_000 + n))
        if n < live:
            live_paths.append(path)
        else:
            old = now - rng.uniform(1, 30) * DAY
            os.utime(path, (old, old))
    for d in dirs:
        newest = max(p.stat().st_mtime for p in d.iterdir())
        os.utime(d, (newest, newest))
    return live_paths


def in_process(home: Path, live: int, polls: int) -> None:
    sys.path.insert(0, str(REPO))
    from ctxd.daemon import watches
    from ctxd.daemon.centre import Centre
    from ctxd.daemon.config import parse_settings
    from ctxd.daemon.poller import FULL_POLL_EVERY, Poller

    root = home / ".claude" / "projects"
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / "state")}
    centre = Centre.open(env, {"claude": root}, time.time, settings=parse_settings(""))
    started = time.perf_counter()
    folders = watches.find_folders([root])
    walk = time.perf_counter() - started
    centre.transcripts.discover([root], until=time.monotonic() + 60)
    assert len(centre.sessions) == live, len(centre.sessions)
    poller = Poller(centre.transcripts, centre.sessions, lambda: 6 * 3600.0)
    by_age = tuple(sorted(folders, key=lambda p: -folders[p].mtime_ns))
    poller.cover(watches.WatchCoverage(len(folders), 0, by_age, None, True, frozenset(folders)))
    poller.poll()  # the first poll lists every folder once
    usual: list[float] = []
    full: list[float] = []
    for n in range(2, polls + 2):
        t = time.perf_counter()
        poller.poll()
        (full if n % FULL_POLL_EVERY == 0 else usual).append(time.perf_counter() - t)
    usual.sort()
    full.sort()
    per_min = (usual[len(usual) // 2] * (FULL_POLL_EVERY - 1) + full[len(full) // 2]) * (
        60 / (2.0 * FULL_POLL_EVERY)
    )
    print(f"folders walked: {len(folders):,} in {walk * 1e3:.1f} ms")
    print(f"usual poll: median {usual[len(usual) // 2] * 1e6:.0f} µs over {len(usual)}")
    print(f"full poll: median {full[len(full) // 2] * 1e6:.0f} µs over {len(full)}")
    print(f"=> {per_min * 1e3:.2f} ms of polling per minute (a poll every 2 s)")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def real_daemon(root: Path, home: Path, limit: int | None, idle: float, live: int) -> None:
    sys.path.insert(0, str(REPO))
    from ctxd.cli.client import request_json
    from ctxd.errors import CtxdError

    run = root / f"run-{limit}"
    run.mkdir(mode=0o700)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(run),
        "XDG_STATE_HOME": str(root / f"state-{limit}"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CTXD_NO_SPAWN": "1",
    }
    serve = [sys.executable, "-m", "ctxd", "serve"]
    if limit is not None:
        script = f'echo {limit} > /proc/sys/user/max_inotify_watches && exec "$@"'
        serve = ["unshare", "--user", "--map-root-user", "sh", "-c", script, "sh", *serve]
    proc = subprocess.Popen(serve, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        doc: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                doc = request_json("status", env=env)
                if len(doc["sessions"]) >= live:
                    break
            except CtxdError:
                pass
            time.sleep(0.2)
        watching = doc.get("daemon", {}).get("watching", {})
        time.sleep(35)  # past the watcher's quiet spell (30 s)
        before = _cpu_s(proc.pid)
        time.sleep(idle)
        spent = _cpu_s(proc.pid) - before
        label = "no limit" if limit is None else f"limit {limit}"
        print(
            f"{label}: watched {watching.get('watched')} of {watching.get('folders')} folders; "
            f"idle CPU {spent:.2f} s over {idle:.0f} s ({spent / idle * 60:.2f} CPU-s/min)"
        )
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folders", type=int, default=790)
    parser.add_argument("--transcripts", type=int, default=2800)
    parser.add_argument("--live", type=int, default=30)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--idle", type=float, default=60.0)
    parser.add_argument("--polls", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        make_history(home, args.folders, args.transcripts, args.live)
        in_process(home, args.live, args.polls)
        for limit in (args.limit, None):
            real_daemon(root, home, limit, args.idle, args.live)


if __name__ == "__main__":
    main()
