"""Qwen Code's installer (`ctxd install qwen`), doctor check and compression rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import builtin_windows, spec
from ctxd.agents.hookcmd import hook_command
from ctxd.agents.qwen import install
from ctxd.agents.qwen.compaction import compaction_point, settings_config
from ctxd.cli.install import apply_plan, plan_install, plan_uninstall, settings_path
from ctxd.core.compaction import AgentOverrides
from ctxd.core.window import lookup_table

RULES: AgentOverrides = {}


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
        "PostToolUseFailure",  # a failed call fires it instead of PostToolUse
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
        tool_events = ("PostToolUse", "PostToolUseFailure")
        assert group.get("matcher") == ("*" if event in tool_events else None)


def test_qwen_home_moves_the_settings(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path / "h"), "QWEN_HOME": str(tmp_path / "q")}
    assert settings_path("qwen", env) == tmp_path / "q" / "settings.json"


def test_foreign_settings_and_hooks_survive_and_uninstall_restores_them(
    env: dict[str, str],
) -> None:
    path = settings_path("qwen", env)
    path.parent.mkdir(parents=True)
    original: dict[str, Any] = {
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


# ---------------------------------------------------------------------- --transport http

HTTP = "[http]\nenabled = true\nport = 24242\n"
URL = "http://127.0.0.1:24242/ctxd/hook/qwen"


@pytest.fixture
def http_env(tmp_path: Path) -> dict[str, str]:
    config = tmp_path / "ctxd.toml"
    config.write_text(HTTP)
    return {"HOME": str(tmp_path), "CTXD_CONFIG": str(config)}


def _handlers(doc: dict[str, object]) -> dict[str, list[dict[str, object]]]:
    hooks = doc["hooks"]
    assert isinstance(hooks, dict)
    return {event: [h for g in groups for h in g["hooks"]] for event, groups in hooks.items()}


def test_http_hooks_for_every_event_but_session_start(http_env: dict[str, str]) -> None:
    path = settings_path("qwen", http_env)
    plan = plan_install("qwen", env=http_env, transport="http")
    assert any(URL in note for note in plan.notes)
    apply_plan(plan)
    handlers = _handlers(json.loads(path.read_text()))
    assert handlers.pop("SessionStart") == [
        {
            "type": "command",
            "name": "ctxd",
            "command": hook_command("qwen", env=http_env),
            "timeout": 10,
        }
    ]
    assert set(handlers) == {
        "UserPromptSubmit",
        "PostToolUse",
        "PostToolUseFailure",
        "Stop",
        "PostCompact",
        "SessionEnd",
    }
    for event, found in handlers.items():
        # named like the command hook; no env headers (Qwen Code's rule reads no variables)
        assert found == [{"type": "http", "name": "ctxd", "url": URL, "timeout": 10}], event
    assert "security" not in json.loads(path.read_text())  # no allow-list: every URL allowed
    assert not plan_install("qwen", env=http_env, transport="http").changed  # idempotent


def test_http_install_switch_and_uninstall_keep_the_users_hooks(http_env: dict[str, str]) -> None:
    path = settings_path("qwen", http_env)
    path.parent.mkdir(parents=True)
    original: dict[str, Any] = {
        "model": {"name": "qwen3-coder-plus"},
        "hooks": {
            "PostToolUse": [
                {"matcher": "write_file", "hooks": [{"type": "command", "command": "fmt.sh"}]},
                {"hooks": [{"type": "http", "name": "audit", "url": "http://127.0.0.1:9/log"}]},
            ],
            "Stop": [{"hooks": [{"type": "command", "command": "notify.sh"}]}],
        },
    }
    path.write_text(json.dumps(original, indent=2) + "\n")

    apply_plan(plan_install("qwen", env=http_env, transport="http"))
    new = json.loads(path.read_text())
    assert new["hooks"]["PostToolUse"][:2] == original["hooks"]["PostToolUse"]
    assert new["hooks"]["PostToolUse"][2]["hooks"][0]["url"] == URL
    assert new["hooks"]["Stop"][0] == original["hooks"]["Stop"][0]
    # back to command hooks: ctxd's HTTP hooks replaced, not doubled; then HTTP again
    apply_plan(plan_install("qwen", env=http_env))
    text = path.read_text()
    assert URL not in text and text.count("ctxd_hook") == 7
    apply_plan(plan_install("qwen", env=http_env, transport="http"))
    assert path.read_text().count(URL) == 6 and path.read_text().count("ctxd_hook") == 1

    apply_plan(plan_uninstall("qwen", env=http_env))
    assert json.loads(path.read_text()) == original


def test_a_url_allow_list_gets_ctxds_url_and_loses_it_on_uninstall(
    http_env: dict[str, str],
) -> None:
    path = settings_path("qwen", http_env)
    path.parent.mkdir(parents=True)
    original = {"security": {"allowedHttpHookUrls": ["https://hooks.example.com/*"], "x": 1}}
    path.write_text(json.dumps(original))

    plan = plan_install("qwen", env=http_env, transport="http")
    assert any("allowedHttpHookUrls" in note and URL in note for note in plan.notes)
    apply_plan(plan)
    doc = json.loads(path.read_text())
    assert doc["security"] == {"allowedHttpHookUrls": ["https://hooks.example.com/*", URL], "x": 1}
    (check,) = [
        c for c in spec("qwen").installer.checks(doc) if c.name == "qwen http hooks allowed"
    ]
    assert check.ok
    assert not plan_install("qwen", env=http_env, transport="http").changed

    # an older port's URL is replaced, not kept beside the new one
    http_env_2 = {**http_env, "CTXD_CONFIG": str(path.parent / "other.toml")}
    Path(http_env_2["CTXD_CONFIG"]).write_text(HTTP.replace("24242", "24243"))
    apply_plan(plan_install("qwen", env=http_env_2, transport="http"))
    patterns = json.loads(path.read_text())["security"]["allowedHttpHookUrls"]
    assert patterns == ["https://hooks.example.com/*", URL.replace("24242", "24243")]

    # command hooks need no URL; uninstall leaves the user's list as it was
    apply_plan(plan_install("qwen", env=http_env))
    assert json.loads(path.read_text())["security"] == original["security"]
    apply_plan(plan_install("qwen", env=http_env, transport="http"))
    apply_plan(plan_uninstall("qwen", env=http_env))
    assert json.loads(path.read_text()) == original


@pytest.mark.parametrize(
    "patterns",
    [
        ["http://127.0.0.1:*"],
        ["http://127.0.0.1:24242/*"],
        ["HTTP://127.0.0.1:24242/ctxd/hook/*"],  # Qwen Code compares case-insensitively
        ["http://127\\.0\\.0\\.1:24242/.*"],  # pre-escaped: taken as a regular expression
    ],
)
def test_a_list_that_already_allows_the_url_is_left_alone(
    http_env: dict[str, str], patterns: list[str]
) -> None:
    path = settings_path("qwen", http_env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"security": {"allowedHttpHookUrls": patterns}}))
    plan = plan_install("qwen", env=http_env, transport="http")
    assert not any("allowedHttpHookUrls" in note for note in plan.notes)
    apply_plan(plan)
    assert json.loads(path.read_text())["security"]["allowedHttpHookUrls"] == patterns


def test_a_list_left_with_only_ctxds_url_is_kept(http_env: dict[str, str]) -> None:
    """Emptying the list would let every HTTP hook post anywhere: uninstall keeps it, and says
    so."""
    doc = {"security": {"allowedHttpHookUrls": [URL]}, "hooks": {}}
    out, notes = install.uninstall(doc)
    assert out["security"] == doc["security"]
    assert any("edit it by hand" in note for note in notes)


def test_doctor_fails_http_hooks_the_allow_list_refuses() -> None:
    doc, _ = install.install({}, "python -S -I ctxd_hook.py qwen", URL)
    doc["security"] = {"allowedHttpHookUrls": ["https://hooks.example.com/*"]}
    (check,) = [c for c in install.checks(doc) if c.name == "qwen http hooks allowed"]
    assert not check.ok and URL in check.detail and check.fix
    # command hooks, or no list: no such line
    assert [c.name for c in install.checks({"security": doc["security"]})] == ["qwen hooks enabled"]
    assert len(install.checks(install.install({}, "x ctxd_hook.py", URL)[0])) == 1
