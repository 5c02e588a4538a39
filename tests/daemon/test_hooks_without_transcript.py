"""A hook that names no transcript (Copilot CLI's, all but agentStop): the daemon finds the
session's file where the agent's layout puts it by session id (`AgentSpec.implied_transcript`),
and a tool-call hook whose own record is not on disk yet waits for it (the agent queues its
writes). In process, over the real Copilot CLI 1.0.102 capture."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest

from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings
from ctxd.protocol import resolve

DATA = Path(__file__).parents[1] / "data"
EVENTS = DATA / "transcripts" / "copilot-1.0.102" / "transcript.print.jsonl"
PAYLOADS = DATA / "payloads" / "copilot" / "1.0.102" / "print"


def _open(home: Path) -> Centre:
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / "state")}
    roots = {"copilot": home / ".copilot" / "session-state"}
    return Centre.open(
        env, roots, lambda: 1.8e9, monotonic=lambda: 0.0, settings=parse_settings("")
    )


def test_a_hook_finds_its_session_by_id_and_waits_for_its_own_record(tmp_path: Path) -> None:
    lines = EVENTS.read_bytes().splitlines(keepends=True)
    post = json.loads(sorted(PAYLOADS.glob("*-postToolUse.json"))[1].read_text())
    sid = post["sessionId"]
    events = tmp_path / ".copilot" / "session-state" / sid / "events.jsonl"
    events.parent.mkdir(parents=True)
    stamp = f'"timestamp":{post["timestamp"]}'.encode()
    (own,) = [i for i, line in enumerate(lines) if stamp in line and b'"hook.start"' in line]
    usage = [i for i, line in enumerate(lines[:own]) if b'"session.usage_record"' in line[:40]]
    events.write_bytes(b"".join(lines[: usage[-1]]))  # the call's own request not on disk yet

    centre = _open(tmp_path)
    answer = centre.answers.handle_hook("copilot", "postToolUse", json.dumps(post).encode())
    assert not isinstance(answer, bytes), "the hook's own record is not on disk: it waits"
    events.write_bytes(b"".join(lines[: own + 1]))

    async def settle() -> bytes:
        return await resolve(answer)

    assert anyio.run(settle) == b""  # low figures: nothing to say
    state = centre.sessions.get(str(events))
    assert state is not None and state.session_id == sid
    assert state.tokens == 13_500  # the second call's request, as the mock reported it
    assert state.agent_window == 64_000


def test_a_failed_calls_hook_waits_for_its_own_record_too(tmp_path: Path) -> None:
    """postToolUseFailure (a call that failed) is a tool call like postToolUse: it waits for
    its own `hook.start`, and is judged on the request that made the failed call."""
    failure = DATA / "transcripts" / "copilot-1.0.102" / "transcript.failure.jsonl"
    lines = failure.read_bytes().splitlines(keepends=True)
    paths = sorted((PAYLOADS.parent / "failure").glob("*-postToolUseFailure.json"))
    post = json.loads(paths[1].read_text())  # the second failed call (an unknown tool)
    events = tmp_path / ".copilot" / "session-state" / post["sessionId"] / "events.jsonl"
    events.parent.mkdir(parents=True)
    stamp = f'"timestamp":{post["timestamp"]}'.encode()
    (own,) = [i for i, line in enumerate(lines) if stamp in line and b'"hook.start"' in line]
    usage = [i for i, line in enumerate(lines[:own]) if b'"session.usage_record"' in line[:40]]
    events.write_bytes(b"".join(lines[: usage[-1]]))

    centre = _open(tmp_path)
    payload = json.dumps(post).encode()
    answer = centre.answers.handle_hook("copilot", "postToolUseFailure", payload)
    assert not isinstance(answer, bytes), "the hook's own record is not on disk: it waits"
    events.write_bytes(b"".join(lines[: own + 1]))

    async def settle() -> bytes:
        return await resolve(answer)

    assert anyio.run(settle) == b""
    state = centre.sessions.get(str(events))
    assert state is not None and state.tokens == 13_500  # the request that made the call


def test_a_hook_before_the_file_exists_opens_the_session_it_later_follows(
    tmp_path: Path,
) -> None:
    start = json.loads(sorted(PAYLOADS.glob("*-sessionStart.json"))[0].read_text())
    sid = start["sessionId"]
    centre = _open(tmp_path)
    assert centre.answers.handle_hook("copilot", "sessionStart", json.dumps(start).encode()) == b""
    assert centre.sessions.key_for("copilot", sid) is not None
    events = tmp_path / ".copilot" / "session-state" / sid / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_bytes(EVENTS.read_bytes())
    stop = json.loads(sorted(PAYLOADS.glob("*-agentStop.json"))[0].read_text())
    stop["transcriptPath"] = str(events)
    centre.answers.handle_hook("copilot", "agentStop", json.dumps(stop).encode())
    rows = [s for s in centre.sessions if s.session_id == sid and s.ended_at is None]
    assert [s.transcript_path for s in rows] == [str(events)]
    assert rows[0].tokens == 16_500


def test_a_tool_call_hook_waits_for_a_file_not_created_yet(tmp_path: Path) -> None:
    """Copilot CLI creates its events file lazily (seen under load a second into the session):
    a tool call's hook waits for the file its layout names, then for its own record in it."""
    post = json.loads(sorted(PAYLOADS.glob("*-postToolUse.json"))[0].read_text())
    sid = post["sessionId"]
    centre = _open(tmp_path)
    answer = centre.answers.handle_hook("copilot", "postToolUse", json.dumps(post).encode())
    assert not isinstance(answer, bytes), "no file yet: the hook waits"
    events = tmp_path / ".copilot" / "session-state" / sid / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_bytes(EVENTS.read_bytes())

    async def settle() -> bytes:
        return await resolve(answer)

    assert anyio.run(settle) == b""
    state = centre.sessions.get(str(events))
    assert state is not None and state.tokens == 16_500  # the whole file, read on the way


def test_a_hook_that_is_no_tool_call_never_waits_for_the_file(tmp_path: Path) -> None:
    start = json.loads(sorted(PAYLOADS.glob("*-userPromptSubmitted.json"))[0].read_text())
    centre = _open(tmp_path)
    assert (
        centre.answers.handle_hook("copilot", "userPromptSubmitted", json.dumps(start).encode())
        == b""
    )


def test_a_record_never_written_costs_one_wait_and_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool hook whose own record is not in the file (an events file elsewhere, a record the
    reader cannot tell apart) waits once; the session's later tool hooks are answered at once
    and the miss is said in the log, until such a record turns up after all."""
    lines = EVENTS.read_bytes().splitlines(keepends=True)
    posts = [json.loads(p.read_text()) for p in sorted(PAYLOADS.glob("*-postToolUse.json"))]
    events = tmp_path / ".copilot" / "session-state" / posts[0]["sessionId"] / "events.jsonl"
    events.parent.mkdir(parents=True)
    stamp = f'"timestamp":{posts[0]["timestamp"]}'.encode()
    (own,) = [i for i, line in enumerate(lines) if stamp in line and b'"hook.start"' in line]
    events.write_bytes(b"".join(lines[:own]))  # its own hook.start never comes
    centre = _open(tmp_path)

    async def settle(answer: object) -> bytes:
        return await resolve(answer)  # type: ignore[arg-type]

    first = centre.answers.handle_hook("copilot", "postToolUse", json.dumps(posts[0]).encode())
    assert not isinstance(first, bytes)
    with caplog.at_level(logging.WARNING, logger="ctxd.daemon.answers"):
        assert anyio.run(settle, first) == b""
    assert any(str(posts[0]["timestamp"]) in r.getMessage() for r in caplog.records)
    caplog.clear()
    for post in posts[1:]:
        later = centre.answers.handle_hook("copilot", "postToolUse", json.dumps(post).encode())
        assert isinstance(later, bytes), "not waited for again"
    assert not caplog.records  # said once
    # the missing record was only late: it is in the file now, so waiting pays again
    events.write_bytes(b"".join(lines[: own + 1]))
    centre.transcripts.catch_up(str(events))
    again = centre.answers.handle_hook("copilot", "postToolUse", json.dumps(posts[1]).encode())
    assert not isinstance(again, bytes)
    events.write_bytes(EVENTS.read_bytes())
    assert anyio.run(settle, again) == b""
