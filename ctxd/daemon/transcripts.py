"""The transcripts ctxd follows: discovery, catch-up under a time budget, the backlog, sweeps.

Each followed file is a `TranscriptFile` (its reader and the reader's facts listener); the usage
its appended bytes report is folded into its session (`Sessions`) through the core. It sees
agents only through the agent registry (`ctxd.agents`).

An agent that keeps all its sessions in one database (`AgentSpec.store`) has it followed here
too, by its reader's position instead of a byte offset: a change to the database or its WAL, a
hook of that agent and every sweep poll it for the rows written since, and each row's usage goes
to the session it names (keyed by agent and session id, as a session with no transcript is);
such a session's digest is the one its store's reader keeps as the rows arrive (`stored_digest`:
nothing is read inside a hook's answer but the rows written since the last poll). An update the
reader read again (its database replaced) is folded only when it is newer than what the session
knows, so that a compaction is never counted twice. A store that cannot be read as its agent's
(`StoreProblem`) is said once at WARNING and kept in `store_problems` until it reads again.

No call holds the event loop for long: every catch-up has a deadline (HOOK_BUDGET inside a hook,
STEP_BUDGET elsewhere), and what it leaves unread goes to the backlog, which `drain_backlog`
reads a step at a time in the background. A session whose transcript is in the backlog is
"catching up" (`catching_up`): figures from part of a file would be wrong, so its hooks are
recorded but not judged.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Callable, Container, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson

from ctxd import agents
from ctxd.agents.digest import DigestSource
from ctxd.agents.store import StoreProblem, StoreReader, StoreUpdate
from ctxd.core import session as core
from ctxd.core.digest import Digest, DigestBook
from ctxd.core.session import SessionState
from ctxd.core.settings import Settings
from ctxd.daemon import watcher
from ctxd.daemon.ended import EndedFiles
from ctxd.daemon.files import TranscriptFile
from ctxd.daemon.refused import RefusedFiles, is_absence, reason_of
from ctxd.daemon.sessions import Sessions
from ctxd.errors import InvalidInput
from ctxd.untrusted import RefusedFile, describe_mode

__all__ = ["HOOK_BUDGET", "QUIET_AFTER", "STEP_BUDGET", "Transcripts", "usable_transcript"]

logger = logging.getLogger(__name__)

# Seconds of transcript reading a hook may spend before answering (a first look at a big
# transcript would otherwise make the agent wait for all of it); the rest is read in the
# background.
HOOK_BUDGET = 0.02
# Seconds of reading per step of everything else (watcher batches, sweeps, scans, the backlog)
# before the event loop gets a turn: how long a hook may have to wait behind it.
STEP_BUDGET = 0.01
# A transcript with no new usage for this long is swept every few minutes only (see `sweep`).
QUIET_AFTER = 600.0


class Transcripts:
    """The followed transcript files, by session key (a transcript's key is its path)."""

    def __init__(
        self,
        sessions: Sessions,
        roots: Mapping[str, Path],
        settings: Callable[[], Settings],
        monotonic: Callable[[], float] = time.monotonic,
        stores: Mapping[str, Path] | None = None,
        refused: RefusedFiles | None = None,
    ) -> None:
        self.sessions = sessions
        #: The transcripts not read, and why (shared with the rest of the daemon for status).
        self.refused = RefusedFiles() if refused is None else refused
        self.roots = dict(roots)
        #: Database path -> (agent, its reader): the agents that keep sessions in a store.
        self._stores: dict[str, tuple[str, StoreReader]] = {
            str(path): (agent, _open_store(agent, str(path), None))
            for agent, path in (stores or {}).items()
        }
        self._settings = settings
        #: The clock deadlines are measured on (`until` arguments are of it).
        self.monotonic = monotonic
        self._files: dict[str, TranscriptFile] = {}
        #: Transcripts with bytes left to read, oldest first (`drain_backlog` reads them).
        self._backlog: dict[str, None] = {}
        #: Positions the last snapshot gave without their reader's state (`encoded_positions`).
        self.states_left_out = 0
        self._backlog_added: anyio.Event | None = None
        self._scans: list[Iterator[str]] = []  # discovery scans their deadline cut short
        self._skipped: dict[str, int] = {}  # per transcript: impossible records logged so far
        #: Database path -> why it cannot be read as its agent's (said once at WARNING).
        self._store_problems: dict[str, str] = {}
        #: The transcripts of sessions that ended and were dropped: followed again only once
        #: they grow, so that a session that ended stays ended through discovery passes.
        self.ended = EndedFiles()
        sessions.on_drop(self._forget)

    # ----------------------------------------------------------------- reading

    def __contains__(self, key: object) -> bool:
        return key in self._files

    def file(self, key: str) -> TranscriptFile | None:
        return self._files.get(key)

    def stored_digest(self, key: str) -> DigestSource | None:
        """The digest of session `key` when its agent keeps it in a session store (no
        transcript file): the one its reader kept as the rows arrived (nothing is read for
        it), its compactions those the store's rows reported. None for any other session."""
        state = self.sessions.get(key)
        if state is None or state.transcript_path is not None:
            return None
        for agent, reader in self._stores.values():
            if agent == state.agent:
                return _StoredDigest(reader.digest(state.session_id), state.compactions)
        return None

    def store_problems(self) -> list[dict[str, str]]:
        """The session stores that cannot be read as their agent's: agent, its title, the
        database's path, why."""
        return [
            {
                "agent": self._stores[path][0],
                "title": agents.spec(self._stores[path][0]).title,
                "path": path,
                "problem": problem,
            }
            for path, problem in self._store_problems.items()
            if path in self._stores
        ]

    def usable(self, path: str | None, agent: str, session_id: str) -> str | None:
        """A hook's transcript path, if it names a regular file to follow (or one followed
        already). One that names something else (a FIFO, a device, a directory) is not
        followed, and named (`refused`) for the session whose hook named it."""
        refusal = _refusal(path, self._files)
        if refusal is None:
            return path
        stamp, reason = refusal
        if reason and path is not None:
            who = core.session_key(agent, session_id, None)
            self.refused.note(path, stamp, reason, "transcript", who)
        return None

    def backlog_size(self) -> int:
        return len(self._backlog)

    def catching_up(self, key: str) -> dict[str, int] | None:
        """How far reading the transcript of session `key` stands while it is in the backlog
        (bytes read, file size); None when it is caught up."""
        tracked = self._files.get(key)
        if tracked is None or key not in self._backlog:
            return None
        return {"read": tracked.size - tracked.behind, "size": tracked.size}

    def deadline(self, budget: float = STEP_BUDGET) -> float:
        return self.monotonic() + budget

    # ----------------------------------------------------------------- following

    def track(
        self,
        path: str,
        agent: str,
        session_id: str | None = None,
        *,
        cwd: str | None = None,
        parent: str | None = None,
        until: float | None = None,
    ) -> SessionState:
        """The session behind transcript `path`, created (and read from the start, until the
        deadline `until` at most: see `catch_up`) if new."""
        existing = self.sessions.get(path)
        if existing is not None:
            if session_id and existing.session_id != session_id:
                return self.sessions.rename(path, session_id)
            return existing
        sid = session_id or agents.spec(agent).files.session_id_from_path(path) or "unknown"
        self.ended.forget(path)
        # A session found on disk was last heard from when its transcript last changed, not
        # now: history must not look current, nor be kept `idle_minutes` past the discovery.
        self.sessions.open(agent, sid, path, cwd=cwd, parent=parent, at=_modified_at(path))
        self._files[path] = TranscriptFile(path, agent)
        self.catch_up(path, until)
        return self.sessions[path]

    def catch_up(self, path: str, until: float | None = None) -> bool:
        """Fold the bytes appended to `path` since the last read into its session, reading
        until the deadline `until` (default STEP_BUDGET from now) at most. True when it is
        caught up; otherwise the rest is left to the backlog. A deadline that has already
        passed reads nothing and leaves it all to the backlog."""
        if path in self._stores:
            return self._poll_store(path, until)
        tracked = self._files.get(path)
        state = self.sessions.get(path)
        if tracked is None or state is None:
            self._backlog.pop(path, None)
            return True
        until = self._reading_until(path, until)
        if until is None:
            return False
        try:
            updates = tracked.read_appended(until, self.monotonic)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError):
                self.sessions.end(path, "transcript deleted")
            else:  # said once for this version of the file; the next change or sweep retries
                who = core.session_key(state.agent, state.session_id, None)
                self.refused.note(path, _stamp(path), reason_of(exc), "transcript", who)
            self._backlog.pop(path, None)  # nothing to read now; the next change or sweep retries
            return True
        self.refused.clear(path)
        if updates:
            now = self.sessions.clock()
            for update in updates:
                state = core.apply_usage(state, update, now)
            # Usage read from the disk is as recent as the file's last change (the transcript's
            # own clock), never newer than what the session heard last (a hook, on ours).
            heard = min(now, tracked.modified_at or now)
            state = replace(state, updated_at=max(heard, self.sessions[path].updated_at))
            self.sessions.store(state)
            self.sessions.learn(state)
        self._log_skipped(path, tracked)
        if tracked.behind and path in self._files:
            self._defer(path)
            return False
        self._backlog.pop(path, None)
        return True

    async def drain_backlog(self) -> None:
        """Read the backlog in the background, forever: steps of STEP_BUDGET, each transcript
        in turn (a huge one does not hold up the others), the event loop free between steps."""
        while True:
            if not self._backlog and not self._scans:
                self._backlog_added = anyio.Event()
                await self._backlog_added.wait()
                self._backlog_added = None
            until = self.deadline()
            if self._scans:
                self._scan(self._scans.pop(0), until)
            while self._backlog and self.monotonic() < until:
                path = next(iter(self._backlog))
                del self._backlog[path]  # `catch_up` puts it back at the end if not done
                try:
                    self.catch_up(path, until)
                except Exception:  # one bad transcript must not stop the reading of the others
                    logger.exception("reading %s failed; left until it changes again", path)
                    self._backlog.pop(path, None)
            await anyio.lowlevel.checkpoint()

    def on_file_changes(self, batch: list[tuple[str, bool]]) -> None:
        """A watcher batch: (path, deleted) pairs under the agents' roots."""
        until = self.deadline()
        for path, deleted in batch:
            store = self._store_changed(path)
            if store is not None:
                self.catch_up(store, until)
            elif path in self._files:
                if deleted and not os.path.exists(path):
                    self.sessions.end(path, "transcript deleted")
                else:
                    self.catch_up(path, until)
            elif not deleted and os.path.isdir(path):
                self.discover([Path(path)], until)
            elif not deleted and os.path.isfile(path):
                self._track_found(path, until)

    def discover(self, roots: list[Path], until: float | None = None) -> int:
        """Track transcripts under `roots` that are recent and not tracked yet; how many were
        found before the deadline (default STEP_BUDGET from now). What it leaves, unread bytes
        or the rest of the scan (a directory at a time), is carried on in the background."""
        since = self.sessions.clock() - self._settings().sessions.idle_seconds
        return self._scan(watcher.find_transcripts(roots, since), until or self.deadline())

    def sweep(self, everything: bool = True) -> None:
        """What events miss: appends and replacements of tracked files; idle and ended sessions.

        With `everything` false only transcripts heard from lately are checked: a quiet one
        costs a stat per sweep for nothing, and a thousand of them made most of an idle
        daemon's CPU.
        """
        now = self.sessions.clock()
        until = self.deadline()
        for store in self._stores:
            self.catch_up(store, until)
        for path in list(self._files):
            state = self.sessions.get(path)
            if state is None or state.ended_at is not None:
                continue
            last_heard = state.usage_at or state.updated_at  # the transcript's own clock first
            if everything or now - last_heard < QUIET_AFTER:
                self.catch_up(path, until)  # one stat when nothing changed
        kept = self._settings().sessions
        self.sessions.expire(kept.idle_seconds, kept.ended_keep_seconds)
        if everything:
            self.ended.prune(now - kept.idle_seconds)

    def catch_up_store(self, agent: str, until: float | None = None) -> None:
        """Poll the store of `agent`, if it keeps its sessions in one (before judging a hook)."""
        for path, (owner, _) in self._stores.items():
            if owner == agent:
                self.catch_up(path, until)

    # ----------------------------------------------------------------- snapshot

    def store_positions(self) -> dict[str, dict[str, Any]]:
        """Where reading each session store stands (`resume_stores` takes it back)."""
        return {path: reader.position() for path, (_, reader) in self._stores.items()}

    def resume_stores(self, positions: Mapping[str, Mapping[str, Any]]) -> None:
        """Read each store on from its saved position (its rows before are in the sessions)."""
        for path, (agent, _) in list(self._stores.items()):
            if path in positions:
                self._stores[path] = (agent, _open_store(agent, path, positions[path]))

    def position(self, key: str) -> dict[str, Any] | None:
        """Where reading the transcript of session `key` stands (None: it has none)."""
        tracked = self._files.get(key)
        return None if tracked is None else tracked.position()

    def positions(self) -> dict[str, dict[str, Any]]:
        """Where reading each transcript stands, with its reader's state where it can be kept
        (what the snapshot saves; `resume` takes it back)."""
        return {path: tracked.position(with_state=True) for path, tracked in self._files.items()}

    def encoded_positions(self, dumps: int | None = None) -> bytes:
        """`positions()` as a JSON object, each transcript's position encoded again only when
        it moved (`TranscriptFile.encoded_position`), and at most `dumps` of those (None: all)
        with their reader's state, which costs most: the others are given without it (a
        restart reads them again up to their offset) and counted in `states_left_out`, for a
        later snapshot to take in."""
        members = []
        self.states_left_out = 0
        for path, tracked in self._files.items():
            if not tracked.position_moved:
                position = tracked.encoded_position()
            elif dumps is None or dumps > 0:
                position = tracked.encoded_position()
                dumps = None if dumps is None else dumps - 1
            else:
                position = orjson.dumps(tracked.position())
                self.states_left_out += 1
            members.append(orjson.dumps(path) + b":" + position)
        return b"{" + b",".join(members) + b"}"

    def resume(self, files: Mapping[str, Mapping[str, Any]]) -> None:
        """Follow again the restored sessions' transcripts that are still the same file: each
        is read on from its saved offset with its reader's saved state, or, without one, read
        again up to that offset with its updates discarded (they are already folded into the
        saved session) to rebuild the reader; in the background (the backlog), its session
        catching up until then."""
        for state in self.sessions:
            saved = files.get(state.key)
            if state.transcript_path:
                # No position (lost with a damaged snapshot): `resume` takes the file as read.
                position = dict(saved) if isinstance(saved, Mapping) else None
                try:
                    tracked = TranscriptFile.resume(state.key, state.agent, position)
                except InvalidInput:  # an agent this version does not know (a newer's snapshot)
                    continue
                self._files[state.key] = tracked
                self._defer(state.key)

    # ----------------------------------------------------------------- internals

    def _store_changed(self, path: str) -> str | None:
        """The store whose database `path` is, or one of its companion files (the WAL)."""
        for store, (agent, _) in self._stores.items():
            spec = agents.spec(agent).store
            if spec is not None and any(path == store + end for end in spec.changed_by):
                return store
        return None

    def _poll_store(self, path: str, until: float | None) -> bool:
        agent, reader = self._stores[path]
        until = self._reading_until(path, until)
        if until is None:
            return False
        try:
            # Only the sessions that can be live, as `discover` for transcripts.
            since = self.sessions.clock() - self._settings().sessions.idle_seconds
            found = reader.read(until, self.monotonic, since)
        except OSError as exc:
            self._store_unread(path, agent, exc)
            self._backlog.pop(path, None)  # the next change or sweep retries
            return True
        if self._store_problems.pop(path, None) is not None:
            logger.info("%s can be read again", path)
        now = self.sessions.clock()
        for row in found:
            key = self.sessions.key_for(agent, row.session_id)
            if key is not None and row.replayed and _known(self.sessions[key], row):
                continue
            heard = _heard_at(row, now)
            if key is None:
                parent = None
                if row.parent_id is not None:
                    # A subagent's steps can be written before its parent's first one (the
                    # parent's step ends when its tool, the subagent, is done): the key the
                    # parent will have, then.
                    parent = self.sessions.key_for(agent, row.parent_id) or core.session_key(
                        agent, row.parent_id, None
                    )
                # Found in the store's history, it was last heard from when the store says it
                # was last active, not now (as a transcript found on disk, by its mtime).
                opened = self.sessions.open(
                    agent, row.session_id, None, cwd=row.cwd, parent=parent, at=heard
                )
                key = opened.key
            earlier = self.sessions[key]
            state = core.apply_usage(earlier, row.update, now)
            state = replace(state, updated_at=max(heard, earlier.updated_at))
            self.sessions.store(state)
            self.sessions.learn(state)
        if reader.behind:
            self._defer(path)
            return False
        self._backlog.pop(path, None)
        return True

    def _store_unread(self, path: str, agent: str, exc: OSError) -> None:
        """Say why the store at `path` could not be read, once for as long as it lasts."""
        what = f"{agents.spec(agent).title} database"
        if isinstance(exc, StoreProblem):  # not the agent's (a schema ctxd does not know)
            if self._store_problems.get(path) != str(exc):
                logger.warning(
                    "cannot read %s as %s, its figures are frozen until it can be: %s",
                    path,
                    what,
                    exc,
                )
                self._store_problems[path] = str(exc)
        elif isinstance(exc, RefusedFile):  # not a database at all: said once, in status too
            self.refused.note(path, _stamp(path), exc.reason, what)
        elif not isinstance(exc, FileNotFoundError):
            logger.debug("cannot read %s now: %s", path, exc)

    def _track_found(self, path: str, until: float | None = None) -> bool:
        agent = agents.transcript_owner(path, self.roots)
        if agent is None or self.ended.still_ended(path):
            return False
        self.track(path, agent, parent=agents.spec(agent).parent_transcript(path), until=until)
        return True

    def _scan(self, paths: Iterator[str], until: float) -> int:
        found = 0
        for path in paths:
            if path not in self._files and self._track_found(path, until):
                found += 1
            if self.monotonic() >= until:
                self._scans.append(paths)
                self._wake()
                break
        return found

    def _reading_until(self, path: str, until: float | None) -> float | None:
        """The deadline to read `path` by (STEP_BUDGET from now when none was given); None, with
        `path` left to the backlog, when the one given has passed already."""
        if until is None:
            return self.deadline()
        if self.monotonic() >= until:
            self._defer(path)
            return None
        return until

    def _defer(self, path: str) -> None:
        self._backlog[path] = None
        self._wake()

    def _wake(self) -> None:
        if self._backlog_added is not None:
            self._backlog_added.set()

    def _forget(self, key: str) -> None:
        for agent, reader in self._stores.values():
            if key.startswith(f"{agent}:"):
                reader.forget(key[len(agent) + 1 :])
        tracked = self._files.pop(key, None)
        if tracked is not None and tracked.identity is not None:
            self.ended.remember(key, tracked.identity, int(tracked.position()["offset"]))
        self._backlog.pop(key, None)
        self._skipped.pop(key, None)

    def _log_skipped(self, path: str, tracked: TranscriptFile) -> None:
        # Readers are pure: one that passes over impossible records (token counts above the
        # window) counts them in `skipped`, and the shell says so.
        skipped = getattr(tracked.reader, "skipped", 0)
        if not isinstance(skipped, int) or skipped == self._skipped.get(path, 0):
            return
        if skipped > self._skipped.get(path, 0):
            count = skipped - self._skipped.get(path, 0)
            logger.debug("%s: %d record(s) with impossible figures ignored", path, count)
        self._skipped[path] = skipped


def _open_store(agent: str, path: str, position: Mapping[str, Any] | None) -> StoreReader:
    store = agents.spec(agent).store
    assert store is not None
    return store.open(path, position)


def _modified_at(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def usable_transcript(path: str | None, known: Container[str] = ()) -> str | None:
    """A payload's transcript path, if it names a regular file we can read (or track already)."""
    return path if _refusal(path, known) is None else None


def _refusal(path: str | None, known: Container[str] = ()) -> tuple[object, str] | None:
    """None when `path` is a transcript path to follow (a regular file, or one tracked already);
    else the stamp of what is there and why it is not followed ("" when there is nothing to
    name: no path, not one of a transcript, no file)."""
    if not path or not os.path.isabs(path) or not path.endswith((".jsonl", ".json")):
        return (None, "")
    if path in known:
        return None
    try:
        info = os.stat(path)
    except (OSError, ValueError) as exc:
        if isinstance(exc, ValueError) or is_absence(exc):
            return (None, "")
        return ((-1, exc.errno), reason_of(exc))
    if stat.S_ISREG(info.st_mode):
        return None
    return (
        (info.st_dev, info.st_ino, info.st_mode),
        f"not a regular file ({describe_mode(info.st_mode)})",
    )


def _stamp(path: str) -> object:
    """What a refusal of `path` is remembered by: which file it is and its type and mode (not
    its mtime: a FIFO written to over and over is still the one FIFO, said once)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_mode)


def _heard_at(row: StoreUpdate, now: float) -> float:
    """When the session of `row` was last heard from, by the store's own clock (the row's time,
    the session's last activity), never later than `now`; `now` when the store gives neither."""
    times = [at for at in (row.update.at, row.active_at) if at is not None]
    return min(now, max(times)) if times else now


def _known(state: SessionState, row: StoreUpdate) -> bool:
    """Whether a row read again is one `state` has folded already: not newer than its last
    update, by the row's time, then its id (OpenCode's ids grow with time)."""
    update = row.update
    if state.usage_at is None or update.at is None:
        return False
    if update.at != state.usage_at:
        return update.at < state.usage_at
    return (update.turn_id or "") <= (state.last_turn_id or "")


class _StoredDigest:
    """A store session's digest as its reader kept it (an empty one when it kept none)."""

    def __init__(self, digest: Digest | None, compactions: int) -> None:
        self.compactions = compactions
        self.digest = DigestBook().digest if digest is None else digest
