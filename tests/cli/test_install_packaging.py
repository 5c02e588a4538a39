"""The Claude Code plugin, its marketplace entry and the Gemini CLI extension, as the agents
read them: every event ctxd needs is wired to the installed client."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ctxd.agents.claude import install as claude
from ctxd.agents.gemini import install as gemini
from ctxd.agents.hookcmd import is_ctxd_command, plugin_command

CLIENTS = Path(__file__).parents[2] / "clients"


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def wired(hooks: dict[str, Any]) -> dict[str, list[tuple[str | None, dict[str, Any]]]]:
    out: dict[str, list[tuple[str | None, dict[str, Any]]]] = {}
    for event, groups in hooks.items():
        for group in groups:
            for handler in group["hooks"]:
                out.setdefault(event, []).append((group.get("matcher"), handler))
    return out


def test_claude_plugin_wires_every_event_to_ctxd_hook() -> None:
    root = CLIENTS / "claude-plugin"
    manifest = load(root / ".claude-plugin" / "plugin.json")
    assert manifest["name"] == "ctxd" and re.fullmatch(r"\d+\.\d+\.\d+", manifest["version"])
    # hooks/hooks.json is loaded by convention; naming it again in the manifest makes Claude
    # Code report a duplicate hooks file.
    assert "hooks" not in manifest

    hooks = wired(load(root / "hooks" / "hooks.json")["hooks"])
    assert set(hooks) == {event for event, _ in claude.EVENTS}
    for event, matcher in claude.EVENTS:
        ((got_matcher, handler),) = hooks[event]
        assert got_matcher == matcher
        assert handler == {"type": "command", "command": plugin_command("claude"), "timeout": 10}
        assert is_ctxd_command(handler["command"])


def test_marketplace_points_at_the_plugin() -> None:
    market = load(CLIENTS / ".claude-plugin" / "marketplace.json")
    assert market["name"] and market["owner"]["name"]
    (entry,) = market["plugins"]
    plugin_dir = (CLIENTS / entry["source"]).resolve()
    assert plugin_dir == (CLIENTS / "claude-plugin").resolve()
    assert load(plugin_dir / ".claude-plugin" / "plugin.json")["name"] == entry["name"]


def test_gemini_extension_wires_every_event_to_ctxd_hook() -> None:
    root = CLIENTS / "gemini-extension"
    manifest = load(root / "gemini-extension.json")
    assert re.fullmatch(r"[a-z0-9-]+", manifest["name"]) and manifest["version"]
    assert "hooks" not in manifest  # Gemini CLI reads hooks from hooks/hooks.json only

    hooks = wired(load(root / "hooks" / "hooks.json")["hooks"])
    assert set(hooks) == {event for event, _ in gemini.EVENTS}
    for event, matcher in gemini.EVENTS:
        ((got_matcher, handler),) = hooks[event]
        assert got_matcher == matcher
        assert handler["command"] == plugin_command("gemini")
        assert handler["timeout"] == 10_000  # milliseconds
        assert handler["type"] == "command" and handler["name"] == "ctxd"


def test_doctor_runs_the_command_the_plugin_and_the_extension_run(tmp_path: Path) -> None:
    """`ctxd doctor` checks a plugin user's hooks by running `Installer.packaged`'s command:
    the one every handler of the plugin and of the extension runs."""
    from ctxd import agents

    claude_plugin = agents.spec("claude").installer.packaged(
        {"enabledPlugins": {"ctxd@ctxd": True}}, tmp_path / "settings.json"
    )
    (tmp_path / "extensions" / "ctxd").mkdir(parents=True)
    (tmp_path / "extensions" / "ctxd" / "gemini-extension.json").write_text("{}")
    gemini_extension = agents.spec("gemini").installer.packaged({}, tmp_path / "settings.json")
    assert claude_plugin is not None and gemini_extension is not None
    for packaged, hooks_file in (
        (claude_plugin, CLIENTS / "claude-plugin" / "hooks" / "hooks.json"),
        (gemini_extension, CLIENTS / "gemini-extension" / "hooks" / "hooks.json"),
    ):
        commands = {
            h["command"] for found in wired(load(hooks_file)["hooks"]).values() for _, h in found
        }
        assert commands == {packaged.command}
