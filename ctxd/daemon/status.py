"""What `ctxd status`, `GET /metrics` and the dashboard show: built in one place.

`Status.document` gives every session's row (its figures judged as a hook would judge them now)
with the daemon's counters; `DaemonStatistics` is the daemon's own side, one frozen value
(`statistics()` in trio's habit). One session's row that cannot be computed says so in that row
and never takes the others down.

A row is built again only when what it is built from changed: the session's state (a frozen
value, replaced on every change), ctxd's settings, or the windows learned or proved; what changes
without them (its age, its backlog, the files refused) is filled in every time. The agents'
settings files can change under an unchanged session too, so a kept row is also rebuilt once it
is ROW_REFRESH seconds old, at most REFRESH_PER_DOCUMENT of those per document (those built
longest ago first): the dashboard polls twice a second, and 10,000 rows built each time held the
event loop for most of a second.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import asdict, dataclass
from typing import Any

import anyio.lowlevel
import anyio.to_thread
import orjson

from ctxd.core import session as core
from ctxd.core.endings import ended_words
from ctxd.core.policy import level_lines
from ctxd.core.session import SessionState
from ctxd.core.settings import Settings
from ctxd.daemon.answers import Answers
from ctxd.daemon.refused import RefusedFiles
from ctxd.daemon.sessions import Sessions
from ctxd.daemon.transcripts import Transcripts

__all__ = ["REFRESH_PER_DOCUMENT", "ROW_REFRESH", "SCHEMA", "DaemonStatistics", "Status"]

logger = logging.getLogger(__name__)

#: Seconds an unchanged session's row is kept before it is built again (its agent's settings
#: files may have changed), and how many such rows one document builds again at most.
ROW_REFRESH = 10.0
REFRESH_PER_DOCUMENT = 200
#: The version of the document, its first key: what other tools build on
#: (ctxd/data/status.v1.schema.json describes it). Additive changes keep it; a field removed,
#: renamed or retyped takes a new one.
SCHEMA = "ctxd.status/v1"
_HEAD = b'{"schema":' + orjson.dumps(SCHEMA) + b',"sessions":['
#: Seconds of work after which `encoded_in_slices` gives the event loop back.
SLICE = 0.002


@dataclass(slots=True)
class _KeptRow:
    """A session's row as built from `state`, at `built_at` (the sessions' clock): its JSON
    without the closing brace, and without the fields that move with the clock (`_tail`)."""

    state: SessionState
    built_at: float
    head: bytes


@dataclass(frozen=True, slots=True)
class DaemonStatistics:
    """The daemon's own figures at one moment (the `daemon` part of a status document)."""

    version: str
    pid: int
    uptime_s: float
    socket: str
    config: str
    config_error: str | None
    sessions: int
    requests: int
    refused: int
    connections: int
    evicted: int
    accept_errors: int
    catching_up: int
    #: The folders under the agents' roots against those watched, the inotify limit, and the
    #: command that raises it when some are not watched (`Poller.statistics`).
    watching: dict[str, object] | None = None
    #: What came of `[http]` at start: enabled, the listener's URL, or why there is none
    #: (`http.HttpListening`).
    http: dict[str, object] | None = None
    #: The agents' session stores that cannot be read as theirs (`Transcripts.store_problems`):
    #: those sessions' figures are frozen until they can be.
    store_problems: tuple[dict[str, str], ...] = ()
    #: The agents' files ctxd did not read, and why (`RefusedFiles.as_json`).
    refused_files: tuple[dict[str, object], ...] = ()

    def as_json(self) -> dict[str, object]:
        return asdict(self)


class Status:
    """Rows of the sessions, as plain values; see the module docstring."""

    def __init__(
        self,
        sessions: Sessions,
        transcripts: Transcripts,
        answers: Answers,
        settings: Callable[[], Settings],
        config_error: Callable[[], str | None],
        refused: RefusedFiles | None = None,
    ) -> None:
        self.sessions = sessions
        self.transcripts = transcripts
        self.answers = answers
        self._settings = settings
        self._config_error = config_error
        self._kept: dict[str, _KeptRow] = {}  # by session key
        # The sessions whose row failed, and how: the traceback is logged once for each, not
        # on every status (the dashboard asks twice a second, and the log would grow with it).
        self._failed: dict[str, str] = {}
        self._kept_for: tuple[Settings, tuple[dict[str, int], dict[str, int]]] | None = None
        #: Rows built (not taken as kept) since start: what a test of the cache counts.
        self.rows_built = 0
        self._refused = RefusedFiles() if refused is None else refused

    def document(self, session: str | None = None) -> dict[str, Any]:
        """Every session's row, newest first (only `session`'s, by id or key, when given),
        the windows learned and the counters since start."""
        doc: dict[str, Any] = orjson.loads(self.encoded(session))
        return doc

    def encoded(self, session: str | None = None, daemon: dict[str, object] | None = None) -> bytes:
        """`document` as JSON bytes, with `daemon` (the daemon's statistics) last when given."""
        steps = self._assemble(session, daemon)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                return b"".join(done.value)

    async def encoded_in_slices(
        self, session: str | None = None, daemon: dict[str, object] | None = None
    ) -> bytes:
        """`encoded`, giving the event loop back every SLICE seconds: rows to build again
        (200 old ones, or all 10,000 after a change of settings) and 10,000 rows put together
        would otherwise hold every hook behind them. The document stands as of its start."""
        steps = self._assemble(session, daemon)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                parts: list[bytes] = done.value
                break
            await anyio.lowlevel.checkpoint()
        # Megabytes copied (and their pages faulted in) in a worker thread: `bytes.join` lets
        # go of the GIL for big joins, so the event loop runs meanwhile.
        return await anyio.to_thread.run_sync(b"".join, parts)

    def _assemble(
        self, session: str | None, daemon: dict[str, object] | None
    ) -> Generator[None, None, list[bytes]]:
        """The steps of `encoded`, up to the parts of the document (joined, they are it): each
        `yield` is a point where the event loop may take over (about every SLICE seconds); the
        states are frozen values taken at the start."""
        slices = _Slices()
        now = self.sessions.clock()
        self._forget_rows_built_on_other_grounds()
        states = sorted(self.sessions, key=lambda s: -s.updated_at)
        if session is not None:
            states = [s for s in states if session in (s.session_id, s.key)]
        kept_rows = yield from self._kept_rows(states, now, slices)
        if session is None and len(self._kept) > len(states):
            live = {state.key for state in states}
            self._kept = {key: kept for key, kept in self._kept.items() if key in live}
        rest: dict[str, object] = {
            "learned_windows": dict(self.sessions.learned),
            "proved_contexts": dict(self.sessions.proved),
            "config_error": self._config_error(),
            # The agents' files ctxd did not read (a FIFO, a device, too big), and why.
            "refused_files": self._refused.as_json(),
            "hooks_answered": self.answers.hooks_answered,
            "counters": _counters(self.answers.counts, self.sessions.compactions),
        }
        if daemon is not None:
            rest["daemon"] = daemon
        parts = [_HEAD]
        yield from self._row_parts(states, kept_rows, now, slices, parts)
        if len(parts) > 1:
            parts[-1] = parts[-1][:-1]  # the last row's comma
        # `rest` encoded is `{...}`: its opening brace gives way to the rows before it.
        parts.append(b"],")
        parts.append(_encode(rest)[1:])
        return parts

    def _kept_rows(
        self, states: list[SessionState], now: float, slices: _Slices
    ) -> Generator[None, None, list[_KeptRow]]:
        """Each state's row: kept, or built again when its state changed, or (a few) when it
        is old."""
        kept_rows: list[_KeptRow] = []
        stale = []
        for state in states:
            kept = self._kept.get(state.key)
            if kept is None or kept.state is not state:
                kept = self._build(state, now)
                yield from slices.pause()
            elif now - kept.built_at >= ROW_REFRESH:
                stale.append(len(kept_rows))
            kept_rows.append(kept)
            if len(kept_rows) % 256 == 0:
                yield from slices.pause()
        # The rows built longest ago first, so that every row's turn comes.
        stale.sort(key=lambda i: kept_rows[i].built_at)
        for i in stale[:REFRESH_PER_DOCUMENT]:
            kept_rows[i] = self._build(states[i], now)
            yield from slices.pause()
        return kept_rows

    def _row_parts(
        self,
        states: list[SessionState],
        kept_rows: list[_KeptRow],
        now: float,
        slices: _Slices,
        parts: list[bytes],
    ) -> Generator[None, None, None]:
        """Each row's kept bytes and what moves with the clock, appended to `parts`.

        Each kept row holds its bytes, so that an unchanged session costs its bytes copied and
        the few that move with the clock written after them, not its row encoded again."""
        catching_up = self.transcripts.catching_up
        refused = bool(len(self._refused))
        for n, (state, kept) in enumerate(zip(states, kept_rows, strict=True)):
            parts.append(kept.head)
            parts.append(
                _tail(
                    round(now - state.updated_at, 1),
                    catching_up(state.key),
                    self._refused_for(state) if refused else None,
                )
            )
            if n % 256 == 255:
                yield from slices.pause()

    def _forget_rows_built_on_other_grounds(self) -> None:
        """Drop every kept row when ctxd's settings, the windows learned or the contexts proved
        changed since."""
        settings = self._settings()
        windows = (dict(self.sessions.learned), dict(self.sessions.proved))
        kept_for = self._kept_for
        if kept_for is None or kept_for[0] is not settings or kept_for[1] != windows:
            self._kept.clear()
            self._kept_for = (settings, windows)

    def _build(self, state: SessionState, now: float) -> _KeptRow:
        self.rows_built += 1
        row = self._row_or_error(state, now)
        # The row's bytes without its closing brace: what moves with the clock comes after.
        kept = _KeptRow(state, now, _encode(row)[:-1])
        if "error" not in row:
            self._kept[state.key] = kept
        return kept

    def _row_or_error(self, state: SessionState, now: float) -> dict[str, Any]:
        """`row`, or, for a session whose row cannot be computed, what is known of it and why:
        one broken session never hides the others."""
        try:
            return self.row(state, now)
        except Exception as exc:
            if self._failed.get(state.key) != type(exc).__name__:
                if len(self._failed) > 4096:
                    self._failed.clear()
                self._failed[state.key] = type(exc).__name__
                logger.exception("status of session %s failed", state.key)
            # What needs no computing still shows: the counts are the session's own.
            return {
                "session_id": state.session_id,
                "agent": state.agent,
                "model": state.model,
                "compactions": state.compactions,
                "turns": state.turns,
                "transcript_path": state.transcript_path,
                "cwd": state.cwd,
                "parent": state.parent,
                "updated_at": state.updated_at,
                "ended_at": state.ended_at,
                "ended_reason": state.ended_reason,
                "ended_why": None if state.ended_at is None else ended_words(state.ended_reason),
                "error": f"cannot compute this session's figures: {type(exc).__name__}",
            }

    def row(self, state: SessionState, now: float) -> dict[str, Any]:
        """A session's figures, without what moves with the clock (`_tail` writes that)."""
        fig = core.figures(state, self.answers.grounds(state))
        fc = fig.forecast
        thresholds = self._settings().thresholds
        return {
            "session_id": state.session_id,
            "agent": state.agent,
            "model": state.model,
            "agent_version": state.agent_version,
            **core.figures_row(fig),
            "basis": thresholds.basis,
            # Where the levels start, in tokens, for the dashboard's lines.
            "levels": level_lines(thresholds, fig.window.size, fig.compaction_at),
            "compactions": state.compactions,
            "turns": state.turns,
            "forecast": None
            if fc is None
            else {
                "tokens_per_call": fc.tokens_per_call,
                "calls_to_next_threshold": fc.calls_to_next_threshold,
                "calls_to_compaction": fc.calls_to_compaction,
                "idle_compaction_at": fc.idle_compaction_at,
                "first_compaction": fc.first_compaction,
            },
            "warned": state.policy.warned.label,
            "handoff_asked": state.policy.handoff_asked,
            "handoff_draft": self.answers.continuity.draft_of(state),
            "transcript_path": state.transcript_path,
            "cwd": state.cwd,
            "parent": state.parent,
            "updated_at": state.updated_at,
            "usage_at": state.usage_at,
            "ended_at": state.ended_at,
            "ended_reason": state.ended_reason,
            "ended_why": None if state.ended_at is None else ended_words(state.ended_reason),
            "prompted_at": state.prompted_at,
        }

    def _refused_for(self, state: SessionState) -> list[dict[str, object]]:
        """The files of this session ctxd did not read: its agent's settings files and the
        transcript its hooks named."""
        if not len(self._refused):  # the usual case: nothing to look up, row after row
            return []
        found = self.answers.agent_settings.refused_for(state)
        found += self._refused.named_by(core.session_key(state.agent, state.session_id, None))
        return [refusal.as_json() for refusal in dict.fromkeys(found)]


class _Slices:
    """When the work of one document has held the event loop for SLICE seconds."""

    def __init__(self) -> None:
        self.due = time.perf_counter() + SLICE

    def pause(self) -> Generator[None, None, None]:
        """A point where the event loop may take over, when this slice is used up."""
        if time.perf_counter() > self.due:
            yield
            self.due = time.perf_counter() + SLICE


def _encode(value: object) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


_NO_REFUSALS = b',"refused_files":[]},'


def _tail(
    age: float, catching_up: dict[str, int] | None, refused: list[dict[str, object]] | None
) -> bytes:
    """The end of a row: what moves with the clock (its age, its backlog, the files refused),
    written the way orjson writes them, the row's closing brace and a comma (the last row's
    is cut off with `],` after it)."""
    return b"".join(
        (
            b',"age_s":',
            _encode(age),
            b',"catching_up":',
            b"null" if catching_up is None else _encode(catching_up),
            _NO_REFUSALS if not refused else b',"refused_files":' + _encode(refused) + b"},",
        )
    )


def _counters(
    counts: Counter[tuple[str, ...]], compactions: Counter[str]
) -> dict[str, list[list[object]]]:
    """The counters as plain values: {kind: [[label, ..., count], ...]}."""
    every = counts + Counter({("compactions", agent): n for agent, n in compactions.items()})
    out: dict[str, list[list[object]]] = {}
    for (kind, *labels), count in sorted(every.items()):
        out.setdefault(kind, []).append([*labels, count])
    return out
