"""`ctxd handoff [SESSION] [--json]`: a session's digest as a handoff note.

The session comes from the daemon's status (SESSION is the start of its id; without it, the
session heard from last), or from a transcript named with `--transcript`, daemon or not. Its
transcript is read once by the agent's reader with the digest's facts as its listener, as the
daemon reads it as the file grows, so the note is the one the daemon would draft at the handoff
point.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ctxd import agents
from ctxd.core.digest import Digest, as_json, render_markdown
from ctxd.errors import InvalidInput, TranscriptError

__all__ = ["digest_of", "handoff_document", "pick_session"]

_CHUNK = 1 << 20


def digest_of(agent: str, path: str) -> Digest:
    """The digest of the transcript at `path`, read whole by `agent`'s reader."""
    spec = agents.spec(agent)
    facts = spec.open_facts(path)
    if facts is None:
        raise InvalidInput(f"ctxd keeps no digest for this {spec.title} transcript")
    reader = spec.open_reader(path, facts, usage=False)  # the digest alone: no usage work
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        while data := os.read(fd, _CHUNK):
            reader.feed(data)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return facts.digest


def pick_session(doc: dict[str, Any], prefix: str | None) -> dict[str, Any]:
    """The status row of the session to hand off: the one whose id starts with `prefix` (a
    session's own row before its subagents'), else the session heard from last."""
    rows = [s for s in doc.get("sessions", []) if s.get("transcript_path")]
    if prefix:
        rows = [s for s in rows if str(s.get("session_id", "")).startswith(prefix)]
        ids = sorted({str(s["session_id"]) for s in rows})
        if not ids:
            raise InvalidInput(f"no tracked session id starts with {prefix!r} (see `ctxd status`)")
        if len(ids) > 1:
            raise InvalidInput(
                f"{prefix!r} is the start of {len(ids)} session ids: {', '.join(ids)}"
            )
    if not rows:
        raise InvalidInput("no tracked session with a transcript (see `ctxd status`)")
    main = [s for s in rows if not s.get("parent")] or rows
    return max(main, key=lambda s: float(s.get("updated_at") or 0))


def handoff_document(
    agent: str, session_id: str, path: str, cwd: str | None, limit: int
) -> dict[str, Any]:
    """What `ctxd handoff --json` prints: the session, its digest, and the note."""
    digest = digest_of(agent, path)
    title = f"{agents.spec(agent).title} session {session_id}"
    if cwd:
        title += f" in {cwd}"
    return {
        "agent": agent,
        "session_id": session_id,
        "transcript_path": path,
        "digest": as_json(digest),
        "markdown": render_markdown(digest, title, limit),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The document for the parsed command line."""
    if args.transcript:
        path = os.path.abspath(args.transcript)
        agent = args.agent or agents.detect_agent_from_path(path)
        if agent is None:
            with open(path, "rb") as f:
                agent = agents.detect_agent(f.read(256 * 1024))
        if agent is None:
            raise InvalidInput(f"{path}: not a transcript of a known agent (use --agent)")
        sid = agents.spec(agent).files.session_id_from_path(path) or os.path.basename(path)
        return handoff_document(agent, sid, path, None, args.tokens)
    from ctxd.cli.client import request_json

    row = pick_session(request_json("status"), args.session)
    return handoff_document(
        str(row["agent"]),
        str(row["session_id"]),
        str(row["transcript_path"]),
        row.get("cwd"),
        args.tokens,
    )
