"""The agents' own settings files, as the flat configuration their compaction rules read.

Each agent names the files it reads (`AgentSpec.settings_files`, lowest precedence first) and
how to read one (`AgentSpec.read_settings`); this cache reads them in the daemon, never in the
core. A file is looked at again (one stat) at most once per `interval`, and read again only when
its size, mtime or inode changed: hooks come many times a second, settings change rarely.

These files lie in folders others write to (a cloned repository, a shared folder): each is read
by `ctxd.untrusted.read_untrusted`, as a regular file only and at most MAX_SETTINGS_BYTES, so a
FIFO or a link to a device gives nothing instead of hanging or filling the daemon. The read is
done on the event loop: a bounded read of a regular file cannot wait indefinitely, and happens
only when the file changed. A file refused is named in `RefusedFiles` (status, doctor, one
WARNING) with its stamp, and not tried again until the stamp changes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd import agents
from ctxd.core.session import SessionState
from ctxd.daemon.refused import Refusal, RefusedFiles, is_absence, reason_of
from ctxd.untrusted import MAX_SETTINGS_BYTES, read_untrusted

__all__ = ["AgentSettings"]

_NOTHING: Mapping[str, str] = MappingProxyType({})

_Stamp = tuple[int, int, int]  # (inode, size, mtime_ns); (0, 0, 0) when absent
_Key = tuple[str, tuple[tuple[str, str], ...], str | None]  # (agent, hook config, cwd)


class AgentSettings:
    """Per session, its agent's settings files merged into one mapping (see `config`)."""

    def __init__(
        self,
        env: Mapping[str, str],
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        refused: RefusedFiles | None = None,
    ) -> None:
        self.env = dict(env)
        self.interval = interval
        self.clock = clock
        #: The files not read, and why (shared with the rest of the daemon for status).
        self.refused = RefusedFiles() if refused is None else refused
        self._files: dict[Path, tuple[_Stamp, dict[str, str]]] = {}
        # (agent, hook config, cwd) -> (checked at, the files, merged config)
        self._merged: dict[_Key, tuple[float, tuple[Path, ...], Mapping[str, str]]] = {}

    def config(self, state: SessionState) -> Mapping[str, str]:
        """The configuration `state`'s agent reads from its settings files, later files over
        earlier ones; {} when it has none. The files are found with the daemon's environment
        under the variables the session's hook reported (CLAUDE_CONFIG_DIR, CODEX_HOME)."""
        key = _key(state)
        pairs = key[1]
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
            merged.update(self._read(path, spec.read_settings, f"{spec.title} settings"))
        result = MappingProxyType(merged) if merged else _NOTHING
        if len(self._merged) > 1024:  # sessions come and go; a fresh start costs a few stats
            self._merged.clear()
        self._merged[key] = (now, paths, result)
        return result

    def refused_for(self, state: SessionState) -> list[Refusal]:
        """The settings files of `state`'s agent, as last listed for it, that were not read."""
        cached = self._merged.get(_key(state))
        found = (self.refused.get(str(path)) for path in cached[1]) if cached else ()
        return [refusal for refusal in found if refusal is not None]

    def _read(
        self, path: Path, read: Callable[[bytes], dict[str, str]], what: str
    ) -> dict[str, str]:
        failed: OSError | None = None
        kind = 0  # the file's type and mode: with the inode, what a refusal is remembered by
        try:
            info = os.stat(path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            kind = info.st_mode
        except ValueError:  # a path no file system holds
            stamp = (0, 0, 0)
        except OSError as exc:
            stamp = (0, 0, 0) if is_absence(exc) else (-1, exc.errno or 0, 0)
            failed = None if is_absence(exc) else exc
        known = self._files.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        values: dict[str, str] = {}
        if stamp[0] > 0:
            try:
                values = read(read_untrusted(path, MAX_SETTINGS_BYTES))
            except OSError as exc:
                failed = None if is_absence(exc) else exc
        if failed is not None:
            # Not by mtime: a FIFO written to over and over is still the one FIFO, said once.
            self.refused.note(str(path), (stamp[0], kind), reason_of(failed), what)
        else:
            self.refused.clear(str(path))
        if len(self._files) > 4096:  # cwds come from payloads: a flood of them must not grow it
            self._files.clear()
        self._files[path] = (stamp, values)
        return values


def _key(state: SessionState) -> _Key:
    pairs = state.agent_config
    if type(pairs) is not tuple:  # a session restored from a snapshot holds JSON lists
        pairs = tuple((str(k), str(v)) for k, v in pairs)
    return (state.agent, pairs, state.cwd)
