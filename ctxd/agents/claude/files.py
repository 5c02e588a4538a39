"""Where Claude Code writes its transcripts, and how to recognise one.

`$CLAUDE_CONFIG_DIR/projects/<cwd slug>/<session id>.jsonl` (default `~/.claude`); a subagent
writes `<slug>/<session id>/subagents/agent-<id>.jsonl`. Every line carries `type` and
`sessionId`/`uuid`.
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
    "is_subagent_path",
    "is_transcript",
    "parent_transcript",
    "recognises",
    "recognises_prefix",
    "session_id_from_path",
    "subagent_transcript",
    "transcript_root",
]


def transcript_root(env: Mapping[str, str]) -> Path:
    base = env.get("CLAUDE_CONFIG_DIR")
    return (Path(base) if base else home(env) / ".claude") / "projects"


def is_transcript(path: str) -> bool:
    return path.endswith(".jsonl")


def has_layout(path: str) -> bool:
    parts = PurePath(path).parts
    if not parts or not parts[-1].endswith(".jsonl"):
        return False
    if len(parts) >= 3 and parts[-3] == "projects":
        return True
    return len(parts) >= 5 and parts[-2] == "subagents" and parts[-5] == "projects"


def is_subagent_path(path: str) -> bool:
    """A subagent's own transcript: `.../<session>/subagents/agent-<id>.jsonl` (2.1.x), or
    `agent-<id>.jsonl` beside its session's file (2.0.x). Session files are named by their
    session id, a UUID, so the `agent-` prefix tells them apart."""
    return os.path.basename(path).startswith("agent-")


def recognises(record: Mapping[str, Any]) -> bool:
    if "payload" in record or "projectHash" in record:
        return False
    return isinstance(record.get("type"), str) and any(
        key in record for key in ("sessionId", "uuid", "leafUuid", "messageId")
    )


def recognises_prefix(prefix: bytes) -> bool:
    # Key order as Claude Code writes it; only for a first line cut off by the head read.
    return prefix.startswith(b'{"parentUuid":') or (
        prefix.startswith(b'{"type":"') and b'"sessionId":' in prefix
    )


def session_id_from_path(path: str) -> str | None:
    stem = os.path.basename(path).removesuffix(".jsonl")
    return stem if PLAIN_TOKEN.fullmatch(stem) else None


def subagent_transcript(parent: str, agent_id: str) -> str | None:
    """`<project>/<session>/subagents/agent-<id>.jsonl`, if the id is plain and the file exists."""
    if not PLAIN_TOKEN.fullmatch(agent_id):
        return None
    base = parent.removesuffix(".jsonl")
    name = agent_id if agent_id.startswith("agent-") else f"agent-{agent_id}"
    path = os.path.join(base, "subagents", f"{name}.jsonl")
    return path if os.path.isfile(path) else None


def parent_transcript(path: str) -> str | None:
    """The parent transcript of a subagent transcript, else None."""
    parts = Path(path).parts
    if len(parts) >= 3 and parts[-2] == "subagents":
        return str(Path(*parts[:-2])) + ".jsonl"
    return None
