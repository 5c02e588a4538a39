"""Soak: a minute of heavy, hostile use with crashes, counting what a user would notice.

A real `ctxd serve` in a sandbox. One generator process (asyncio, raw Unix sockets) plays:

- SESSIONS Claude Code sessions, each running RATE hooks a second one after another (as an agent
  does): 19 PostToolUse for one Stop, each a real captured payload pointed at the session's
  own transcript. Every tenth hook first appends a real assistant line whose figure grows 5,000
  tokens a second, from a start spread over the sessions so that each crosses the handoff line
  at its own moment during the run;
- CROWD connections kept open the whole time, half sending nothing, half dribbling a frame at a
  byte a second (the daemon drops them after its 5 s deadline, or for a newcomer; they are
  opened again at once);
- KILLS SIGKILLs of the daemon, evenly spread over the first two thirds of the run, each
  followed at once by a new `ctxd serve`, as the next hook would start one.

A hook gets what the real hook client gets: when no daemon listens (between a kill and the new
daemon's socket) it waits for one, at most 2 s in all (`ctxd_hook.SPAWN_WAIT`); its request is
sent once. Counted:

- failed hooks: no OK answer within 2 s of the hook's start, or an error answer ("busy", ...).
  Hooks whose request was in flight at the moment of a SIGKILL cannot be answered by the dead
  process; they are counted apart ("cut off by a kill"), since no daemon can avoid that;
- duplicate handoffs: the handoff request answered more than once to a session (no compaction
  happens in the run, so once is the most that is right), the state that must survive a crash;
- hook latency from the hook's start (connect) to its answer: all hooks, and hooks that found
  the daemon up; plus how late the generator started hooks (its own lag, for judging);
- the daemon's RSS before the load (first daemon, sessions registered) and after it (the last
  daemon, the load stopped), and each daemon's peak.

    .venv/bin/python bench/soak.py [--duration 60] [--sessions 200] [--rate 20] [--crowd 500]
        [--kills 5] [--seed 11]

Raw figures go to bench/out/soak.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import common as c

OK = b'{"v":1,"ok":true}'
HOOK_BOUND = 2.0  # the hook client's wait for an answer (DEFAULT_TIMEOUT, SPAWN_WAIT)
CLAUDE_STOP = c.DATA / "payloads" / "claude" / "2.1.332" / "interactive" / "06-Stop.json"
TOKENS_PER_SECOND = 5_000
LINES_EVERY = 10  # hooks between two appended assistant lines
STOPS_EVERY = 20  # hooks between two Stop hooks
DRIBBLE = (1000).to_bytes(4, "big") + b'{"v":1,"op":"ping"}' + b" " * 977


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)  # every answered hook, seconds
    latencies_up: list[float] = field(default_factory=list)  # those that found the daemon up
    lag: list[float] = field(default_factory=list)  # hook start - its scheduled time
    sent: int = 0
    answered: int = 0
    failed: int = 0
    cut_off: int = 0  # request sent, the daemon killed before it answered
    waited_for_restart: int = 0
    handoffs: Counter[str] = field(default_factory=Counter)
    warnings: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    crowd_opened: int = 0


class Daemon:
    """The daemon process under test, killed and restarted on schedule."""

    def __init__(self, box: c.Sandbox) -> None:
        self.box = box
        self.proc = c.start_daemon(box)
        # Bumped before and after each kill: a hook that saw it change was cut off by a kill.
        self.generation = 0
        self.peaks_kib: list[int] = []
        self.restart_s: list[float] = []
        self.cpu_s = 0.0  # CPU time of the daemons killed so far (utime + stime)
        self.up = asyncio.Event()
        self.up.set()

    def kill_and_restart(self) -> None:
        self.peaks_kib.append(c.proc_memory_kib(self.proc.pid).get("VmHWM", 0))
        self.cpu_s += c.proc_cpu_seconds(self.proc.pid)
        self.generation += 1
        self.proc.kill()
        self.proc.wait()
        self.generation += 1
        log = self.box.log.open("ab")
        self.proc = subprocess.Popen(
            [c.PYTHON, "-m", "ctxd", "serve"],
            env=self.box.env,
            cwd=c.REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        log.close()


async def probe_until_up(daemon: Daemon, path: str, since: float) -> None:
    """What the hook that starts a daemon does: connect every 10 ms until one listens."""
    loop = asyncio.get_running_loop()
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, path)
        except OSError:
            await asyncio.sleep(0.01)
            continue
        finally:
            sock.close()
        daemon.restart_s.append(time.monotonic() - since)
        daemon.up.set()
        return


async def read_frame(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> bytes:
    """One length-prefixed answer, its 4-byte length included."""
    data = b""
    size = 4
    while len(data) < size:
        chunk = await loop.sock_recv(sock, 65536)
        if not chunk:
            raise ConnectionResetError("closed before the whole answer")
        data += chunk
        if size == 4 and len(data) >= 4:
            size += int.from_bytes(data[:4], "big")
    return data


async def hook(daemon: Daemon, path: str, request: bytes, tally: Tally) -> bytes | None:
    """One hook as the client runs it; the result bytes, None when it got none."""
    loop = asyncio.get_running_loop()
    start = time.monotonic()
    deadline = start + HOOK_BOUND
    waited = False
    tally.sent += 1
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            tally.failed += 1
            tally.failures["no daemon within 2 s"] += 1
            return None
        if not daemon.up.is_set():
            waited = True
            try:
                await asyncio.wait_for(daemon.up.wait(), remaining)
            except TimeoutError:
                continue
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, path)
        except OSError:
            sock.close()
            if daemon.up.is_set():
                daemon.up.clear()
                asyncio.get_running_loop().create_task(probe_until_up(daemon, path, start))
            waited = True
            continue
        break
    generation = daemon.generation
    try:
        async with asyncio.timeout(deadline - time.monotonic()):
            await loop.sock_sendall(sock, request)
            data = await read_frame(loop, sock)
    except (OSError, TimeoutError) as exc:
        if daemon.generation != generation:
            tally.cut_off += 1  # a kill happened while it was being answered
        else:
            tally.failed += 1
            tally.failures[type(exc).__name__] += 1
        return None
    finally:
        sock.close()
    header, _, result = data[4:].partition(b"\n")
    if header != OK:
        tally.failed += 1
        tally.failures[header.decode(errors="replace")[:80]] += 1
        return None
    took = time.monotonic() - start
    tally.answered += 1
    tally.latencies.append(took)
    if waited:
        tally.waited_for_restart += 1
    else:
        tally.latencies_up.append(took)
    return result


class Session:
    def __init__(self, box: c.Sandbox, n: int, sessions: int, template: dict[str, Any]) -> None:
        self.id = str(uuid.uuid4())
        self.cwd = f"/work/soak/{n}"
        # Starts spread so that the handoff line (~677,000 tokens) is crossed across the run.
        self.base = 380_000 + (270_000 * n) // max(1, sessions - 1)
        self.template = template
        self.path = c.place_claude_transcript(box, b"", self.id, self.cwd)
        self.append(0.0)
        post = json.loads(c.CLAUDE_POST_TOOL_USE.read_bytes())
        post.pop("tool_use_id", None)  # the captured id is in no transcript here: never wait
        stop = json.loads(CLAUDE_STOP.read_bytes())
        for payload in (post, stop):
            payload.update(session_id=self.id, transcript_path=str(self.path), cwd=self.cwd)
        self.post = c.frame("hook", json.dumps(post).encode(), agent="claude", event=None)
        self.stop = c.frame("hook", json.dumps(stop).encode(), agent="claude", event=None)

    def append(self, elapsed: float) -> None:
        tokens = self.base + int(TOKENS_PER_SECOND * elapsed)
        with self.path.open("ab") as f:
            f.write(c.assistant_append(self.template, self.id, tokens))


async def run_session(
    s: Session, daemon: Daemon, path: str, rate: float, t0: float, end: float, tally: Tally
) -> None:
    period = 1.0 / rate
    due = t0 + random.random() * period
    n = 0
    while due < end:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        tally.lag.append(time.monotonic() - due)
        n += 1
        if n % LINES_EVERY == 0:
            s.append(time.monotonic() - t0)
        is_stop = n % STOPS_EVERY == 0
        result = await hook(daemon, path, s.stop if is_stop else s.post, tally)
        if result and b"CONTEXT HANDOFF" in result:
            tally.handoffs[s.id] += 1
        elif result and b"CONTEXT WARNING" in result:
            tally.warnings += 1
        due = max(due + period, time.monotonic())  # one hook after another, no bursts


async def crowd_member(path: str, slow: bool, end: float, tally: Tally) -> None:
    """One idle or slow connection, opened again whenever the daemon drops it."""
    loop = asyncio.get_running_loop()
    while time.monotonic() < end:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, path)
            tally.crowd_opened += 1
            sent = 0
            while time.monotonic() < end:
                if slow and sent < len(DRIBBLE):
                    await loop.sock_sendall(sock, DRIBBLE[sent : sent + 1])
                    sent += 1
                try:
                    async with asyncio.timeout(1.0):
                        if not await loop.sock_recv(sock, 4096):
                            break  # dropped by the daemon
                except TimeoutError:
                    continue
        except OSError:
            await asyncio.sleep(0.2)
        finally:
            sock.close()
        await asyncio.sleep(0.05)


async def killer(daemon: Daemon, path: str, kills: int, t0: float, span: float) -> list[float]:
    at = []
    for k in range(kills):
        when = t0 + span * (k + 1) / (kills + 1) + random.uniform(-0.5, 0.5)
        await asyncio.sleep(max(0.0, when - time.monotonic()))
        at.append(round(time.monotonic() - t0, 2))
        killed = time.monotonic()
        daemon.up.clear()
        await asyncio.to_thread(daemon.kill_and_restart)
        asyncio.get_running_loop().create_task(probe_until_up(daemon, path, killed))
    return at


async def soak(args: argparse.Namespace, box: c.Sandbox, daemon: Daemon) -> dict[str, Any]:
    template = c.assistant_line()
    sessions = [Session(box, n, args.sessions, template) for n in range(args.sessions)]
    path = str(box.socket)
    # Every session registered and read before the load, so "before" is a working daemon.
    for s in sessions:
        await hook(daemon, path, s.post, Tally())
    await asyncio.sleep(1.0)
    rss_before = c.proc_memory_kib(daemon.proc.pid)
    load_before = os.getloadavg()
    daemon.cpu_s = -c.proc_cpu_seconds(daemon.proc.pid)
    tally = Tally()
    t0 = time.monotonic()
    end = t0 + args.duration
    cpu0 = os.times()
    tasks = [
        asyncio.create_task(crowd_member(path, n % 2 == 1, end, tally)) for n in range(args.crowd)
    ]
    await asyncio.sleep(1.0)  # the crowd in place before the sessions start
    tasks += [
        asyncio.create_task(run_session(s, daemon, path, args.rate, t0 + 1.0, end, tally))
        for s in sessions
    ]
    kills_at = await killer(daemon, path, args.kills, t0 + 1.0, (args.duration - 1.0) * 2 / 3)
    await asyncio.gather(*tasks)
    generator_cpu = sum(os.times()[:2]) - sum(cpu0[:2])
    daemon_cpu = daemon.cpu_s + c.proc_cpu_seconds(daemon.proc.pid)
    wall = time.monotonic() - t0
    await asyncio.sleep(2.0)
    rss_after = c.proc_memory_kib(daemon.proc.pid)
    ping = json.loads(c.request(box.socket, "ping"))
    return {
        "tally": tally,
        "kills_at": kills_at,
        "rss_before": rss_before,
        "rss_after": rss_after,
        "peaks_kib": [*daemon.peaks_kib, rss_after.get("VmHWM", 0)],
        "restart_s": daemon.restart_s,
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "generator_cpu_s": generator_cpu,
        "daemon_cpu_s": daemon_cpu,
        "wall_s": wall,
        "last_daemon": ping,
    }


def report(args: argparse.Namespace, r: dict[str, Any]) -> bool:
    t: Tally = r["tally"]
    dupes = sum(n - 1 for n in t.handoffs.values() if n > 1)
    lat = c.summarize([x * 1000 for x in t.latencies])
    up = c.summarize([x * 1000 for x in t.latencies_up])
    lag = c.summarize([x * 1000 for x in t.lag])
    mib = 1024
    ok = t.failed == 0 and dupes == 0
    print(
        c.table(
            ["figure", "value", "target", "verdict"],
            [
                [
                    "hooks sent",
                    t.sent,
                    f"{args.sessions * args.rate * (args.duration - 1):,.0f}",
                    "",
                ],
                ["answered", t.answered, "", ""],
                ["failed (no OK answer within 2 s)", t.failed, "0", c.verdict(t.failed == 0)],
                ["cut off by a SIGKILL (in flight)", t.cut_off, "", ""],
                ["waited for a restart, then answered", t.waited_for_restart, "", ""],
                ["sessions asked for a handoff", len(t.handoffs), "", ""],
                ["duplicate handoffs", dupes, "0", c.verdict(dupes == 0)],
                ["warnings given", t.warnings, "", ""],
                [
                    "hook latency p50 / p99 / max, ms (all)",
                    f"{lat.p50:.2f} / {lat.p99:.2f} / {lat.max:.0f}",
                    "",
                    "",
                ],
                [
                    "hook latency p50 / p99 / max, ms (daemon up)",
                    f"{up.p50:.2f} / {up.p99:.2f} / {up.max:.0f}",
                    "",
                    "",
                ],
                ["generator lag p50 / p99, ms", f"{lag.p50:.2f} / {lag.p99:.2f}", "", ""],
                [
                    "restarts: socket back after, s",
                    " ".join(f"{x:.2f}" for x in r["restart_s"]),
                    "",
                    "",
                ],
                ["SIGKILL at, s", " ".join(str(x) for x in r["kills_at"]), "", ""],
                ["RSS before (first daemon), MiB", r["rss_before"]["VmRSS"] / mib, "", ""],
                [
                    "RSS after (last daemon), MiB",
                    r["rss_after"]["VmRSS"] / mib,
                    "≤ 60 MB",
                    c.verdict(r["rss_after"]["VmRSS"] * 1024 <= 60e6),
                ],
                [
                    "peak RSS per daemon, MiB",
                    " ".join(f"{x / mib:.1f}" for x in r["peaks_kib"]),
                    "",
                    "",
                ],
                ["crowd connections opened", t.crowd_opened, "", ""],
                [
                    "last daemon: evicted / refused / accept errors",
                    " / ".join(
                        str(r["last_daemon"].get(k))
                        for k in ("evicted", "refused", "accept_errors")
                    ),
                    "",
                    "",
                ],
                [
                    "daemon CPU, s of wall (µs per hook answered)",
                    f"{r['daemon_cpu_s']:.1f} of {r['wall_s']:.1f} "
                    f"({r['daemon_cpu_s'] / max(1, t.answered) * 1e6:.0f})",
                    "",
                    "",
                ],
                [
                    "generator CPU, s of wall",
                    f"{r['generator_cpu_s']:.1f} of {r['wall_s']:.1f}",
                    "",
                    "",
                ],
                [
                    "load average before / after (1 min)",
                    f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f}",
                    "",
                    "",
                ],
            ],
        )
    )
    if t.failures:
        print(f"\nfailures: {dict(t.failures)}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--rate", type=float, default=20.0, help="hooks per second per session")
    parser.add_argument("--crowd", type=int, default=500)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    random.seed(args.seed)
    c.header("Soak: sessions, crowd, kills", "bench/soak.py " + " ".join(sys.argv[1:]))
    with c.sandbox("soak") as box:
        daemon = Daemon(box)
        try:
            r = asyncio.run(soak(args, box, daemon))
        finally:
            c.stop_daemon(daemon.proc)
        ok = report(args, r)
        t: Tally = r.pop("tally")
        raw = {
            **r,
            "args": vars(args),
            "sent": t.sent,
            "answered": t.answered,
            "failed": t.failed,
            "cut_off": t.cut_off,
            "failures": dict(t.failures),
            "handoffs": dict(t.handoffs),
            "latencies_ms": [round(x * 1000, 3) for x in t.latencies],
        }
        print(f"\nraw: {c.save_json('soak', raw)}")
        log = Path(box.log).read_text(errors="replace")
        errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
        print(
            f"daemon log: {len(errors)} error lines" + (f", first: {errors[0]}" if errors else "")
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
