"""Shared fixtures: an isolated user "world" (home, runtime/state/config dirs, agent roots), a real
`ctxd serve` process in it, real `ctxd-hook` processes, and transcripts that grow line by line.

Transcript lines are copies of real lines (tests/data/daemon/lines.json, taken from the captured
samples) with only ids, timestamps and usage changed; hook payloads are the real captured
payloads (tests/data/payloads/) with session_id, transcript_path and cwd filled in.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
PAYLOADS = DATA / "payloads"
HOOK_CLIENT = REPO / "clients" / "ctxd_hook.py"
NATIVE_SOURCE = REPO / "clients" / "ctxd_hook.c"
LINES: dict[str, dict[str, Any]] = json.loads((DATA / "daemon" / "lines.json").read_text())

#: Bounds for waiting on the daemon. Generous against a loaded CI box, yet a broken feature
#: still fails in seconds.
START_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0
POLL = 0.02

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 5.0, what: str = "condition") -> T:
    """Poll `probe` until it returns something truthy; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(POLL)


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line(record: dict[str, Any]) -> bytes:
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _payload_template(rel: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PAYLOADS / rel).read_text())
    return data


# Which real captured payload stands for each event (agent, event[, variant]).
_CLAUDE_PAYLOADS = {
    "SessionStart": "claude/2.1.332/compact/01-SessionStart.startup.json",
    "SessionStart.compact": "claude/2.1.332/compact/17-SessionStart.compact.json",
    "UserPromptSubmit": "claude/2.1.332/print/02-UserPromptSubmit.json",
    "PostToolUse": "claude/2.1.332/print/04-PostToolUse.json",
    "PostToolUseFailure": "claude/2.1.332/failure/04-PostToolUseFailure.json",
    "Stop": "claude/2.1.332/print/07-Stop.json",
    "Stop.active": "claude/2.1.332/print/08-Stop.stop_hook_active.json",
    "PreCompact": "claude/2.1.332/compact/15-PreCompact.auto.json",
    "PostCompact": "claude/2.1.332/compact/18-PostCompact.auto.json",
    "SubagentStop": "claude/2.1.332/compact/16-SubagentStop.json",
    "SessionEnd": "claude/2.1.332/compact/20-SessionEnd.other.json",
}
_GEMINI_PAYLOADS = {
    "SessionStart": "gemini/0.61.0/interactive/17-SessionStart.clear.json",
    "BeforeAgent": "gemini/0.61.0/interactive/02-BeforeAgent.json",
    "AfterTool": "gemini/0.61.0/interactive/06-AfterTool.json",
    "PreCompress": "gemini/0.61.0/interactive/07-PreCompress.auto.json",
    "PreCompress.manual": "gemini/0.61.0/interactive/09-PreCompress.manual.json",
    "AfterAgent": "gemini/0.61.0/interactive/15-AfterAgent.json",
    "SessionEnd": "gemini/0.61.0/interactive/19-SessionEnd.exit.json",
}
_CODEX_PAYLOADS = {
    "SessionStart": "codex/0.171.0/exec/01-SessionStart.startup.json",
    "UserPromptSubmit": "codex/0.171.0/exec/02-UserPromptSubmit.json",
    "PostToolUse": "codex/0.171.0/exec/04-PostToolUse.json",
    "Stop": "codex/0.171.0/exec/09-Stop.json",
    "Stop.active": "codex/0.171.0/exec/10-Stop.stop_hook_active.json",
    "PreCompact": "codex/0.171.0/autocompact/07-PreCompact.auto.json",
    "SessionEnd": "codex/0.171.0/exec/11-SessionEnd.other.json",
}


class Transcript:
    """A transcript file that tests grow by appending real line shapes."""

    agent = ""
    payloads: ClassVar[dict[str, str]] = {}

    def __init__(self, path: Path, session_id: str, cwd: Path) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, *records: dict[str, Any]) -> None:
        with self.path.open("ab") as f:
            f.write(b"".join(_line(r) for r in records))

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        """The real captured payload of `event` (or "Event.variant"), made to name this session."""
        data = _payload_template(self.payloads[event])
        data.update(session_id=self.session_id, transcript_path=str(self.path), cwd=str(self.cwd))
        data.update(fields)
        return data


class ClaudeTranscript(Transcript):
    agent = "claude"
    payloads = _CLAUDE_PAYLOADS
    model = "claude-opus-5-5"

    def __init__(self, path: Path, session_id: str, cwd: Path) -> None:
        super().__init__(path, session_id, cwd)
        self._parent: str | None = None
        self.name = session_id
        self.tool_use_id: str | None = None  # the last assistant message's tool call
        self.path.touch()

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        """As the base class; a PostToolUse (PostToolUseFailure) names the tool call of the last
        assistant message, as Claude Code's does (ctxd waits for that message before answering)."""
        if event in ("PostToolUse", "PostToolUseFailure") and self.tool_use_id is not None:
            fields.setdefault("tool_use_id", self.tool_use_id)
        return super().payload(event, **fields)

    def assistant(
        self,
        tokens: int,
        *,
        sidechain: bool = False,
        agent_id: str | None = None,
        version: str | None = None,
    ) -> None:
        """One final assistant message whose context is `tokens` (input + cache parts);
        `version`: the Claude Code version the line names (default: the sample's)."""
        assert tokens >= 3000
        rec = copy.deepcopy(LINES["claude-assistant"])
        if version is not None:
            rec["version"] = version
        msg = rec["message"]
        msg["id"] = f"msg_{uuid.uuid4().hex[:20]}"
        msg["model"] = self.model
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
            isSidechain=sidechain,
        )
        if agent_id is not None:
            rec["agentId"] = agent_id
        self._parent = rec["uuid"]
        self.append(rec)

    def compact_boundary(self, post_tokens: int, pre_tokens: int) -> None:
        rec = copy.deepcopy(LINES["claude-compact-boundary"])
        rec["compactMetadata"].update(preTokens=pre_tokens, postTokens=post_tokens)
        rec.update(
            uuid=str(uuid.uuid4()),
            logicalParentUuid=self._parent,
            sessionId=self.session_id,
            cwd=str(self.cwd),
            timestamp=_now_iso(),
        )
        self._parent = rec["uuid"]
        self.append(rec)


class GeminiTranscript(Transcript):
    agent = "gemini"
    payloads = _GEMINI_PAYLOADS
    model = "gemini-3.8-flash"

    def __init__(self, path: Path, session_id: str, cwd: Path) -> None:
        super().__init__(path, session_id, cwd)
        meta = dict(LINES["gemini-meta"], sessionId=session_id, startTime=_now_iso())
        user = dict(LINES["gemini-user"], id=str(uuid.uuid4()), timestamp=_now_iso())
        self.append(meta, user)

    def gemini(self, prompt_tokens: int) -> None:
        """One gemini message whose prompt (tokens.input) is `prompt_tokens`."""
        rec = copy.deepcopy(LINES["gemini-message"])
        rec.update(id=str(uuid.uuid4()), timestamp=_now_iso(), model=self.model)
        rec["tokens"] = {
            "input": prompt_tokens,
            "output": 40,
            "cached": prompt_tokens // 2,
            "thoughts": 0,
            "tool": 0,
            "total": prompt_tokens + 40,
        }
        self.append(rec)

    def compress(self) -> None:
        """Gemini CLI's compression: the message list replaced by a state snapshot and the
        model's fixed acknowledgement (rebuilt messages carry no tokens)."""
        now = _now_iso()
        self.append(
            {
                "$set": {
                    "messages": [
                        dict(
                            LINES["gemini-user"],
                            id=str(uuid.uuid4()),
                            timestamp=now,
                            content=[{"text": "<state_snapshot>summary</state_snapshot>"}],
                        ),
                        {
                            "id": str(uuid.uuid4()),
                            "timestamp": now,
                            "type": "gemini",
                            "content": [{"text": "Got it. Thanks for the additional context!"}],
                        },
                    ],
                    "lastUpdated": now,
                }
            }
        )


class CodexTranscript(Transcript):
    agent = "codex"
    payloads = _CODEX_PAYLOADS
    model = "gpt-5.5"
    window = 258_400  # what Codex reports for a 272,000 catalog window

    def __init__(self, path: Path, session_id: str, cwd: Path) -> None:
        super().__init__(path, session_id, cwd)
        self.turn_id = str(uuid.uuid4())
        self._ordinal = 0
        meta = copy.deepcopy(LINES["codex-session-meta"])
        meta["payload"].update(id=session_id, session_id=session_id, cwd=str(cwd))
        started = copy.deepcopy(LINES["codex-task-started"])
        started["payload"].update(
            turn_id=self.turn_id, root_turn_id=self.turn_id, model_context_window=self.window
        )
        context = copy.deepcopy(LINES["codex-turn-context"])
        context["payload"].update(
            turn_id=self.turn_id, root_turn_id=self.turn_id, model=self.model, cwd=str(cwd)
        )
        self.append(meta, started, context)

    def append(self, *records: dict[str, Any]) -> None:
        for rec in records:
            rec["ordinal"] = self._ordinal
            rec["timestamp"] = _now_iso()
            self._ordinal += 1
        super().append(*records)

    @staticmethod
    def _usage(total: int) -> dict[str, int]:
        return {
            "input_tokens": total - 100,
            "cached_input_tokens": (total - 100) // 2,
            "cache_write_input_tokens": 0,
            "output_tokens": 100,
            "reasoning_output_tokens": 0,
            "total_tokens": total,
        }

    def response(self, total: int) -> None:
        """A model response's `token_usage_record` (on disk when its tool hooks run)."""
        rec = copy.deepcopy(LINES["codex-token-usage-record"])
        usage = self._usage(total)
        rec["payload"].update(
            thread_id=self.session_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            root_turn_id=self.turn_id,
            response_id=f"resp_{uuid.uuid4().hex[:16]}",
            usage=usage,
            turn_token_usage=usage,
            thread_token_usage=usage,
        )
        self.append(rec)

    def token_count(self, total: int) -> None:
        """The `token_count` event Codex writes after the tool's output."""
        rec = copy.deepcopy(LINES["codex-token-count"])
        usage = self._usage(total)
        rec["payload"]["info"].update(
            total_token_usage=usage, last_token_usage=usage, model_context_window=self.window
        )
        self.append(rec)

    def payload(self, event: str, **fields: Any) -> dict[str, Any]:
        data = super().payload(event, **fields)
        if "turn_id" in data:
            data["turn_id"] = self.turn_id
        return data


def path_of(transcript: Transcript | Path | str) -> str:
    return str(transcript.path if isinstance(transcript, Transcript) else transcript)


class World:
    """One user's isolated environment, and at most one daemon of ours running in it.

    Test modules reach the helpers through this object (a `from conftest import` would be
    ambiguous next to tests/e2e/conftest.py); they import the names for annotations only.
    """

    hook_client = HOOK_CLIENT
    repo = REPO
    wait_for = staticmethod(wait_for)

    def __init__(self, root: Path, *, processes: bool = True) -> None:
        root.mkdir(parents=True, exist_ok=True)
        #: False for an in-process test's world: it runs no ctxd process, so it is not slow.
        self.processes = processes
        root.chmod(0o700)
        self.root = root
        self.home = root / "home"
        self.run_base = root / "run"
        self.config_home = root / "config"
        self.state_home = root / "state"
        self.claude_dir = self.home / ".claude"
        self.codex_dir = self.home / ".codex"
        self.work = root / "work"
        for d in (self.home, self.run_base, self.config_home, self.state_home, self.work):
            d.mkdir(mode=0o700, exist_ok=True)
        self.env: dict[str, str] = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(self.run_base),
            "XDG_STATE_HOME": str(self.state_home),
            "XDG_CONFIG_HOME": str(self.config_home),
            "CLAUDE_CONFIG_DIR": str(self.claude_dir),
            "CODEX_HOME": str(self.codex_dir),
            # A hook that finds no daemon would start one in the background; only the tests
            # about spawning want that.
            "CTXD_NO_SPAWN": "1",
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self._logs = 0
        #: The hook client as installed hooks run it: the Python one, or the native one
        #: (`native_hook_client`) for the tests that run against both.
        self.hook_argv: list[str] = [sys.executable, "-S", "-I", str(HOOK_CLIENT)]
        # The agents' roots exist, as on a machine where the agents have been used; tests about
        # roots that appear later remove them first.
        for agent_root in self.agent_roots:
            agent_root.mkdir(parents=True, exist_ok=True)

    @property
    def agent_roots(self) -> list[Path]:
        return [
            self.claude_dir / "projects",
            self.home / ".gemini" / "tmp",
            self.codex_dir / "sessions",
        ]

    def remove_agent_roots(self) -> None:
        for agent_root in self.agent_roots:
            shutil.rmtree(agent_root)

    # ------------------------------------------------------------------ paths

    @property
    def runtime_dir(self) -> Path:
        return self.run_base / "ctxd"

    @property
    def socket(self) -> Path:
        override = self.env.get("CTXD_SOCKET")
        return Path(override) if override else self.runtime_dir / "ctxd.sock"

    @property
    def state_file(self) -> Path:
        return self.state_home / "ctxd" / "state.json"

    @property
    def config_file(self) -> Path:
        return Path(self.env.get("CTXD_CONFIG") or self.config_home / "ctxd" / "config.toml")

    @property
    def claude_projects(self) -> Path:
        return self.claude_dir / "projects"

    def write_config(self, text: str) -> None:
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(text)

    # ------------------------------------------------------------------ transcripts

    def claude(
        self, session_id: str | None = None, slug: str = "-work-project"
    ) -> ClaudeTranscript:
        sid = session_id or str(uuid.uuid4())
        return ClaudeTranscript(self.claude_projects / slug / f"{sid}.jsonl", sid, self.work)

    def claude_subagent(self, parent: ClaudeTranscript, agent_id: str) -> ClaudeTranscript:
        """`<project>/<session>/subagents/agent-<id>.jsonl`; `.name` is the agent id."""
        path = parent.path.with_suffix("") / "subagents" / f"agent-{agent_id}.jsonl"
        sub = ClaudeTranscript(path, parent.session_id, self.work)
        sub.name = agent_id
        return sub

    def gemini(self, session_id: str | None = None) -> GeminiTranscript:
        sid = session_id or str(uuid.uuid4())
        name = f"session-2026-11-29T21-13-{sid[:8]}.jsonl"
        path = self.home / ".gemini" / "tmp" / "work" / "chats" / name
        return GeminiTranscript(path, sid, self.work)

    def codex(
        self, session_id: str | None = None, started: str = "2026-11-29T21-02-01"
    ) -> CodexTranscript:
        """A new rollout; a resumed session is the same id with a later `started` stamp."""
        sid = session_id or str(uuid.uuid4())
        name = f"rollout-{started}-{sid}.jsonl"
        path = self.codex_dir / "sessions" / "2026" / "11" / "29" / name
        return CodexTranscript(path, sid, self.work)

    # ------------------------------------------------------------------ processes

    def _may_run(self) -> None:
        if not self.processes:
            raise AssertionError(
                "an in_process test's world runs no ctxd process; drop the marker to run one"
            )

    def popen_serve(self, *args: str) -> subprocess.Popen[bytes]:
        self._may_run()
        """`ctxd serve` in this world, stderr to a log file under the world's root."""
        self._logs += 1
        log = (self.root / f"daemon-{self._logs}.log").open("wb")
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "ctxd", "serve", "--log-level", "debug", *args],
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        finally:
            log.close()

    def log(self) -> str:
        path = self.root / f"daemon-{self._logs}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> subprocess.Popen[bytes]:
        """Start our daemon and return once it answers a ping."""
        assert self.proc is None or self.proc.poll() is not None, "a daemon is already running"
        self.proc = self.popen_serve()
        self.wait_ready(self.proc)
        return self.proc

    def ping(self) -> dict[str, Any] | None:
        from ctxd.cli.client import request_json
        from ctxd.errors import CtxdError

        try:
            answer: dict[str, Any] = request_json("ping", env=self.env)
        except CtxdError:
            return None
        return answer

    def wait_ready(self, proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"ctxd serve exited with {proc.returncode}:\n{self.log()}")
            return self.ping()

        return wait_for(ready, START_TIMEOUT, "the daemon to answer")

    def stop(self) -> int | None:
        """SIGTERM our daemon, SIGKILL it after a bound; its exit code (None if none ran)."""
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

    def kill(self) -> None:
        """SIGKILL our daemon: no cleanup at all, as after a crash."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def daemon_pids(self) -> set[int]:
        """Every live `ctxd serve` process whose environment is this world's (e.g. spawned by
        a hook), found through /proc."""
        # HOME is the one variable every test keeps (some drop XDG_RUNTIME_DIR).
        marker = f"HOME={self.home}".encode()
        found: set[int] = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes().split(b"\0")
                environ = Path(entry.path, "environ").read_bytes().split(b"\0")
                state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if b"ctxd" in cmdline and b"serve" in cmdline and marker in environ and state != "Z":
                found.add(int(entry.name))
        return found

    def close(self) -> None:
        self.stop()
        # Daemons a hook spawned in this world are ours too; end them by pid.
        for pid in self.daemon_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def hook(
        self,
        agent: str,
        payload: dict[str, Any] | bytes,
        *args: str,
        env: dict[str, str] | None = None,
        timeout: float = 10.0,
    ) -> subprocess.CompletedProcess[bytes]:
        """Run the real hook client as installed hooks do (`hook_argv` AGENT ...)."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._may_run()
        return subprocess.run(
            [*self.hook_argv, agent, *args],
            input=data,
            env=self.env if env is None else env,
            cwd=self.work,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def hook_out(self, agent: str, payload: dict[str, Any] | bytes, *args: str) -> Any:
        """The hook's stdout as JSON (None when it printed nothing); it must exit 0 silently
        on stderr."""
        result = self.hook(agent, payload, *args)
        assert result.returncode == 0, result
        assert result.stderr == b"", result.stderr
        return json.loads(result.stdout) if result.stdout else None

    def cli(self, *args: str, timeout: float = 20.0) -> subprocess.CompletedProcess[str]:
        self._may_run()
        return subprocess.run(
            [sys.executable, "-m", "ctxd", *args],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def status(self) -> dict[str, Any]:
        """`ctxd status --json` (through the CLI's client, in process, for fast polling)."""
        from ctxd.cli.client import request_json

        doc: dict[str, Any] = request_json("status", env=self.env)
        return doc

    def row(self, transcript: Transcript | Path | str) -> dict[str, Any] | None:
        """The status row of the session behind `transcript`, None if not listed."""
        path = path_of(transcript)
        for row in self.status()["sessions"]:
            if row["transcript_path"] == path:
                result: dict[str, Any] = row
                return result
        return None

    def wait_row(
        self,
        transcript: Transcript | Path | str,
        check: Callable[[dict[str, Any]], bool] = lambda row: True,
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            row = self.row(transcript)
            return row if row is not None and check(row) else None

        return wait_for(probe, timeout, f"a status row for {path_of(transcript)}")


#: Fixtures that run ctxd for real: a daemon process, or the CLI in a subprocess.
REAL_PROCESS_FIXTURES = frozenset({"world", "shared", "home"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that runs ctxd in a process of its own is `slow` (see pyproject's markers),
    so that `-m "not e2e and not slow"` stays a quick run whoever adds such a test."""
    for item in items:
        if item.get_closest_marker("in_process") is not None:
            continue
        if REAL_PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    """A fresh isolated world, no daemon running yet (and none allowed in an `in_process` test)."""
    in_process = request.node.get_closest_marker("in_process") is not None
    w = World(tmp_path / "w", processes=not in_process)
    try:
        yield w
    finally:
        w.close()


@pytest.fixture(scope="session")
def native_hook_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """clients/ctxd_hook.c compiled as the project builds it (-Werror: warnings are errors),
    with the `ctxd-command` file `ctxd install` writes beside it naming this ctxd; skipped
    where no C compiler is (hooks then run the Python client, as `ctxd doctor` says)."""
    import shutil

    compiler = next((cc for cc in ("cc", "gcc", "clang") if shutil.which(cc)), None)
    if compiler is None:
        pytest.skip("no C compiler (cc, gcc, clang) to build the native hook client")
    directory = tmp_path_factory.mktemp("native-client")
    binary = directory / "ctxd-hook"
    flags = ["-O2", "-Wall", "-Wextra", "-Werror"]
    subprocess.run(
        [compiler, *flags, "-o", str(binary), str(NATIVE_SOURCE)], check=True, timeout=120
    )
    (directory / "ctxd-command").write_text(f"{sys.executable}\n-I\n-m\nctxd\n")
    return binary


@pytest.fixture
def ctxd(world: World) -> World:
    """A fresh world with its own daemon running (default config)."""
    world.start()
    return world


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One daemon (default config) per test module, for tests that use their own sessions."""
    w = World(tmp_path_factory.mktemp("shared") / "w")
    w.start()
    try:
        yield w
    finally:
        w.close()
