"""`ctxd handoff [SESSION] [--json]`: a session's digest as a handoff note.

The session comes from the daemon's status (SESSION is the start of its id; without it, the
session heard from last), or from a transcript named with `--transcript`, daemon or not. Its
transcript is read once by the agent's reader with the digest's facts as its listener, as the
daemon reads it as the file grows, so the note is the one the daemon would draft at the handoff
point.

An agent that keeps its sessions in one database (OpenCode) has its session's digest read from
that database: the one `--transcript` names (the session by SESSION or `--session`, else its
latest main session), or, from the daemon's status, the agent's database in this environment.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ctxd import agents
from ctxd.core.digest import Digest, as_json, render_markdown
from ctxd.errors import InvalidInput, TranscriptError
from ctxd.untrusted import read_chunks, read_head, why

__all__ = ["digest_of", "handoff_document", "pick_session"]

_CHUNK = 1 << 20
#: How much of a transcript is looked at to tell whose it is.
_HEAD = 256 * 1024


def digest_of(agent: str, path: str, stored: str | None = None) -> Digest:
    """The digest of the transcript at `path`, read whole by `agent`'s reader; or, `stored`
    naming a session, of that session of the agent's database at `path`."""
    spec = agents.spec(agent)
    if stored is not None:
        if spec.store is None or spec.store.digest is None:
            raise InvalidInput(f"ctxd keeps no digest for {spec.title} sessions")
        try:
            return spec.store.digest(path, stored)
        except OSError as exc:
            raise TranscriptError(f"cannot read {path}: {why(exc)}") from None
    facts = spec.open_facts(path)
    if facts is None:
        raise InvalidInput(f"ctxd keeps no digest for this {spec.title} transcript")
    reader = spec.open_reader(path, facts, usage=False)  # the digest alone: no usage work
    try:
        for data in read_chunks(path, _CHUNK):
            reader.feed(data)
    except OSError as exc:
        raise TranscriptError(f"cannot read {path}: {why(exc)}") from None
    return facts.digest


def pick_session(doc: dict[str, Any], prefix: str | None) -> dict[str, Any]:
    """The status row of the session to hand off: the one whose id starts with `prefix` (a
    session's own row before its subagents'), else the session heard from last."""
    rows = [s for s in doc.get("sessions", []) if s.get("transcript_path") or _in_store(s)]
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


def _in_store(row: dict[str, Any]) -> bool:
    """A status row of a session kept in its agent's database (no transcript file)."""
    name = row.get("agent")
    return name in agents.AGENTS and agents.spec(str(name)).store is not None


def handoff_document(
    agent: str, session_id: str, path: str, cwd: str | None, limit: int, stored: bool = False
) -> dict[str, Any]:
    """What `ctxd handoff --json` prints: the session, its digest, and the note (`stored`:
    `path` is the agent's database that holds the session)."""
    digest = digest_of(agent, path, session_id if stored else None)
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


def _from_store(path: str, agent: str, args: argparse.Namespace) -> dict[str, Any]:
    from ctxd.cli.replay import stored_sessions

    prefix = args.session_option or args.session
    sessions = stored_sessions(path, agent, prefix)
    if not sessions:
        raise InvalidInput(f"{path}: no session in it has usage yet")
    # Without a prefix, the session heard from last, a main session before a subagent.
    main = [s for s in sessions if s.parent_id is None] or sessions
    chosen = max(main, key=lambda s: s.updated_at or 0.0) if prefix is None else sessions[0]
    return handoff_document(agent, chosen.session_id, path, chosen.cwd, args.tokens, stored=True)


def _is_transcript_of(agent: str | None, path: str) -> bool:
    """Whether the file at `path` begins as a transcript of `agent` (the one named, if any)
    does: then it is no agent's database, and the databases are not asked (which imports
    every agent's package, for a note about one agent's file)."""
    if agent is None:
        return False
    try:
        head = read_head(path, _HEAD)
    except OSError:
        return False  # said when it is read
    return agents.has_format(agent, head)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The document for the parsed command line."""
    if args.transcript:
        path = os.path.abspath(args.transcript)
        owner = None if _is_transcript_of(args.agent, path) else agents.store_owner(path)
        if owner is not None:
            if args.agent is not None and args.agent != owner:
                raise InvalidInput(f"{path} is a {agents.spec(owner).title} database")
            return _from_store(path, owner, args)
        agent = args.agent or agents.detect_agent_from_path(path)
        if agent is None:
            try:
                agent = agents.detect_agent(read_head(path, _HEAD))
            except OSError as exc:
                raise TranscriptError(f"cannot read {path}: {why(exc)}") from None
        if agent is None:
            raise InvalidInput(f"{path}: not a transcript of a known agent (use --agent)")
        sid = agents.spec(agent).files.session_id_from_path(path) or os.path.basename(path)
        return handoff_document(agent, sid, path, None, args.tokens)
    from ctxd.cli.client import request_json

    row = pick_session(request_json("status"), args.session_option or args.session)
    agent = str(row["agent"])
    store = agents.spec(agent).store
    if not row.get("transcript_path") and store is not None:
        # The daemon's sessions of this agent are in its database, here where this
        # environment puts it (as the daemon's, unless told otherwise).
        path = str(store.path(os.environ))
        return handoff_document(
            agent, str(row["session_id"]), path, row.get("cwd"), args.tokens, True
        )
    return handoff_document(
        agent,
        str(row["session_id"]),
        str(row["transcript_path"]),
        row.get("cwd"),
        args.tokens,
    )
