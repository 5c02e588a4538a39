"""The session digest's two uses in the daemon: the handoff draft and the note after a compaction.

- At the handoff point (the core's Stop answer that asks for a handoff) the session's digest is
  rendered as a Markdown note and written to `$XDG_STATE_HOME/ctxd/handoffs/<session>.md` (a
  private directory, one atomic write); the answer then names the file: to the user
  ("message"), or to the agent ("block": review and complete this draft, not write one).
- After a compaction, the first answer to an event whose context the agent feeds to its model
  carries a compact form of the digest, once per compaction (`[continuity] inject`). A
  compaction is known from the hook (Claude Code's and Codex CLI's SessionStart with source
  "compact") or from the transcript (every agent: the digest counts compactions), whichever
  comes first.

Each session has its own digest (a subagent's too, from its own transcript; a session kept in
its agent's database, from its rows there): nothing here reads another session's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ctxd import agents
from ctxd.agents.digest import DigestSource
from ctxd.core.digest import Digest, render_compact, render_markdown
from ctxd.core.events import HookEvent, Reply
from ctxd.core.session import SessionState
from ctxd.core.settings import Settings
from ctxd.errors import UnsafeRuntimeDir
from ctxd.fileio import write_atomic
from ctxd.paths import ensure_private_dir, state_dir

__all__ = ["Continuity", "handoff_dir", "handoff_title"]

logger = logging.getLogger(__name__)


def handoff_dir(env: Mapping[str, str]) -> Path:
    """Where handoff drafts go: `$XDG_STATE_HOME/ctxd/handoffs`."""
    return state_dir(env) / "handoffs"


def handoff_title(state: SessionState) -> str:
    """The heading of a session's handoff note."""
    title = f"{agents.spec(state.agent).title} session {state.session_id}"
    if state.parent:
        title += " (a subagent)"
    return f"{title} in {state.cwd}" if state.cwd else title


class Continuity:
    """Per-session bookkeeping of what was injected; writes the handoff drafts."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.dir = handoff_dir(env)
        #: Session key -> the digest's compaction count when the note was last injected.
        self._injected: dict[str, int] = {}
        #: Session key -> the handoff draft written for it since start (for the status rows);
        #: forgotten with the session.
        self._drafts: dict[str, str] = {}

    def forget(self, key: str) -> None:
        self._injected.pop(key, None)
        self._drafts.pop(key, None)

    def draft_of(self, state: SessionState) -> str | None:
        """The path of the handoff draft written for this session: the one written since
        start, or, for a session whose handoff was asked before the daemon started, its draft
        if one is there (a stat in ctxd's own private folder)."""
        known = self._drafts.get(state.key)
        if known is not None or not state.policy.handoff_asked:
            return known
        path = self._draft_path(state)
        try:
            return str(path) if path.is_file() else None
        except OSError:
            return None

    def _draft_path(self, state: SessionState) -> Path:
        return self.dir / f"{state.session_id}.md"

    def amend(
        self,
        event: HookEvent,
        before: SessionState,
        after: SessionState,
        reply: Reply,
        reader: DigestSource | None,
        settings: Settings,
    ) -> Reply:
        """`reply` with the handoff draft's path and the note after a compaction, where due."""
        if reader is None:
            return reply
        c = settings.continuity
        # Asked, or asked again because the first ask never reached the agent (`on_stop`).
        again = before.policy.handoff_unconfirmed and not after.policy.handoff_unconfirmed
        asked = after.policy.handoff_asked and (not before.policy.handoff_asked or again)
        if asked and c.handoff_file and (reply.block_reason or reply.user_message):
            path = self._write_draft(after, reader.digest, c.handoff_tokens)
            if path is not None:
                self._drafts[after.key] = str(path)
                reply = _naming_draft(reply, path)
        # Every hook asks how many compactions there were; the digest is built only when used.
        compactions = reader.compactions
        injected = self._injected.setdefault(after.key, compactions)
        expected = after.expected_compactions > before.expected_compactions
        due = event.kind == "compaction" or compactions > injected or expected
        if due and c.inject and event.name in agents.spec(after.agent).dialect.context_events:
            self._injected[after.key] = max(compactions, injected + 1)
            note = render_compact(reader.digest, c.compact_tokens)
            if note:
                context = f"{note}\n{reply.context}" if reply.context else note
                reply = replace(reply, context=context)
        return reply

    def _write_draft(self, state: SessionState, digest: Digest, limit: int) -> Path | None:
        path = self._draft_path(state)
        text = render_markdown(digest, handoff_title(state), limit)
        try:
            ensure_private_dir(self.dir)
            write_atomic(path, text.encode("utf-8"))
        except (OSError, UnsafeRuntimeDir) as exc:  # the answer goes out without a draft
            logger.warning("cannot write the handoff draft %s: %s", path, exc)
            return None
        return path


def _naming_draft(reply: Reply, path: Path) -> Reply:
    if reply.block_reason:
        return replace(
            reply,
            block_reason=(
                f"{reply.block_reason} ctxd has drafted one from the transcript at {path}: "
                "please review and complete this draft (the reasons, decisions and next steps "
                "the transcript cannot hold) rather than writing one from scratch."
            ),
        )
    return replace(
        reply,
        user_message=f"{reply.user_message} ctxd drafted a handoff note from the transcript: "
        f"{path}",
    )
