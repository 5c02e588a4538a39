"""Shared machinery of the end-to-end suite: find the real CLIs, run a mock model API (inside a
loopback-only network namespace when asked), lay out an isolated HOME per run, run a CLI, and
read back what the model received.

Nothing here refers to anything outside the repository: the CLIs come from
`tests/e2e/.cache/npm` (see install-agents.sh) or from `CTXD_E2E_<AGENT>_BIN`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

E2E_DIR = Path(__file__).resolve().parent
REPO = E2E_DIR.parent.parent
CACHE = Path(os.environ.get("CTXD_E2E_CACHE", E2E_DIR / ".cache"))
NPM_BIN = CACHE / "npm" / "node_modules" / ".bin"
#: The CLIs that run under a runtime of their own (pi 1.x under Node 22): wrappers, found first.
OWN_BIN = CACHE / "bin"
#: The interpreter the suite runs under (the project's venv): mocks, hooks and ctxd use it.
PYTHON = sys.executable

Json = dict[str, Any]


# ------------------------------------------------------------------------------------ the CLIs
def find_cli(name: str) -> Path | None:
    """The installed CLI `name` (an agent of `ctxd.agents.AGENTS`; `pi0`: pi 0.x, the shared
    prefix's `pi`; `claude-sdk`: the newer Claude Code, the Agent SDK's binary), or None when
    not installed."""
    override = os.environ.get(f"CTXD_E2E_{name.upper().replace('-', '_')}_BIN")
    if override:
        path = Path(override)
    elif name == "pi0":
        path = NPM_BIN / "pi"
    else:
        path = OWN_BIN / name if (OWN_BIN / name).exists() else NPM_BIN / name
    return path if path.exists() and os.access(path, os.X_OK) else None


def cli_version(path: Path) -> str:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    return (out.stdout or out.stderr).strip()


def missing_cli_reason(name: str) -> str:
    return (
        f"{name} CLI not installed: run tests/e2e/install-agents.sh "
        f"(or set CTXD_E2E_{name.upper()}_BIN)"
    )


def netns_available() -> bool:
    """True when `unshare -rn` (a private, loopback-only network namespace) works here."""
    if not (shutil.which("unshare") and shutil.which("nsenter")):
        return False
    res = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30)
    return res.returncode == 0


# ------------------------------------------------------------------------------------ run dirs
@dataclass(frozen=True)
class RunDir:
    """One isolated run: its own HOME, agent config dir, work dir (the agent's cwd), capture dir."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def config(self) -> Path:
        return self.root / "config"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def cap(self) -> Path:
        return self.root / "cap"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @classmethod
    def create(cls, root: Path) -> RunDir:
        rd = cls(root)
        for d in (rd.home, rd.config, rd.work, rd.cap, rd.tmp):
            d.mkdir(parents=True, exist_ok=True)
        return rd

    def hooks(self) -> list[Json]:
        """What capture_hook.py recorded, in firing order."""
        return read_jsonl(self.cap / "hooks.jsonl")


def read_jsonl(path: Path) -> list[Json]:
    """The complete lines of a log another process is appending to: a last line without its
    newline is still being written, so it is left for the next read."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    complete = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in complete.splitlines() if line.strip()]


def write_json(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1), encoding="utf-8")


def capture_hook_command(label: str) -> str:
    """The shell command of the smoke-test hook for `label`."""
    return " ".join(shlex.quote(a) for a in (PYTHON, str(E2E_DIR / "capture_hook.py"), label))


# ------------------------------------------------------------------------------------ mocks
@dataclass
class Mock:
    """A running mock model API (one of mock_anthropic / mock_gemini / mock_openai).

    With `netns=True` the mock runs inside its own `unshare -rn` namespace (only a loopback
    interface), and `wrap()` prefixes a command with the `nsenter` that puts it in there too:
    nothing the CLI does can then leave the machine.
    """

    module: str
    run_dir: Path
    script: Json
    netns: bool = False
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.run_dir / f"requests.{self.module}.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Mock:
        script_path = self.run_dir / f"script.{self.module}.json"
        port_file = self.run_dir / f"port.{self.module}.txt"
        port_file.unlink(missing_ok=True)
        write_json(script_path, self.script)
        argv = [
            PYTHON,
            str(E2E_DIR / f"{self.module}.py"),
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--log",
            str(self.log_path),
            "--script",
            str(script_path),
        ]
        if self.netns:
            # unshare execs the mock itself: its pid is the namespace's handle for nsenter
            argv = ["unshare", "-rn", *argv, "--lo-up"]
        with (self.run_dir / f"{self.module}.log").open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if port_file.exists() and port_file.read_text().strip():
                self.port = int(port_file.read_text())
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        log_text = (self.run_dir / f"{self.module}.log").read_text(errors="replace")
        raise RuntimeError(f"{self.module} did not start: {log_text}")

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """`argv` run where the mock is reachable (inside its namespace when it has one)."""
        if not self.netns:
            return list(argv)
        assert self.proc is not None
        enter = ["nsenter", "-t", str(self.proc.pid), "-n"]
        if os.geteuid() != 0:
            # an unprivileged user may only join the namespace through its user namespace
            enter[3:3] = ["-U", "--preserve-credentials"]
        return [*enter, *argv]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def requests(self) -> list[Json]:
        return read_jsonl(self.log_path)

    def main_requests(self) -> list[Json]:
        """The agent-loop requests (the ones carrying tools), in the order they arrived."""
        return [r for r in self.requests() if (r.get("answer") or {}).get("kind") == "main"]

    def requests_of_kind(self, kind: str) -> list[Json]:
        return [r for r in self.requests() if (r.get("answer") or {}).get("kind") == kind]


# ------------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str
    elapsed: float

    def describe(self) -> str:
        return (
            f"$ {shlex.join(self.argv)}\n-> rc={self.returncode} in {self.elapsed:.1f}s\n"
            f"--- stdout\n{self.stdout[-4000:]}\n--- stderr\n{self.stderr[-4000:]}"
        )


#: Set to `native` to run the suites with the native hook client (see ctxd.agents.nativeclient).
HOOK_CLIENT_ENV = "CTXD_HOOK_CLIENT"


def base_env(rd: RunDir, extra: Mapping[str, str]) -> dict[str, str]:
    """A clean environment: nothing from the developer's own shell but PATH and locale."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "xterm-256color",
        "HOME": str(rd.home),
        "TMPDIR": str(rd.tmp),
        "E2E_CAPTURE_DIR": str(rd.cap),
    }
    # Which hook client `ctxd install` writes (`native`: the e2e suites run with the native one;
    # the install fails when it cannot be built).
    if os.environ.get(HOOK_CLIENT_ENV):
        env[HOOK_CLIENT_ENV] = os.environ[HOOK_CLIENT_ENV]
    env.update(extra)
    return env


def run(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float = 100,
    stdin: str | None = None,
) -> Result:
    t0 = time.monotonic()
    proc = subprocess.run(
        list(argv),
        cwd=cwd,
        env=dict(env),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Result(list(argv), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)


def wait_for(pred: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


# ------------------------------------------------------------------------------------ reading
def last_turn_text_claude(body: Json) -> str:
    """What a Messages API request added since the model last spoke: the messages after the
    last assistant message (tool results, hook context, system reminders), as JSON text."""
    msgs = body.get("messages") or []
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    return json.dumps(msgs[last + 1 :])


def last_turn_text_gemini(body: Json) -> str:
    contents = body.get("contents") or []
    last = max((i for i, c in enumerate(contents) if c.get("role") == "model"), default=-1)
    return json.dumps(contents[last + 1 :])


_CODEX_MODEL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")


def last_turn_text_codex(body: Json) -> str:
    items = body.get("input") or []

    def by_model(it: Json) -> bool:
        t = it.get("type")
        return t in _CODEX_MODEL_ITEMS or (t in ("message", None) and it.get("role") == "assistant")

    last = max(
        (i for i, it in enumerate(items) if isinstance(it, dict) and by_model(it)), default=-1
    )
    return json.dumps(items[last + 1 :])


def last_turn_text_chat(body: Json) -> str:
    """What a chat-completions request added since the model last spoke, as JSON text."""
    msgs = body.get("messages") or []
    last = max((i for i, m in enumerate(msgs) if m.get("role") == "assistant"), default=-1)
    return json.dumps(msgs[last + 1 :])


def marks(requests: Iterable[Json], needle: str, tail: Callable[[Json], str]) -> list[bool]:
    """For each request: did `needle` arrive with it (in what was added since the model's last
    turn)? Request i+1 carries what the hooks said after tool call i."""
    return [needle in tail(r.get("body") or {}) for r in requests]


def at_calls(
    main: Iterable[Json], needle: str, tail: Callable[[Json], str] = last_turn_text_chat
) -> list[int]:
    """The tool calls (0-based, counted over every main request) after which `needle` reached
    the model: request i+1 carries what the hooks said after call i."""
    return [i - 1 for i, hit in enumerate(marks(main, needle, tail)) if hit]


def chat_usage(prompt: int) -> Json:
    """A chat-completions `usage` whose prompt is `prompt` tokens, half of them cached."""
    return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": prompt // 2}


# ------------------------------------------------------------------------------------ Claude Code
CLAUDE_API_KEY = "sk-ant-dummy-key-0000000000"
CLAUDE_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)


def claude_prepare(rd: RunDir, settings: Json | None = None) -> Path:
    """Write `$CLAUDE_CONFIG_DIR/settings.json` (returned) and the `.claude.json` that skips
    onboarding, the API-key question and the workspace-trust dialog (without them the UI tries to
    reach the real service, and hooks of an untrusted workspace do not run)."""
    write_json(
        rd.config / ".claude.json",
        {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": "0",
            "theme": "dark",
            "customApiKeyResponses": {"approved": [CLAUDE_API_KEY[-20:]], "rejected": []},
            "projects": {
                str(rd.work): {
                    "hasTrustDialogAccepted": True,
                    "hasCompletedProjectOnboarding": True,
                    "allowedTools": [],
                }
            },
        },
    )
    path = rd.config / "settings.json"
    write_json(path, settings or {})
    return path


def claude_capture_hooks() -> Json:
    hooks: Json = {}
    for ev in CLAUDE_EVENTS:
        ent: Json = {"hooks": [{"type": "command", "command": capture_hook_command(ev)}]}
        if ev in ("PreToolUse", "PostToolUse"):
            ent["matcher"] = "*"
        hooks[ev] = [ent]
    return hooks


#: `claude -p`'s output as the tests read it: stream-json with the hook events (answers and
#: system messages show), and no permission prompts.
CLAUDE_STREAM = (
    "--output-format",
    "stream-json",
    "--verbose",
    "--include-hook-events",
    "--dangerously-skip-permissions",
)


def claude_env(rd: RunDir, mock: Mock, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return base_env(
        rd,
        {
            "CLAUDE_CONFIG_DIR": str(rd.config),
            "ANTHROPIC_BASE_URL": mock.url,
            "ANTHROPIC_API_KEY": CLAUDE_API_KEY,
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # root may only use --dangerously-skip-permissions inside a declared sandbox
            "IS_SANDBOX": "1",
            **(extra or {}),
        },
    )


def shell_command(i: int, tool_seconds: float) -> str:
    """The scripted shell command of tool call i; it takes `tool_seconds` (a real tool takes a
    while; an instant one races the agent's own transcript writes, see test_claude_e2e)."""
    return f"sleep {tool_seconds}; echo step{i}" if tool_seconds else f"echo step{i}"


def claude_tool_steps(
    n: int, cache_read: Sequence[int] | None = None, tool_seconds: float = 0
) -> list[Json]:
    """`n` Bash echo tool calls, then a final text answer; step i reports cache_read[i]
    (the final answer the next value, or the last one)."""
    steps: list[Json] = []
    for i in range(n):
        step: Json = {
            "tool_use": {
                "name": "Bash",
                "input": {
                    "command": shell_command(i, tool_seconds),
                    "description": f"Print step {i}",
                },
            }
        }
        if cache_read is not None:
            step["usage"] = claude_usage(cache_read[i])
        steps.append(step)
    final: Json = {"text": "Done."}
    if cache_read is not None:
        final["usage"] = claude_usage(cache_read[min(n, len(cache_read) - 1)])
    steps.append(final)
    return steps


def claude_usage(cache_read: int) -> Json:
    """Usage whose context size is cache_read + 5,000 (input 1,000 + cache creation 4,000)."""
    return {
        "input_tokens": 1000,
        "cache_creation_input_tokens": 4000,
        "cache_read_input_tokens": cache_read,
        "output_tokens": 50,
    }


# ------------------------------------------------------------------------------------ Gemini CLI
GEMINI_API_KEY = "dummy-gemini-api-key"
GEMINI_EVENTS = (
    "SessionStart",
    "BeforeAgent",
    "AfterAgent",
    "BeforeTool",
    "AfterTool",
    "PreCompress",
    "SessionEnd",
)


def gemini_settings_path(rd: RunDir) -> Path:
    return rd.home / ".gemini" / "settings.json"


def gemini_prepare(rd: RunDir, hooks: Json | None = None) -> Path:
    """Write `~/.gemini/settings.json` (returned) and trust the work dir.

    `security.auth.selectedType` is required (the base-URL variable alone selects auth type
    "gateway", which `-p` refuses); usage statistics, telemetry and update checks would reach
    outside hosts; an untrusted folder silently drops `--yolo`.
    """
    settings: Json = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ide": {"enabled": False, "hasSeenNudge": True},
    }
    if hooks is not None:
        settings["hooks"] = hooks
    path = gemini_settings_path(rd)
    write_json(path, settings)
    write_json(rd.home / ".gemini" / "trustedFolders.json", {str(rd.work): "TRUST_FOLDER"})
    return path


def gemini_capture_hooks() -> Json:
    hooks: Json = {}
    for ev in GEMINI_EVENTS:
        ent: Json = {
            "hooks": [
                {
                    "type": "command",
                    "name": "capture-" + ev,
                    "command": capture_hook_command(ev),
                    "timeout": 30000,
                }
            ]
        }
        if ev in ("BeforeTool", "AfterTool"):
            ent["matcher"] = ".*"
        hooks[ev] = [ent]
    return hooks


def gemini_env(rd: RunDir, mock: Mock, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return base_env(
        rd,
        {
            "GOOGLE_GEMINI_BASE_URL": mock.url,
            "GEMINI_API_KEY": GEMINI_API_KEY,
            # belt and braces besides the namespace: anything not for loopback goes to the mock,
            # which refuses it (and logs the host)
            "HTTPS_PROXY": mock.url,
            "HTTP_PROXY": mock.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **(extra or {}),
        },
    )


def gemini_tool_steps(
    n: int, prompt_tokens: Sequence[int] | None = None, tool_seconds: float = 0
) -> list[Json]:
    """`n` run_shell_command echo calls, then a final text answer; step i reports
    promptTokenCount prompt_tokens[i]."""
    steps: list[Json] = []
    for i in range(n):
        step: Json = {
            "function_call": {
                "name": "run_shell_command",
                "args": {
                    "command": shell_command(i, tool_seconds),
                    "description": f"Print step {i}",
                },
            }
        }
        if prompt_tokens is not None:
            step["usage"] = gemini_usage(prompt_tokens[i])
        steps.append(step)
    final: Json = {"text": "Done."}
    if prompt_tokens is not None:
        final["usage"] = gemini_usage(prompt_tokens[min(n, len(prompt_tokens) - 1)])
    steps.append(final)
    return steps


def gemini_usage(prompt: int) -> Json:
    return {
        "promptTokenCount": prompt,
        "candidatesTokenCount": 40,
        "cachedContentTokenCount": prompt // 2,
    }


# ------------------------------------------------------------------------------------ Codex CLI
CODEX_API_KEY = "sk-dummy-key-0000000000"
CODEX_MODEL = "gpt-5.5"
CODEX_EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "PreCompact",
    "PostCompact",
    "SessionEnd",
)
#: every headless call: no approvals, no sandbox, and run hooks nobody has trusted yet (Codex
#: skips untrusted hooks silently)
CODEX_FLAGS = (
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
    "--dangerously-bypass-hook-trust",
)


def codex_home(rd: RunDir) -> Path:
    return rd.config


def codex_prepare(rd: RunDir, mock: Mock, hooks: Json | None = None, extra_toml: str = "") -> Path:
    """Write `$CODEX_HOME/config.toml` (a Responses provider on the mock; plugin sync, metrics
    and update checks off; TUI notices pre-answered) and `hooks.json` (returned)."""
    (codex_home(rd) / "config.toml").write_text(
        f"""\
model = "{CODEX_MODEL}"
model_provider = "mock"
check_for_update_on_startup = false
{extra_toml}

[model_providers.mock]
name = "Mock OpenAI"
base_url = "{mock.url}/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
apps = false
remote_plugin = false

[analytics]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"

[tui]
screen_reader_detection_done = true

[notice.model_migrations]
"{CODEX_MODEL}" = "gpt-6-sol"
""",
        encoding="utf-8",
    )
    path = codex_home(rd) / "hooks.json"
    write_json(path, {"hooks": hooks or {}})
    return path


def codex_capture_hooks() -> Json:
    hooks: Json = {}
    for ev in CODEX_EVENTS:
        # Codex clamps SessionEnd hook timeouts to 3 s (and warns about a larger one)
        ent: Json = {
            "hooks": [
                {
                    "type": "command",
                    "command": capture_hook_command(ev),
                    "timeout": 3 if ev == "SessionEnd" else 30,
                }
            ]
        }
        if ev in ("PreToolUse", "PostToolUse"):
            ent["matcher"] = "*"
        hooks[ev] = [ent]
    return hooks


def codex_env(rd: RunDir, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    dead = "http://127.0.0.1:9"  # anything not for loopback goes to a dead local port
    return base_env(
        rd,
        {
            "CODEX_HOME": str(codex_home(rd)),
            "OPENAI_API_KEY": CODEX_API_KEY,
            "HTTPS_PROXY": dead,
            "HTTP_PROXY": dead,
            "ALL_PROXY": dead,
            "NO_PROXY": "127.0.0.1,localhost",
            **(extra or {}),
        },
    )


def codex_tool_steps(
    n: int, input_tokens: Sequence[int] | None = None, tool_seconds: float = 0
) -> list[Json]:
    """`n` shell echo calls, then a final text answer; step i reports input_tokens[i]."""
    steps: list[Json] = []
    for i in range(n):
        step: Json = {"shell": shell_command(i, tool_seconds)}
        if input_tokens is not None:
            step["usage"] = codex_usage(input_tokens[i])
        steps.append(step)
    final: Json = {"text": "Done."}
    if input_tokens is not None:
        final["usage"] = codex_usage(input_tokens[min(n, len(input_tokens) - 1)])
    steps.append(final)
    return steps


def codex_usage(input_tokens: int) -> Json:
    return {
        "input_tokens": input_tokens,
        "cached_tokens": input_tokens // 2,
        "output_tokens": 100,
        "reasoning_tokens": 0,
    }


# ------------------------------------------------------------------------------------ ctxd
class Ctxd:
    """A real `ctxd serve` for one run, everything it touches inside the run dir.

    `env` is the environment shared by the daemon, the `ctxd` verbs and (merged into the
    agent's environment) the hooks: they all find the same socket through CTXD_SOCKET, and the
    daemon watches the same agent roots (HOME, CLAUDE_CONFIG_DIR, CODEX_HOME) as the agent.
    Hooks are wired by the real `ctxd install`, so they run the client this install resolves.
    """

    def __init__(self, rd: RunDir, config_toml: str, agent_env: Mapping[str, str]) -> None:
        self.rd = rd
        run_dir = rd.root / "run"
        run_dir.mkdir(mode=0o700, exist_ok=True)
        self.config_path = rd.root / "ctxd.toml"
        self.config_path.write_text(config_toml, encoding="utf-8")
        self.env: dict[str, str] = {
            "CTXD_SOCKET": str(run_dir / "ctxd.sock"),
            "CTXD_CONFIG": str(self.config_path),
            "XDG_STATE_HOME": str(rd.root / "state"),
            "XDG_CONFIG_HOME": str(rd.root / "xdg-config"),
            "XDG_RUNTIME_DIR": str(run_dir),
            # the tests start and stop the daemon themselves: a hook that runs after the
            # teardown (a UI killed with its tmux server) must not leave a daemon behind
            "CTXD_NO_SPAWN": "1",
        }
        self._agent_env = dict(agent_env)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = rd.root / "ctxd.log"

    def _cmd_env(self) -> dict[str, str]:
        return base_env(self.rd, {**self._agent_env, **self.env})

    def ctl(self, *args: str, timeout: float = 60) -> Result:
        """`python -m ctxd ARGS...` in this run's environment."""
        return run(
            [PYTHON, "-m", "ctxd", *args], cwd=self.rd.root, env=self._cmd_env(), timeout=timeout
        )

    def start(self, wrap: Callable[[list[str]], list[str]] | None = None) -> Ctxd:
        """Start the daemon (its command line through `wrap`, e.g. a mock's `wrap` to run it
        in the mock's network namespace) and wait until it answers."""
        argv = [PYTHON, "-m", "ctxd", "serve", "--log-level", "debug"]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv if wrap is None else wrap(argv),
                cwd=self.rd.root,
                env=self._cmd_env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        sock = Path(self.env["CTXD_SOCKET"])
        if not wait_for(
            lambda: sock.exists() and self.ctl("status", "--json").returncode == 0, 20, 0.1
        ):
            self.stop()
            raise RuntimeError(f"ctxd did not start: {self.log_path.read_text(errors='replace')}")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def stop_with_cli(self) -> None:
        """`ctxd stop`, as a user would; returns once the daemon is gone with its socket."""
        res = self.ctl("stop")
        assert res.returncode == 0, res.describe()
        if self.proc is not None:
            self.proc.wait(15)
        assert not Path(self.env["CTXD_SOCKET"]).exists(), "ctxd stop left the socket behind"

    def status(self) -> Json:
        res = self.ctl("status", "--json")
        assert res.returncode == 0, res.describe()
        doc: Json = json.loads(res.stdout)
        return doc

    def rows(self, session_id: str) -> list[Json]:
        """Every `ctxd status --json` row of the session `session_id`."""
        return [s for s in self.status()["sessions"] if s.get("session_id") == session_id]

    def session(self, session_id: str) -> Json:
        """The row of the session `session_id` that follows its transcript."""
        rows = [r for r in self.rows(session_id) if r.get("transcript_path")]
        assert len(rows) == 1, (session_id, self.status())
        return rows[0]

    def install(self, agent: str, settings: Path, *extra: str) -> Result:
        res = self.ctl("install", agent, "--settings", str(settings), *extra)
        assert res.returncode == 0, res.describe()
        if os.environ.get(HOOK_CLIENT_ENV) == "native":
            assert "hook client: native (" in res.stdout, res.describe()
        return res

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class AgentRig:
    """One agent CLI's run wired to one ctxd daemon and one mock model; a test file's `Rig`
    adds how its CLI is run."""

    bin: Path
    rd: RunDir
    ctxd: Ctxd
    mock: Mock

    def main(self) -> list[Json]:
        """The requests of the agent loop, in order (the mock's "main" kind)."""
        return self.mock.main_requests()


# ------------------------------------------------------------------------------------ tmux
class Tmux:
    """A private tmux server (its own socket) running one interactive CLI in session `name`."""

    def __init__(self, sock: Path, name: str) -> None:
        self.sock = sock
        self.name = name

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-S", str(self.sock), *args], capture_output=True, text=True, timeout=30
        )
        return out.stdout

    def start(self, shell_command: str) -> None:
        self("new-session", "-d", "-s", self.name, "-x", "160", "-y", "50", shell_command)

    def pane(self) -> str:
        """The screen and its scrollback."""
        return self("capture-pane", "-p", "-S", "-500", "-t", self.name)

    def wait(self, text: str, timeout: float) -> bool:
        return wait_for(lambda: text in self.pane(), timeout, 0.3)

    def send(self, text: str) -> None:
        """Type `text`, then Enter (a pause between: a TUI may read a fast Enter as a paste)."""
        self("send-keys", "-t", self.name, "-l", text)
        time.sleep(0.7)
        self("send-keys", "-t", self.name, "Enter")

    def kill(self) -> None:
        self("kill-server")


# ------------------------------------------------------------------------------------ Copilot CLI
COPILOT_MODEL = "gpt-4.1"


def copilot_env(rd: RunDir, mock: Mock, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Copilot CLI offline (`COPILOT_OFFLINE`), its model a bring-your-own provider at the mock;
    the package it unpacks on first run goes to the shared scratch cache, not the run's HOME."""
    cache = CACHE / "home" / ".cache" / "copilot"
    cache.mkdir(parents=True, exist_ok=True)
    return base_env(
        rd,
        {
            "COPILOT_PROVIDER_BASE_URL": f"{mock.url}/v1",
            "COPILOT_PROVIDER_API_KEY": "sk-dummy-key-0000000000",
            "COPILOT_MODEL": COPILOT_MODEL,
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_CACHE_HOME": str(cache),
            # besides the namespace: anything not for loopback goes to the mock, which refuses it
            "HTTPS_PROXY": mock.url,
            "HTTP_PROXY": mock.url,
            "NO_PROXY": "127.0.0.1,localhost",
            **(extra or {}),
        },
    )
