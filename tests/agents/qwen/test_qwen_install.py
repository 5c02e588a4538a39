"""Qwen Code's installer (`ctxd install qwen`), doctor check and compression rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxd.agents import builtin_windows, spec
from ctxd.agents.hookcmd import hook_command
from ctxd.agents.qwen import install
from ctxd.agents.qwen.compaction import compaction_point, settings_config
from ctxd.cli.install import apply_plan, plan_install, plan_uninstall, settings_path
from ctxd.core.compaction import CompactionRules
from ctxd.core.window import lookup_table

RULES = CompactionRules()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path)}


def test_hooks_are_named_use_seconds_and_match_every_tool(env: dict[str, str]) -> None:
    path = settings_path("qwen", env)
    assert path == Path(env["HOME"]) / ".qwen" / "settings.json"
    apply_plan(plan_install("qwen", env=env))
    hooks = json.loads(path.read_text())["hooks"]
    assert set(hooks) == {
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
        "PostCompact",
        "SessionEnd",
    }
    for event, (group,) in hooks.items():
        (handler,) = group["hooks"]
        assert handler == {
            "type": "command",
            "name": "ctxd",
            "command": hook_command("qwen", env=env),
            "timeout": 10,  # seconds: 1000 and more would be read as milliseconds
        }
        assert group.get("matcher") == ("*" if event == "PostToolUse" else None)


def test_qwen_home_moves_the_settings(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h"), "QWEN_HOME": str(tmp_path / "q")}
    assert settings_path("qwen", env) == tmp_path / "q" / "settings.json"


def test_foreign_settings_and_hooks_survive_and_uninstall_restores_them(
    env: dict[str, str],
) -> None:
    path = settings_path("qwen", env)
    path.parent.mkdir(parents=True)
    original = {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "qwen3-coder-plus"},
        "hooks": {
            "PostToolUse": [
                {"matcher": "write_file", "hooks": [{"type": "command", "command": "fmt.sh"}]}
            ],
            "PreToolUse": [{"hooks": [{"type": "http", "url": "http://127.0.0.1:1/x"}]}],
        },
    }
    path.write_text(json.dumps(original, indent=2) + "\n")

    apply_plan(plan_install("qwen", env=env))
    new = json.loads(path.read_text())
    assert new["security"] == original["security"] and new["model"] == original["model"]
    assert new["hooks"]["PreToolUse"] == original["hooks"]["PreToolUse"]
    # the user's own hook stays first, ctxd's comes after it
    assert new["hooks"]["PostToolUse"][0] == original["hooks"]["PostToolUse"][0]
    assert len(new["hooks"]["PostToolUse"]) == 2
    assert not plan_install("qwen", env=env).changed  # idempotent

    apply_plan(plan_uninstall("qwen", env=env))
    assert json.loads(path.read_text()) == original


def test_hooks_switched_off_are_noted_and_fail_the_doctor_check(env: dict[str, str]) -> None:
    path = settings_path("qwen", env)
    path.parent.mkdir(parents=True)
    path.write_text('{"disableAllHooks": true}\n')

    plan = plan_install("qwen", env=env)
    assert any("disableAllHooks is true" in note for note in plan.notes)
    (check,) = spec("qwen").installer.checks({"disableAllHooks": True})
    assert not check.ok and check.fix
    (check,) = spec("qwen").installer.checks({})
    assert check.ok


def test_install_specs_name_only_events_the_dialect_knows() -> None:
    dialect = spec("qwen").dialect
    for event, _ in install.EVENTS:
        assert event in dialect.kinds


@pytest.mark.parametrize(
    ("window", "point"),
    [
        # min(0.85 * window, window - 33,000), the first whole token at or above it
        (1_000_000, 850_000),
        (262_144, 222_823),  # 222,822.4
        (200_000, 167_000),
        (131_072, 98_072),
        (32_768, 27_853),  # the ceiling is negative: 0.85 alone
    ],
)
def test_the_compression_point(window: int, point: int) -> None:
    assert compaction_point(window, None, RULES, {}) == point


def test_the_users_threshold_is_read_from_settings() -> None:
    config = settings_config({"context": {"autoCompactThreshold": 0.5}})
    assert config == {"context.autoCompactThreshold": "0.5"}
    assert compaction_point(1_000_000, None, RULES, config) == 500_000
    # Qwen Code ignores a share outside (0, 1], and so does the rule.
    for bad in (0, 1.5, True, "x"):
        ignored = settings_config({"context": {"autoCompactThreshold": bad}})
        assert compaction_point(1_000_000, None, RULES, ignored) == 850_000
    assert settings_config({"context": {}}) == {}


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("qwen3-coder-plus", 1_000_000),
        ("qwen3-coder-flash-2025-07-28", 1_000_000),
        ("qwen3.5-plus", 1_000_000),
        ("coder-model", 1_000_000),
        ("qwen3-coder-30b-a3b-instruct", 262_144),
        ("qwen3-max", 262_144),
        ("qwen-turbo", 262_144),
    ],
)
def test_built_in_windows(model: str, window: int) -> None:
    assert lookup_table(model, builtin_windows()) == window


def test_the_daemon_reads_the_threshold_from_user_and_workspace_settings(tmp_path: Path) -> None:
    qwen = spec("qwen")
    env = {"HOME": str(tmp_path)}
    assert qwen.settings_files(env, None) == (tmp_path / ".qwen" / "settings.json",)
    assert qwen.settings_files(env, "/src/app") == (
        tmp_path / ".qwen" / "settings.json",
        Path("/src/app/.qwen/settings.json"),
    )
    doc = b'{"context": {"autoCompactThreshold": 0.6}, "model": {"name": "x"}}'
    assert qwen.read_settings(doc) == {"context.autoCompactThreshold": "0.6"}
    assert qwen.read_settings(b"// a comment\n{}") == {}
    assert qwen.read_settings(b"[]") == {}
