"""Drive ctxd only through its process and wire interfaces (the hardening tests).

Nothing here imports ctxd: the daemon is `python -m ctxd serve` in an isolated environment,
requests are raw frames on its Unix socket, hooks are the real hook client run as the agents run
it, and `ctxd status --json` is the CLI. So these tests hold whatever the package looks like
inside.

Wire format: a frame is a 4-byte big-endian length and a body. A request body is a JSON header
line (`{"v":1,"op":"hook","agent":"claude","event":null}`), "\\n", then the raw hook payload; an
answer body is a JSON header line (`{"v":1,"ok":true}` or `{"v":1,"ok":false,"error":...}`),
"\\n", then the result (for a hook: the bytes the client prints; otherwise a JSON document).

CTXD_SRC (default: this repository) names the source tree under test, e.g. an export of
another commit; the daemon and the hook client are both taken from it.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
SRC = Path(os.environ.get("CTXD_SRC") or REPO).resolve()
DATA = REPO / "tests" / "data"
PAYLOADS = DATA / "payloads"
PYTHON = sys.executable  # the project's venv python, which runs pytest
NOBODY = 65534

START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
POLL = 0.02

# How installed hooks run the client: no site, isolated, the client dir first on the path.
HOOK_CODE = f"import sys;sys.path[:0]=[{str(SRC / 'clients')!r}];import ctxd_hook as h;h.main()"

_LINES: dict[str, dict[str, Any]] = json.loads((DATA / "daemon" / "lines.json").read_text())
CLAUDE_PAYLOADS = {
    "PostToolUse": "claude/2.1.332/print/04-PostToolUse.json",
    "Stop": "claude/2.1.332/print/07-Stop.json",
}

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    """Poll `probe` until it returns something truthy; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)


# ---------------------------------------------------------------------- wire


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def request_frame(op: str, payload: bytes = b"", **fields: Any) -> bytes:
    header = json.dumps({"v": 1, "op": op, **fields}, separators=(",", ":")).encode()
    return frame(header + b"\n" + payload)


def hook_frame(payload: dict[str, Any] | bytes, agent: str = "claude") -> bytes:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return request_frame("hook", data, agent=agent, event=None)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("closed before the whole answer")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def exchange(path: Path | str, data: bytes, timeout: float = 5.0) -> tuple[dict[str, Any], bytes]:
    """Send one framed request; the answer's header and result. OSError/TimeoutError if none."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(data)
        size = int.from_bytes(recv_exactly(sock, 4), "big")
        body = recv_exactly(sock, size)
    header, _, result = body.partition(b"\n")
    return json.loads(header), result


def connect(path: Path | str, timeout: float = 5.0) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except BaseException:
        sock.close()
        raise
    return sock


# ---------------------------------------------------------------------- /proc


def proc_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status (VmRSS, VmHWM, ...), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


# ---------------------------------------------------------------------- transcripts


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ClaudeSession:
    """A Claude Code transcript under the watched root, grown with real line shapes."""

    def __init__(self, path: Path, cwd: Path, session_id: str) -> None:
        self.path = path
        self.cwd = cwd
        self.session_id = session_id
        self.tool_use_id: str | None = None
        self._parent: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def assistant_line(self, tokens: int, **extra: Any) -> bytes:
        """One final assistant message whose context is `tokens` (input + cache parts); `extra`
        fields are added to the record (e.g. padding)."""
        assert tokens >= 3000
        rec = copy.deepcopy(_LINES["claude-assistant"])
        msg = rec["message"]
        msg["id"] = f"msg_{uuid.uuid4().hex[:20]}"
        self.tool_use_id = msg["content"][0]["id"] = f"toolu_{uuid.uuid4().hex[:20]}"
        msg["usage"].update(
            input_tokens=1000,
            cache_creation_input_tokens=2000,
            cache_read_input_tokens=tokens - 3000,
            output_tokens=100,
        )
        rec.update(
            uuid=str(uuid.uuid4()),
            parentUuid=self._parent,
            sessionId=self.session_id,
            cwd=str(self.cwd),
            timestamp=_now_iso(),
            **extra,
        )
        self._parent = rec["uuid"]
        return json.dumps(rec, separators=(",", ":")).encode() + b"\n"

    def assistant(self, tokens: int) -> None:
        with self.path.open("ab") as f:
            f.write(self.assistant_line(tokens))

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        """The real captured payload of `event`, made to name this session."""
        data: dict[str, Any] = json.loads((PAYLOADS / CLAUDE_PAYLOADS[event]).read_text())
        data.update(session_id=self.session_id, transcript_path=str(self.path), cwd=str(self.cwd))
        if event == "PostToolUse" and self.tool_use_id is not None:
            data["tool_use_id"] = self.tool_use_id
        data.update(fields)
        return data


# ---------------------------------------------------------------------- one user's world


class Home:
    """One user's isolated environment (HOME, XDG dirs, socket) and the ctxd processes in it.

    The root is a short directory under /tmp: a Unix socket path must fit in 108 bytes.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ctxd-hd-", dir="/tmp"))
        self.root.chmod(0o700)
        self.home = self.root / "home"
        self.run_base = self.root / "run"
        self.state_home = self.root / "state"
        self.config_home = self.root / "config"
        self.work = self.root / "work"
        for d in (self.home, self.run_base, self.state_home, self.config_home, self.work):
            d.mkdir(mode=0o700)
        self.claude_projects.mkdir(parents=True)
        self.env: dict[str, str] = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.run_base),
            "XDG_STATE_HOME": str(self.state_home),
            "XDG_CONFIG_HOME": str(self.config_home),
            "CTXD_SOCKET": str(self.run_base / "ctxd" / "ctxd.sock"),
            "CTXD_NO_SPAWN": "1",
        }
        if SRC != REPO:
            self.env["PYTHONPATH"] = f"{SRC}{os.pathsep}{SRC / 'clients'}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.others: list[subprocess.Popen[bytes]] = []  # further processes to end at close
        self._logs = 0

    # ------------------------------------------------------------------ paths

    @property
    def socket(self) -> Path:
        return Path(self.env["CTXD_SOCKET"])

    @property
    def runtime_dir(self) -> Path:
        return self.socket.parent

    @property
    def state_dir(self) -> Path:
        return Path(self.env["XDG_STATE_HOME"]) / "ctxd"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def config_file(self) -> Path:
        return Path(self.env["XDG_CONFIG_HOME"]) / "ctxd" / "config.toml"

    @property
    def claude_projects(self) -> Path:
        return self.home / ".claude" / "projects"

    def claude(self, slug: str = "-work-project") -> ClaudeSession:
        sid = str(uuid.uuid4())
        return ClaudeSession(self.claude_projects / slug / f"{sid}.jsonl", self.work, sid)

    def write_config(self, text: str) -> None:
        self.config_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.config_file.write_text(text)
        # Seen as a change even on a coarse-mtime file system.
        info = self.config_file.stat()
        os.utime(self.config_file, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000_000))

    # ------------------------------------------------------------------ daemon process

    def popen_serve(
        self,
        *args: str,
        preexec_fn: Callable[[], None] | None = None,
        log_level: str = "debug",
    ) -> subprocess.Popen[bytes]:
        """`ctxd serve --log-level LOG_LEVEL ARGS`, stdout and stderr to daemon-N.log."""
        self._logs += 1
        log = (self.root / f"daemon-{self._logs}.log").open("wb")
        try:
            return subprocess.Popen(
                [PYTHON, "-m", "ctxd", "serve", "--log-level", log_level, *args],
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=preexec_fn,
            )
        finally:
            log.close()

    def log(self) -> str:
        path = self.root / f"daemon-{self._logs}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def log_tail(self, lines: int = 6) -> str:
        """The last lines of the daemon's log, for assertion messages."""
        return "\n".join(self.log().rstrip().splitlines()[-lines:])

    def start(self, preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen[bytes]:
        """Start the daemon and return once it answers a ping."""
        assert self.proc is None or self.proc.poll() is not None, "a daemon is already running"
        self.proc = self.popen_serve(preexec_fn=preexec_fn)
        self.wait_ready(self.proc)
        return self.proc

    def wait_ready(self, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT) -> None:
        def ready() -> dict[str, Any] | None:
            if proc.poll() is not None:
                raise AssertionError(f"ctxd serve exited with {proc.returncode}:\n{self.log()}")
            return self.ping(timeout=1.0)

        wait_for(ready, timeout, "the daemon to answer a ping")

    def kill(self) -> None:
        """SIGKILL the daemon: no cleanup at all, as after a crash."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def stop(self) -> int | None:
        """SIGTERM the daemon, SIGKILL it after a bound; its exit code (None if none ran)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def close(self) -> None:
        self.stop()
        for proc in self.others:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ requests

    def request(
        self, op: str, payload: bytes = b"", timeout: float = 5.0, **fields: Any
    ) -> tuple[dict[str, Any], bytes]:
        return exchange(self.socket, request_frame(op, payload, **fields), timeout)

    def ping(self, timeout: float = 2.0) -> dict[str, Any] | None:
        """The ping answer, None when no daemon answers in time."""
        try:
            header, result = self.request("ping", timeout=timeout)
        except (OSError, ValueError):
            return None
        return json.loads(result) if header.get("ok") else None

    def status(self, timeout: float = 5.0) -> dict[str, Any]:
        """The `status` document, over the wire (fast, for polling)."""
        header, result = self.request("status", timeout=timeout)
        assert header.get("ok"), header
        doc: dict[str, Any] = json.loads(result)
        return doc

    def cli(self, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [PYTHON, "-m", "ctxd", *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def status_json(self) -> dict[str, Any]:
        """`ctxd status --json`, as a user runs it."""
        result = self.cli("status", "--json")
        assert result.returncode == 0, result.stderr
        doc: dict[str, Any] = json.loads(result.stdout)
        return doc

    def row(self, session: ClaudeSession) -> dict[str, Any] | None:
        for row in self.status()["sessions"]:
            if row["transcript_path"] == str(session.path):
                found: dict[str, Any] = row
                return found
        return None

    def hook(
        self,
        payload: dict[str, Any] | bytes,
        agent: str = "claude",
        env: dict[str, str] | None = None,
        timeout: float = 10.0,
        client: list[str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """The real hook client, run as installed hooks run it, payload on stdin; `client` is
        another client's command (the native one's), default the Python client's."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return subprocess.run(
            [*(client or [PYTHON, "-S", "-I", "-c", HOOK_CODE]), agent],
            input=data,
            env=self.env if env is None else env,
            cwd=self.work,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def hook_out(self, payload: dict[str, Any] | bytes, agent: str = "claude") -> Any:
        """What the hook printed, as JSON (None when it printed nothing); it must exit 0."""
        result = self.hook(payload, agent)
        assert result.returncode == 0, result
        assert result.stderr == b"", result.stderr
        return json.loads(result.stdout) if result.stdout else None


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Any:
    """A tmpfs of `size` mounted on `path` (0700) for the duration; skips the test if the mount
    is not possible (needs root, or CAP_SYS_ADMIN)."""
    import pytest

    path.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill_disk(directory: Path, leave: int = 4096) -> Path:
    """Fill the file system of `directory` up to its last byte, then free `leave` bytes."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        size = 0
        for block in (1 << 20, 1 << 16, 4096, 512, 1):
            data = b"\0" * block
            while True:
                try:
                    written = os.write(fd, data)
                except OSError:
                    break
                size += written
                if written < block:
                    break
        os.ftruncate(fd, max(0, size - leave))
        os.fsync(fd)
    finally:
        os.close(fd)
    return filler


def as_nobody_cmd(*argv: str) -> list[str]:
    """`argv` run as uid/gid 65534 with no supplementary groups."""
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def nobody_python() -> str | None:
    """A Python interpreter that uid 65534 can run (the venv's may live under a private /root),
    None when there is none or no way to switch uid."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    for candidate in (PYTHON, shutil.which("python3"), "/usr/bin/python3"):
        if not candidate:
            continue
        probe = subprocess.run(
            as_nobody_cmd(candidate, "-S", "-I", "-c", "pass"),
            capture_output=True,
            cwd="/",
            timeout=10,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
    return None
