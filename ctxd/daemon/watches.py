"""The inotify watches: which the kernel holds for this process, how many a user may hold (both
read from Linux's /proc), and what of the folders under the agents' roots they cover.

watchfiles says nothing when the kernel refuses a watch (the watch limit reached): the watcher
opens and some folders are simply not watched. What the kernel really holds is listed per
inotify descriptor in /proc/self/fdinfo, one line per watch with the watched inode, so the
folders left out can be named (`measure`). Elsewhere than Linux (no /proc) nothing is known and
nothing is claimed. `watch_order` is the order to ask for watches in, live folders first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "INSTANCES_SYSCTL",
    "SYSCTL",
    "Folder",
    "WatchCoverage",
    "WatchLimit",
    "find_folders",
    "instances_command",
    "measure",
    "raise_command",
    "watch_limit",
    "watch_order",
    "watched_inodes",
]

#: The sysctl that sets how many inotify watches each user may hold.
SYSCTL = "fs.inotify.max_user_watches"
#: The one that sets how many inotify instances (watchers) each user may hold.
INSTANCES_SYSCTL = "fs.inotify.max_user_instances"
_SYSCTL_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
# A user namespace has its own limit besides the system's; the lower one is the one that bites.
_NAMESPACE_FILE = Path("/proc/sys/user/max_inotify_watches")

_INOTIFY = "anon_inode:inotify"
# What to suggest: the value distributions and IDEs commonly recommend, or twice what is needed.
SUGGESTED_WATCHES = 524_288
# Folders modified this recently (a transcript created or removed in them) are asked to be
# watched first, with those of the sessions followed: the default idle window.
RECENT_FOLDER = 6 * 3600.0


@dataclass(frozen=True, slots=True)
class WatchLimit:
    """The inotify watches a user may hold: the system's sysctl and, when it is lower, the user
    namespace's own limit (`value` is the one in force)."""

    value: int
    system: int | None
    namespace: int | None

    def describe(self) -> str:
        text = f"{SYSCTL} = {self.system:,}" if self.system is not None else f"limit {self.value:,}"
        if self.namespace is not None and self.namespace == self.value != self.system:
            text += f", this user namespace's user.max_inotify_watches = {self.namespace:,}"
        return text


def raise_command(limit: WatchLimit | None, folders: int) -> str:
    """The command that raises the cap enough for `folders` (other programs share it)."""
    value = max(SUGGESTED_WATCHES, 2 * folders, 2 * limit.value if limit is not None else 0)
    return (
        f"sudo sysctl -w {SYSCTL}={value} (and put `{SYSCTL} = {value}` in "
        "/etc/sysctl.d/90-inotify.conf to keep it)"
    )


def instances_command() -> str:
    """The command that raises the inotify instances a user may hold (a watcher is one)."""
    return f"sudo sysctl -w {INSTANCES_SYSCTL}=1024"


def watch_limit() -> WatchLimit | None:
    """The inotify watch limit in force for this process; None where it cannot be read."""
    system = _read_int(_SYSCTL_FILE)
    namespace = _read_int(_NAMESPACE_FILE)
    known = [value for value in (system, namespace) if value is not None]
    return WatchLimit(min(known), system, namespace) if known else None


def watched_inodes() -> set[tuple[int, int]] | None:
    """(st_dev, st_ino) of everything this process's inotify descriptors watch; None where
    /proc does not say (not Linux)."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    found: set[tuple[int, int]] = set()
    for fd in fds:
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != _INOTIFY:
                continue
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii", errors="replace") as info:
                lines = info.readlines()
        except OSError:  # closed meanwhile (listdir's own descriptor, another thread's)
            continue
        for line in lines:
            if line.startswith("inotify "):
                watched = _parse_watch(line)
                if watched is not None:
                    found.add(watched)
    return found


def _parse_watch(line: str) -> tuple[int, int] | None:
    # "inotify wd:66 ino:20ce6c sdev:fe00000 mask:3ee ..." (hex). sdev is the kernel's own
    # encoding of the device (major << 20 | minor), not the one stat() returns.
    fields = dict(part.split(":", 1) for part in line.split()[1:] if ":" in part)
    try:
        ino = int(fields["ino"], 16)
        sdev = int(fields["sdev"], 16)
    except (KeyError, ValueError):
        return None
    return os.makedev(sdev >> 20, sdev & 0xFFFFF), ino


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Folder:
    """A folder under the roots as the walk found it: its identity and modification time."""

    dev: int
    ino: int
    mtime_ns: int


def find_folders(roots: Iterable[Path]) -> dict[str, Folder]:
    """Every folder under `roots` (the roots included, symbolic links not followed)."""
    found: dict[str, Folder] = {}
    stack = [str(root) for root in roots]
    while stack:
        path = stack.pop()
        try:
            info = os.stat(path, follow_symlinks=False)
            entries = list(os.scandir(path))
        except OSError:
            continue
        found[path] = Folder(info.st_dev, info.st_ino, info.st_mtime_ns)
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
            except OSError:
                continue
    return found


@dataclass(frozen=True, slots=True)
class WatchCoverage:
    """How much of the roots a watcher covers: the folders under them, how many the kernel
    really watches, and the others (newest first), which must be polled.

    `measured` is false where the kernel does not say (no /proc): nothing is claimed then.
    """

    folders: int = 0
    watched: int = 0
    unwatched: tuple[str, ...] = ()
    limit: WatchLimit | None = None
    measured: bool = False
    #: Every folder seen under the roots, watched or not (a poll tells a new one by it).
    known: frozenset[str] = frozenset()
    #: Why no watcher could be opened at all (then every folder is unwatched).
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "folders": self.folders,
            "watched": self.watched,
            "unwatched": len(self.unwatched),
            "measured": self.measured,
            "limit": None if self.limit is None else self.limit.value,
            "limit_sysctl": SYSCTL,
            "limit_text": None if self.limit is None else self.limit.describe(),
            "error": self.error,
        }


def measure(folders: Mapping[str, Folder]) -> WatchCoverage:
    """What the kernel watches of `folders`, by inode (the watches of this process)."""
    held = watched_inodes()
    limit = watch_limit()
    if held is None:
        return WatchCoverage(len(folders), len(folders), (), limit, False, frozenset(folders))
    unwatched = [path for path, f in folders.items() if (f.dev, f.ino) not in held]
    unwatched.sort(key=lambda path: -folders[path].mtime_ns)
    return WatchCoverage(
        len(folders),
        len(folders) - len(unwatched),
        tuple(unwatched),
        limit,
        True,
        frozenset(folders),
    )


def watch_order(
    roots: Iterable[Path], folders: Mapping[str, Folder], live: Iterable[str], now: float
) -> list[str]:
    """The paths to give the recursive watcher, in the order the kernel is asked: the folders of
    live sessions, then those modified lately (newest first), then the roots. Each is watched
    with its subtree; one met again later costs no second watch, so when the cap is reached it
    is reached on history."""
    root_paths = [str(root) for root in roots]
    recent_ns = (now - RECENT_FOLDER) * 1e9
    first = [path for path in dict.fromkeys(live) if path in folders]
    lately = sorted(
        (path for path, f in folders.items() if f.mtime_ns >= recent_ns),
        key=lambda path: -folders[path].mtime_ns,
    )
    skip = set(root_paths)
    return [*dict.fromkeys(p for p in [*first, *lately] if p not in skip), *root_paths]
