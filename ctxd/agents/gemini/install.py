"""Gemini CLI: ctxd's hooks in `~/.gemini/settings.json`, as pure transformations."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.hookmap import HookSpec, Json, add_hooks, remove_hooks

AGENT = "gemini"
NAME = "ctxd"
#: Milliseconds (Gemini CLI's unit).
TIMEOUT_MS = 10_000
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("BeforeAgent", None),
    # Gemini CLI matchers are regular expressions: ".*" is "every tool" ("*" would not compile).
    ("AfterTool", ".*"),
    ("AfterAgent", None),
    ("PreCompress", None),
    ("SessionEnd", None),
)

__all__ = ["EVENTS", "NAME", "hook_specs", "install", "settings_path", "uninstall"]


def settings_path(env: Mapping[str, str]) -> Path:
    """`~/.gemini/settings.json`."""
    return Path(env.get("HOME") or os.path.expanduser("~")) / ".gemini" / "settings.json"


def hook_specs(command: str) -> tuple[HookSpec, ...]:
    """One named command hook per event ctxd needs."""
    handler = {"type": "command", "name": NAME, "command": command, "timeout": TIMEOUT_MS}
    return tuple(HookSpec(event, matcher, handler) for event, matcher in EVENTS)


def _disabled_notes(doc: Json) -> tuple[str, ...]:
    notes: list[str] = []
    config = doc.get("hooksConfig")
    if isinstance(config, dict):
        if config.get("enabled") is False:
            notes.append("hooksConfig.enabled is false: Gemini CLI runs no hooks, ctxd's included")
        disabled = config.get("disabled")
        if isinstance(disabled, list) and NAME in disabled:
            notes.append(f'hooksConfig.disabled lists "{NAME}": Gemini CLI skips ctxd\'s hooks')
    return tuple(notes)


def install(doc: Json, command: str) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's hooks; notes when the user's settings switch hooks off."""
    return add_hooks(doc, hook_specs(command), is_ctxd_command), _disabled_notes(doc)


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's hooks."""
    return remove_hooks(doc, is_ctxd_command), ()
