"""Codex CLI specifics: seconds with SessionEnd within the 3 s clamp, trust, stable positions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxd.agents.codex.install import trust_keys
from ctxd.agents.hookcmd import hook_command, is_ctxd_command
from ctxd.cli.install import apply_plan, plan_install, settings_path

DATA = Path(__file__).parents[2] / "data" / "settings"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "CODEX_HOME": str(tmp_path / "codex-home")}


def place(name: str, env: dict[str, str]) -> Path:
    path = settings_path("codex", env)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DATA / name, path)
    return path


def foreign_positions(doc: dict[str, object]) -> list[tuple[str, int, int, str]]:
    """Where each foreign hook sits: Codex keys its trust records on exactly this."""
    out = []
    hooks = doc["hooks"]
    assert isinstance(hooks, dict)
    for event, groups in hooks.items():
        for g, group in enumerate(groups):
            for h, handler in enumerate(group["hooks"]):
                if not is_ctxd_command(handler["command"]):
                    out.append((event, g, h, handler["command"]))
    return out


def test_hooks_json_goes_to_codex_home_with_seconds(env: dict[str, str], tmp_path: Path) -> None:
    apply_plan(plan_install("codex", env=env))
    doc = json.loads((tmp_path / "codex-home" / "hooks.json").read_text())
    assert set(doc) == {"hooks"}  # Codex refuses unknown root keys
    timeouts = {}
    for event, (group,) in doc["hooks"].items():
        (handler,) = group["hooks"]
        assert handler["command"] == hook_command("codex", env=env)
        timeouts[event] = handler["timeout"]
    assert timeouts == {
        "SessionStart": 10,
        "PostToolUse": 10,
        "Stop": 10,
        "PreCompact": 10,
        "PostCompact": 10,
        "SessionEnd": 3,
    }
    assert doc["hooks"]["PostToolUse"][0]["matcher"] == "*"


def test_foreign_hooks_keep_their_positions_and_description(env: dict[str, str]) -> None:
    for name in ("codex-foreign.hooks.json", "codex-harness-0.171.0.hooks.json"):
        path = place(name, env)
        original = json.loads(path.read_text())
        apply_plan(plan_install("codex", env=env))
        new = json.loads(path.read_text())
        assert foreign_positions(new) == foreign_positions(original)
        assert new.get("description") == original.get("description")


def test_install_explains_how_to_trust_the_hooks(env: dict[str, str], tmp_path: Path) -> None:
    plan = plan_install("codex", env=env)
    (note,) = plan.notes
    assert str(tmp_path / "codex-home" / "config.toml") in note
    assert "Hooks need review" in note and "/hooks" in note
    assert "--dangerously-bypass-hook-trust" in note


def test_hooks_switched_off_in_config_are_reported(env: dict[str, str]) -> None:
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True)
    shutil.copyfile(DATA / "codex-harness-0.171.0.config.toml", config)
    text = config.read_text().replace("[features]\n", "[features]\nhooks = false\n")
    config.write_text(text)
    notes = plan_install("codex", env=env).notes
    assert any("hooks = false" in n for n in notes)


def test_recorded_trust_is_recognised_once_installed(env: dict[str, str]) -> None:
    path = settings_path("codex", env)
    apply_plan(plan_install("codex", env=env))
    keys = trust_keys(json.loads(path.read_text()), path)
    assert len(keys) == 6
    assert f"{path}:session_start:0:0" in keys and f"{path}:post_tool_use:0:0" in keys
    config = path.parent / "config.toml"
    config.write_text("".join(f'[hooks.state."{k}"]\ntrusted_hash = "sha256:00"\n\n' for k in keys))
    (note,) = plan_install("codex", env=env).notes
    assert "has a trust record" in note

    # without a record for every hook, the instructions come back
    config.write_text(f'[hooks.state."{keys[0]}"]\ntrusted_hash = "sha256:00"\n')
    (note,) = plan_install("codex", env=env).notes
    assert "Hooks need review" in note


def test_unreadable_config_toml_does_not_block_install(env: dict[str, str]) -> None:
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("model = \n")
    plan = plan_install("codex", env=env)
    assert plan.changed
    assert any("could not be read" in n for n in plan.notes)
    assert config.read_text() == "model = \n"
