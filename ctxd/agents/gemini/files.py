"""Where Gemini CLI writes its chat recordings, and how to recognise one.

`~/.gemini/tmp/<project>/chats/session-<YYYY-MM-DDTHH-MM>-<id8>.jsonl`; line 1 is metadata
`{sessionId, projectHash, startTime, ...}`, later lines are messages or `$set`/`$rewindTo`.
Older versions write `session-*.json`: one object holding the metadata and the messages.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

from ctxd.agents.hooks import PLAIN_TOKEN
from ctxd.paths import home

__all__ = [
    "has_layout",
    "is_document",
    "is_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "transcript_root",
]


_SUFFIXES = (".jsonl", ".json")


def transcript_root(env: Mapping[str, str]) -> Path:
    return home(env) / ".gemini" / "tmp"


def is_transcript(path: str) -> bool:
    name = os.path.basename(path)
    return (
        name.startswith("session-")
        and name.endswith(_SUFFIXES)
        and f"{os.sep}chats{os.sep}" in path
    )


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    name = parts[-1] if parts else ""
    return (
        len(parts) >= 2
        and parts[-2] == "chats"
        and name.startswith("session-")
        and name.endswith(_SUFFIXES)
    )


def recognises(record: Mapping[str, Any]) -> bool:
    if "$set" in record or "$rewindTo" in record:
        return True
    if "projectHash" in record and "sessionId" in record:
        return True
    return (
        record.get("type") in ("user", "gemini", "info")
        and "id" in record
        and not any(key in record for key in ("sessionId", "uuid", "payload"))
    )


def is_document(head: bytes) -> bool:
    """Whether a recording's first bytes start one object spread over lines (the older format,
    which Gemini CLI writes indented) rather than JSON lines."""
    return head.lstrip().split(b"\n", 1)[0].strip() == b"{"


def recognises_prefix(prefix: bytes) -> bool:
    return prefix.startswith(b'{"sessionId":') and b'"projectHash":' in prefix


def session_id_from_path(path: str) -> str | None:
    name = os.path.basename(path)
    stem = name.removesuffix(".jsonl") if name.endswith(".jsonl") else name.removesuffix(".json")
    return stem if PLAIN_TOKEN.fullmatch(stem) else None
