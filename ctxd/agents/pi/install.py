"""`ctxd install pi`: ctxd's extension listed in pi's settings.json, as pure transformations.

pi loads TypeScript extensions from `~/.pi/agent/extensions/`, and from the paths in
settings.json `extensions` (0.73.1, docs/settings.md). ctxd's extension (clients/pi/ctxd.ts)
is copied beside the hook client (`~/.local/share/ctxd/client/pi/ctxd.ts`, refreshed by every
ctxd run, so it survives a reinstall of ctxd); install adds that path to `extensions`,
uninstall takes out every path ending in ctxd's, and the user's own extensions stay untouched.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.hookcmd import client_dir
from ctxd.agents.pi.files import agent_dir
from ctxd.agents.spec import Check, Json
from ctxd.errors import SettingsFileError

__all__ = ["EXTENSION", "checks", "extension_path", "install", "settings_path", "uninstall"]

#: The extension's path under the client directory.
EXTENSION = "pi/ctxd.ts"
_KEY = "extensions"
_SUFFIX = "/ctxd/client/" + EXTENSION


def settings_path(env: Mapping[str, str]) -> Path:
    return agent_dir(env) / "settings.json"


def extension_path(env: Mapping[str, str] = os.environ) -> str:
    """Where `ctxd install` copies the extension, in this environment."""
    return str(client_dir(env) / EXTENSION)


def _is_ours(entry: object) -> bool:
    return isinstance(entry, str) and entry.endswith(_SUFFIX)


def _entries(doc: Mapping[str, Any]) -> list[Any]:
    value = doc.get(_KEY)
    if value is None:
        return []
    if not isinstance(value, list):
        raise SettingsFileError(f'"{_KEY}" is a {type(value).__name__}, not a list')
    return value


def install(doc: Json, extension: str) -> tuple[Json, tuple[str, ...]]:
    """`doc` with `extension` listed once in `extensions`, after the user's own entries."""
    entries = _entries(doc)
    wanted = [e for e in entries if not _is_ours(e) or e == extension]
    if extension not in wanted:
        wanted.append(extension)
    elif wanted.count(extension) > 1:
        first = wanted.index(extension)
        wanted = [e for i, e in enumerate(wanted) if e != extension or i == first]
    if wanted == entries and _KEY in doc:
        return doc, ()
    return {**doc, _KEY: wanted}, ()


def uninstall(doc: Json) -> tuple[Json, tuple[str, ...]]:
    """`doc` without ctxd's extension; an `extensions` list only ctxd's entries filled goes."""
    entries = _entries(doc)
    kept = [e for e in entries if not _is_ours(e)]
    if kept == entries:
        return doc, ()
    out = dict(doc)
    if kept:
        out[_KEY] = kept
    else:
        del out[_KEY]
    return out, ()


def checks(doc: Json) -> list[Check]:
    """`ctxd doctor`: ctxd's extension is listed, and the file it names is there."""
    try:
        ours = [e for e in _entries(doc) if _is_ours(e)]
    except SettingsFileError as exc:
        return [Check("pi extension", False, str(exc), "fix the settings file by hand")]
    if not ours:
        return [
            Check(
                "pi extension",
                False,
                f"ctxd's extension is not in {_KEY}",
                "`ctxd install pi` if you use pi",
                skipped=True,
            )
        ]
    missing = [e for e in ours if not Path(e).is_file()]
    if missing:
        return [
            Check(
                "pi extension",
                False,
                f"{', '.join(missing)} does not exist",
                "run `ctxd install pi` again",
            )
        ]
    return [Check("pi extension", True, f"{ours[0]} is listed in {_KEY}")]
