"""The agents' own settings files, as the flat configuration their compaction rules read.

Each agent names the files it reads (`AgentSpec.settings_files`, lowest precedence first) and
how to read one (`AgentSpec.read_settings`); this cache reads them in the daemon, never in the
core. A file is looked at again (one stat) at most once per `interval`, and read again only when
its size, mtime or inode changed: hooks come many times a second, settings change rarely.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd import agents
from ctxd.core.session import SessionState

__all__ = ["AgentSettings"]

_NOTHING: Mapping[str, str] = MappingProxyType({})
#: Longer files are not settings files; they are not read.
MAX_SETTINGS_BYTES = 4 * 1024 * 1024

_Stamp = tuple[int, int, int]  # (inode, size, mtime_ns); (0, 0, 0) when absent


class AgentSettings:
    """Per session, its agent's settings files merged into one mapping (see `config`)."""

    def __init__(
        self,
        env: Mapping[str, str],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.env = dict(env)
        self.interval = interval
        self.clock = clock
        self._files: dict[Path, tuple[_Stamp, dict[str, str]]] = {}
        # (agent, hook config, cwd) -> (checked at, the files, merged config)
        self._merged: dict[
            tuple[str, tuple[tuple[str, str], ...], str | None],
            tuple[float, tuple[Path, ...], Mapping[str, str]],
        ] = {}

    def config(self, state: SessionState) -> Mapping[str, str]:
        """The configuration `state`'s agent reads from its settings files, later files over
        earlier ones; {} when it has none. The files are found with the daemon's environment
        under the variables the session's hook reported (CLAUDE_CONFIG_DIR, CODEX_HOME)."""
        pairs = state.agent_config
        if type(pairs) is not tuple:  # a session restored from a snapshot holds JSON lists
            pairs = tuple((str(k), str(v)) for k, v in pairs)
        key = (state.agent, pairs, state.cwd)
        now = self.clock()
        cached = self._merged.get(key)
        if cached is not None and now - cached[0] < self.interval:
            return cached[2]
        spec = agents.spec(state.agent)
        if cached is None:
            env = {**self.env, **dict(pairs)}
            try:
                paths = spec.settings_files(env, state.cwd)
            except ValueError:  # a path no file system holds (checked where it enters, too)
                paths = ()
        else:
            paths = cached[1]
        merged: dict[str, str] = {}
        for path in paths:
            merged.update(self._read(path, spec.read_settings))
        result = MappingProxyType(merged) if merged else _NOTHING
        if len(self._merged) > 1024:  # sessions come and go; a fresh start costs a few stats
            self._merged.clear()
        self._merged[key] = (now, paths, result)
        return result

    def _read(self, path: Path, read: Callable[[bytes], dict[str, str]]) -> dict[str, str]:
        try:
            info = os.stat(path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        except (OSError, ValueError):
            stamp = (0, 0, 0)
        known = self._files.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        values: dict[str, str] = {}
        if stamp != (0, 0, 0) and stamp[1] <= MAX_SETTINGS_BYTES:
            try:
                values = read(path.read_bytes())
            except OSError:
                values = {}
        self._files[path] = (stamp, values)
        return values
