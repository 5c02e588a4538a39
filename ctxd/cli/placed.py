"""The whole files `ctxd install` places for an agent (`PlacedFile`: Cline's hook executables):
plan what to write or remove, then do it.

A file is ctxd's when it holds `PLACED_MARK`. Install writes each file atomically with its mode
(an equal file is left alone), and refuses, before writing anything, when a file of that name is
the user's own: it is never overwritten. Uninstall removes only the files that are still ctxd's
and says which of the user's it left. A symlink, a FIFO or a huge file at the path is the user's.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.spec import PLACED_MARK, PlacedFile
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic
from ctxd.untrusted import RefusedFile, read_untrusted

__all__ = [
    "FileStep",
    "NotCtxds",
    "apply_files",
    "hook_interpreter",
    "plan_files",
    "read_placed",
]

#: A placed file larger than this is not one of ctxd's (they are a few lines).
PLACED_LIMIT = 64 * 1024

Action = Literal["write", "same", "remove", "absent", "foreign"]


@dataclass(frozen=True, slots=True)
class FileStep:
    """What install or uninstall does with one placed file."""

    file: PlacedFile
    action: Action

    def describe(self, dry_run: bool) -> str:
        path = self.file.path
        if self.action == "write":
            return f"{'would write' if dry_run else 'wrote'} {path} (mode {self.file.mode:o})"
        if self.action == "same":
            return f"{path} is ctxd's already: unchanged"
        if self.action == "remove":
            return f"{'would remove' if dry_run else 'removed'} {path}"
        if self.action == "foreign":
            return f"{path} is not ctxd's (it lacks {PLACED_MARK!r}): left alone"
        return f"{path} does not exist: nothing to remove"


class NotCtxds(Exception):
    """The file at a placed file's path is the user's (or unreadable): never touched."""


def read_placed(path: Path, earlier: Callable[[str], bool] = lambda text: False) -> str | None:
    """The text of the file at `path` if it is ctxd's (a regular file, not a symlink, holding
    `PLACED_MARK`, or a text `earlier` says ctxd once had users save); None when there is no
    file there. Raises `NotCtxds` for anything else
    (the user's, or unreadable)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotCtxds(f"cannot look at {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise NotCtxds(f"{path} is not a regular file")
    try:
        text = read_untrusted(path, PLACED_LIMIT).decode("utf-8", "replace")
    except (OSError, RefusedFile) as exc:
        raise NotCtxds(f"cannot read {path}: {exc}") from None
    if PLACED_MARK not in text and not earlier(text):
        raise NotCtxds(f"{path} is not ctxd's")
    return text


def _step(file: PlacedFile, verb: Literal["install", "uninstall"]) -> FileStep:
    try:
        text = read_placed(file.path, file.earlier)
    except NotCtxds:
        return FileStep(file, "foreign")
    if verb == "uninstall":
        return FileStep(file, "absent" if text is None else "remove")
    if text == file.text and stat.S_IMODE(os.lstat(file.path).st_mode) == file.mode:
        return FileStep(file, "same")
    return FileStep(file, "write")


def plan_files(
    files: tuple[PlacedFile, ...], verb: Literal["install", "uninstall"], install_hint: str
) -> tuple[FileStep, ...]:
    """What `verb` does with each of `files` (nothing written). Install raises `CtxdError`
    naming the first file of the user's in the way: the user's file is kept, and nothing is
    written until it is moved (`install_hint` says how ctxd's would then be placed)."""
    steps = tuple(_step(f, verb) for f in files)
    if verb == "install":
        for step in steps:
            if step.action == "foreign":
                raise CtxdError(
                    f"{step.file.path} is yours, not ctxd's: ctxd never overwrites it and "
                    f"wrote nothing; {install_hint}"
                )
    return steps


def apply_files(steps: tuple[FileStep, ...]) -> list[str]:
    """Do `steps`: write each file atomically with its mode (creating its directory, private),
    remove the ones planned for removal if they are still ctxd's. Returns what was done, one
    line each (nothing for a file already absent). Raises `CtxdError` when a file cannot be
    written or removed."""
    said: list[str] = []
    for step in steps:
        path = step.file.path
        try:
            if step.action == "write":
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                write_atomic(path, step.file.text.encode(), step.file.mode)
            elif step.action == "remove" and read_placed(path, step.file.earlier) is not None:
                path.unlink()  # still ctxd's: checked again just before
        except NotCtxds:
            said.append(f"{path} changed since: no longer ctxd's, left alone")
            continue
        except OSError as exc:
            raise CtxdError(f"cannot {step.action} {path}: {exc.strerror or exc}") from None
        if step.action != "absent":
            said.append(step.describe(False))
    return said


def hook_interpreter(text: str) -> str | None:
    """The interpreter that the ctxd hook command in a placed file's `text` names (its first
    word), or None when the file runs no ctxd command."""
    for line in text.splitlines():
        words = line.strip().removeprefix("exec ")
        try:
            parts = shlex.split(words)
        except ValueError:
            continue
        if parts and is_ctxd_command(shlex.join(parts)):
            return parts[0]
    return None
