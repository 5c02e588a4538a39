"""Claude Code specifics: the statusLine rules and the timeouts in seconds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxd.agents.hookcmd import hook_command, is_ctxd_command, unwrap_command, wrap_command
from ctxd.cli.install import apply_plan, plan_install, plan_uninstall, settings_path

DATA = Path(__file__).parents[2] / "data" / "settings"
FOREIGN_STATUSLINE = 'node "$HOME/.claude/hooks/gsd-statusline.js"'


def statusline_notes(notes: tuple[str, ...]) -> list[str]:
    """The notes about the statusline (without `claude` on PATH another says which hooks a
    release that is not known to take them does not get)."""
    return [n for n in notes if "not registered" not in n]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-config")}


def place(name: str, env: dict[str, str]) -> Path:
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / name, path)
    return path


def load(path: Path) -> dict[str, object]:
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def test_settings_live_in_claude_config_dir(env: dict[str, str], tmp_path: Path) -> None:
    apply_plan(plan_install("claude", env=env))
    assert (tmp_path / "claude-config" / "settings.json").exists()
    assert not (tmp_path / ".claude").exists()


def test_statusline_is_set_when_none_is_set(env: dict[str, str]) -> None:
    path = place("claude-plain.json", env)
    plan = plan_install("claude", env=env)
    (note,) = statusline_notes(plan.notes)  # the user is told Claude Code now shows ctxd's line
    assert "ctxd's line is now Claude Code's statusline" in note
    assert "`ctxd uninstall claude --statusline`" in note
    apply_plan(plan)
    assert load(path)["statusLine"] == {
        "type": "command",
        "command": hook_command("claude", "statusline", env),
    }


def test_foreign_statusline_stays_on_screen_run_by_ctxd(env: dict[str, str]) -> None:
    """The user's own statusLine keeps drawing the line: only its command is wrapped by ctxd's
    client (its other keys untouched), the note says what changed, and uninstalling gives the
    setting back exactly."""
    path = place("claude-foreign.json", env)
    original = load(path)
    plan = plan_install("claude", env=env)
    apply_plan(plan)
    assert load(path)["statusLine"] == {
        "type": "command",
        "command": wrap_command(hook_command("claude", "statusline", env), FOREIGN_STATUSLINE),
        "padding": 0,
    }
    (note,) = statusline_notes(plan.notes)
    assert FOREIGN_STATUSLINE in note and "still draws the line" in note
    assert "`ctxd uninstall claude`" in note and "--statusline" in note
    # a second install changes nothing; uninstall gives the file back as it was
    assert not plan_install("claude", env=env).changed
    apply_plan(plan_uninstall("claude", env=env))
    assert load(path) == original


def test_uninstall_statusline_alone_unwraps_and_keeps_the_hooks(env: dict[str, str]) -> None:
    path = place("claude-foreign.json", env)
    original = load(path)
    apply_plan(plan_install("claude", env=env))
    apply_plan(plan_uninstall("claude", env=env, statusline=True))
    after = load(path)
    assert after["statusLine"] == original["statusLine"]
    assert "hooks" in after


def test_a_wrapped_statusline_follows_ctxd_when_it_moves(env: dict[str, str]) -> None:
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True)
    old = wrap_command("/gone/bin/python -S -I /gone/ctxd_hook.py claude statusline", "x 'y'")
    path.write_text(json.dumps({"statusLine": {"type": "command", "command": old}}))
    apply_plan(plan_install("claude", env=env))
    command = load(path)["statusLine"]["command"]  # type: ignore[index]
    assert command == wrap_command(hook_command("claude", "statusline", env), "x 'y'")


@pytest.mark.parametrize(
    "foreign",
    [
        FOREIGN_STATUSLINE,
        "bunx -y ccstatusline@latest",
        'echo "$(jq -r .model.display_name)" | tr a-z A-Z; exit 0',
        "printf '%s\\n' it\\'s",
        "--wrap",
        "",
    ],
)
def test_unwrap_gives_back_the_command_exactly(foreign: str) -> None:
    wrapped = wrap_command(hook_command("claude", "statusline"), foreign)
    assert is_ctxd_command(wrapped)
    assert unwrap_command(wrapped) == foreign
    assert unwrap_command(hook_command("claude", "statusline")) is None
    assert unwrap_command(foreign) is None


def test_statusline_flag_replaces_a_foreign_one_and_says_so(env: dict[str, str]) -> None:
    path = place("claude-foreign.json", env)
    original = load(path)
    plan = plan_install("claude", env=env, statusline=True)
    backup = apply_plan(plan)
    status = load(path)["statusLine"]
    assert isinstance(status, dict) and is_ctxd_command(status["command"])
    assert any("replaced" in n and FOREIGN_STATUSLINE in n for n in plan.notes)
    assert backup is not None and json.loads(backup.read_text()) == original

    # uninstall removes ctxd's line and puts back the one it replaced, exactly
    apply_plan(plan_uninstall("claude", env=env))
    assert load(path) == original


def test_uninstall_gives_back_a_foreign_statusline(env: dict[str, str]) -> None:
    path = place("claude-harness-2.1.332.json", env)
    original = load(path)
    apply_plan(plan_install("claude", env=env))
    assert unwrap_command(load(path)["statusLine"]["command"])  # type: ignore[index]
    apply_plan(plan_uninstall("claude", env=env))
    assert load(path)["statusLine"] == original["statusLine"]


def test_ctxd_statusline_is_updated_and_keeps_user_tweaks(env: dict[str, str]) -> None:
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True)
    old = "/gone/bin/python -S -I /gone/ctxd_hook.py claude statusline"
    path.write_text(json.dumps({"statusLine": {"type": "command", "command": old, "padding": 2}}))
    apply_plan(plan_install("claude", env=env))
    assert load(path)["statusLine"] == {
        "type": "command",
        "command": hook_command("claude", "statusline", env),
        "padding": 2,
    }


def test_hooks_use_seconds_and_match_every_tool(env: dict[str, str]) -> None:
    path = settings_path("claude", env)
    apply_plan(plan_install("claude", env=env))
    hooks = load(path)["hooks"]
    assert isinstance(hooks, dict)
    for event, groups in hooks.items():
        (group,) = groups
        (handler,) = group["hooks"]
        command = hook_command("claude", env=env)
        assert handler == {"type": "command", "command": command, "timeout": 10}
        tool_events = ("PostToolUse", "PostToolUseFailure")
        assert group.get("matcher") == ("*" if event in tool_events else None)


def test_a_failed_tool_call_has_a_hook_too(env: dict[str, str]) -> None:
    """PostToolUse fires only after a call that succeeded (2.1.332): without
    PostToolUseFailure a failed call reaches ctxd not at all, as command or HTTP hook."""
    from ctxd.agents.claude import install

    url = "http://127.0.0.1:1/ctxd/hook/claude"
    for http_url, kind in ((None, "command"), (url, "http")):
        out, _ = install.install(
            {}, "ctxd-hook claude", "ctxd-line", statusline=False, http_url=http_url
        )
        (group,) = out["hooks"]["PostToolUseFailure"]
        assert group["matcher"] == "*"
        assert [h["type"] for h in group["hooks"]] == [kind]
        back, _ = install.uninstall(out)
        assert "PostToolUseFailure" not in back.get("hooks", {})


def test_enabled_ctxd_plugin_is_reported(env: dict[str, str]) -> None:
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"enabledPlugins": {"ctxd@ctxd": True}}))
    assert any("run twice" in n for n in plan_install("claude", env=env).notes)


def _claude_on_path(tmp_path: Path, env: dict[str, str], says: str) -> dict[str, str]:
    """`env` with a `claude` on PATH that answers `--version` as Claude Code does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    claude = bin_dir / "claude"
    claude.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo "{says}"\n')
    claude.chmod(0o755)
    return {**env, "PATH": f"{bin_dir}:/usr/bin:/bin"}


@pytest.mark.parametrize(
    ("says", "interrupt"),
    [
        ("2.1.337 (Claude Code)", True),
        ("2.1.335 (Claude Code)", True),
        # 2.1.332 stops its UI at a "Settings Warning" for an event it does not know.
        ("2.1.332 (Claude Code)", False),
        ("not a version", False),
    ],
)
def test_interrupt_is_registered_for_a_release_that_knows_it(
    env: dict[str, str], tmp_path: Path, says: str, interrupt: bool
) -> None:
    path = place("claude-plain.json", env)
    plan = plan_install("claude", env=_claude_on_path(tmp_path, env, says))
    apply_plan(plan)
    hooks = load(path)["hooks"]
    assert isinstance(hooks, dict)
    assert ("Interrupt" in hooks) is interrupt
    assert "PostToolUse" in hooks and "SessionStart" in hooks
    left_out = [n for n in plan.notes if "not registered" in n]
    assert bool(left_out) is not interrupt
    if left_out and says.startswith("2.1.332"):
        assert "Claude Code 2.1.332 predates it" in left_out[0]


def test_without_claude_on_path_interrupt_waits(env: dict[str, str]) -> None:
    path = place("claude-plain.json", {**env, "PATH": "/nonexistent"})
    plan = plan_install("claude", env={**env, "PATH": "/nonexistent"})
    apply_plan(plan)
    hooks = load(path)["hooks"]
    assert isinstance(hooks, dict) and "Interrupt" not in hooks
    (note,) = [n for n in plan.notes if "not registered" in n]
    assert "no `claude --version` said" in note and "ctxd install claude" in note
