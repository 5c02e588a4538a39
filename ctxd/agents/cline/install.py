"""`ctxd install cline`: ctxd's hook files in Cline's global hooks folder.

Cline CLI reads no hook list from a settings document: a hook is an executable file named by
its event in a hooks folder (`hooks.py`), and every file there for one event runs
(`PostToolUse` and `PostToolUse.sh` both, their contexts joined). 3.0.65 looks globally in
`~/Documents/Cline/Hooks` and in its own folder's `hooks` (`$CLINE_DIR`, default `~/.cline`:
not the data folder, which `$CLINE_DATA_DIR` and `--data-dir` move), then in the workspace's.
ctxd places its files in `~/.cline/hooks` (`hooks_dir`), which `ctxd uninstall cline` removes
again while they are still ctxd's (`ctxd.cli.placed`); providers.json is never written.

Cline takes a file's name before its extension as the event, so ctxd's files are
`PostToolUse.bash` and so on (an extension Cline runs, and one a user's own hook is unlikely to
have): the user's own `PostToolUse` or `PostToolUse.sh` keeps running beside it. A file saved by
hand as an earlier ctxd asked (`saved_by_hand`) counts as ctxd's: install replaces it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ctxd.agents.cline.files import data_dir, own_dir
from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.spec import PLACED_MARK, InstallRequest, Json, PlacedFile

__all__ = [
    "HOOK_FILES",
    "files",
    "hook_script",
    "hooks_dir",
    "install",
    "saved_by_hand",
    "settings_path",
    "uninstall",
]

#: ctxd's hook files in Cline's hooks folder: the one whose answer reaches the model, and two
#: whose answers Cline does not read but whose events ctxd follows (a stop, the session's end).
HOOK_FILES = ("PostToolUse.bash", "TaskComplete.bash", "SessionShutdown.bash")


def settings_path(env: Mapping[str, str]) -> Path:
    """Cline's provider settings (what ctxd reads; it writes nothing there)."""
    return data_dir(env) / "settings" / "providers.json"


def hooks_dir(env: Mapping[str, str]) -> Path:
    """The global hooks folder in Cline's own folder: `$CLINE_DIR/hooks`, default
    `~/.cline/hooks`."""
    return own_dir(env) / "hooks"


def hook_script(command: str) -> str:
    """The hook file that makes Cline run ctxd's hook command (its stdin passed on)."""
    return (
        "#!/bin/sh\n"
        f"# ctxd's hook for Cline CLI, {PLACED_MARK}; `ctxd uninstall cline` removes it.\n"
        f"exec {command}\n"
    )


def saved_by_hand(text: str) -> bool:
    """The file an earlier `ctxd install cline` asked the user to save (`#!/bin/sh`, then
    `exec` and ctxd's hook command), with any interpreter and client path."""
    lines = text.splitlines()
    return (
        len(lines) == 2
        and lines[0] == "#!/bin/sh"
        and lines[1].startswith("exec ")
        and is_ctxd_command(lines[1].removeprefix("exec "))
    )


def files(env: Mapping[str, str], command: Callable[[str | None], str]) -> tuple[PlacedFile, ...]:
    folder = hooks_dir(env)
    script = hook_script(command(None))  # the payload names the event
    return tuple(PlacedFile(folder / name, script, 0o755, saved_by_hand) for name in HOOK_FILES)


def install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return doc, ()


def uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return doc, ()
