"""`ctxd install cline`: not done by this version of ctxd.

Cline CLI reads no hook list from a settings document: a hook is an executable file named by
its event in a hooks folder (`hooks.py`). ctxd's installer edits one settings document; writing
a hook file (`~/.cline/hooks/PostToolUse`, a shell script that runs ctxd's hook command, kept
apart from a user's own file of that name) needs an installer of files, which is not written
yet. Until then `install` says what to put there by hand, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ctxd.agents.cline.files import data_dir
from ctxd.agents.spec import InstallRequest, Json
from ctxd.errors import InvalidInput

__all__ = ["hook_script", "install", "settings_path", "uninstall"]


def settings_path(env: Mapping[str, str]) -> Path:
    """Cline's provider settings (what ctxd reads; it writes nothing there)."""
    return data_dir(env) / "settings" / "providers.json"


def hook_script(command: str) -> str:
    """The hook file that makes Cline run ctxd's hook command (its stdin passed on)."""
    return f"#!/bin/sh\nexec {command}\n"


def install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    raise InvalidInput(
        "ctxd install cline is not supported yet: save this as ~/.cline/hooks/PostToolUse"
        f" (executable): {hook_script(request.command(None))!r}"
    )


def uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return doc, ()
