"""`ctxd doctor` as a user runs it: one line per check, a fix for each failure, exit status; the
hook commands it judges are the ones installed in the agents' settings, run for real."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import World


def _lines(world: World) -> tuple[int, dict[str, str], str]:
    result = world.cli("doctor", timeout=60)
    marks = {}
    for line in result.stdout.splitlines():
        if line[:4] in ("ok  ", "FAIL", "skip"):
            marks[line[5:].split(":", 1)[0]] = line[:4].strip()
    return result.returncode, marks, result.stdout


def _settings(world: World) -> Path:
    return world.claude_dir / "settings.json"


def _rewrite_commands(world: World, change: Any) -> None:
    """Apply `change(command) -> command` to every installed ctxd command (a user's edit, or
    what a broken reinstall leaves)."""
    path = _settings(world)
    doc = json.loads(path.read_text())
    for groups in doc["hooks"].values():
        for group in groups:
            for handler in group["hooks"]:
                handler["command"] = change(handler["command"])
    doc["statusLine"]["command"] = change(doc["statusLine"]["command"])
    path.write_text(json.dumps(doc))


def test_a_wired_setup_passes_and_unused_agents_are_skipped(world: World) -> None:
    world.start()
    assert world.cli("install", "claude", "--statusline").returncode == 0
    code, marks, out = _lines(world)
    for name in (
        "daemon",
        "runtime dir",
        "socket",
        "claude hooks",
        "claude statusline",
        "claude hook command",
        "claude statusline command",
        "hook client",
        "hook spawn",
        "config",
        "watched roots",
    ):
        assert marks[name] == "ok", (name, out)
    assert marks["gemini hooks"] == "skip" and marks["codex hooks"] == "skip"
    assert "ctxd's answer verbatim" in out
    assert code == 0, out


def test_a_fresh_setup_passes_without_daemon_transcripts_or_our_statusline(world: World) -> None:
    """Right after `ctxd install claude`: no daemon yet (the first hook starts it), no agent
    transcripts yet, and the user's own statusline kept. None of that is a failure."""
    world.remove_agent_roots()
    _settings(world).write_text('{"statusLine": {"type": "command", "command": "my-line"}}\n')
    assert world.cli("install", "claude").returncode == 0
    code, marks, out = _lines(world)
    assert code == 0, out
    assert marks["daemon"] == "skip" and "the first hook starts it" in out
    assert marks["watched roots"] == "skip"
    assert marks["claude statusline"] == "ok" and "your own `my-line`, run by ctxd" in out
    assert marks["claude hook command"] == "ok"
    # the user's command (not found here) prints what it prints; the payload reaches ctxd
    assert marks["claude statusline command"] == "ok", out
    assert "FAIL" not in out


def test_an_emptied_settings_file_after_uninstall_is_a_skip(world: World) -> None:
    assert world.cli("install", "gemini").returncode == 0
    assert world.cli("uninstall", "gemini").returncode == 0
    code, marks, out = _lines(world)
    assert marks["gemini hooks"] == "skip" and "has no ctxd hooks" in out
    assert code == 0, out


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # What users once saw: the command names a client that a reinstall moved away.
        (lambda c: c.replace("/.local/share/ctxd/client", "/gone"), "exits 1: ModuleNotFoundError"),
        (lambda c: c.replace(c.split()[0], "/nonexistent/python3", 1), "exits 127"),
        (lambda c: f"{c}; echo done", "instead of ctxd's answer"),
        (lambda c: f"echo hi # {c}", "never reached ctxd"),
        (lambda c: f"sleep 0.25; {c}", "slow: "),
    ],
    ids=["moved-client", "gone-interpreter", "extra-output", "not-run", "slow"],
)
def test_a_broken_installed_command_fails(world: World, change: Any, says: str) -> None:
    assert world.cli("install", "claude").returncode == 0
    _rewrite_commands(world, change)
    code, marks, out = _lines(world)
    assert code == 1, out
    assert marks["claude hook command"] == "FAIL" and says in out, out
    assert marks["claude statusline command"] == "FAIL"
    assert "fix: `ctxd install claude` writes a working command" in out
    # ... and what doctor says to do fixes it.
    assert world.cli("install", "claude").returncode == 0
    code, marks, out = _lines(world)
    assert (code, marks["claude hook command"]) == (0, "ok"), out


def test_a_missing_daemon_is_a_skip_and_a_broken_config_fails_with_a_fix(world: World) -> None:
    world.write_config("[thresholds]\nwarning = 'lots'\n")
    result = world.cli("doctor", timeout=60)
    assert result.returncode == 1
    out = result.stdout
    assert "skip daemon: not running" in out
    assert "FAIL config:" in out and "thresholds.warning must be a number" in out
    assert "keeps the settings it had" in out


def test_installed_commands_in_flat_per_event_lists() -> None:
    """Copilot CLI's hooks are handlers straight in each event's list, the command under
    `bash`; the user's own are not ctxd's."""
    from ctxd.cli.doctor import installed_commands

    ours = "python3 -S -I -c 'import ctxd_hook as h;h.main()' copilot"
    doc = {
        "hooks": {
            "postToolUse": [{"type": "command", "bash": "./mine.sh"}, {"bash": f"{ours} post"}],
            "agentStop": [{"type": "command", "bash": f"{ours} stop"}],
        },
        "statusLine": {"type": "command", "command": f"{ours} statusline"},
    }
    assert installed_commands(doc, True) == {
        f"{ours} post": ["postToolUse"],
        f"{ours} stop": ["agentStop"],
        f"{ours} statusline": ["statusline"],
    }


def test_one_command_per_event_is_one_line_per_event_each_naming_it(world: World) -> None:
    """Copilot CLI's hooks are one command per event: doctor printed five identical
    "copilot hook command" lines, and a FAIL among them would not say which event's."""
    assert world.cli("install", "copilot").returncode == 0
    code, marks, out = _lines(world)
    assert code == 0, out
    events = (
        "sessionStart",
        "userPromptSubmitted",
        "postToolUse",
        "postToolUseFailure",
        "agentStop",
        "sessionEnd",
    )
    for event in events:
        assert marks[f"copilot hook command ({event})"] == "ok", out
    assert "copilot hook command" not in marks, out
    assert marks["copilot statusline command"] == "ok", out
    # One command for every event (Claude Code's) stays one line, as before.
    assert world.cli("install", "claude").returncode == 0
    _, marks, out = _lines(world)
    assert marks["claude hook command"] == "ok", out


OPENCODE_BIN = Path(__file__).parents[1] / "e2e" / ".cache" / "npm" / "node_modules" / ".bin"


def _runtime_only(world: World, runtime: str) -> None:
    """PATH holds `runtime` alone (as found here), so that doctor can load the plugin with
    nothing else."""
    found = shutil.which(runtime, path=f"{OPENCODE_BIN}:{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"no {runtime} here")
    only = world.root / f"only-{runtime}"
    only.mkdir()
    (only / runtime).symlink_to(found)
    world.env["PATH"] = str(only)


@pytest.mark.parametrize("runtime", ["kilo", "node"])
def test_the_kilo_plugin_is_loaded_and_its_hook_run(world: World, runtime: str) -> None:
    """Kilo's plugin, loaded in Kilo's own runtime (its binary is Bun too) or node."""
    cache = os.environ.get("CTXD_E2E_CACHE")
    kilo_bin = Path(cache) / "npm" / "node_modules" / ".bin" if cache else OPENCODE_BIN
    found = shutil.which(runtime, path=f"{kilo_bin}:{os.environ.get('PATH', '')}")
    if found is None:
        pytest.skip(f"no {runtime} here")
    if runtime == "kilo":  # its npm bin is a node script that runs the platform binary
        found = str(Path(found).resolve().parents[1].parent / "cli-linux-x64" / "bin" / "kilo")
    only = world.root / f"only-{runtime}"
    only.mkdir()
    (only / runtime).symlink_to(found)
    world.env["PATH"] = str(only)
    assert world.cli("install", "kilo").returncode == 0
    code, marks, out = _lines(world)
    assert marks["kilo plugin"] == "ok", out
    assert marks["kilo plugin run"] == "ok", out
    assert "the answer reached the tool output" in out, out
    assert code == 0, out


def _opencode_plugin(world: World, source: str) -> None:
    """opencode.json names a plugin of this source where ctxd's would be (an older copy)."""
    path = world.root / "old" / "opencode" / "ctxd.js"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    settings = world.config_home / "opencode" / "opencode.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"plugin": [path.as_uri()]}))


@pytest.mark.parametrize("runtime", ["opencode", "node"])
def test_the_opencode_plugin_is_loaded_and_its_hook_run(world: World, runtime: str) -> None:
    _runtime_only(world, runtime)
    world.env["XDG_DATA_HOME"] = str(world.root / "my data")  # the client copy's URL is quoted
    assert world.cli("install", "opencode").returncode == 0
    code, marks, out = _lines(world)
    assert marks["opencode plugin"] == "ok", out
    assert marks["opencode plugin run"] == "ok", out
    assert f"{runtime}" in out and "the answer reached the tool output" in out, out
    assert code == 0, out


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("export const CtxdPlugin = async () => ({})\n", "is not a function"),
        (
            'export const CtxdPlugin = async () => ({ "tool.execute.after": async () => {} })\n',
            "its hook never reached ctxd",
        ),
        ("export const CtxdPlugin = async () => ({\n", "exits 1: SyntaxError"),
    ],
    ids=["no-hook", "never-asks", "syntax-error"],
)
def test_a_broken_opencode_plugin_fails(world: World, source: str, says: str) -> None:
    _runtime_only(world, "node")
    _opencode_plugin(world, source)
    code, marks, out = _lines(world)
    assert code == 1, out
    assert marks["opencode plugin run"] == "FAIL" and says in out, out
    assert "fix: `ctxd install opencode` copies a working plugin" in out


def test_opencode_without_ctxd_is_a_skip(world: World) -> None:
    code, marks, out = _lines(world)
    assert marks["opencode plugin"] == "skip", out
    assert "opencode plugin run" not in marks
    assert code == 0, out


#: Where `ctxd-hook` is for a pip user of the interpreter running the tests: its venv's bin.
_SCRIPTS = Path(sys.executable).parent
_GEMINI_EXTENSION = Path(__file__).resolve().parents[2] / "clients" / "gemini-extension"


def _enable_claude_plugin(world: World) -> None:
    """What `claude plugin install ctxd@ctxd` leaves in the user's settings."""
    path = _settings(world)
    doc = json.loads(path.read_text()) if path.exists() else {}
    doc["enabledPlugins"] = {"ctxd@ctxd": True}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _install_gemini_extension(world: World) -> None:
    """What `gemini extensions install clients/gemini-extension` leaves: a copy of the folder."""
    shutil.copytree(_GEMINI_EXTENSION, world.home / ".gemini" / "extensions" / "ctxd")


@pytest.mark.skipif(not (_SCRIPTS / "ctxd-hook").exists(), reason="no ctxd-hook installed")
@pytest.mark.parametrize(
    ("agent", "enable", "says"),
    [
        ("claude", _enable_claude_plugin, "ctxd's plugin ctxd@ctxd runs `ctxd-hook claude`"),
        ("gemini", _install_gemini_extension, "runs `ctxd-hook gemini`"),
    ],
    ids=["claude-plugin", "gemini-extension"],
)
def test_ctxds_plugin_alone_is_checked_by_running_its_command(
    world: World, agent: str, enable: Any, says: str
) -> None:
    """A user of the plugin (or extension) alone runs no `ctxd install`: doctor says the
    plugin's hooks are there, runs their `ctxd-hook` for real, and asks for no client copy."""
    world.env["PATH"] = f"{_SCRIPTS}:{world.env['PATH']}"
    enable(world)
    code, marks, out = _lines(world)
    kind = "plugin" if agent == "claude" else "extension"
    assert marks[f"{agent} {kind}"] == "ok" and says in out, out
    assert marks[f"{agent} hook command"] == "ok" and "ctxd's answer verbatim" in out, out
    assert f"{agent} hooks" not in marks, out
    assert marks["hook client"] == "skip", out
    assert code == 0, out


def test_ctxds_plugin_without_ctxd_hook_on_the_path_fails_with_a_fix(world: World) -> None:
    world.env["PATH"] = "/usr/bin:/bin"
    _enable_claude_plugin(world)
    code, marks, out = _lines(world)
    assert code == 1, out
    assert marks["claude hook command"] == "FAIL" and "exits 127" in out, out
    assert "fix: `ctxd-hook` must be on Claude Code's PATH" in out, out


@pytest.mark.skipif(not (_SCRIPTS / "ctxd-hook").exists(), reason="no ctxd-hook installed")
@pytest.mark.parametrize("agent", ["claude", "gemini"])
def test_ctxds_hooks_and_its_plugin_together_fail_as_twice(world: World, agent: str) -> None:
    world.env["PATH"] = f"{_SCRIPTS}:{world.env['PATH']}"
    assert world.cli("install", agent).returncode == 0
    if agent == "claude":
        _enable_claude_plugin(world)
    else:
        _install_gemini_extension(world)
    code, marks, out = _lines(world)
    assert code == 1, out
    assert marks[f"{agent} hooks"] == "FAIL" and "every hook runs twice" in out, out
    assert f"fix: keep one: `ctxd uninstall {agent}`" in out, out
    # ... and what doctor says to do fixes it.
    assert world.cli("uninstall", agent).returncode == 0
    code, marks, out = _lines(world)
    assert "every hook runs twice" not in out and marks[f"{agent} hook command"] == "ok", out


def test_codex_hooks_that_codex_will_skip_untrusted_fail(world: World) -> None:
    """Codex runs a hook only once the user trusted it (a record per hook in config.toml) and
    skips the others silently: doctor says so until each of ctxd's hooks has its record."""
    world.start()
    assert world.cli("install", "codex").returncode == 0
    code, marks, out = _lines(world)
    assert marks["codex hooks"] == "ok", out
    assert marks["codex hook trust"] == "FAIL", out
    assert "Codex skips them without a word" in out and "/hooks" in out
    assert code != 0, out

    from ctxd.agents.codex.install import trust_keys

    hooks = world.codex_dir / "hooks.json"
    keys = trust_keys(json.loads(hooks.read_text()), hooks)
    # What Codex writes when the user trusts them (the hash is Codex's; any value counts here).
    (world.codex_dir / "config.toml").write_text(
        "".join(f'[hooks.state."{key}"]\ntrusted_hash = "sha256:00"\n\n' for key in keys)
    )
    code, marks, out = _lines(world)
    assert marks["codex hook trust"] == "ok", out
