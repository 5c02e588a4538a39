"""ctxd's Claude Code plugin and Gemini CLI extension, installed by the real CLIs' own commands
(no `ctxd install`), offline against the mocks, with a real ctxd daemon.

This is the path of a user who ran `pip install ctxd` and then installed the plugin: the hooks
are the plugin's (`clients/claude-plugin/hooks/hooks.json`,
`clients/gemini-extension/hooks/hooks.json`), their command is the `ctxd-hook` console script,
found on PATH with the venv's bin dir on it, and there is no per-user copy of the client. The
warning tests run a second time with the per-user client a `ctxd install` leaves (the native
one where a C compiler is) and no console script on PATH: the hooks' command runs that instead.

The scripted usage is the same as in test_claude_e2e.py and test_gemini_e2e.py: Claude Code on
the "window" basis (WARNING from 650,000 of 1,000,000 tokens, CRITICAL from 750,000, the
handoff from 700,000), Gemini CLI on the default compaction basis (WARNING from 340,788 prompt
tokens, CRITICAL from 393,216, the handoff from 367,002).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_support import (
    CLAUDE_STREAM,
    PYTHON,
    REPO,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    claude_env,
    claude_prepare,
    claude_tool_steps,
    gemini_env,
    gemini_prepare,
    gemini_tool_steps,
    last_turn_text_claude,
    last_turn_text_gemini,
    marks,
    run,
    wait_for,
)

from ctxd.agents.hookcmd import client_dir, install_client

pytestmark = pytest.mark.e2e

CLIENTS = REPO / "clients"
#: The marketplace's name in clients/.claude-plugin/marketplace.json, and the plugin's.
MARKETPLACE = "ctxd"
PLUGIN = "ctxd"
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"
WINDOW_BASIS = '[thresholds]\nbasis = "window"\n'
#: Claude Code writes its transcript lazily: 0.5 s tools, as in test_claude_e2e.py.
CLAUDE_TOOL_SECONDS = 0.5


def pip_user_path() -> str:
    """PATH as a pip user's shell has it: the venv's bin dir, where pip put the `ctxd-hook`
    console script, in front of the system's."""
    bin_dir = Path(PYTHON).parent  # not resolved: a venv's python is a symlink out of it
    if not (bin_dir / "ctxd-hook").exists():
        pytest.skip(f"no ctxd-hook beside {PYTHON}: pip install ctxd into the venv running pytest")
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    assert shutil.which("ctxd-hook", path=path) == str(bin_dir / "ctxd-hook")
    return path


def assert_no_ctxd_install(env: dict[str, str]) -> None:
    """Nothing of `ctxd install`'s: no per-user copy of the client for a hook to run."""
    assert not client_dir(env).exists(), sorted(client_dir(env).rglob("*"))


def without_console_script(path: str) -> str:
    """PATH without the venv's bin dir: no `ctxd-hook` console script on it."""
    bin_dir = str(Path(PYTHON).parent)
    kept = os.pathsep.join(d for d in path.split(os.pathsep) if d != bin_dir)
    assert shutil.which("ctxd-hook", path=kept) is None, kept
    return kept


def per_user_client(env: dict[str, str]) -> None:
    """What `ctxd install` leaves in the per-user client directory (besides the agent's hooks):
    the client copy, and the native client where a C compiler is (`CTXD_HOOK_CLIENT=native`
    requires it)."""
    install_client(env)
    assert (client_dir(env) / "ctxd-hook").exists()


def doctor_sees(env: dict[str, str], cwd: Path, agent: str, kind: str) -> None:
    """`ctxd doctor` as the user runs it after installing the plugin (or extension) with the
    agent's own command: it finds it enabled and runs its `ctxd-hook` for real."""
    res = run([PYTHON, "-m", "ctxd", "doctor"], cwd=cwd, env=env, timeout=60)
    assert f"ok   {agent} {kind}: ctxd's {kind} " in res.stdout, res.describe()
    assert f"ok   {agent} hook command: exit 0, ctxd's answer verbatim" in res.stdout, (
        res.describe()
    )
    assert "FAIL" not in res.stdout, res.describe()


def status_lists(ctxd: Ctxd, session_id: str) -> Result:
    """`ctxd status` (the table a user reads) names the session by the start of its id."""
    res = ctxd.ctl("status")
    assert res.returncode == 0, res.describe()
    assert session_id[:8] in res.stdout, res.describe()
    return res


def start_or_leave(ctxd: Ctxd, cleanup: ExitStack, daemon: bool) -> None:
    """Start the run's daemon, or leave it to the first hook to start (a daemon a hook started
    is stopped with `ctxd stop` at the end, whatever the test did)."""
    if daemon:
        cleanup.callback(ctxd.stop)
        ctxd.start()
    else:
        sock = Path(ctxd.env["CTXD_SOCKET"])
        cleanup.callback(lambda: sock.exists() and ctxd.ctl("stop"))


def spawned_daemon(ctxd: Ctxd) -> list[str]:
    """The command line of the daemon a hook started (the test started none)."""
    assert ctxd.proc is None
    assert wait_for(lambda: ctxd.ctl("status", "--json").returncode == 0, 20)
    pid = int((Path(ctxd.env["CTXD_SOCKET"]).parent / "ctxd.lock").read_text())
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def spawned_by_ctxd_hook() -> list[str]:
    """What `ctxd-hook` starts when no daemon answers: the interpreter of the console script's
    `#!` line (nothing names another: no `ctxd install` wrote a `ctxd-command` file)."""
    script = Path(PYTHON).parent / "ctxd-hook"
    shebang = script.read_text(encoding="utf-8").splitlines()[0]
    return [shebang.removeprefix("#!"), "-I", "-m", "ctxd", "serve", "--spawned"]


# ------------------------------------------------------------------------------- Claude Code
@dataclass
class ClaudeRig:
    bin: Path
    rd: RunDir
    ctxd: Ctxd
    mock: Mock
    path: str

    def env(self, **extra: str) -> dict[str, str]:
        return claude_env(self.rd, self.mock, {**self.ctxd.env, "PATH": self.path, **extra})

    def run(self, *args: str, **extra_env: str) -> Result:
        return run([str(self.bin), *args], cwd=self.rd.work, env=self.env(**extra_env))

    def claude(self, *args: str, **extra_env: str) -> Result:
        res = self.run(
            "-p",
            *args,
            *CLAUDE_STREAM,
            **extra_env,
        )
        assert res.returncode == 0, res.describe()
        return res

    def install_plugin(self) -> None:
        """The marketplace in the repository and the plugin from it, by the CLI's own commands
        (a local directory: nothing is fetched)."""
        for args in (
            ("plugin", "marketplace", "add", str(CLIENTS), "--json"),
            ("plugin", "install", f"{PLUGIN}@{MARKETPLACE}", "--json"),
        ):
            res = self.run(*args)
            assert res.returncode == 0, res.describe()
            assert json.loads(res.stdout.splitlines()[-1])["outcome"] == "ok", res.describe()


@pytest.fixture
def claude_rig(claude_bin: Path, tmp_path: Path) -> Iterator[Callable[..., ClaudeRig]]:
    cleanup = ExitStack()  # registered before each start: a failed start leaks nothing

    def make(
        steps: list[Json],
        config: str = WINDOW_BASIS,
        *,
        daemon: bool = True,
        per_user: bool = False,
    ) -> ClaudeRig:
        rd = RunDir.create(tmp_path)
        settings = claude_prepare(rd)
        ctxd = Ctxd(rd, config, {"CLAUDE_CONFIG_DIR": str(rd.config)})
        start_or_leave(ctxd, cleanup, daemon)
        mock = Mock("mock_anthropic", rd.root, {"steps": steps})
        cleanup.callback(mock.stop)
        mock.start()
        path = pip_user_path()
        rig = ClaudeRig(
            claude_bin, rd, ctxd, mock, without_console_script(path) if per_user else path
        )
        rig.install_plugin()
        doc = json.loads(settings.read_text())
        assert doc["enabledPlugins"] == {f"{PLUGIN}@{MARKETPLACE}": True}, doc
        assert "hooks" not in doc, doc  # every hook that runs is the plugin's
        if per_user:
            per_user_client(rig.env())
        else:
            assert_no_ctxd_install(rig.env())
        return rig

    with cleanup:
        yield make


def claude_events(res: Result) -> list[Json]:
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def claude_session_id(res: Result) -> str:
    sid = {e["session_id"] for e in claude_events(res) if e.get("session_id")}
    assert len(sid) == 1, sid
    return str(sid.pop())


def claude_at_calls(main: list[Json], needle: str) -> list[int]:
    """The tool calls (0-based) after which `needle` reached the model."""
    return [i - 1 for i, hit in enumerate(marks(main, needle, last_turn_text_claude)) if hit]


@pytest.mark.parametrize("per_user", [False, True], ids=["console-script", "per-user-client"])
def test_claude_plugin_warns_the_model_and_the_session_is_tracked(
    claude_rig: Callable[..., ClaudeRig], per_user: bool
) -> None:
    """With the console script; and with the per-user client a `ctxd install` left, which the
    plugin's hooks run instead (no `ctxd-hook` on PATH then)."""
    # call:       0        1        2(W)     3-6 (quiet, debounced)            7(W: 5th)
    cache_read = [95_000, 295_000, 655_000, 660_000, 665_000, 670_000, 675_000, 685_000]
    # 8(C: escalation) 9     final answer (Stop: 78 % used -> handoff)
    cache_read += [755_000, 765_000, 775_000]
    rig = claude_rig(claude_tool_steps(10, cache_read, CLAUDE_TOOL_SECONDS), per_user=per_user)
    doctor_sees(rig.env(), rig.rd.work, "claude", "plugin")
    res = rig.claude("Run the steps")

    # the session loaded the plugin from the marketplace
    (init,) = [e for e in claude_events(res) if e.get("subtype") == "init"]
    assert f"{PLUGIN}@{MARKETPLACE}" in [p.get("source") for p in init["plugins"]], init

    main = rig.mock.main_requests()
    assert len(main) == 11
    assert claude_at_calls(main, WARNING) == [2, 7], res.describe()
    assert claude_at_calls(main, CRITICAL) == [8]
    handoffs = [
        e
        for e in claude_events(res)
        if e.get("type") == "system" and HANDOFF in str(e.get("content", ""))
    ]
    assert len(handoffs) == 1, res.describe()

    # every hook that ran was the plugin's, and the CLI took each answer without complaint
    responses = [e for e in claude_events(res) if e.get("subtype") == "hook_response"]
    assert {"SessionStart", "PostToolUse", "Stop"} <= {e["hook_event"] for e in responses}
    for e in responses:
        assert (e["exit_code"], e["outcome"], e["stderr"]) == (0, "success", ""), e

    sid = claude_session_id(res)
    row = rig.ctxd.session(sid)
    assert (row["agent"], row["tokens"], row["window"]) == ("claude", 780_000, 1_000_000)
    assert row["severity"] == "critical"
    status_lists(rig.ctxd, sid)


def test_claude_plugin_starts_the_daemon(claude_rig: Callable[..., ClaudeRig]) -> None:
    """No daemon running, as after a fresh `pip install`: the plugin's first hook starts one,
    and the warning still comes at its own call."""
    # call:       0       1(W)     2 (debounced)  final answer
    cache_read = [95_000, 655_000, 660_000, 665_000]
    rig = claude_rig(claude_tool_steps(3, cache_read, CLAUDE_TOOL_SECONDS), daemon=False)
    res = rig.claude("Run the steps", CTXD_NO_SPAWN="0")

    assert spawned_daemon(rig.ctxd) == spawned_by_ctxd_hook()
    assert claude_at_calls(rig.mock.main_requests(), WARNING) == [1], res.describe()
    sid = claude_session_id(res)
    assert rig.ctxd.session(sid)["tokens"] == 670_000
    status_lists(rig.ctxd, sid)


# ------------------------------------------------------------------------------- Gemini CLI
@dataclass
class GeminiRig:
    bin: Path
    rd: RunDir
    ctxd: Ctxd
    mock: Mock
    path: str
    proxied_by_install: int = 0

    def env(self, **extra: str) -> dict[str, str]:
        return gemini_env(self.rd, self.mock, {**self.ctxd.env, "PATH": self.path, **extra})

    def run(self, *args: str, stdin: str | None = None, **extra_env: str) -> Result:
        argv = self.mock.wrap([str(self.bin), *args])
        return run(argv, cwd=self.rd.work, env=self.env(**extra_env), stdin=stdin)

    def gemini(self, *args: str, **extra_env: str) -> Result:
        res = self.run("-p", *args, "--yolo", "--output-format", "json", **extra_env)
        assert res.returncode == 0, res.describe()
        return res

    def install_extension(self) -> Result:
        """`gemini extensions install <dir>`, as a user answers it: `--consent` to the
        third-party notice, "y" to the question whether to trust the folder (inside the
        namespace: nothing is fetched)."""
        res = self.run(
            "extensions", "install", str(CLIENTS / "gemini-extension"), "--consent", stdin="y\n"
        )
        assert res.returncode == 0, res.describe()
        assert 'Extension "ctxd" installed successfully and enabled.' in res.stderr, res.describe()
        # Gemini CLI 0.61.0 reports the install to play.googleapis.com whatever
        # `privacy.usageStatisticsEnabled` says (its ExtensionManager's telemetry Config is
        # built without it); the mock, the only way out of the namespace, refuses it.
        self.proxied_by_install = len(self.mock.requests_of_kind("proxy"))
        return res

    def session_id(self) -> str:
        rows = [s for s in self.ctxd.status()["sessions"] if s.get("transcript_path")]
        assert len(rows) == 1, rows
        return str(rows[0]["session_id"])


@pytest.fixture
def gemini_rig(gemini_bin: Path, netns: bool, tmp_path: Path) -> Iterator[Callable[..., GeminiRig]]:
    cleanup = ExitStack()

    def make(
        steps: list[Json], config: str = "", *, daemon: bool = True, per_user: bool = False
    ) -> GeminiRig:
        rd = RunDir.create(tmp_path)
        settings = gemini_prepare(rd)
        ctxd = Ctxd(rd, config, {})
        start_or_leave(ctxd, cleanup, daemon)
        mock = Mock("mock_gemini", rd.root, {"steps": steps}, netns=netns)
        cleanup.callback(mock.stop)
        mock.start()
        path = pip_user_path()
        rig = GeminiRig(
            gemini_bin, rd, ctxd, mock, without_console_script(path) if per_user else path
        )
        rig.install_extension()
        assert "hooks" not in json.loads(settings.read_text())  # every hook is the extension's
        assert (rd.home / ".gemini" / "extensions" / "ctxd" / "hooks" / "hooks.json").exists()
        if per_user:
            per_user_client(rig.env())
        else:
            assert_no_ctxd_install(rig.env())
        return rig

    with cleanup:
        yield make


def gemini_at_calls(main: list[Json], needle: str) -> list[int]:
    return [i - 1 for i, hit in enumerate(marks(main, needle, last_turn_text_gemini)) if hit]


@pytest.mark.parametrize("per_user", [False, True], ids=["console-script", "per-user-client"])
def test_gemini_extension_warns_the_model_and_the_session_is_tracked(
    gemini_rig: Callable[..., GeminiRig], per_user: bool
) -> None:
    """With the console script; and with the per-user client a `ctxd install` left (no
    `ctxd-hook` on PATH then)."""
    # call:    0        1        2(W)     3-6 (quiet, debounced)              7(W: 5th)
    prompt = [100_000, 300_000, 345_000, 350_000, 352_000, 354_000, 356_000, 358_000]
    # 8(C: escalation) 9       final answer (AfterAgent: 77 % used -> handoff)
    prompt += [400_000, 402_000, 405_000]
    rig = gemini_rig(gemini_tool_steps(10, prompt), per_user=per_user)
    doctor_sees(rig.env(), rig.rd.work, "gemini", "extension")
    res = rig.gemini("Run the steps")
    assert json.loads(res.stdout)["response"].strip() == "Done.", res.describe()

    main = rig.mock.main_requests()
    assert len(main) == 11
    assert gemini_at_calls(main, WARNING) == [2, 7], res.describe()
    assert gemini_at_calls(main, CRITICAL) == [8]
    # the one hook line on stderr is the handoff shown to the user: no hook failed
    hook_lines = [line for line in res.stderr.splitlines() if "hook" in line.lower()]
    assert len(hook_lines) == 1 and HANDOFF in hook_lines[0], res.describe()
    proxied = rig.mock.requests_of_kind("proxy")
    assert len(proxied) == rig.proxied_by_install, "the session tried to reach an outside host"

    sid = rig.session_id()
    row = rig.ctxd.session(sid)
    assert (row["agent"], row["tokens"], row["window"]) == ("gemini", 405_000, 1_048_576)
    status_lists(rig.ctxd, sid)


def test_gemini_extension_starts_the_daemon(gemini_rig: Callable[..., GeminiRig]) -> None:
    """No daemon running: the extension's first hook starts one (in the CLI's namespace; the
    socket is a file, reachable from outside), and the warning comes at its own call."""
    # call:    0        1(W)     2 (debounced)  final answer
    prompt = [100_000, 345_000, 350_000, 352_000]
    rig = gemini_rig(gemini_tool_steps(3, prompt), daemon=False)
    res = rig.gemini("Run the steps", CTXD_NO_SPAWN="0")

    assert spawned_daemon(rig.ctxd) == spawned_by_ctxd_hook()
    assert gemini_at_calls(rig.mock.main_requests(), WARNING) == [1], res.describe()
    sid = rig.session_id()
    assert rig.ctxd.session(sid)["tokens"] == 352_000
    status_lists(rig.ctxd, sid)
