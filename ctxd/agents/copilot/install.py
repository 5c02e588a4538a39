"""Copilot CLI: ctxd's hooks and statusLine in `~/.copilot/settings.json` (or
`$COPILOT_HOME/settings.json`), as pure transformations.

Copilot CLI's hooks are a flat list per event, not Claude Code's groups:
`"hooks": {"postToolUse": [{"type": "command", "bash": "...", "timeoutSec": 10}, ...]}` (the
schema of `.github/hooks/*.json`, which settings.json `hooks` shares; `copilot help config`).
ctxd's entries are found by their `bash` command; the user's own are never touched.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.copilot.files import copilot_home
from ctxd.agents.hookcmd import (
    is_ctxd_command,
    replacing_command,
    unwrap_command,
    user_statusline,
    wrap_command,
)
from ctxd.agents.spec import Check, Json
from ctxd.errors import SettingsFileError

__all__ = ["EVENTS", "checks", "install", "settings_path", "uninstall"]

#: Seconds (Copilot CLI's unit, 30 by default). The client gives up after about 2 s.
TIMEOUT_S = 10
#: postToolUseFailure: a tool call that failed fires it instead of postToolUse (since 1.0.15).
EVENTS = (
    "sessionStart",
    "userPromptSubmitted",
    "postToolUse",
    "postToolUseFailure",
    "agentStop",
    "sessionEnd",
)
_DISABLED = "disableAllHooks"


def settings_path(env: Mapping[str, str]) -> Path:
    """The user settings Copilot CLI reads: `<COPILOT_HOME, else ~/.copilot>/settings.json`."""
    return copilot_home(env) / "settings.json"


def _ours(entry: object) -> bool:
    return isinstance(entry, dict) and is_ctxd_command(entry.get("bash"))


def _hooks(doc: Json) -> dict[str, Any]:
    hooks = doc.get("hooks")
    if hooks is None:
        return {}
    if not isinstance(hooks, dict):
        raise SettingsFileError(f'"hooks" is a {type(hooks).__name__}, not an object')
    return hooks


def install(
    doc: Json, command: Callable[[str | None], str], statusline_command: str, *, statusline: bool
) -> tuple[Json, tuple[str, ...]]:
    """`doc` with one ctxd hook per event of `EVENTS` (an existing one updated where it stands,
    duplicates dropped, a new one after the user's own), and ctxd's statusLine where none is set
    or `statusline` asks to replace a foreign one."""
    out = copy.deepcopy(doc)
    hooks = _hooks(out)
    for event in list(hooks):
        if event not in EVENTS:
            _strip(hooks, event)
    for event in EVENTS:
        entries = hooks.get(event, [])
        if not isinstance(entries, list):
            raise SettingsFileError(f'"hooks.{event}" is a {type(entries).__name__}, not a list')
        wanted = {"type": "command", "bash": command(event), "timeoutSec": TIMEOUT_S}
        placed: list[Any] = []
        done = False
        for entry in entries:
            if not _ours(entry):
                placed.append(entry)
            elif not done:
                placed.append({**entry, **wanted})
                done = True
        if not done:
            placed.append(wanted)
        hooks[event] = placed
    out["hooks"] = hooks
    notes = list(_statusline(out, statusline_command, statusline))
    if doc.get(_DISABLED) is True:
        notes.insert(0, f"{_DISABLED} is true: Copilot CLI runs no hooks, ctxd's included")
    return out, tuple(notes)


def _statusline(out: Json, command: str, replace: bool) -> tuple[str, ...]:
    """ctxd's statusLine where none is set (or `replace` asks); a user's own command is kept on
    screen, run by ctxd's client so that the daemon sees the payload too (`wrap_command`):
    the payload's `context_window` is the only live figure of a GitHub-hosted model."""
    current = out.get("statusLine")
    wanted = {"type": "command", "command": command}
    own = current.get("command") if isinstance(current, dict) else None
    foreign = unwrap_command(own)
    if current is None:
        out["statusLine"] = wanted
        return (
            "statusLine: none was set, so ctxd's line is now Copilot CLI's statusline "
            "(`ctxd uninstall copilot --statusline` removes it and keeps the hooks)",
        )
    if replace and (foreign is not None or not is_ctxd_command(own)):
        out["statusLine"] = {
            **wanted,
            "command": replacing_command(command, user_statusline(current)),
        }
        return (
            "statusLine replaced by ctxd's; `ctxd uninstall copilot` (or `--statusline`) puts "
            "it back exactly as it was",
        )
    if foreign is not None:  # ctxd already runs the user's line: refresh ctxd's part
        out["statusLine"] = {**current, "command": wrap_command(command, foreign)}
        return ()
    if is_ctxd_command(own):  # ctxd's line that replaced the user's keeps carrying it
        out["statusLine"] = {
            **current,
            **wanted,
            "command": replacing_command(command, user_statusline(current)),
        }
        return ()
    if isinstance(own, str) and own:
        out["statusLine"] = {**current, "command": wrap_command(command, own)}
        return (
            f"statusLine: your own `{own}` still draws the line, run by ctxd's client, which "
            "also hands its payload to ctxd (the live figure of a GitHub-hosted model); its "
            "output and exit code are unchanged, and `ctxd uninstall copilot` puts the command "
            "back as it was. To show ctxd's line instead: `ctxd install copilot --statusline`",
        )
    return (
        "statusLine left as is; ctxd's hooks work without it; to show ctxd's line instead, "
        "run `ctxd install copilot --statusline`",
    )


def _strip(hooks: dict[str, Any], event: str) -> None:
    entries = hooks.get(event)
    if not isinstance(entries, list) or not any(_ours(e) for e in entries):
        return
    kept = [e for e in entries if not _ours(e)]
    if kept:
        hooks[event] = kept
    else:
        del hooks[event]


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's hooks and without ctxd's own statusLine (a foreign one stays)."""
    out = copy.deepcopy(doc)
    hooks = _hooks(out)
    for event in list(hooks):
        _strip(hooks, event)
    if "hooks" in out and not hooks:
        del out["hooks"]
    current = out.get("statusLine")
    command = current.get("command") if isinstance(current, dict) else None
    if is_ctxd_command(command):  # the user's own line back, exactly, if ctxd's stood for one
        own = user_statusline(current)
        if own is not None:
            out["statusLine"] = copy.deepcopy(own)
        else:
            del out["statusLine"]
    return out, ()


def checks(doc: Json) -> list[Check]:
    """`ctxd doctor`: whether Copilot CLI will run the hooks at all, and whose statusline it
    shows."""
    found: list[Check] = []
    if doc.get(_DISABLED) is True:
        found.append(
            Check(
                "copilot hooks enabled",
                False,
                f"{_DISABLED} is true in the Copilot CLI settings",
                f'remove "{_DISABLED}" from the settings file',
            )
        )
    else:
        found.append(Check("copilot hooks enabled", True, f"{_DISABLED} is not set"))
    line = doc.get("statusLine")
    command = line.get("command") if isinstance(line, dict) else None
    foreign = unwrap_command(command)
    ours = is_ctxd_command(command)
    if foreign is not None:
        said = f"your own `{foreign}`, run by ctxd's client (ctxd sees its payload)"
    elif ours:
        said = "ctxd's line"
    else:
        said = f"your own: `{command}`" if command else "none set"
    found.append(
        Check(
            "copilot statusline",
            True,
            said,
            None if ours else "`ctxd install copilot` to have ctxd's client run it",
        )
    )
    return found
