"""The daemon's uses of the digest (`ctxd.daemon.continuity`): the handoff draft at the handoff
point, the note once per compaction, each session with its own digest; and `[continuity]`."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ctxd.agents import spec
from ctxd.agents.digest import Facts
from ctxd.agents.reader import TranscriptReader
from ctxd.core.events import HookEvent, Reply
from ctxd.core.policy import PolicyState
from ctxd.core.session import SessionState
from ctxd.core.settings import ContinuitySettings, Settings
from ctxd.daemon.config import parse_settings
from ctxd.daemon.continuity import Continuity
from ctxd.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "transcripts"
CONTINUITY = DATA / "claude-code-2.1.332" / "transcript.continuity.jsonl"
COMPACT = DATA / "claude-code-2.1.197" / "transcript.compact.jsonl"
ON = Settings(continuity=ContinuitySettings(inject=True))


def _opened(path: str) -> tuple[TranscriptReader, Facts]:
    """Claude's reader for `path` and the digest's facts it tells, as the daemon opens them."""
    claude = spec("claude")
    facts = claude.open_facts(path)
    assert facts is not None
    return claude.open_reader(path, facts), facts


def _up_to_the_compaction() -> tuple[TranscriptReader, Facts, bytes]:
    """The compacted transcript opened as `_opened` does and read up to its compaction's
    boundary line; the lines from that boundary on are returned, unread."""
    transcript, reader = _opened("/t/s1.jsonl")
    lines = CONTINUITY.read_bytes().splitlines(keepends=True)
    boundary = next(i for i, ln in enumerate(lines) if b"compact_boundary" in ln)
    transcript.feed(b"".join(lines[:boundary]))
    return transcript, reader, b"".join(lines[boundary:])


def _reader(path: Path) -> Facts:
    """The facts of the transcript at `path`, read whole."""
    reader, facts = _opened(str(path))
    reader.feed(path.read_bytes())
    return facts


def _state(sid: str, handoff_asked: bool = False) -> SessionState:
    return SessionState(
        key=f"/t/{sid}.jsonl",
        agent="claude",
        session_id=sid,
        transcript_path=f"/t/{sid}.jsonl",
        cwd="/w",
        policy=PolicyState(handoff_asked=handoff_asked),
    )


def _event(name: str, kind: str, sid: str, source: str | None = None) -> HookEvent:
    return HookEvent("claude", name, kind, sid, f"/t/{sid}.jsonl", "/w", source=source)  # type: ignore[arg-type]


def test_the_handoff_draft_is_written_and_named(tmp_path: Path) -> None:
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    before, after = _state("s1"), _state("s1", handoff_asked=True)
    stop = _event("Stop", "stop", "s1")
    asked = Reply(block_reason="CONTEXT HANDOFF: 72% used.")
    reply = c.amend(stop, before, after, asked, _reader(CONTINUITY), ON)
    draft = tmp_path / "ctxd" / "handoffs" / "s1.md"
    assert reply.block_reason is not None and str(draft) in reply.block_reason
    assert "review and complete this draft" in reply.block_reason
    text = draft.read_text()
    assert text.startswith("# Handoff: Claude Code session s1 in /w\n")
    assert "ls /nonexistent-ctxd-e2e-dir" in text and "Write the release notes" in text
    assert (draft.stat().st_mode & 0o777, draft.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    # shown to the user instead: the message names the file
    message = c.amend(stop, before, after, Reply(user_message="CONTEXT HANDOFF: x"), None, ON)
    assert message == Reply(user_message="CONTEXT HANDOFF: x")  # no digest, no draft
    shown = c.amend(stop, before, after, Reply(user_message="H"), _reader(CONTINUITY), ON)
    assert shown.user_message == f"H ctxd drafted a handoff note from the transcript: {draft}"


def test_a_handoff_asked_with_a_tool_calls_context_names_the_draft_there(tmp_path: Path) -> None:
    """An agent asked at a tool call (`Dialect.handoff_on_tool_call`): the model reads the
    context, so the draft is named there, after the warning and the request."""
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    before, after = _state("s1"), _state("s1", handoff_asked=True)
    call = _event("PostToolUse", "tool_call", "s1")
    asked = Reply(context="CONTEXT WARNING: x\nCONTEXT HANDOFF: 72% used.")
    reply = c.amend(call, before, after, asked, _reader(CONTINUITY), ON)
    draft = tmp_path / "ctxd" / "handoffs" / "s1.md"
    assert reply.context is not None and draft.is_file()
    assert reply.context.startswith("CONTEXT WARNING: x\nCONTEXT HANDOFF: 72% used. ctxd has")
    assert reply.context.endswith(
        f"at {draft}: please review and complete this draft (the "
        "reasons, decisions and next steps the transcript cannot hold) rather than writing one "
        "from scratch."
    )
    assert reply.user_message is None and reply.block_reason is None
    # a warning alone, with nothing asked, writes no draft
    quiet = c.amend(
        call, after, after, Reply(context="CONTEXT WARNING: y"), _reader(CONTINUITY), ON
    )
    assert quiet == Reply(context="CONTEXT WARNING: y")


def test_no_draft_when_turned_off_or_not_asked(tmp_path: Path) -> None:
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    off = Settings(continuity=ContinuitySettings(handoff_file=False))
    asked = Reply(block_reason="CONTEXT HANDOFF")
    stop = _event("Stop", "stop", "s1")
    assert c.amend(stop, _state("s1"), _state("s1", True), asked, _reader(CONTINUITY), off) == asked
    again = _state("s1", True)  # asked before: this Stop asks nothing
    assert c.amend(stop, again, again, Reply(), _reader(CONTINUITY), ON) == Reply()
    assert not (tmp_path / "ctxd" / "handoffs").exists()


def test_the_note_once_per_compaction_on_events_that_carry_context(tmp_path: Path) -> None:
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    reader = _reader(CONTINUITY)  # one compaction in the transcript, already there
    s = _state("s1")
    tool = _event("PostToolUse", "tool_call", "s1")
    # the first answer sets the mark: compactions before ctxd saw the session are not news
    assert c.amend(tool, s, s, Reply(), reader, ON) == Reply()
    start = _event("SessionStart", "compaction", "s1", source="compact")
    first = c.amend(start, s, s, Reply(), reader, ON)
    assert first.context is not None and first.context.startswith("[ctxd continuity]")
    assert c.amend(tool, s, s, Reply(), reader, ON) == Reply()  # once
    # a PreCompact carries no context: nothing there, nothing used up
    c2 = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    pre = _event("PreCompact", "compaction", "s1", source="auto")
    assert c2.amend(pre, s, s, Reply(), reader, ON) == Reply()
    # a warning already due is kept, after the note
    warned = c2.amend(start, s, s, Reply(context="CONTEXT WARNING: x"), reader, ON)
    assert warned.context is not None and warned.context.endswith("\nCONTEXT WARNING: x")
    off = Settings(continuity=ContinuitySettings(inject=False))
    assert Continuity({}).amend(start, s, s, Reply(), reader, off) == Reply()


def test_a_compaction_seen_in_the_transcript_is_announced_at_the_next_context_event(
    tmp_path: Path,
) -> None:
    """Gemini CLI's way: no hook follows a compression; the transcript says it happened."""
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    transcript, reader, after = _up_to_the_compaction()
    s = _state("s1")
    tool = _event("PostToolUse", "tool_call", "s1")
    assert c.amend(tool, s, s, Reply(), reader, ON) == Reply()
    transcript.feed(after)
    note = c.amend(tool, s, s, Reply(), reader, ON).context
    assert note is not None and "ls /nonexistent-ctxd-e2e-dir" in note
    assert c.amend(tool, s, s, Reply(), reader, ON) == Reply()


def test_sessions_never_see_each_others_digest(tmp_path: Path) -> None:
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    ours, theirs = _reader(CONTINUITY), _reader(COMPACT)
    start_a = _event("SessionStart", "compaction", "a", source="compact")
    start_b = _event("SessionStart", "compaction", "b", source="compact")
    a = c.amend(start_a, _state("a"), _state("a"), Reply(), ours, ON).context or ""
    b = c.amend(start_b, _state("b"), _state("b"), Reply(), theirs, ON).context or ""
    assert "app.py" in a and "app.py" not in b
    assert "Run the steps" in b and "Run the steps" not in a
    stop = _event("Stop", "stop", "b")
    c.amend(stop, _state("b"), _state("b", True), Reply(user_message="H"), theirs, ON)
    assert "app.py" not in (tmp_path / "ctxd" / "handoffs" / "b.md").read_text()


def test_continuity_config() -> None:
    s = parse_settings(
        "[continuity]\ninject = false\ncompact_tokens = 500\n"
        "handoff_file = false\nhandoff_tokens = 3000\n"
    )
    assert s.continuity == ContinuitySettings(False, 500, False, 3000)
    assert parse_settings("").continuity == ContinuitySettings()
    assert ContinuitySettings().inject is True  # the note after a compaction is on by default
    for bad in ('inject = "yes"', "compact_tokens = 10", "handoff_tokens = 999999", "x = 1"):
        with pytest.raises(ConfigError):
            parse_settings(f"[continuity]\n{bad}\n")


@pytest.mark.slow
def test_cli_handoff_json_for_a_transcript(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "handoff", "--json", "--transcript", str(CONTINUITY)],
        capture_output=True,
        text=True,
        check=True,
    )
    doc = json.loads(out.stdout)
    assert doc["agent"] == "claude"
    assert doc["digest"]["failed"][0]["exit_code"] == 2
    assert doc["markdown"].startswith("# Handoff: Claude Code session")


def test_the_note_goes_with_a_compaction_expected_at_resume(tmp_path: Path) -> None:
    """A resume after the prompt cache expired: the agent compacts before its first message, so
    the note goes with the SessionStart that says so, once (the compaction's record, when the
    transcript shows it, is the same compaction)."""
    c = Continuity({"XDG_STATE_HOME": str(tmp_path)})
    transcript, reader, after = _up_to_the_compaction()
    s = _state("s1")
    tool = _event("PostToolUse", "tool_call", "s1")
    assert c.amend(tool, s, s, Reply(), reader, ON) == Reply()
    resume = _event("SessionStart", "session_start", "s1", source="resume")
    assert c.amend(resume, s, s, Reply(), reader, ON) == Reply()  # nothing expected
    expecting = replace(s, expected_compactions=1)
    note = c.amend(resume, s, expecting, Reply(), reader, ON).context
    assert note is not None and note.startswith("[ctxd continuity]")
    transcript.feed(after)
    assert c.amend(tool, expecting, expecting, Reply(), reader, ON) == Reply()
