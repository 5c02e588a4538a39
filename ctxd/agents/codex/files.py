"""Where Codex CLI writes its rollouts, and how to recognise one.

`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl` (default `~/.codex`); every line is
`{timestamp, ordinal, type, payload}`, the first a `session_meta`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.paths import home

__all__ = [
    "codex_home",
    "has_layout",
    "is_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]

_SESSION_ID = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")


def codex_home(env: Mapping[str, str]) -> Path:
    """`$CODEX_HOME`, else `~/.codex`."""
    base = env.get("CODEX_HOME")
    return Path(base) if base else home(env) / ".codex"


def transcript_root(env: Mapping[str, str]) -> Path:
    return codex_home(env) / "sessions"


def is_transcript(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("rollout-") and name.endswith(".jsonl")


def _is_date(year: str, month: str, day: str) -> bool:
    return len(year) == 4 and len(month) == 2 and len(day) == 2 and (year + month + day).isdigit()


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    return (
        len(parts) >= 5
        and parts[-5] == "sessions"
        and is_transcript(parts[-1])
        and _is_date(parts[-4], parts[-3], parts[-2])
    )


def recognises(record: Mapping[str, Any]) -> bool:
    return "payload" in record and "timestamp" in record and isinstance(record.get("type"), str)


def recognises_prefix(prefix: bytes) -> bool:
    return prefix.startswith(b'{"timestamp":') and b'"payload":' in prefix


def session_id_from_path(path: str) -> str | None:
    match = _SESSION_ID.search(os.path.basename(path))
    return match.group(1) if match else None
