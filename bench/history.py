"""Benchmark 12: a heavy user's month of history and 30 sessions live at once.

Makes a month of real-shaped history in an isolated HOME: at --scale 1, 2,800 transcripts,
~3.4 GB, ~750 folders (Claude Code projects and Codex CLI day folders), each file a real captured
transcript from tests/data repeated to its size (its session id re-stamped; a Codex rollout's
`session_meta` kept once at its head), sizes log-normal (median ~0.3 MB, a few tens of MB), the
modification times spread over 30 days with ~2 % of the files (~10 % of the bytes) in the last
6 hours, as a day of work leaves them. Then 30 Claude Code sessions go live: each a real
transcript in a project folder that grows by one real assistant line every few seconds, and
answers hooks. Measured against a real `ctxd serve` (with `[http]` on):

  start-up     from spawning the daemon until every live session's status row shows its last
               appended figure, and until nothing is left to read (status: catching_up 0); the
               daemon's bytes read then (/proc/PID/io rchar), its CPU, the sessions tracked
  restart      the same after a SIGTERM (the daemon saves its snapshot) and a new start
  hooks        PostToolUse of the live sessions, interleaved round-robin while they append:
               the command client ctxd installs (base interpreter, -S -I, the copied ctxd_hook),
               the `ctxd-hook` console script, and HTTP (POST /ctxd/hook/claude, a new
               connection each): wall p50/p99 and, for the processes, their CPU per hook
  ctxd status  `ctxd status` as a process (the console script), wall p50/p99 and CPU
  idle         the daemon's CPU over --idle seconds with nothing appending, per minute
  RSS          VmRSS after start-up, after the hooks, after idle; VmHWM

The history stays under --root (default bench/out/history, gitignored, private) for a re-run
with --keep (its files' ages are re-applied from the manifest, so "recent" stays recent); without
--keep it is deleted at the end. Re-run after a change to the daemon's start-up or restart:

    .venv/bin/python bench/history.py [--scale 1.0] [--live 30] [--hooks 60] [--idle 60]
                                      [--root DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import common as c

FULL_FILES = 2800
FULL_BYTES = 3 * 1024**3
FULL_FOLDERS = 790
DAYS = 30
RECENT_SECONDS = 6 * 3600  # the daemon's default idle_minutes: what start-up reads
RECENT_FILES = 0.02
RECENT_BYTES = 0.10
CODEX_SHARE = 0.2
MAX_FILE = 64 * 1024**2
APPEND_EVERY = 3.0  # seconds between two appends of one live session

CLAUDE_SOURCES = sorted((c.DATA / "transcripts" / "claude-code-2.1.332").glob("*.jsonl"))
CODEX_SOURCES = sorted((c.DATA / "transcripts" / "codex-cli-0.171.0").glob("*.jsonl"))
MANIFEST = "manifest.json"


# ---------------------------------------------------------------------------- the history


@dataclass(frozen=True)
class Source:
    head: bytes  # written once (a Codex rollout's session_meta)
    body: bytes  # repeated
    session_id: bytes  # replaced by each copy's own


def _source(path: Path, agent: str) -> Source:
    lines = path.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    if agent == "codex":
        sid = first["payload"]["id"]
        return Source(lines[0], b"".join(lines[1:]), sid.encode())
    sid = next(json.loads(line)["sessionId"] for line in lines if b'"sessionId"' in line)
    return Source(b"", b"".join(lines), sid.encode())


def _content(source: Source, size: int, session_id: str) -> bytes:
    """`source` repeated to about `size` bytes (whole lines; the source once at least)."""
    repeat = max(1, math.ceil((size - len(source.head)) / len(source.body)))
    data = source.head + source.body * repeat
    cut = max(len(source.head) + len(source.body), data.rfind(b"\n", 0, size) + 1)
    return data[:cut].replace(source.session_id, session_id.encode())


def _sizes(rng: random.Random, count: int, total: int, recent: set[int]) -> list[int]:
    """Log-normal sizes, the recent files holding RECENT_BYTES of `total`."""
    raw = [min(rng.lognormvariate(0.0, 1.5), 200.0) for _ in range(count)]
    recent_raw = sum(raw[i] for i in recent) or 1.0
    other_raw = sum(raw[i] for i in range(count) if i not in recent) or 1.0
    sizes = []
    for i, value in enumerate(raw):
        share = RECENT_BYTES / recent_raw if i in recent else (1 - RECENT_BYTES) / other_raw
        sizes.append(max(20_000, min(MAX_FILE, int(value * share * total))))
    return sizes


def make_history(box: c.Sandbox, scale: float, seed: int = 22) -> dict[str, Any]:
    """Write the history under `box`'s HOME; the manifest (file -> age in seconds) it keeps."""
    rng = random.Random(seed)
    count = max(10, round(FULL_FILES * scale))
    folders = max(4, round(FULL_FOLDERS * scale))
    recent = set(rng.sample(range(count), max(1, round(count * RECENT_FILES))))
    sizes = _sizes(rng, count, int(FULL_BYTES * scale), recent)
    claude = {p.name: _source(p, "claude") for p in CLAUDE_SOURCES}
    codex = {p.name: _source(p, "codex") for p in CODEX_SOURCES}
    projects = [f"/home/dev/work/project-{i:03d}" for i in range(max(1, folders - DAYS - 2))]
    codex_root = Path(box.env["CODEX_HOME"]) / "sessions"
    now = time.time()
    files: dict[str, float] = {}
    for i, size in enumerate(sizes):
        age = (
            rng.uniform(60, RECENT_SECONDS - 600)
            if i in recent
            else rng.uniform(RECENT_SECONDS + 600, DAYS * 86400)
        )
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if rng.random() < CODEX_SHARE:
            when = time.gmtime(now - age)
            day = codex_root / time.strftime("%Y/%m/%d", when)
            day.mkdir(parents=True, exist_ok=True)
            path = day / f"rollout-{time.strftime('%Y-%m-%dT%H-%M-%S', when)}-{sid}.jsonl"
            source = codex[rng.choice(sorted(codex))]
        else:
            directory = box.claude_projects / c.claude_slug(rng.choice(projects))
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{sid}.jsonl"
            source = claude[rng.choice(sorted(claude))]
        path.write_bytes(_content(source, size, sid))
        files[str(path.relative_to(box.root))] = age
    manifest = {"scale": scale, "seed": seed, "files": files}
    (box.root / MANIFEST).write_text(json.dumps(manifest))
    return manifest


def age_history(box: c.Sandbox, manifest: dict[str, Any]) -> None:
    """Set every history file's modification time from its age, as of now."""
    now = time.time()
    for relative, age in manifest["files"].items():
        os.utime(box.root / relative, (now - age, now - age))


def history_shape(box: c.Sandbox, manifest: dict[str, Any]) -> dict[str, Any]:
    sizes = [(box.root / rel).stat().st_size for rel in manifest["files"]]
    recent = [
        (box.root / rel).stat().st_size
        for rel, age in manifest["files"].items()
        if age < RECENT_SECONDS
    ]
    folders = {str(Path(rel).parent) for rel in manifest["files"]}
    return {
        "files": len(sizes),
        "bytes": sum(sizes),
        "folders": len(folders),
        "recent_files": len(recent),
        "recent_bytes": sum(recent),
        "largest": max(sizes),
    }


# ---------------------------------------------------------------------------- live sessions


@dataclass
class Live:
    session_id: str
    path: Path
    cwd: str
    tokens: int
    payload: bytes


class Appender:
    """Every live session grows by one real assistant line every APPEND_EVERY seconds (spread
    over the interval), from a thread of this process, until stopped."""

    def __init__(self, live: list[Live], template: dict[str, Any]) -> None:
        self.live = live
        self.template = template
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.appends = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def append(self, session: Live) -> None:
        with self.lock:
            session.tokens += 1_500
            line = c.assistant_append(self.template, session.session_id, session.tokens)
            with session.path.open("ab") as f:
                f.write(line)
            self.appends += 1

    def _run(self) -> None:
        step = APPEND_EVERY / len(self.live)
        i = 0
        while not self.stop.wait(step):
            self.append(self.live[i % len(self.live)])
            i += 1

    def __enter__(self) -> Appender:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def make_live(box: c.Sandbox, count: int, template: dict[str, Any]) -> list[Live]:
    rng = random.Random(30)
    source = _source(c.CLAUDE_TRANSCRIPT, "claude")
    live = []
    for i in range(count):
        sid = str(uuid.uuid4())
        cwd = f"/home/dev/work/live-{i:02d}"
        # A session some hours in: the real transcript repeated (its id re-stamped), then a
        # turn with a figure of ours.
        content = _content(source, rng.randint(200_000, 3_000_000), sid)
        path = c.place_claude_transcript(box, content, sid, cwd)
        session = Live(sid, path, cwd, 100_000 + 1_000 * i, c.claude_payload(sid, path, cwd))
        with path.open("ab") as f:
            f.write(c.assistant_append(template, sid, session.tokens))
        live.append(session)
    return live


def live_answered(box: c.Sandbox, live: list[Live], lock: threading.Lock) -> bool:
    """Whether every live session's row shows the figure last appended to its transcript."""
    with lock:
        want = {s.path.as_posix(): s.tokens for s in live}
    rows = {r["transcript_path"]: r.get("tokens") for r in c.status(box)["sessions"]}
    return all(rows.get(path) is not None and rows[path] >= want[path] for path in want)


# ---------------------------------------------------------------------------- the daemon


def spawn(box: c.Sandbox) -> subprocess.Popen[bytes]:
    log = box.log.open("ab")
    proc = subprocess.Popen(
        [c.PYTHON, "-m", "ctxd", "serve"],
        env=box.env,
        cwd=c.REPO,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    log.close()
    return proc


def read_bytes(pid: int) -> int:
    """What the process read through read(2) and kin so far (rchar: page cache included)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


def start_until_live(
    box: c.Sandbox, live: list[Live], lock: threading.Lock, timeout: float = 600.0
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """Spawn the daemon; once every live session answers with its figure: the seconds it took,
    to the first answer and to all, the bytes read by then, and the sessions tracked."""
    begin = time.perf_counter()
    proc = spawn(box)
    first = None
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"ctxd serve exited with {proc.returncode}; see {box.log}")
        if time.perf_counter() - begin > timeout:
            proc.kill()
            raise RuntimeError(f"the live sessions did not all answer in {timeout:g} s")
        try:
            done = live_answered(box, live, lock)
        except OSError:
            done = False
        else:
            first = first or time.perf_counter() - begin
        if done:
            break
        time.sleep(0.02)
    all_live = time.perf_counter() - begin
    # What start-up reads after the live sessions: the rest of the recent history (backlog).
    while c.status(box)["daemon"].get("catching_up", 0) and time.perf_counter() - begin < timeout:
        time.sleep(0.02)
    figures = {
        "first_answer_s": first,
        "all_live_s": all_live,
        "caught_up_s": time.perf_counter() - begin,
        "read_mb": read_bytes(proc.pid) / 1e6,
        "cpu_s": c.proc_cpu_seconds(proc.pid),
        "sessions": c.status(box)["daemon"]["sessions"],
    }
    return proc, figures


# ---------------------------------------------------------------------------- hooks and status


def _run_timed(argv: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, float, bytes]:
    """Wall seconds, CPU seconds (user + system of the child) and stdout of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}: {done.stderr[-300:]!r}")
    return wall, cpu, done.stdout


def http_hook(port: int, payload: bytes) -> float:
    head = (
        f"POST /ctxd/hook/claude HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    begin = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + payload)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    wall = time.perf_counter() - begin
    if not answer.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"HTTP hook answered {answer[:120]!r}")
    return wall


def measure_hooks(
    box: c.Sandbox, live: list[Live], port: int, rounds: int
) -> dict[str, dict[str, list[float]]]:
    """PostToolUse of each live session in turn, the three transports interleaved."""
    from ctxd.agents.hookcmd import hook_command, install_client

    install_client(box.env)
    command = shlex.split(hook_command("claude", None, box.env))
    script = [str(Path(c.PYTHON).parent / "ctxd-hook"), "claude"]
    out: dict[str, dict[str, list[float]]] = {
        name: {"wall": [], "cpu": []} for name in ("command client", "ctxd-hook script", "HTTP")
    }
    for n in range(rounds):
        session = live[n % len(live)]
        wall, cpu, _ = _run_timed(command, session.payload, box.env)
        out["command client"]["wall"].append(wall)
        out["command client"]["cpu"].append(cpu)
        wall, cpu, _ = _run_timed(script, session.payload, box.env)
        out["ctxd-hook script"]["wall"].append(wall)
        out["ctxd-hook script"]["cpu"].append(cpu)
        out["HTTP"]["wall"].append(http_hook(port, session.payload))
    return out


def measure_status(box: c.Sandbox, runs: int) -> dict[str, list[float]]:
    ctxd = str(Path(c.PYTHON).parent / "ctxd")
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu, stdout = _run_timed([ctxd, "status"], b"", box.env)
        if b"session" not in stdout:
            raise RuntimeError(f"ctxd status printed {stdout[:200]!r}")
        walls.append(wall)
        cpus.append(cpu)
    return {"wall": walls, "cpu": cpus}


def idle_cpu(pid: int, seconds: float) -> float:
    """The daemon's CPU seconds per minute over `seconds` of nothing happening."""
    before = c.proc_cpu_seconds(pid)
    time.sleep(seconds)
    return (c.proc_cpu_seconds(pid) - before) * 60 / seconds


def rss_mb(pid: int) -> float:
    return c.proc_memory_kib(pid)["VmRSS"] / 1024


# ---------------------------------------------------------------------------- main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prepare(root: Path, scale: float, keep: bool) -> tuple[c.Sandbox, dict[str, Any], float]:
    """The sandbox with its history (made, or reused when --keep left one of this scale), the
    daemon's state and the live sessions of a previous run removed."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    box = c.make_sandbox(root)
    manifest_path = root / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else None
    for stale in (root / "state", root / "run", *box.claude_projects.glob("*live-*")):
        shutil.rmtree(stale, ignore_errors=True)
    box = c.make_sandbox(root)
    made = 0.0
    if manifest is None or manifest["scale"] != scale or not keep:
        for tree in (box.claude_projects, Path(box.env["CODEX_HOME"]) / "sessions"):
            shutil.rmtree(tree, ignore_errors=True)
        box.claude_projects.mkdir(parents=True)
        begin = time.perf_counter()
        manifest = make_history(box, scale)
        made = time.perf_counter() - begin
    age_history(box, manifest)
    return box, manifest, made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--scale", type=float, default=1.0, help="of the history (1: ~3 GB)")
    parser.add_argument("--live", type=int, default=30, help="live sessions")
    parser.add_argument("--hooks", type=int, default=60, help="hooks per transport")
    parser.add_argument("--status-runs", type=int, default=20)
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle measured")
    parser.add_argument("--root", type=Path, default=c.OUT / "history")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the history")
    args = parser.parse_args()
    command = "python bench/history.py " + shlex.join(sys.argv[1:])
    c.header("A month of history, 30 live sessions", command)

    box, manifest, made = _prepare(args.root.resolve(), args.scale, args.keep)
    shape = history_shape(box, manifest)
    port = _free_port()
    config = Path(box.env["CTXD_CONFIG"])
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"[http]\nenabled = true\nport = {port}\n")
    template = c.assistant_line()
    live = make_live(box, args.live, template)
    appender = Appender(live, template)
    print(
        f"history: {shape['files']:,} files, {shape['bytes'] / 1e9:.2f} GB, "
        f"{shape['folders']:,} folders; {shape['recent_files']} files "
        f"({shape['recent_bytes'] / 1e6:,.0f} MB) in the last 6 h; largest "
        f"{shape['largest'] / 1e6:.0f} MB" + (f"; made in {made:.1f} s" if made else "; reused")
    )
    print(f"live: {len(live)} Claude Code sessions, one append each every {APPEND_EVERY:g} s\n")

    results: dict[str, Any] = {"shape": shape, "scale": args.scale}
    proc = None
    try:
        proc, results["start"] = start_until_live(box, live, appender.lock)
        results["rss_start_mb"] = rss_mb(proc.pid)
        with appender:
            proc.send_signal(15)
            proc.wait(30)
            proc, results["restart"] = start_until_live(box, live, appender.lock)
            hooks = measure_hooks(box, live, port, args.hooks)
            status = measure_status(box, args.status_runs)
        results["rss_hooks_mb"] = rss_mb(proc.pid)
        time.sleep(5)  # the last appends read
        results["idle_cpu_s_per_min"] = idle_cpu(proc.pid, args.idle)
        results["rss_idle_mb"] = rss_mb(proc.pid)
        results["hwm_mb"] = c.proc_memory_kib(proc.pid)["VmHWM"] / 1024
        results["appends"] = appender.appends
    finally:
        if proc is not None:
            c.stop_daemon(proc)
        if not args.keep:
            shutil.rmtree(box.root, ignore_errors=True)

    rows: list[list[object]] = []
    for phase in ("start", "restart"):
        f = results[phase]
        rows.append(
            [
                f"{phase}: all {len(live)} live answer",
                f"{f['all_live_s']:.2f} s",
                f"first answer {f['first_answer_s']:.2f} s; all read at {f['caught_up_s']:.2f} s: "
                f"{f['read_mb']:,.0f} MB, {f['cpu_s']:.2f} CPU-s; {f['sessions']} sessions",
            ]
        )
    for name, figures in (*hooks.items(), ("ctxd status", status)):
        wall = c.summarize([x * 1000 for x in figures["wall"]])
        cpu = c.summarize([x * 1000 for x in figures["cpu"]]) if figures["cpu"] else None
        rows.append(
            [
                f"hook: {name}" if name != "ctxd status" else "ctxd status (process)",
                f"p50 {wall.p50:.1f} ms, p99 {wall.p99:.1f} ms",
                f"{wall.n} runs" + (f"; {cpu.mean:.1f} CPU-ms each" if cpu else ""),
            ]
        )
    rows.append(["idle CPU", f"{results['idle_cpu_s_per_min']:.3f} CPU-s/min", f"{args.idle:g} s"])
    rows.append(
        [
            "RSS",
            f"{results['rss_idle_mb']:.0f} MB",
            f"after start {results['rss_start_mb']:.0f} MB, after hooks "
            f"{results['rss_hooks_mb']:.0f} MB, peak {results['hwm_mb']:.0f} MB",
        ]
    )
    print(c.table(["what", "figure", "detail"], rows))
    results["hooks"] = hooks
    results["status"] = status
    print(f"\nraw: {c.save_json('history', results)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
