"""The daemon's centre in process, under clocks the test controls: hooks answered by the answers
room over real transcript files, with no daemon process, no socket and no real waiting.

The wall clock (what sessions are stamped with) is a `FakeClock`; the waits inside an answer run
on trio's `MockClock`, which jumps ahead whenever every task is blocked, so a 0.3 s wait for the
agent's transcript takes microseconds. What only a real daemon can show (sockets, the hook
process, the watcher, restarts) stays in the subprocess tests beside this one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from trio.testing import MockClock

from ctxd.core.settings import Settings
from ctxd.daemon import snapshot
from ctxd.daemon.answers import TOOL_CALL_WAIT
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings
from ctxd.daemon.files import TranscriptFile
from ctxd.protocol import resolve

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

# The world gives these tests files and an environment; no ctxd process runs.
pytestmark = pytest.mark.in_process

WINDOW_BASIS = '[thresholds]\nbasis = "window"\n'
#: On basis "window" with the 1,000,000 default: remaining 40 / 30 / 20 % (see test_daemon_policy).
TOKENS_AT_REMAINING = {40: 600_000, 30: 700_000, 20: 800_000}


class FakeClock:
    """Wall-clock seconds that move only when told."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def open_centre(world: World, clock: FakeClock, config: str = "") -> Centre:
    settings: Settings = parse_settings(config)
    roots = {"claude": world.claude_projects}
    # Deadlines are measured on a clock that never moves: every catch-up reads to the end.
    return Centre.open(world.env, roots, clock, monotonic=lambda: 0.0, settings=settings)


def answer_of(centre: Centre, payload: dict[str, Any]) -> Any:
    """The JSON a tool-call hook prints, for an answer that needs no waiting."""
    answer = centre.answers.handle_hook("claude", None, json.dumps(payload).encode())
    assert isinstance(answer, bytes), "the turn was on disk: no wait expected"
    return json.loads(answer) if answer else None


def level(out: Any) -> str | None:
    if out is None:
        return None
    text: str = out["hookSpecificOutput"]["additionalContext"]
    return text.split(":")[0].removeprefix("CONTEXT ")


def test_the_gsd_trace_in_process(world: World, clock: FakeClock) -> None:
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    remaining = [40, 30, 30, 30, 30, 30, 30, 20, 20, 20, 20, 20, 20, 30]
    expected = [
        None, "WARNING", None, None, None, None, "WARNING",
        "CRITICAL", None, None, None, None, "CRITICAL", None,
    ]  # fmt: skip
    got = []
    for r in remaining:
        t.assistant(TOKENS_AT_REMAINING[r])
        got.append(level(answer_of(centre, t.payload("PostToolUse"))))
        clock.advance(1.0)
    assert got == expected
    (row,) = centre.status.document()["sessions"]
    assert row["tokens"] == TOKENS_AT_REMAINING[30]
    assert row["warned"] == "critical"


def test_the_debounce_counts_calls_not_seconds(world: World, clock: FakeClock) -> None:
    # GSD's debounce is five tool calls; hours between them change nothing.
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(TOKENS_AT_REMAINING[30])
    assert level(answer_of(centre, t.payload("PostToolUse"))) == "WARNING"
    for _ in range(4):
        clock.advance(3600.0)
        t.assistant(TOKENS_AT_REMAINING[30])
        assert answer_of(centre, t.payload("PostToolUse")) is None


def test_failed_calls_are_warned_and_counted(world: World, clock: FakeClock) -> None:
    """A call that fails fires PostToolUseFailure, not PostToolUse (Claude Code 2.1.332): it is
    a tool call like any other, warned after and counted by the debounce."""
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    events = ["PostToolUseFailure", "PostToolUse", "PostToolUseFailure", "PostToolUse"]
    events += ["PostToolUseFailure", "PostToolUseFailure"]
    got = []
    for event in events:
        t.assistant(TOKENS_AT_REMAINING[30])
        out = answer_of(centre, t.payload(event))
        got.append(level(out))
        if out is not None:
            assert out["hookSpecificOutput"]["hookEventName"] == event
    # warned at the first failed call, again at the fifth call after it (GSD's debounce)
    assert got == ["WARNING", None, None, None, None, "WARNING"]


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "trio", {"clock": MockClock(autojump_threshold=0)}


@pytest.mark.anyio
@pytest.mark.parametrize("event", ["PostToolUse", "PostToolUseFailure"])
async def test_a_tool_call_waits_for_its_turn_to_be_written(
    world: World, clock: FakeClock, event: str
) -> None:
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(TOKENS_AT_REMAINING[40])
    answer_of(centre, t.payload("PostToolUse"))
    before = t.path.read_bytes()
    t.assistant(TOKENS_AT_REMAINING[30])  # the turn that makes the next call...
    turn = t.path.read_bytes()[len(before) :]
    t.path.write_bytes(before)  # ...is not on disk yet when its hook fires (Claude Code)
    payload = t.payload(event)  # after a call that succeeded, or one that failed
    answer = centre.answers.handle_hook("claude", None, json.dumps(payload).encode())
    assert not isinstance(answer, bytes), "answered before the turn that made the call was read"

    async def the_agent_writes_the_turn() -> None:
        await anyio.sleep(TOOL_CALL_WAIT / 3)
        with t.path.open("ab") as f:
            f.write(turn)

    started = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(the_agent_writes_the_turn)
        out = await resolve(answer)
    # Judged on the turn written during the wait (the one that made the call), not the one before.
    assert level(json.loads(out)) == "WARNING"
    assert anyio.current_time() - started < TOOL_CALL_WAIT


@pytest.mark.anyio
async def test_a_turn_never_written_is_judged_after_the_wait(
    world: World, clock: FakeClock
) -> None:
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(TOKENS_AT_REMAINING[30])
    payload = t.payload("PostToolUse", tool_use_id="toolu_never_written")
    started = anyio.current_time()
    out = await resolve(centre.answers.handle_hook("claude", None, json.dumps(payload).encode()))
    assert anyio.current_time() - started >= TOOL_CALL_WAIT  # virtual seconds, none real
    assert level(json.loads(out)) == "WARNING"  # on the last figure on disk


def test_idle_sessions_end_and_ended_ones_leave(world: World, clock: FakeClock) -> None:
    centre = open_centre(world, clock, "[sessions]\nidle_minutes = 60\nended_minutes = 15\n")
    t = world.claude()
    t.assistant(100_000)
    answer_of(centre, t.payload("PostToolUse"))

    clock.advance(59 * 60)
    centre.transcripts.sweep()
    (row,) = centre.status.document()["sessions"]
    assert row["ended_at"] is None

    clock.advance(2 * 60)
    centre.transcripts.sweep()
    (row,) = centre.status.document()["sessions"]
    assert (row["ended_reason"], row["ended_at"]) == ("idle", clock.now)

    clock.advance(16 * 60)
    centre.transcripts.sweep()
    assert centre.status.document()["sessions"] == []


def test_a_hook_writes_no_handoff_draft_outside_the_daemons_environment(
    world: World, clock: FakeClock
) -> None:
    # The handoff draft goes under the state dir of the environment the centre was given.
    centre = open_centre(world, clock, WINDOW_BASIS)
    t: ClaudeTranscript = world.claude()
    t.assistant(TOKENS_AT_REMAINING[20])
    out = centre.answers.handle_hook("claude", None, json.dumps(t.payload("Stop")).encode())
    assert isinstance(out, bytes) and b"handoff" in out.lower()
    drafts = list((world.state_home / "ctxd" / "handoffs").glob("*.md"))
    assert len(drafts) == 1


def test_a_nul_in_a_hooks_env_leaves_status_and_every_session_working(
    world: World, clock: FakeClock
) -> None:
    centre = open_centre(world, clock, WINDOW_BASIS)
    bad, good = world.claude(), world.claude()
    for t in (bad, good):
        t.assistant(TOKENS_AT_REMAINING[40])
    payload = json.dumps(bad.payload("PostToolUse")).encode()
    centre.answers.handle_hook("claude", None, payload, {"CLAUDE_CONFIG_DIR": "/tmp/x\x00y"})
    centre.answers.handle_hook("claude", None, payload, {"CLAUDE_CONFIG_DIR": ["not", "text"]})
    answer_of(centre, good.payload("PostToolUse"))

    rows = {row["transcript_path"]: row for row in centre.status.document()["sessions"]}
    assert {rows[str(t.path)]["tokens"] for t in (bad, good)} == {TOKENS_AT_REMAINING[40]}
    # The session that sent it is still judged: its next call warns as any would.
    bad.assistant(TOKENS_AT_REMAINING[30])
    assert level(answer_of(centre, bad.payload("PostToolUse"))) == "WARNING"


def test_a_row_that_cannot_be_computed_says_so_and_hides_no_other(
    world: World, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    centre = open_centre(world, clock)
    broken, fine = world.claude(), world.claude()
    for t in (broken, fine):
        t.assistant(100_000)
        answer_of(centre, t.payload("PostToolUse"))
    grounds = centre.answers.grounds

    def failing_for_one(state: Any) -> Any:
        if state.key == str(broken.path):
            raise ValueError("a figure no session could have")
        return grounds(state)

    monkeypatch.setattr(centre.answers, "grounds", failing_for_one)
    rows = {row["transcript_path"]: row for row in centre.status.document()["sessions"]}
    assert rows[str(fine.path)]["tokens"] == 100_000
    assert rows[str(broken.path)]["error"] == "cannot compute this session's figures: ValueError"


STATUSLINE = "tests/data/payloads/statusline/claude-2.1.332.jsonl"


def statusline_payload(world: World, t: Any, tokens: int, ttl: str, expires_at: int) -> bytes:
    """A real 2.1.332 statusline payload after a reply, naming `t`, at `tokens` context tokens,
    with its prompt cache's TTL and expiry."""
    doc = json.loads((world.repo / STATUSLINE).read_text().splitlines()[2])
    doc.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(world.work))
    usage = doc["context_window"]["current_usage"]
    usage.update(input_tokens=tokens, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    doc["prompt_cache"].update(ttl=ttl, expires_at=expires_at, warm=True)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("tokens", "ttl", "idle"),
    [(300_000, "1h", True), (150_000, "1h", False), (300_000, "5m", False)],
)
def test_idle_compaction_from_statusline_payloads(
    world: World, clock: FakeClock, tokens: int, ttl: str, idle: bool
) -> None:
    """The statusline's prompt cache says when Claude Code compacts the idle session: status
    gives the time, and the Stop hook tells the user (only when it will happen)."""
    centre = open_centre(world, clock)
    t = world.claude()
    t.assistant(tokens)
    expires = int(clock.now) + 3600
    centre.answers.handle_hook(
        "claude", "statusline", statusline_payload(world, t, tokens, ttl, expires)
    )
    (row,) = centre.status.document()["sessions"]
    assert row["tokens"] == tokens and row["window_source"] == "statusline"
    assert row["idle_compaction_at"] == (expires - 360 if idle else None)
    answer = centre.answers.handle_hook("claude", None, json.dumps(t.payload("Stop")).encode())
    assert isinstance(answer, bytes)
    said = json.loads(answer).get("systemMessage", "") if answer else ""
    if idle:
        hhmm = time.strftime("%H:%M", time.localtime(expires - 360))
        assert f"left idle, this session is compacted at {hhmm}" in said, said
    else:
        assert "left idle" not in said


def test_the_statusline_env_is_taken_like_a_hooks(world: World, clock: FakeClock) -> None:
    """A session known only from its statusline: the variables in the statusline command's
    environment count as a hook's do (CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS lowers the floor of
    idle compaction to 100,000, so 150,000 tokens are compacted when idle)."""
    centre = open_centre(world, clock)
    t = world.claude()
    t.assistant(150_000)
    expires = int(clock.now) + 3600
    payload = statusline_payload(world, t, 150_000, "1h", expires)
    env = {"CLAUDE_CODE_IDLE_COMPACT_MIN_TOKENS": "100000"}
    centre.answers.handle_hook("claude", "statusline", payload, env)
    (row,) = centre.status.document()["sessions"]
    assert row["idle_compaction_at"] == expires - 360


STATUSLINE_2_1_337 = "tests/data/payloads/statusline/claude-2.1.337.jsonl"


def test_a_2_1_337_statusline_reveals_the_auto_compact_window(
    world: World, clock: FakeClock
) -> None:
    """The real 2.1.337 payload at 103,000 tokens says 26 %: of its 400,000 auto-compact window,
    not of the 1,000,000 window it names. ctxd keeps the window, compacts at 367,000 and says
    the statusline decided."""
    centre = open_centre(world, clock)
    t = world.claude()
    t.assistant(103_000)
    doc = json.loads((world.repo / STATUSLINE_2_1_337).read_text().splitlines()[1])
    assert doc["context_window"]["used_percentage"] == 26
    doc.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(world.work))
    centre.answers.handle_hook("claude", "statusline", json.dumps(doc).encode())
    (row,) = centre.status.document()["sessions"]
    assert (row["window"], row["window_source"]) == (1_000_000, "statusline")
    assert (row["compact_window"], row["compact_window_source"]) == (400_000, "statusline")
    assert row["compaction_at"] == 367_000
    assert row["used_pct"] == pytest.approx(10.3)


def test_a_resume_after_the_cache_expired_expects_claude_codes_compaction(
    world: World, clock: FakeClock
) -> None:
    """Claude Code 2.1.335+ compacts a session resumed after its 1-hour cache expired before its
    first message: at that SessionStart ctxd forgets the warnings given on the old context."""
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(700_000, version="2.1.337")
    expires = int(clock.now) + 3600
    doc = json.loads(statusline_payload(world, t, 700_000, "1h", expires))
    doc["version"] = "2.1.337"
    doc["context_window"].update(used_percentage=None, remaining_percentage=None)
    centre.answers.handle_hook("claude", "statusline", json.dumps(doc).encode())
    assert level(answer_of(centre, t.payload("PostToolUse"))) == "WARNING"
    clock.advance(3601.0)
    resume = t.payload("SessionStart", source="resume")
    centre.answers.handle_hook("claude", None, json.dumps(resume).encode())
    (state,) = [s for s in centre.sessions if s.session_id == t.session_id]
    assert state.expected_compactions == 1
    assert state.policy.warned.label == "ok"


def test_settings_applied_between_two_hooks_judge_the_second(
    world: World, clock: FakeClock
) -> None:
    """What a hook is judged with is kept between hooks only while it holds: a config applied
    in between (the daemon re-read the file) is what the very next hook is judged on."""
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(TOKENS_AT_REMAINING[40])
    assert level(answer_of(centre, t.payload("PostToolUse"))) is None
    centre.settings.apply(parse_settings('[thresholds]\nbasis = "window"\nwarning = 45\n'))
    clock.advance(1.0)
    assert level(answer_of(centre, t.payload("PostToolUse"))) == "WARNING"


@pytest.fixture
def time_zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Set the process's time zone (a POSIX TZ string); the real one comes back after."""

    def set_zone(zone: str) -> None:
        monkeypatch.setenv("TZ", zone)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


def test_the_idle_note_tells_the_time_in_the_zone_in_force_now(
    world: World, clock: FakeClock, time_zone: Callable[[str], None]
) -> None:
    """A clock time in a message is in the user's time zone as it is at that answer (a summer
    time change between two Stop hooks shows in the second)."""
    centre = open_centre(world, clock)
    t = world.claude()
    t.assistant(300_000)
    expires = 1_800_003_600  # 2027-01-15 09:00 UTC; compacted 6 minutes before
    centre.answers.handle_hook(
        "claude", "statusline", statusline_payload(world, t, 300_000, "1h", expires)
    )
    said = []
    for zone in ("UTC0", "XST-2"):  # UTC, then two hours east of it
        time_zone(zone)
        answer = centre.answers.handle_hook("claude", None, json.dumps(t.payload("Stop")).encode())
        assert isinstance(answer, bytes)
        said.append(json.loads(answer)["systemMessage"])
        clock.advance(1.0)
    assert "compacted at 08:54 UTC" in said[0], said[0]
    assert "compacted at 10:54 " in said[1], said[1]


def switch_payload(t: Any, event: str, tokens: int, to_model: str, source: str) -> bytes:
    """A PreModelSwitch/PostModelSwitch payload with the fields 2.1.332's bundle gives it (its
    hook input: the common fields, from_model, to_model, requested_model, source,
    context_tokens, prompt_cache_warm, cache_ttl; not captured from a run)."""
    doc = t.payload("Stop")
    doc.pop("stop_hook_active", None)
    doc.update(
        hook_event_name=event,
        from_model="claude-opus-4-8[1m]",
        to_model=to_model,
        requested_model=to_model,
        source=source,
        context_tokens=tokens,
        prompt_cache_warm=True,
        cache_ttl="1h",
    )
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("config", "tokens", "said"),
    [
        ("", 300_000, "more than its 200,000-token window on claude-sonnet-4-6"),
        ("", 180_000, "past its compaction point (167,000 of 200,000 tokens)"),
        ("", 50_000, None),  # well inside it: quiet
        ('[model_switch]\naction = "deny"\n', 300_000, "deny"),
    ],
)
def test_a_model_switch_past_the_new_models_compaction_point(
    world: World, clock: FakeClock, config: str, tokens: int, said: str | None
) -> None:
    centre = open_centre(world, clock, config)
    t = world.claude()
    t.assistant(tokens)
    payload = switch_payload(t, "PreModelSwitch", tokens, "claude-sonnet-4-6", "picker")
    answer = centre.answers.handle_hook("claude", None, payload)
    assert isinstance(answer, bytes)
    out = json.loads(answer) if answer else None
    if said is None:
        assert out is None
        return
    assert out is not None
    if said != "deny":  # the default: a message the user sees, the switch goes ahead
        assert set(out) == {"systemMessage"}
        assert f"holds {tokens:,} tokens, {said}" in out["systemMessage"]
    else:
        hso = out["hookSpecificOutput"]
        assert hso["hookEventName"] == "PreModelSwitch" and hso["permissionDecision"] == "deny"
        assert "claude-sonnet-4-6" in hso["permissionDecisionReason"]


def test_after_a_model_switch_the_window_and_tokens_are_taken_at_once(
    world: World, clock: FakeClock
) -> None:
    centre = open_centre(world, clock)
    t = world.claude()
    t.assistant(120_000)
    centre.answers.handle_hook(
        "claude", "statusline", statusline_payload(world, t, 120_000, "1h", 0)
    )
    (row,) = centre.status.document()["sessions"]
    assert row["window"] == 1_000_000 and row["window_source"] == "statusline"
    payload = switch_payload(t, "PostModelSwitch", 125_000, "claude-sonnet-4-6", "auto")
    assert centre.answers.handle_hook("claude", None, payload) == b""
    (row,) = centre.status.document()["sessions"]
    assert row["model"] == "claude-sonnet-4-6" and row["tokens"] == 125_000
    assert row["window"] == 200_000 and row["window_source"] != "statusline"


def test_an_idle_compaction_comes_first_and_a_token_limit_is_named(
    world: World, clock: FakeClock
) -> None:
    """At 300,000 of 1,000,000 on a warm 1-hour cache Claude Code compacts the idle session long
    before the size point: the forecast says it comes first, the Stop asks for the handoff (the
    size point alone would not, at 31 %), and status and metrics name the token limit passed."""
    from ctxd.daemon.metrics import render

    centre = open_centre(world, clock, "[thresholds]\nwarning_tokens = 250000\n")
    t = world.claude()
    t.assistant(300_000)
    expires = int(clock.now) + 3600
    centre.answers.handle_hook(
        "claude", "statusline", statusline_payload(world, t, 300_000, "1h", expires)
    )
    (row,) = centre.status.document()["sessions"]
    assert row["window"] == 1_000_000 and row["basis_used_pct"] < 70
    assert row["forecast"]["first_compaction"] == "idle"
    assert row["forecast"]["idle_compaction_at"] == expires - 360
    assert (row["severity"], row["limit_passed"], row["limit_value"]) == (
        "warning",
        "warning_tokens",
        250_000,
    )
    metrics = render(centre.status.document())
    labels = f'agent="claude",model="{row["model"]}",session="{t.session_id}"'
    assert f'ctxd_limit_passed{{{labels},limit="warning_tokens"}} 250000' in metrics
    assert f"ctxd_idle_compaction_timestamp_seconds{{{labels}}} {float(expires - 360)!r}" in (
        metrics
    )

    answer = centre.answers.handle_hook("claude", None, json.dumps(t.payload("Stop")).encode())
    assert isinstance(answer, bytes)
    said = json.loads(answer)["systemMessage"]
    assert said.startswith("CONTEXT HANDOFF:") and "left idle, this session is compacted" in said
    assert centre.answers.counts["handoffs", "claude"] == 1


COPILOT_CAPTURE = Path(__file__).parents[1] / "data" / "transcripts" / "copilot-1.0.102"
COPILOT_PAYLOADS = Path(__file__).parents[1] / "data" / "payloads" / "copilot" / "1.0.102"


def test_a_hook_that_names_only_its_session_is_found_under_the_agents_own_home(
    world: World, clock: FakeClock, tmp_path: Path
) -> None:
    # Copilot CLI's hooks give a session id and no file: the events file is found where the
    # agent's environment puts its home, which need not be where the daemon would look.
    payload = (COPILOT_PAYLOADS / "print" / "04-postToolUse.json").read_bytes()
    session_id = json.loads(payload)["sessionId"]
    home = tmp_path / "elsewhere"
    events = home / "session-state" / session_id / "events.jsonl"
    events.parent.mkdir(parents=True)
    events.write_bytes((COPILOT_CAPTURE / "transcript.print.jsonl").read_bytes())
    centre = open_centre(world, clock)

    centre.answers.handle_hook("copilot", "postToolUse", payload, {"COPILOT_HOME": str(home)})

    rows = [r for r in centre.status.document()["sessions"] if r["session_id"] == session_id]
    usage = json.loads((COPILOT_CAPTURE / "usage.print.json").read_text())
    assert [(r["transcript_path"], r["tokens"]) for r in rows] == [
        (str(events), usage[-1]["usage"]["prompt_tokens"])
    ]


def rows_by_path(centre: Centre) -> dict[str, dict[str, Any]]:
    return {row["transcript_path"]: row for row in centre.status.document()["sessions"]}


def test_an_ended_session_stays_ended_through_a_discovery_pass(world: World) -> None:
    # The wall clock near the files' own mtimes: discovery finds what changed lately.
    clock = FakeClock(time.time())
    centre = open_centre(world, clock, "[sessions]\nended_minutes = 15\n")
    t, other = world.claude(), world.claude()
    for each in (t, other):
        each.assistant(100_000)
        answer_of(centre, each.payload("PostToolUse"))
    centre.answers.handle_hook("claude", None, json.dumps(t.payload("SessionEnd")).encode())
    clock.advance(16 * 60)
    centre.transcripts.sweep()
    assert set(rows_by_path(centre)) == {str(other.path)}

    # The next discovery pass (every 5 minutes) finds the file again, recent as it is.
    clock.advance(5 * 60)
    centre.transcripts.discover([world.claude_projects])
    centre.transcripts.sweep()
    assert set(rows_by_path(centre)) == {str(other.path)}, "the ended session came back"

    # It is followed again once it grows: its agent wrote to it, it is live.
    t.assistant(150_000)
    centre.transcripts.discover([world.claude_projects])
    row = rows_by_path(centre)[str(t.path)]
    assert (row["tokens"], row["ended_at"]) == (150_000, None)


def test_an_ended_session_stays_ended_across_a_restart(world: World) -> None:
    clock = FakeClock(time.time())
    config = "[sessions]\nended_minutes = 15\n"
    centre = open_centre(world, clock, config)
    t = world.claude()
    t.assistant(100_000)
    answer_of(centre, t.payload("PostToolUse"))
    centre.answers.handle_hook("claude", None, json.dumps(t.payload("SessionEnd")).encode())
    clock.advance(16 * 60)
    centre.transcripts.sweep()
    state = world.state_file
    snapshot.save(centre.sessions, centre.transcripts, state)

    again = open_centre(world, clock, config)
    snapshot.restore(again.sessions, again.transcripts, state)
    again.transcripts.discover([world.claude_projects])
    assert rows_by_path(again) == {}


def test_a_session_found_on_disk_is_as_old_as_its_transcript(world: World) -> None:
    clock = FakeClock(time.time())
    centre = open_centre(world, clock, "[sessions]\nidle_minutes = 480\n")
    t = world.claude()
    t.assistant(100_000)
    six_hours_ago = clock.now - 6 * 3600
    os.utime(t.path, (six_hours_ago, six_hours_ago))

    centre.transcripts.discover([world.claude_projects])
    (row,) = centre.status.document()["sessions"]
    assert row["tokens"] == 100_000
    assert row["age_s"] == pytest.approx(6 * 3600, abs=1), "history shown as just updated"

    # Idle is judged on the transcript's clock: 8 hours after its last change, not after ours.
    clock.advance(2 * 3600 + 60)
    centre.transcripts.sweep()
    (row,) = centre.status.document()["sessions"]
    assert row["ended_reason"] == "idle"


def test_a_restart_reads_on_from_where_it_stood_with_the_same_digest(
    world: World, clock: FakeClock
) -> None:
    centre = open_centre(world, clock)
    t = world.claude()
    for tokens in (100_000, 110_000):
        t.assistant(tokens)
        answer_of(centre, t.payload("PostToolUse"))
    snapshot.save(centre.sessions, centre.transcripts, world.state_file)
    read_before = t.path.stat().st_size
    t.assistant(120_000)  # while the daemon is down

    again = open_centre(world, clock)
    snapshot.restore(again.sessions, again.transcripts, world.state_file)
    key = str(t.path)
    size = t.path.stat().st_size
    assert again.transcripts.catching_up(key) == {"read": read_before, "size": size}
    again.transcripts.catch_up(key)
    (row,) = again.status.document()["sessions"]
    assert row["tokens"] == 120_000
    # The digest goes on as if the daemon had read the whole file in one go.
    fresh = TranscriptFile(key, "claude")
    fresh.read_appended()
    tracked = again.transcripts.file(key)
    assert tracked is not None and tracked.facts is not None and fresh.facts is not None
    assert tracked.facts.digest == fresh.facts.digest
    assert tracked.facts.digest.commands_run + len(tracked.facts.digest.files) > 0


def test_a_warning_journaled_after_the_snapshot_keeps_its_readers_state(
    world: World, clock: FakeClock
) -> None:
    # A crash right after a warning: the session's last word is a journal line, whose position
    # carries no reader state; it is the snapshot's position, so the snapshot's state serves.
    centre = open_centre(world, clock, WINDOW_BASIS)
    t = world.claude()
    t.assistant(TOKENS_AT_REMAINING[40])
    answer_of(centre, t.payload("PostToolUse"))
    journal = snapshot.Journal(world.state_file.with_suffix(".journal"))
    snapshot.save(centre.sessions, centre.transcripts, world.state_file, journal.seq)
    journal.start()
    key = str(t.path)
    journal.append(centre.sessions[key], centre.transcripts.position(key))
    journal.close()

    again = open_centre(world, clock, WINDOW_BASIS)
    snapshot.restore(again.sessions, again.transcripts, world.state_file, journal)
    size = t.path.stat().st_size
    assert again.transcripts.catching_up(key) == {"read": size, "size": size}
