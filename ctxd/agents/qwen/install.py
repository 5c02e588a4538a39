"""Qwen Code: ctxd's hooks in `~/.qwen/settings.json` (or `$QWEN_HOME/settings.json`), as pure
transformations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.hookmap import HookSpec, Json, add_hooks, remove_hooks
from ctxd.agents.qwen.files import qwen_home
from ctxd.agents.spec import Check

__all__ = ["EVENTS", "checks", "hook_specs", "install", "settings_path", "uninstall"]

NAME = "ctxd"
#: Seconds (Qwen Code reads 1000 or more as legacy milliseconds).
TIMEOUT_S = 10
EVENTS: tuple[tuple[str, str | None], ...] = (
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    # Tool matchers: "*" (or "", ".*") is every tool; anything else a name or a regex.
    ("PostToolUse", "*"),
    ("Stop", None),
    ("PostCompact", None),
    ("SessionEnd", None),
)
_DISABLED = "disableAllHooks"


def settings_path(env: Mapping[str, str]) -> Path:
    """The user settings Qwen Code reads: `<QWEN_HOME, else ~/.qwen>/settings.json`."""
    return qwen_home(env) / "settings.json"


def hook_specs(command: str) -> tuple[HookSpec, ...]:
    """One named command hook per event ctxd needs."""
    handler = {"type": "command", "name": NAME, "command": command, "timeout": TIMEOUT_S}
    return tuple(HookSpec(event, matcher, handler) for event, matcher in EVENTS)


def _disabled_notes(doc: Mapping[str, Any]) -> tuple[str, ...]:
    if doc.get(_DISABLED) is True:
        return (f"{_DISABLED} is true: Qwen Code runs no hooks, ctxd's included",)
    return ()


def install(doc: Json, command: str) -> tuple[Json, tuple[str, ...]]:
    """`doc` with ctxd's hooks; a note when the user's settings switch hooks off."""
    return add_hooks(doc, hook_specs(command), is_ctxd_command), _disabled_notes(doc)


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's hooks."""
    return remove_hooks(doc, is_ctxd_command), ()


def checks(doc: Json) -> list[Check]:
    """`ctxd doctor`: whether Qwen Code will run the hooks at all."""
    if doc.get(_DISABLED) is True:
        return [
            Check(
                "qwen hooks enabled",
                False,
                f"{_DISABLED} is true in the Qwen Code settings",
                f'remove "{_DISABLED}" from the settings file',
            )
        ]
    return [Check("qwen hooks enabled", True, f"{_DISABLED} is not set")]
