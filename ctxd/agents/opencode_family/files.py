"""OpenCode writes no transcript files: its sessions are in one database (`store`). Its data
directory is the root watched, for the changes to that database and its WAL. The one file of a
session there is is the JSON `opencode export` prints (`export`), told by its content."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxd.agents.opencode import export
from ctxd.agents.opencode.store import database_path

__all__ = [
    "has_layout",
    "is_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]


def transcript_root(env: Mapping[str, str]) -> Path:
    return database_path(env).parent


def is_transcript(path: str) -> bool:
    return False


def has_layout(path: str) -> bool:
    return False


def recognises(record: Mapping[str, Any]) -> bool:
    return export.recognises(record)


def recognises_prefix(prefix: bytes) -> bool:
    return export.recognises_prefix(prefix)


def session_id_from_path(path: str) -> str | None:
    return None
