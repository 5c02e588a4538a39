"""The daemon's state on disk, so that a restart neither repeats a handoff nor forgets a warning.

Written atomically (a temp file in the same directory, fsync, rename) and restored at start.
Readers' internal state is not serialised: a restored transcript is read again up to its saved
offset with the updates discarded (they are already folded into the saved session), and then
followed from there as usual.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import orjson

from ctxd.policy import PolicyState, Severity
from ctxd.registry import Registry
from ctxd.session import SessionState
from ctxd.tracker import TranscriptFile

logger = logging.getLogger(__name__)

FORMAT = 1
_SESSION_FIELDS = {f.name for f in fields(SessionState)}
_POLICY_FIELDS = {f.name for f in fields(PolicyState)}


def snapshot(registry: Registry) -> bytes:
    files = {
        path: {"offset": tracked.offset, "identity": tracked.identity}
        for path, tracked in registry.files.items()
    }
    doc = {
        "format": FORMAT,
        "sessions": [asdict(state) for state in registry.sessions.values()],
        "files": files,
        "learned": registry.learned,
    }
    return orjson.dumps(doc)


def save(registry: Registry, path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, snapshot(registry))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    registry.dirty = False


def _session(raw: dict[str, Any]) -> SessionState:
    policy_raw = {k: v for k, v in raw.get("policy", {}).items() if k in _POLICY_FIELDS}
    if "warned" in policy_raw:
        policy_raw["warned"] = Severity(policy_raw["warned"])
    if "recent" in policy_raw:
        policy_raw["recent"] = tuple(policy_raw["recent"])
    values = {k: v for k, v in raw.items() if k in _SESSION_FIELDS}
    values["policy"] = PolicyState(**policy_raw)
    return SessionState(**values)


def restore(registry: Registry, path: Path) -> int:
    """Load a snapshot into an empty registry; returns how many sessions came back."""
    try:
        doc = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return 0
    except (OSError, orjson.JSONDecodeError) as exc:
        logger.warning("ignoring unreadable snapshot %s: %s", path, exc)
        return 0
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        logger.warning("ignoring snapshot %s: unknown format", path)
        return 0
    registry.learned.update({str(k): int(v) for k, v in doc.get("learned", {}).items()})
    files = doc.get("files", {})
    restored = 0
    for raw in doc.get("sessions", []):
        try:
            state = _session(raw)
        except (TypeError, ValueError) as exc:
            logger.warning("skipping a snapshot session: %s", exc)
            continue
        registry._store(state)
        restored += 1
        saved = files.get(state.key)
        if saved and state.transcript_path:
            registry.files[state.key] = _reopen(state, saved)
    registry.dirty = False
    return restored


def _reopen(state: SessionState, saved: dict[str, Any]) -> TranscriptFile:
    tracked = TranscriptFile(state.key, state.agent)
    identity = saved.get("identity")
    offset = int(saved.get("offset", 0))
    try:
        info = os.stat(state.key)
    except OSError:
        return tracked  # gone: the next catch-up ends the session
    if identity and (info.st_dev, info.st_ino) == tuple(identity) and info.st_size >= offset:
        # Rebuild the reader's own state (carry-over, turn ids) without re-applying old updates.
        tracked.read_appended(limit=offset)
    return tracked
