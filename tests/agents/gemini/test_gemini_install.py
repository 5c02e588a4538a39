"""Gemini CLI specifics: milliseconds, regex matchers, named hooks, switches that turn hooks off."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ctxd.agents.hookcmd import hook_command
from ctxd.cli.install import apply_plan, plan_install, plan_uninstall, settings_path

DATA = Path(__file__).parents[2] / "data" / "settings"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path)}


def test_hooks_are_named_use_milliseconds_and_a_regex_matcher(env: dict[str, str]) -> None:
    path = settings_path("gemini", env)
    apply_plan(plan_install("gemini", env=env))
    hooks = json.loads(path.read_text())["hooks"]
    assert set(hooks) == {
        "SessionStart",
        "BeforeAgent",
        "AfterTool",
        "AfterAgent",
        "PreCompress",
        "SessionEnd",
    }
    for event, (group,) in hooks.items():
        (handler,) = group["hooks"]
        assert handler == {
            "type": "command",
            "name": "ctxd",
            "command": hook_command("gemini", env=env),
            "timeout": 10_000,
        }
        if event == "AfterTool":
            assert re.fullmatch(group["matcher"], "run_shell_command")
        else:
            assert "matcher" not in group


def test_foreign_settings_and_hooks_survive(env: dict[str, str]) -> None:
    path = settings_path("gemini", env)
    path.parent.mkdir(parents=True)
    shutil.copyfile(DATA / "gemini-foreign.json", path)
    original = json.loads(path.read_text())
    apply_plan(plan_install("gemini", env=env))
    new = json.loads(path.read_text())
    for key in ("security", "general", "ui", "mcpServers", "hooksConfig"):
        assert new[key] == original[key]
    assert new["hooks"]["BeforeTool"] == original["hooks"]["BeforeTool"]
    # the user's AfterTool and SessionEnd hooks stay first, ctxd's come after
    assert new["hooks"]["AfterTool"][0] == original["hooks"]["AfterTool"][0]
    assert new["hooks"]["SessionEnd"][0] == original["hooks"]["SessionEnd"][0]
    assert len(new["hooks"]["AfterTool"]) == 2


def test_hooks_switched_off_in_settings_are_reported(env: dict[str, str]) -> None:
    path = settings_path("gemini", env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"hooksConfig": {"enabled": False, "disabled": ["ctxd"]}}))
    notes = plan_install("gemini", env=env).notes
    assert any("enabled is false" in n for n in notes)
    assert any("disabled" in n and "ctxd" in n for n in notes)


def test_non_event_keys_inside_hooks_are_left_alone(env: dict[str, str]) -> None:
    # Older Gemini CLI releases kept `enabled`/`disabled` inside `hooks` itself.
    doc = {"hooks": {"enabled": True, "disabled": ["journal"]}}
    path = settings_path("gemini", env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    apply_plan(plan_install("gemini", env=env))
    new = json.loads(path.read_text())
    assert new["hooks"]["enabled"] is True and new["hooks"]["disabled"] == ["journal"]
    apply_plan(plan_uninstall("gemini", env=env))
    assert json.loads(path.read_text()) == doc


def test_installed_extension_is_reported(env: dict[str, str], tmp_path: Path) -> None:
    ext = tmp_path / ".gemini" / "extensions" / "ctxd"
    ext.mkdir(parents=True)
    (ext / "gemini-extension.json").write_text('{"name": "ctxd", "version": "0.1.0"}')
    assert any("run twice" in n for n in plan_install("gemini", env=env).notes)
