"""The daemon's state on disk, so that a restart neither repeats a handoff nor forgets a warning.

Written whole or not at all (`ctxd.fileio.write_atomic`) and restored at start. Readers'
internal state is not serialised: `Registry.restore` re-reads each transcript up to its saved
offset instead.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import orjson

from ctxd.core.measure import Severity
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState
from ctxd.daemon.registry import Registry
from ctxd.fileio import write_atomic

__all__ = ["FORMAT", "restore", "save", "snapshot"]

logger = logging.getLogger(__name__)

FORMAT = 1
_SESSION_FIELDS = {f.name for f in fields(SessionState)}
_POLICY_FIELDS = {f.name for f in fields(PolicyState)}


def snapshot(registry: Registry) -> bytes:
    exported = registry.export()
    doc = {
        "format": FORMAT,
        "sessions": [asdict(state) for state in exported["sessions"]],
        "files": exported["files"],
        "learned": exported["learned"],
    }
    return orjson.dumps(doc)


def save(registry: Registry, path: Path) -> None:
    """Write the registry's state to `path` (OSError when it cannot be written whole)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(path, snapshot(registry))
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
    sessions = []
    for raw in doc.get("sessions", []):
        try:
            sessions.append(_session(raw))
        except (TypeError, ValueError) as exc:
            logger.warning("skipping a snapshot session: %s", exc)
    learned = {str(k): int(v) for k, v in doc.get("learned", {}).items()}
    registry.restore(sessions, doc.get("files", {}), learned)
    return len(sessions)
