"""The daemon's state on disk, so that a restart neither repeats a handoff nor forgets a warning.

Two files in the private state dir:

- the snapshot (`state.json`): every session, each transcript's read position, the windows
  learned, the transcripts of sessions that ended and were dropped (so that they stay ended).
  Written whole or not at all (`ctxd.fileio.write_atomic`) every few seconds while something
  changed, and at shutdown. While the daemon serves, a snapshot is taken on the event loop from
  each session's and position's bytes kept since the last (`Exporter`,
  `Transcripts.encoded_positions`: only what changed is encoded) and written in a worker thread.
- the journal (`state.journal`): one line per answer that depends on state that must not
  repeat (a warning given, a handoff asked), written before that answer leaves the daemon, so
  that a crash of the daemon at any moment loses nothing of that kind. The write is in the
  kernel's hands once `write` returns (the daemon dying, even by SIGKILL, does not lose it);
  `sync` (`fdatasync`, which costs milliseconds on a busy disk) then makes it survive a crash of
  the machine too, and the daemon runs it in a worker thread right after, so that answers do not
  wait for the disk. Each line holds the whole session, numbered; the snapshot records the last
  number it includes, so a restart applies only the lines written after it. Each snapshot
  written starts a new, empty journal; until one is, the old journal stays as it is. A snapshot
  written in a thread starts the new journal with the lines written meanwhile (`Journal.mark`),
  on disk before it replaces the old one.

A transcript's read position in the snapshot carries its reader's and digest's state
(`TranscriptFile.position`), so that a restart reads only what was appended meanwhile; a journal
line's position carries none (the answer must not wait for it): a session whose last word is in
the journal keeps the snapshot's state when its position is the same, else is read again.

Sessions are read back by their fields' declared types (`ctxd.daemon.typed`), nested states and
all, so a field added to a state comes back as it was saved without a line here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path
from typing import Any

import orjson

from ctxd import paths
from ctxd.core.session import SessionState
from ctxd.daemon.sessions import Sessions
from ctxd.daemon.transcripts import Transcripts
from ctxd.daemon.typed import from_plain
from ctxd.fileio import create_fresh, write_atomic

__all__ = ["FORMAT", "Exporter", "Journal", "restore", "save", "snapshot", "write"]

logger = logging.getLogger(__name__)

FORMAT = 1
#: A journal holds a few seconds of answers; one far bigger than this is not ours to trust.
MAX_JOURNAL = 64 * 1024 * 1024


class Exporter:
    """Each session's bytes, kept with the state they were encoded from (a frozen value,
    replaced on every change): a snapshot of 10,000 sessions of which a few changed encodes
    those few, not all of them."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[SessionState, bytes]] = {}
        #: Sessions encoded (not taken as kept) since start: what a test of the cache counts.
        self.encoded = 0

    def sessions(self, states: list[SessionState]) -> bytes:
        """`states` as a JSON array; the sessions no longer there are forgotten."""
        kept: dict[str, tuple[SessionState, bytes]] = {}
        parts = []
        for state in states:
            known = self._kept.get(state.key)
            if known is None or known[0] is not state:
                # orjson writes dataclasses (and enums) itself, as `asdict` would.
                # Copied to its own size: orjson's result holds a buffer of ~16 KB however short
                # the document (measured), so 20,000 kept sessions held 300 MB, not 14.
                known = (state, bytes(memoryview(orjson.dumps(state))))
                self.encoded += 1
            kept[state.key] = known
            parts.append(known[1])
        self._kept = kept
        return b"[" + b",".join(parts) + b"]"


def snapshot(
    sessions: Sessions,
    transcripts: Transcripts,
    journal_seq: int = 0,
    exporter: Exporter | None = None,
    dumps: int | None = None,
) -> bytes:
    """What a restart needs, as one document: the sessions, each transcript's read position,
    the windows learned. With an `exporter` kept from one snapshot to the next, only what
    changed since the last is encoded again; `dumps`: see `Transcripts.encoded_positions`."""
    states, learned, proved = sessions.export()
    rest = {
        "stores": transcripts.store_positions(),
        "ended": transcripts.ended.export(),
        "learned": learned,
        "proved": proved,
    }
    # The same document as encoding it whole, assembled from each part's bytes.
    return b"".join(
        (
            b'{"format":',
            orjson.dumps(FORMAT),
            b',"journal":',
            orjson.dumps(journal_seq),
            b',"sessions":',
            (exporter or Exporter()).sessions(states),
            b',"files":',
            transcripts.encoded_positions(dumps),
            b",",
            orjson.dumps(rest)[1:],
        )
    )


def save(
    sessions: Sessions,
    transcripts: Transcripts,
    path: Path,
    journal_seq: int = 0,
    exporter: Exporter | None = None,
) -> None:
    """Write the daemon's state to `path`, in a directory checked private (OSError when it
    cannot be written whole, UnsafeRuntimeDir when the directory is not private)."""
    write(path, snapshot(sessions, transcripts, journal_seq, exporter))
    sessions.dirty = False


def write(path: Path, data: bytes) -> None:
    """Put a `snapshot` in place at `path` (any thread: it touches nothing but the file;
    errors as `save`'s)."""
    paths.ensure_private_dir(path.parent)
    write_atomic(path, data)


class Journal:
    """The append-only journal (see the module docstring). `seq` is the number of the last line
    written (or restored)."""

    def __init__(self, path: Path, seq: int = 0) -> None:
        self.path = path
        self.seq = seq
        self._fd: int | None = None
        self._size = 0
        #: The lines written since `mark`, while a snapshot taken then is being written.
        self._carried: list[bytes] | None = None

    def mark(self) -> int:
        """The number of the last line written, for a snapshot taken now and written while
        answers go on: the lines written from now on are the next journal's first
        (`start(carry=True)`), so that none is lost to it."""
        self._carried = []
        return self.seq

    def unmark(self) -> None:
        """The snapshot taken at `mark` was not written: this journal goes on as it is."""
        self._carried = None

    def append(self, state: SessionState, position: dict[str, Any] | None) -> None:
        """Write one session's line (see `sync` for the disk); OSError when it cannot be written
        whole (nothing of it is left behind then) or no journal was started."""
        if self._fd is None:
            raise OSError("no journal started (no snapshot could be written yet)")
        seq = self.seq + 1
        line = orjson.dumps({"seq": seq, "session": state, "file": position}) + b"\n"
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            # A partial line would glue itself to the next one: cut it off.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += len(line)
        self.seq = seq
        if self._carried is not None:
            self._carried.append(line)

    def sync_handle(self) -> int | None:
        """A descriptor of the current journal for `sync` (the caller closes it), or None: a
        copy, so that a new journal started meanwhile cannot close it under a worker thread."""
        return None if self._fd is None else os.dup(self._fd)

    @staticmethod
    def sync(handle: int) -> None:
        """Flush what was written through `handle` to disk, and close it (any thread)."""
        try:
            os.fdatasync(handle)
        finally:
            os.close(handle)

    def start(self, carry: bool = False) -> None:
        """Begin a new, empty journal; only right after a snapshot that holds everything the
        old one did, or, with `carry`, everything up to its `mark`: the lines written since
        then begin the new one (on disk before it replaces the old one)."""
        paths.ensure_private_dir(self.path.parent)
        first = b"".join(self._carried or ()) if carry else b""
        fd = create_fresh(self.path, first=first)
        self.close()
        self._fd, self._size = fd, len(first)
        self._carried = None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _read_private(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file of ours (None when there is none); OSError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise OSError(f"{path} is not a regular file of this user's")
        if info.st_size > limit:
            raise OSError(f"{path} is {info.st_size:,} bytes, over the limit of {limit:,}")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _journal_lines(data: bytes, after: int) -> list[dict[str, Any]]:
    """The journal's whole lines numbered after `after`, in order. A torn last line (a crash in
    the middle of a write, which was then never flushed, so never answered on) is skipped."""
    entries = []
    for line in data.split(b"\n"):
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict) and _is_seq(entry.get("seq")) and entry["seq"] > after:
            entries.append(entry)
    return entries


#: Past any count of answers, and far enough below 2**64 that the next numbers can be written
#: (orjson writes 64-bit integers: a line numbered past it failed every journalled answer).
_MAX_SEQ = 1 << 62


def _is_seq(value: object) -> bool:
    return type(value) is int and 0 <= value <= _MAX_SEQ


def _same_position(earlier: object, later: dict[str, Any]) -> bool:
    """Whether a journal line's read position is the snapshot's (which holds a reader state)."""
    if not isinstance(earlier, dict):
        return False
    return all(earlier.get(k) == later.get(k) for k in ("offset", "identity", "tail"))


def restore(
    sessions: Sessions, transcripts: Transcripts, path: Path, journal: Journal | None = None
) -> int:
    """Load the snapshot at `path` and then the journal's later lines into empty rooms;
    returns how many sessions came back. `journal.seq` is set to the last number seen, so that
    new lines continue the count."""
    doc: Any = {}
    try:
        data = _read_private(path, 1 << 30)
        doc = {} if data is None else orjson.loads(data)
    except OSError as exc:
        logger.warning("ignoring unreadable snapshot %s: %s", path, exc)
    except orjson.JSONDecodeError as exc:  # damaged: kept for whoever looks into why
        logger.warning("ignoring unreadable snapshot %s: %s%s", path, exc, _kept_aside(path))
    if not isinstance(doc, dict) or doc.get("format", FORMAT) != FORMAT:
        logger.warning("ignoring snapshot %s: unknown format%s", path, _kept_aside(path))
        doc = {}
    seq = doc.get("journal", 0) if _is_seq(doc.get("journal")) else 0
    saved: dict[str, SessionState] = {}
    files: dict[str, dict[str, Any]] = {
        k: v for k, v in _section(doc, "files", dict).items() if isinstance(v, dict)
    }
    rows = _section(doc, "sessions", list)
    raws: list[tuple[Any, Any]] = [(raw, None) for raw in rows]
    if journal is not None:
        try:
            data = _read_private(journal.path, MAX_JOURNAL)
        except OSError as exc:
            logger.warning("ignoring unreadable journal %s: %s", journal.path, exc)
            data = None
        entries = _journal_lines(data or b"", seq)
        raws += [(entry.get("session"), entry) for entry in entries]
        journal.seq = max([seq] + [entry["seq"] for entry in entries])
        if entries:
            logger.info("%d answers restored from the journal", len(entries))
    for raw, entry in raws:
        try:
            state = from_plain(SessionState, raw)
        except (TypeError, ValueError) as exc:
            logger.warning("skipping a saved session: %s", exc)
            continue
        saved[state.key] = state  # a journal line is newer than the snapshot's row
        if entry is not None:
            earlier = files.pop(state.key, None)
            later = entry.get("file")
            if isinstance(later, dict):
                files[state.key] = (
                    earlier if earlier is not None and _same_position(earlier, later) else later
                )
    learned = _windows(_section(doc, "learned", dict))
    proved = _windows(_section(doc, "proved", dict))
    sessions.restore(list(saved.values()), learned, proved)
    transcripts.resume(files)
    ended = doc.get("ended")
    transcripts.ended.restore(ended if isinstance(ended, dict) else {})
    stores = doc.get("stores")
    transcripts.resume_stores(stores if isinstance(stores, dict) else {})
    # The next snapshot takes the journal's lines in; a plain restore changed nothing.
    sessions.dirty = journal is not None and len(raws) > len(rows)
    return len(saved)


def _kept_aside(path: Path) -> str:
    """Move a snapshot this version cannot read (a newer ctxd's, before a downgrade; a damaged
    one) out of the way of the next save, which would write over it; what the warning adds."""
    aside = path.with_name(path.name + ".unknown")
    try:
        os.replace(path, aside)
    except OSError as exc:
        return f" (not kept aside: {exc.strerror or exc})"
    return f"; kept as {aside}"


def _section(doc: dict[str, Any], key: str, kind: type[Any]) -> Any:
    """The snapshot's `key`, when it is of the `kind` (dict or list) ctxd writes; else an empty
    one, said: a snapshot damaged on disk must cost what it holds, never the daemon's start
    (each restart would meet it again)."""
    value = doc.get(key)
    if isinstance(value, kind):
        return value
    if value is not None:
        logger.warning("ignoring the snapshot's %r: not a JSON %s", key, kind.__name__)
    return kind()


#: What the snapshot's writer (orjson, 64-bit integers) can write back.
_MAX_INT = (1 << 63) - 1


def _windows(raw: dict[str, Any]) -> dict[str, int]:
    """The model -> tokens figures that are whole numbers the next snapshot can write (one it
    cannot would fail every save after)."""
    return {str(k): v for k, v in raw.items() if type(v) is int and 0 <= v <= _MAX_INT}
