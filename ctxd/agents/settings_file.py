"""Reading, rendering and safely rewriting an agent's JSON settings file.

Parsing and rendering are pure; `read_text` and `write_settings` are the only I/O. A file that does
not parse as a JSON object is refused, never "repaired": the user's settings are worth more than
ctxd's hooks. `//` and `/* */` comments are read (Gemini CLI accepts them in its settings.json),
but a rewrite cannot keep them: `comments` tells the caller, who says so (the backup keeps them).
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ctxd.errors import SettingsFileError
from ctxd.fileio import write_atomic
from ctxd.untrusted import MAX_SETTINGS_BYTES, RefusedFile, read_untrusted

__all__ = [
    "comments",
    "parse",
    "read_text",
    "render",
    "settings_reader",
    "strip_comments",
    "write_settings",
    "write_target",
]

NEW_FILE_MODE = 0o600
NEW_DIR_MODE = 0o700
DEFAULT_INDENT = 2


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist; `SettingsFileError` when unreadable,
    not a regular file (a FIFO would hang the reader) or larger than MAX_SETTINGS_BYTES."""
    try:
        return read_untrusted(path, MAX_SETTINGS_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except RefusedFile as exc:
        raise SettingsFileError(f"cannot read {path}: {exc.reason}") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"cannot read {path}: {exc}") from exc


def strip_comments(text: str) -> str:
    """`text` with its `//` and `/* */` comments (outside strings) blanked out: each comment
    character becomes a space, newlines stay, so that error positions still point into the file.
    """
    out: list[str] = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        char = text[i]
        if in_string:
            out.append(char)
            if char == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c == "\n" else " " for c in text[i:end]))
            i = end
            continue
        else:
            out.append(char)
        i += 1
    return "".join(out)


def comments(text: str | None) -> bool:
    """Whether `text` holds comments, which a rewrite drops."""
    return text is not None and strip_comments(text) != text


def parse(text: str | None, path: Path) -> dict[str, Any]:
    """The settings object in `text` (None or blank text: an empty object), comments allowed.

    Raises `SettingsFileError` for anything but one JSON object (a trailing comma included).
    """
    if text is None or not text.strip():
        return {}
    try:
        doc = json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise SettingsFileError(
            f"{path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "it was left untouched: fix it, or add ctxd's hooks by hand"
        ) from exc
    except (RecursionError, ValueError) as exc:
        # Nesting deeper than the parser's stack, or an integer of thousands of digits: a cloned
        # repository can hold either, and neither is a settings file an agent would use.
        raise SettingsFileError(
            f"{path} is not usable JSON ({_first_line(exc)}); it was left untouched"
        ) from exc
    if not isinstance(doc, dict):
        raise SettingsFileError(
            f"{path} holds a JSON {type(doc).__name__}, not an object; it was left untouched"
        )
    return doc


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def settings_reader(
    config: Callable[[Mapping[str, Any]], dict[str, str]],
) -> Callable[[bytes], dict[str, str]]:
    """A reader of an agent's JSON settings file for the daemon (`AgentSpec.read_settings`):
    bytes -> the keys `config` picks from the object. Comments are allowed (the agents accept
    them); a file that is not one JSON object gives nothing, as the agent would ignore it."""

    def read(data: bytes) -> dict[str, str]:
        try:
            return config(parse(data.decode("utf-8", "replace"), Path("settings.json")))
        except SettingsFileError:
            return {}

    return read


def _indent_of(text: str | None) -> int | str:
    """The indent the file already uses (spaces or a tab), so a rewrite keeps its look."""
    if not text:
        return DEFAULT_INDENT
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line):
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return DEFAULT_INDENT


def render(doc: dict[str, Any], like: str | None) -> str:
    """`doc` as JSON text, indented like `like` (the file's old text), ending in a newline."""
    text = json.dumps(doc, indent=_indent_of(like), ensure_ascii=False)
    if like is not None and like.strip() and not like.endswith("\n"):
        return text
    return text + "\n"


def write_target(path: Path) -> Path:
    """The file a write really replaces: a symlinked settings file (dotfile managers) keeps its
    link, and its target is rewritten instead."""
    return path.resolve() if path.is_symlink() else path


def write_settings(path: Path, text: str, expected: str | None) -> Path | None:
    """Replace `path` with `text` atomically, after a backup of the old file.

    `expected` is the content the change was planned against: if the file changed since (or
    appeared, or vanished), nothing is written and `SettingsFileError` is raised. Returns the
    backup's path, or None when there was no old file. The new file keeps the old one's mode
    (0600 for a new file).
    """
    target = write_target(path)
    current = read_text(target)
    if current != expected:
        raise SettingsFileError(f"{path} changed since the plan was made; nothing was written")
    directory = target.parent
    try:
        directory.mkdir(mode=NEW_DIR_MODE, parents=True, exist_ok=True)
        mode = stat.S_IMODE(target.stat().st_mode) if current is not None else NEW_FILE_MODE
        backup = _backup(target, mode) if current is not None else None
        write_atomic(target, text.encode(), mode)
    except OSError as exc:
        raise SettingsFileError(f"cannot write {path}: {exc}") from exc
    if backup is not None:
        prune_backups(target)
    return backup


#: Backups kept per settings file besides the first: the newest this many.
KEEP_BACKUPS = 5
BACKUP_INFIX = ".ctxd-backup-"


def prune_backups(target: Path, keep: int = KEEP_BACKUPS) -> list[Path]:
    """Remove `target`'s backups but the first (the file as it was before ctxd first changed
    it) and the newest `keep`; the paths removed. Only regular files named as ctxd names them
    are touched; a failure leaves that one backup (a backup too many is no reason to fail)."""
    found: list[tuple[int, str, Path]] = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(target.name + BACKUP_INFIX):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            found.append((info.st_mtime_ns, entry.name, Path(entry.path)))
    found.sort()
    removed = []
    for _, _, path in found[1 : max(1, len(found) - keep)]:
        try:
            path.unlink()
        except OSError:
            continue
        removed.append(path)
    return removed


def _backup(target: Path, mode: int) -> Path:
    """A copy of `target` next to it, named `<name>.ctxd-backup-<time>[-n]`; never overwrites."""
    data = read_untrusted(target, MAX_SETTINGS_BYTES)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        suffix = f"{BACKUP_INFIX}{stamp}" + (f"-{n}" if n else "")
        candidate = target.with_name(target.name + suffix)
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        return candidate
    raise SettingsFileError(f"too many backups of {target} this second")
