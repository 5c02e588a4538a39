"""Where pi writes its sessions, and how to recognise one.

`<PI_CODING_AGENT_DIR, else ~/.pi/agent>/sessions/--<cwd, "/" as "-">--/<time>_<session id>.jsonl`
(0.73.1, docs/session-format.md). Line 1 is the header `{"type": "session", "version": 3, "id",
"timestamp", "cwd"}`; every later line an entry `{"type", "id", "parentId", "timestamp", ...}`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.paths import home

__all__ = [
    "agent_dir",
    "has_layout",
    "is_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

#: `2026-12-01T22-31-40-204Z_01a233bc-2dab-745f-bff0-c44edd0e9fdd.jsonl`
_NAME = re.compile(r"\d{4}-\d\d-\d\dT[0-9-]{6,16}Z_([A-Za-z0-9-]{1,64})\.jsonl")


def agent_dir(env: Mapping[str, str]) -> Path:
    """`$PI_CODING_AGENT_DIR` when set (a leading `~` is the user's home), else `~/.pi/agent`."""
    value = env.get("PI_CODING_AGENT_DIR")
    if not value:
        return home(env) / ".pi" / "agent"
    if value == "~" or value.startswith("~/"):
        return home(env) / value[2:]
    return Path(value)


def transcript_root(env: Mapping[str, str]) -> Path:
    return agent_dir(env) / "sessions"


def is_transcript(path: str) -> bool:
    return has_layout(path)


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 2
        and len(parts[-2]) >= 4
        and parts[-2].startswith("--")
        and parts[-2].endswith("--")
        and _NAME.fullmatch(parts[-1]) is not None
    )


def recognises(record: Mapping[str, Any]) -> bool:
    # The header: no other agent's first record is {"type": "session", "id", "cwd"}. Sessions
    # of version 1 (linear, before entries had ids; pi still reads them) have no `version`.
    version = record.get("version", 1)
    return (
        record.get("type") == "session"
        and isinstance(version, int)
        and not isinstance(version, bool)
        and isinstance(record.get("id"), str)
        and "cwd" in record
    )


def recognises_prefix(prefix: bytes) -> bool:
    return prefix.startswith((b'{"type":"session","version":', b'{"type":"session","id":'))


def session_id_from_path(path: str) -> str | None:
    found = _NAME.fullmatch(os.path.basename(path))
    return found.group(1) if found else None
