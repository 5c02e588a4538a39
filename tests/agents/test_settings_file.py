"""Install/uninstall on real settings shapes of the agents: what a user would notice."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from ctxd import agents
from ctxd.agents import AGENTS
from ctxd.agents.claude import install as claude_mod
from ctxd.agents.codex import install as codex_mod
from ctxd.agents.gemini import install as gemini_mod
from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.cli.install import Plan, apply_plan, plan_install, plan_uninstall, settings_path
from ctxd.errors import InvalidInput, SettingsFileError

DATA = Path(__file__).parents[1] / "data" / "settings"

CASES = [
    ("claude", None),
    ("claude", "claude-harness-2.1.332.json"),
    ("claude", "claude-foreign.json"),
    ("claude", "claude-plain.json"),
    ("gemini", None),
    ("gemini", "gemini-harness-0.61.0.json"),
    ("gemini", "gemini-foreign.json"),
    ("codex", None),
    ("codex", "codex-harness-0.171.0.hooks.json"),
    ("codex", "codex-foreign.hooks.json"),
]
EVENTS = {
    # The install's pure transformation, without Claude Code's version: what every release knows.
    "claude": dict(claude_mod.events_for(None)),
    "gemini": dict(gemini_mod.EVENTS),
    "codex": dict(codex_mod.EVENTS),
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": os.environ.get("PATH", "")}


def place(agent: str, name: str | None, env: dict[str, str]) -> Path:
    path = settings_path(agent, env)
    if name is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(DATA / name, path)
    return path


def foreign(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """Everything not ctxd's: the other top-level keys, and each event's foreign handlers."""
    rest = {k: v for k, v in doc.items() if k not in ("hooks", "statusLine")}
    handlers: dict[str, list[Any]] = {}
    for event, groups in (doc.get("hooks") or {}).items():
        for group in groups:
            for handler in group.get("hooks", []):
                if not is_ctxd_command(handler.get("command")):
                    handlers.setdefault(event, []).append((group.get("matcher"), handler))
    return rest, handlers


def ctxd_handlers(doc: dict[str, Any]) -> dict[str, list[tuple[Any, Any]]]:
    found: dict[str, list[tuple[Any, Any]]] = {}
    for event, groups in (doc.get("hooks") or {}).items():
        for group in groups:
            for handler in group.get("hooks", []):
                if is_ctxd_command(handler.get("command")):
                    found.setdefault(event, []).append((group.get("matcher"), handler))
    return found


def backups(path: Path) -> list[Path]:
    if not path.parent.exists():
        return []
    return sorted(p for p in path.parent.iterdir() if ".ctxd-backup-" in p.name)


@pytest.mark.parametrize(("agent", "name"), CASES)
def test_install_wires_every_event_once_and_keeps_foreign_entries(
    agent: str, name: str | None, env: dict[str, str]
) -> None:
    path = place(agent, name, env)
    original = json.loads(path.read_text()) if name else {}
    apply_plan(plan_install(agent, env=env))
    installed = json.loads(path.read_text())

    ours = ctxd_handlers(installed)
    assert set(ours) == set(EVENTS[agent])
    for event, matcher in EVENTS[agent].items():
        assert len(ours[event]) == 1, event
        assert ours[event][0][0] == matcher
    assert foreign(installed) == foreign(original)


@pytest.mark.parametrize(("agent", "name"), CASES)
def test_install_twice_changes_nothing(agent: str, name: str | None, env: dict[str, str]) -> None:
    path = place(agent, name, env)
    apply_plan(plan_install(agent, env=env))
    first = path.read_bytes()
    count = len(backups(path))

    again = plan_install(agent, env=env)
    assert not again.changed
    assert again.diff() == ""
    assert apply_plan(again) is None
    assert path.read_bytes() == first
    assert len(backups(path)) == count


@pytest.mark.parametrize(("agent", "name"), CASES)
def test_install_then_uninstall_gives_back_the_original(
    agent: str, name: str | None, env: dict[str, str]
) -> None:
    path = place(agent, name, env)
    original = json.loads(path.read_text()) if name else {}
    apply_plan(plan_install(agent, env=env))
    removal = plan_uninstall(agent, env=env)
    assert removal.changed
    apply_plan(removal)
    assert json.loads(path.read_text()) == original
    # and nothing left to remove
    assert not plan_uninstall(agent, env=env).changed


@pytest.mark.parametrize(("agent", "name"), [c for c in CASES if c[1] is not None])
def test_dry_run_plan_writes_nothing(agent: str, name: str, env: dict[str, str]) -> None:
    path = place(agent, name, env)
    before = path.read_bytes()
    listing = sorted(os.listdir(path.parent))

    plan = plan_install(agent, env=env)
    assert plan.changed
    diff = plan.diff()
    assert diff.startswith(f"--- {path}\n+++ {path}\n")
    assert "+" in diff and "import ctxd_hook as h" in diff
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == listing


@pytest.mark.parametrize("agent", [a for a in AGENTS if agents.spec(a).installer.edits_settings])
def test_missing_file_is_planned_as_new_and_created_private(
    agent: str, env: dict[str, str]
) -> None:
    path = settings_path(agent, env)
    plan = plan_install(agent, env=env)
    assert plan.before is None and plan.changed
    assert plan.diff().startswith(f"--- /dev/null\n+++ {path}\n")
    assert not path.exists()  # planning alone creates nothing

    assert apply_plan(plan) is None  # no old file, so no backup
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == json.loads(plan.after)


@pytest.mark.parametrize(("agent", "name"), [c for c in CASES if c[1] is not None])
def test_apply_backs_up_the_old_file_and_keeps_its_mode(
    agent: str, name: str, env: dict[str, str]
) -> None:
    path = place(agent, name, env)
    path.chmod(0o640)
    old = path.read_bytes()
    backup = apply_plan(plan_install(agent, env=env))
    assert backup is not None
    assert backup.parent == path.parent and backup.read_bytes() == old
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_bytes() != old
    # no temporary file left behind
    assert [p for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("agent", AGENTS)
def test_unparseable_file_is_refused_and_left_untouched(agent: str, env: dict[str, str]) -> None:
    path = place(agent, "broken-trailing-comma.json", env)
    before = path.read_bytes()
    with pytest.raises(SettingsFileError, match="not valid JSON"):
        plan_install(agent, env=env)
    with pytest.raises(SettingsFileError, match="not valid JSON"):
        plan_uninstall(agent, env=env)
    assert path.read_bytes() == before
    assert backups(path) == []


@pytest.mark.parametrize("text", ["[]", '"hooks"', '{"hooks": []}', '{"hooks": {"Stop": {}}}'])
def test_wrong_shapes_are_refused(text: str, env: dict[str, str]) -> None:
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(SettingsFileError):
        plan_install("claude", env=env)
    assert path.read_text() == text


def test_a_file_changed_after_planning_is_not_overwritten(env: dict[str, str]) -> None:
    path = place("claude", "claude-plain.json", env)
    plan = plan_install("claude", env=env)
    path.write_text('{"model": "opus"}\n')  # the user (or the agent) saved meanwhile
    with pytest.raises(SettingsFileError, match="changed since"):
        apply_plan(plan)
    assert path.read_text() == '{"model": "opus"}\n'
    assert backups(path) == []


def test_a_hand_built_plan_over_an_unparseable_file_is_refused(env: dict[str, str]) -> None:
    path = place("claude", "broken-trailing-comma.json", env)
    before = path.read_text()
    plan = Plan("claude", path, before, "{}\n", True, ())
    with pytest.raises(SettingsFileError):
        apply_plan(plan)
    assert path.read_text() == before


def test_symlinked_settings_keep_their_link(env: dict[str, str], tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    shutil.copyfile(DATA / "claude-plain.json", real)
    link = settings_path("claude", env)
    link.parent.mkdir(parents=True)
    link.symlink_to(real)

    apply_plan(plan_install("claude", env=env))
    assert link.is_symlink()
    assert ctxd_handlers(json.loads(real.read_text()))


def test_rewrite_keeps_the_files_indentation(env: dict[str, str]) -> None:
    path = place("codex", "codex-harness-0.171.0.hooks.json", env)  # indent=1, no final newline
    apply_plan(plan_install("codex", env=env))
    text = path.read_text()
    assert text.startswith('{\n "hooks": {\n  "SessionStart"')
    assert not text.endswith("\n")


def test_settings_paths_follow_the_agents_environment(tmp_path: Path) -> None:
    home = str(tmp_path)
    assert settings_path("claude", {"HOME": home}) == tmp_path / ".claude" / "settings.json"
    assert settings_path("claude", {"HOME": home, "CLAUDE_CONFIG_DIR": "/c"}) == Path(
        "/c/settings.json"
    )
    assert settings_path("gemini", {"HOME": home}) == tmp_path / ".gemini" / "settings.json"
    assert settings_path("codex", {"HOME": home}) == tmp_path / ".codex" / "hooks.json"
    assert settings_path("codex", {"HOME": home, "CODEX_HOME": "/x"}) == Path("/x/hooks.json")


def test_settings_override_is_used(tmp_path: Path, env: dict[str, str]) -> None:
    target = tmp_path / "elsewhere.json"
    apply_plan(plan_install("claude", settings=target, env=env))
    assert ctxd_handlers(json.loads(target.read_text()))
    assert not settings_path("claude", env).exists()


def test_unknown_agent_is_invalid_input(env: dict[str, str]) -> None:
    with pytest.raises(InvalidInput):
        plan_install("cursor", env=env)
    with pytest.raises(InvalidInput):
        plan_uninstall("cursor", env=env)


def test_uninstall_without_a_file_changes_nothing(env: dict[str, str]) -> None:
    plan = plan_uninstall("gemini", env=env)
    assert not plan.changed
    assert apply_plan(plan) is None
    assert not settings_path("gemini", env).exists()


def test_stale_ctxd_hooks_are_updated_in_place_not_duplicated(env: dict[str, str]) -> None:
    old = "/old/venv/bin/python -S -I /old/site-packages/ctxd_hook.py claude"
    doc = {
        "hooks": {
            "PostToolUse": [
                {"matcher": "*", "hooks": [{"type": "command", "command": old, "timeout": 5}]},
                {"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt"}]},
                {"matcher": "*", "hooks": [{"type": "command", "command": "ctxd-hook claude"}]},
            ],
            # an event this ctxd no longer needs
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": old}]}],
        }
    }
    path = settings_path("claude", env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    apply_plan(plan_install("claude", env=env))
    new = json.loads(path.read_text())
    post = new["hooks"]["PostToolUse"]
    assert len(post) == 2
    assert post[1] == {"matcher": "Edit", "hooks": [{"type": "command", "command": "fmt"}]}
    assert post[0]["hooks"][0]["command"] != old and is_ctxd_command(post[0]["hooks"][0]["command"])
    assert "UserPromptSubmit" not in new["hooks"]
