"""Shared plumbing for the daemon benchmarks: an isolated sandbox, a real `ctxd serve` process,
real transcripts and payloads from tests/data, raw socket requests, statistics and tables.

Every benchmark runs the daemon as a separate process (`<venv python> -m ctxd serve`) with HOME,
XDG_RUNTIME_DIR, XDG_STATE_HOME, CTXD_CONFIG, CLAUDE_CONFIG_DIR and CODEX_HOME pointing into a
temporary directory, so nothing a user has (a running daemon, agents' transcripts) is touched.
Nothing here reads /work/shared: the samples come from the copies in tests/data.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import math
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
OUT = REPO / "bench" / "out"  # gitignored: caches (npm), raw results
# The venv's interpreter, as the installed hook command names it (not resolved: resolving would
# lose the venv's site-packages for `-m ctxd serve`).
PYTHON = sys.executable
# The real interpreter binary behind the venv, for the start-up floor.
REAL_PYTHON = os.path.realpath(sys.executable)

CLAUDE_TRANSCRIPT = DATA / "transcripts" / "claude-code-2.1.332" / "transcript.interactive.jsonl"
CLAUDE_POST_TOOL_USE = (
    DATA / "payloads" / "claude" / "2.1.332" / "interactive" / "05-PostToolUse.json"
)

# Run as `python bench/x.py`: make `ctxd` and the stdlib wire module importable from the repo.
for _source in (REPO / "clients", REPO):
    if str(_source) not in sys.path:
        sys.path.insert(0, str(_source))

import ctxd_wire  # noqa: E402  (after the path set-up above)

# ---------------------------------------------------------------------------- sandbox


@dataclass(frozen=True)
class Sandbox:
    root: Path
    env: dict[str, str]  # the full environment for the daemon and its clients

    @property
    def socket(self) -> Path:
        return Path(self.env["XDG_RUNTIME_DIR"]) / "ctxd" / "ctxd.sock"

    @property
    def claude_projects(self) -> Path:
        return Path(self.env["CLAUDE_CONFIG_DIR"]) / "projects"

    @property
    def log(self) -> Path:
        return self.root / "daemon.log"


def make_sandbox(root: Path) -> Sandbox:
    """Directories and an environment that isolate one daemon under `root`."""
    dirs = {
        "HOME": root / "home",
        "XDG_RUNTIME_DIR": root / "run",
        "XDG_STATE_HOME": root / "state",
        "XDG_CONFIG_HOME": root / "config",
        "CLAUDE_CONFIG_DIR": root / "home" / ".claude",
        "CODEX_HOME": root / "home" / ".codex",
        "TMPDIR": root / "tmp",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    os.chmod(dirs["XDG_RUNTIME_DIR"], 0o700)
    (dirs["CLAUDE_CONFIG_DIR"] / "projects").mkdir(exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CTXD_", "XDG_", "CLAUDE", "CODEX", "GEMINI"))
    }
    env.update({key: str(path) for key, path in dirs.items()})
    env["CTXD_CONFIG"] = str(root / "config" / "ctxd" / "config.toml")  # absent: defaults
    env["CTXD_NO_SPAWN"] = "1"  # a benchmark starts its daemon itself, never by accident
    return Sandbox(root, env)


@contextmanager
def sandbox(prefix: str) -> Iterator[Sandbox]:
    with tempfile.TemporaryDirectory(prefix=f"ctxd-bench-{prefix}-") as tmp:
        yield make_sandbox(Path(tmp))


# ---------------------------------------------------------------------------- the daemon


def start_daemon(
    box: Sandbox, cpus: str | None = None, timeout: float = 15.0
) -> subprocess.Popen[bytes]:
    """A real `ctxd serve`, answering `ping`; pinned to `cpus` (taskset list) when given."""
    command = [PYTHON, "-m", "ctxd", "serve"]
    if cpus is not None:
        command = ["taskset", "-c", cpus, *command]
    log = box.log.open("ab")
    proc = subprocess.Popen(
        command, env=box.env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=log
    )
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ctxd serve exited with {proc.returncode}; see {box.log}")
        try:
            request(box.socket, "ping", timeout=1.0)
            return proc
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError(f"ctxd serve did not answer within {timeout:g} s; see {box.log}")


def stop_daemon(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def running_daemon(box: Sandbox, cpus: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    proc = start_daemon(box, cpus)
    try:
        yield proc
    finally:
        stop_daemon(proc)


def frame(op: str, payload: bytes = b"", **fields: Any) -> bytes:
    """A request frame, built by ctxd's own encoder."""
    from ctxd import protocol

    return protocol.encode_request(op, payload, **fields)


async def exchange(loop: asyncio.AbstractEventLoop, path: str, frame: bytes) -> bytes:
    """One request on a fresh non-blocking connection, from the load generators' own event loop
    (no ctxd code in the client's way); the answer body."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, path)
        await loop.sock_sendall(sock, frame)
        data = b""
        size = ctxd_wire.HEADER_SIZE
        while len(data) < size:
            chunk = await loop.sock_recv(sock, 1 << 20)
            if not chunk:
                raise ConnectionError("closed before a full answer")
            data += chunk
            if size == ctxd_wire.HEADER_SIZE and len(data) >= size:
                size += ctxd_wire.frame_size(data[:size], ctxd_wire.MAX_STATUS)
        return data[ctxd_wire.HEADER_SIZE :]
    finally:
        sock.close()


def request(
    path: Path | str, op: str, payload: bytes = b"", timeout: float = 10.0, **fields: Any
) -> bytes:
    """One request over the socket; the answer's result bytes (RuntimeError on an error answer)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(frame(op, payload, **fields))
        body = ctxd_wire.read_frame(sock, ctxd_wire.MAX_STATUS)
    result = ctxd_wire.ok_result(body)
    if result is None:
        raise RuntimeError(f"ctxd answered an error: {body[:200].decode(errors='replace')}")
    return result


def status(box: Sandbox, session: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(request(box.socket, "status", session=session))
    return doc


def wait_sessions(box: Sandbox, count: int, timeout: float) -> tuple[int, float]:
    """(sessions tracked, seconds waited): returns once `count` are tracked or at `timeout`."""
    start = time.monotonic()
    while True:
        seen: int = status(box)["daemon"]["sessions"]
        waited = time.monotonic() - start
        if seen >= count or waited >= timeout:
            return seen, waited
        time.sleep(0.05)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_memory_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM, RssAnon, RssFile of `pid`, in KiB."""
    wanted = ("VmRSS", "VmHWM", "RssAnon", "RssFile")
    found: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in wanted:
            found[key] = int(value.split()[0])
    return found


# ---------------------------------------------------------------------------- agent data


def claude_slug(cwd: str) -> str:
    """Claude Code's project directory name: the cwd with non-alphanumerics as '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def transcript_lines(path: Path = CLAUDE_TRANSCRIPT) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def small_transcript(path: Path = CLAUDE_TRANSCRIPT, max_line: int = 2048) -> bytes:
    """The real transcript without its big request blobs and attachments (lines > `max_line`
    bytes), so that hundreds of copies stay small; every usage line is kept."""
    return b"".join(line for line in transcript_lines(path) if len(line) <= max_line)


def assistant_line(path: Path = CLAUDE_TRANSCRIPT) -> dict[str, Any]:
    """The first main-chain assistant line with usage and a stop_reason, as a dict."""
    for raw in transcript_lines(path):
        line = json.loads(raw)
        message = line.get("message")
        if (
            line.get("type") == "assistant"
            and not line.get("isSidechain")
            and isinstance(message, dict)
            and message.get("usage")
            and message.get("stop_reason")
        ):
            return dict(line)
    raise RuntimeError(f"no assistant line with usage in {path}")


def assistant_append(template: dict[str, Any], session_id: str, tokens: int) -> bytes:
    """A real assistant line re-stamped for `session_id` whose context figure is `tokens`
    (all in `input_tokens`, no cache), with fresh ids so it is never a streaming duplicate."""
    line = json.loads(json.dumps(template))
    line["sessionId"] = session_id
    line["uuid"] = str(uuid.uuid4())
    line["parentUuid"] = str(uuid.uuid4())
    message = line["message"]
    message["id"] = f"msg_bench_{uuid.uuid4().hex}"
    usage = message["usage"]
    usage["input_tokens"] = tokens
    usage["cache_creation_input_tokens"] = 0
    usage["cache_read_input_tokens"] = 0
    return json.dumps(line, separators=(",", ":")).encode() + b"\n"


def place_claude_transcript(box: Sandbox, content: bytes, session_id: str, cwd: str) -> Path:
    """Write a transcript where Claude Code would: projects/<slug of cwd>/<session_id>.jsonl."""
    directory = box.claude_projects / claude_slug(cwd)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{session_id}.jsonl"
    path.write_bytes(content)
    return path


def claude_payload(
    session_id: str, transcript: Path, cwd: str, sample: Path = CLAUDE_POST_TOOL_USE
) -> bytes:
    """The real PostToolUse payload, pointed at `transcript` (the sample's paths are
    `$SCRATCH` placeholders)."""
    payload = json.loads(sample.read_bytes())
    payload.update(session_id=session_id, transcript_path=str(transcript), cwd=cwd)
    return json.dumps(payload, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class Stats:
    n: int
    mean: float
    p50: float
    p95: float
    p99: float
    max: float


def percentile(ordered: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def summarize(samples: Sequence[float]) -> Stats:
    ordered = sorted(samples)
    if not ordered:
        return Stats(0, math.nan, math.nan, math.nan, math.nan, math.nan)
    return Stats(
        n=len(ordered),
        mean=statistics.fmean(ordered),
        p50=statistics.median(ordered),
        p95=percentile(ordered, 95),
        p99=percentile(ordered, 99),
        max=ordered[-1],
    )


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table (readable as plain text too)."""
    cells = [[str(h) for h in headers], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *[line(row) for row in cells[1:]]])


def _cell(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:.2f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def machine() -> str:
    """One line naming the machine, for the tables' captions."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), {model}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, {when}"
    )


def _terminate(signum: int, frame: object) -> None:
    # Raise instead of dying, so that `running_daemon` and `sandbox` clean up behind us.
    raise SystemExit(128 + signum)


def save_json(name: str, value: Mapping[str, Any]) -> Path:
    """Raw results under bench/out/ (gitignored), for the record."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(value, indent=1, default=str) + "\n")
    return path


def header(title: str, command: str) -> None:
    """Print the benchmark's caption; from here on SIGTERM unwinds (stopping the daemon)."""
    signal.signal(signal.SIGTERM, _terminate)
    print(f"## {title}\n")
    print(f"machine: {machine()}")
    print(f"command: {command}\n")
