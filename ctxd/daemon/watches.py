"""The inotify watches this process holds, and how many a user may hold: read from Linux's /proc.

watchfiles says nothing when the kernel refuses a watch (the watch limit reached): the watcher
opens and some folders are simply not watched. What the kernel really holds is listed per
inotify descriptor in /proc/self/fdinfo, one line per watch with the watched inode, so the
folders left out can be named. Elsewhere than Linux (no /proc) nothing is known and nothing is
claimed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SYSCTL", "WatchLimit", "raise_command", "watch_limit", "watched_inodes"]

#: The sysctl that sets how many inotify watches each user may hold.
SYSCTL = "fs.inotify.max_user_watches"
_SYSCTL_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
# A user namespace has its own limit besides the system's; the lower one is the one that bites.
_NAMESPACE_FILE = Path("/proc/sys/user/max_inotify_watches")

_INOTIFY = "anon_inode:inotify"
# What to suggest: the value distributions and IDEs commonly recommend, or twice what is needed.
SUGGESTED_WATCHES = 524_288


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
