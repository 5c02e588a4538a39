"""The daemon's centre: its four rooms built together, and the settings they judge with.

`Centre.open` wires the rooms — `Sessions` (the store), `Transcripts` (the files followed),
`Answers` (hooks in, bytes out) and `Status` (the rows) — over one wall clock, one clock for
deadlines and one environment. The lifecycle serves it; tests drive it in process, under clocks
they control. Nothing here does a job of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ctxd import agents
from ctxd.core.settings import Settings
from ctxd.daemon.answers import Answers
from ctxd.daemon.config import default_settings
from ctxd.daemon.refused import RefusedFiles
from ctxd.daemon.sessions import Sessions
from ctxd.daemon.status import Status
from ctxd.daemon.transcripts import Transcripts

__all__ = ["Centre", "SettingsInForce"]


class SettingsInForce:
    """ctxd's settings as last applied, and why the config file's last read was not."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or default_settings()
        self.error: str | None = None

    def __call__(self) -> Settings:
        return self.settings

    def apply(self, settings: Settings) -> None:
        self.settings, self.error = settings, None

    def refuse(self, error: str) -> None:
        """The config could not be applied: the last good settings stay in force."""
        self.error = error


@dataclass(frozen=True, slots=True)
class Centre:
    settings: SettingsInForce
    sessions: Sessions
    transcripts: Transcripts
    answers: Answers
    status: Status
    #: The agents' files ctxd did not read (each room that reads one notes it here).
    refused: RefusedFiles

    @classmethod
    def open(
        cls,
        env: Mapping[str, str],
        roots: Mapping[str, Path],
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        settings: Settings | None = None,
    ) -> Centre:
        """The rooms for the agents' transcript `roots`; `clock` gives the wall time sessions
        are stamped with, `monotonic` the time reading deadlines are measured on; `env` is the
        daemon's environment (where the agents' settings files and the handoff drafts are)."""
        in_force = SettingsInForce(settings)
        sessions = Sessions(clock)
        stores = agents.store_paths(env)
        refused = RefusedFiles(clock)  # the agents' files not read, named in status
        transcripts = Transcripts(sessions, roots, in_force, monotonic, stores, refused)
        answers = Answers(sessions, transcripts, in_force, env, refused)
        status = Status(sessions, transcripts, answers, in_force, lambda: in_force.error, refused)
        return cls(in_force, sessions, transcripts, answers, status, refused)
