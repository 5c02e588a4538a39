"""`ctxd install cline`, and what `ctxd doctor` checks of Cline's hooks.

Cline CLI reads no hook list from a settings document: a hook is an executable file named by
its event in a hooks folder (`hooks.py`), and every file there for one event runs (`PostToolUse`
and `PostToolUse.sh` both, their contexts joined). ctxd's installer edits one settings
document, so it cannot place that file yet: `install` changes nothing and says, in its notes,
the exact file to save (`hook_script`); `uninstall` has nothing of ctxd's in the document to
take out. `ctxd doctor` looks in the hooks folder beside Cline's data (`packaged`) for a
PostToolUse file that runs ctxd's hook command, and runs that file as Cline would.

Cline takes a file's name before its extension as the event, so ctxd's file is
`PostToolUse.bash` (an extension Cline runs, and one a user's own hook is unlikely to have): the
user's own `PostToolUse` or `PostToolUse.sh` keeps running beside it.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from ctxd.agents.cline.files import data_dir
from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.spec import InstallRequest, Json, Packaged
from ctxd.untrusted import RefusedFile, read_untrusted

__all__ = [
    "HOOK_FILE",
    "HOOK_FILES",
    "hook_script",
    "hooks_dir",
    "install",
    "ours_in",
    "packaged",
    "settings_path",
    "uninstall",
]

#: ctxd's hook files in Cline's hooks folder: the one whose answer reaches the model, and two
#: whose answers Cline does not read but whose events ctxd follows (a stop, the session's end).
HOOK_FILES = ("PostToolUse.bash", "TaskComplete.bash", "SessionShutdown.bash")
HOOK_FILE = HOOK_FILES[0]
_EVENTS = ("posttooluse",)
_EXTENSIONS = ("", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".py")
#: A hook file larger than this is not a wrapper of ctxd's.
_SCRIPT_LIMIT = 64 * 1024


def settings_path(env: Mapping[str, str]) -> Path:
    """Cline's provider settings (what ctxd reads; it writes nothing there)."""
    return data_dir(env) / "settings" / "providers.json"


def hooks_dir(settings: Path) -> Path:
    """The user's hooks folder, `~/.cline/hooks`, for the settings file at `settings`
    (`~/.cline/data/settings/providers.json`)."""
    return settings.parent.parent.parent / "hooks"


def hook_script(command: str) -> str:
    """The hook file that makes Cline run ctxd's hook command (its stdin passed on)."""
    return f"#!/bin/sh\nexec {command}\n"


def install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    folder = hooks_dir(request.path)
    script = hook_script(request.command(None))
    return doc, (
        "Cline CLI runs hook files, not hooks listed in its settings: ctxd writes none yet.",
        f"Save this as {', '.join(str(folder / n) for n in HOOK_FILES)} and make them"
        f" executable (chmod +x): {script!r}",
    )


def uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    folder = hooks_dir(request.path)
    return doc, (f"remove {', '.join(str(folder / n) for n in HOOK_FILES)} if you saved them",)


def _runs_ctxd(path: Path) -> bool:
    try:
        text = read_untrusted(path, _SCRIPT_LIMIT).decode("utf-8", "replace")
    except (OSError, RefusedFile):
        return False
    for line in text.splitlines():
        words = line.strip()
        if words.startswith("exec "):
            words = words[5:]
        try:
            parts = shlex.split(words)
        except ValueError:
            continue
        if parts and is_ctxd_command(shlex.join(parts)):
            return True
    return False


def ours_in(folder: Path) -> Path | None:
    """ctxd's PostToolUse hook file in `folder`, if one there runs ctxd's hook command."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return None
    for name in names:
        stem, ext = os.path.splitext(name)
        path = folder / name
        if stem.lower() in _EVENTS and ext in _EXTENSIONS and path.is_file() and _runs_ctxd(path):
            return path
    return None


def packaged(doc: Json, path: Path) -> Packaged | None:
    """`ctxd doctor`: ctxd's hook file, run as Cline runs it (the file itself)."""
    found = ours_in(hooks_dir(path))
    if found is None:
        return None
    return Packaged("hook file", str(found), shlex.quote(str(found)))
