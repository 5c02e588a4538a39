"""Claude Code, the real CLI, offline against mock_anthropic.py, wired to a real ctxd daemon.

The scripted usage climbs through ctxd's thresholds on a 1M window (Claude Code 2.1.332 runs
claude-opus-5-5 with a 1,000,000-token window). The thresholds are on the "window" basis, so
the numbers read plainly: WARNING from 650,000 tokens (35 % left), CRITICAL from 750,000 (25 %
left), the handoff from 700,000 (70 % used). Every figure below is context tokens =
cache_read + 5,000 (see `claude_usage`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from e2e_support import (
    CLAUDE_STREAM,
    AgentRig,
    Ctxd,
    Json,
    Mock,
    Result,
    RunDir,
    Tmux,
    capture_hook_command,
    claude_capture_hooks,
    claude_env,
    claude_prepare,
    claude_tool_steps,
    claude_usage,
    last_turn_text_claude,
    marks,
    run,
    wait_for,
)

pytestmark = pytest.mark.e2e

WINDOW_BASIS = '[thresholds]\nbasis = "window"\n'
#: How long each scripted tool call takes. Claude Code writes its transcript lazily; a tool that
#: finishes within ~100 ms of the model's reply runs its PostToolUse hook before the reply is on
#: disk (see test_instant_tools_are_warned_at_their_own_call).
TOOL_SECONDS = 0.5
_PCT = "CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
_ENV_ACW = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
_ACW = "autoCompactWindow"
WARNING = "CONTEXT WARNING:"
CRITICAL = "CONTEXT CRITICAL:"
HANDOFF = "CONTEXT HANDOFF:"


def test_smoke_scripted_tool_calls_with_hooks(
    claude_release: tuple[str, Path], tmp_path: Path
) -> None:
    """The harness itself, on each Claude Code release: a -p session of three Bash tool calls
    completes, every hook fires, and a PostToolUse hook's additionalContext reaches the model
    right after its own call."""
    _, claude_bin = claude_release
    rd = RunDir.create(tmp_path)
    claude_prepare(rd, {"hooks": claude_capture_hooks()})
    mock = Mock("mock_anthropic", rd.root, {"steps": claude_tool_steps(3)}).start()
    try:
        res = run(
            [
                str(claude_bin),
                "-p",
                "Run the steps",
                "--output-format",
                "json",
                "--dangerously-skip-permissions",
            ],
            cwd=rd.work,
            env=claude_env(rd, mock),
        )
    finally:
        mock.stop()
    assert res.returncode == 0, res.describe()
    out = json.loads(res.stdout)
    assert out["is_error"] is False and out["result"] == "Done.", res.describe()

    labels = [h["label"] for h in rd.hooks()]
    assert labels.count("PostToolUse") == 3, labels
    for ev in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "SessionEnd"):
        assert ev in labels, labels

    main = mock.main_requests()
    assert len(main) == 4  # one per tool call, plus the final answer
    for n in (1, 2, 3):
        arrived = marks(main, f"E2E-SMOKE-MARKER-{n}", last_turn_text_claude)
        assert arrived == [i == n for i in range(4)], (n, arrived)


# ------------------------------------------------------------------------------------ the rig
@dataclass
class Rig(AgentRig):
    """One Claude Code home wired to one ctxd daemon and one mock."""

    settings: Path

    def env(self, **extra: str) -> dict[str, str]:
        return claude_env(self.rd, self.mock, {**self.ctxd.env, **extra})

    def claude(self, *args: str, **extra_env: str) -> Result:
        """`claude -p ...` with stream-json output (hook events and system messages show)."""
        argv = [
            str(self.bin),
            "-p",
            *args,
            *CLAUDE_STREAM,
        ]
        res = run(argv, cwd=self.rd.work, env=self.env(**extra_env))
        assert res.returncode == 0, res.describe()
        return res


@pytest.fixture
def make_rig(claude_bin: Path, tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    cleanup = ExitStack()  # registered before each start: a failed start leaks nothing

    def make(steps: list[Json], config: str = WINDOW_BASIS, *, counter: bool = False) -> Rig:
        rd = RunDir.create(tmp_path)
        settings = claude_prepare(rd)
        # `ctxd install claude` asks the `claude` on PATH which hooks it knows: this one.
        on_path = rd.root / "bin"
        on_path.mkdir(exist_ok=True)
        (on_path / "claude").symlink_to(claude_bin)
        path = f"{on_path}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        ctxd = Ctxd(rd, config, {"CLAUDE_CONFIG_DIR": str(rd.config), "PATH": path})
        ctxd.install("claude", settings)
        cleanup.callback(ctxd.stop)
        ctxd.start()
        script: Json = {"steps": steps}
        if counter:
            # resumes and compactions rewrite the history: count the requests instead
            script["step_mode"] = "counter"
        mock = Mock("mock_anthropic", rd.root, script)
        cleanup.callback(mock.stop)
        mock.start()
        rig = Rig(claude_bin, rd, ctxd, mock, settings)
        return rig

    with cleanup:
        yield make


@pytest.fixture
def make_release_rig(
    make_rig: Callable[..., Rig], claude_release: tuple[str, Path]
) -> Callable[..., Rig]:
    """`make_rig` on the Claude Code release the test names (`claude_release`, parametrized
    indirectly with each case's release, so no case runs, or skips, on another)."""

    def make(*args: object, **kwargs: object) -> Rig:
        return replace(make_rig(*args, **kwargs), bin=claude_release[1])

    return make


def tokens(cache_read: Sequence[int]) -> list[int]:
    return [c + 5_000 for c in cache_read]


def stream_events(res: Result) -> list[Json]:
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def session_id(res: Result) -> str:
    sid = {e["session_id"] for e in stream_events(res) if e.get("session_id")}
    assert len(sid) == 1, sid
    return str(sid.pop())


def handoff_messages(res: Result) -> list[str]:
    """The system messages shown to the user that ask for a handoff."""
    return [
        e.get("content", "")
        for e in stream_events(res)
        if e.get("type") == "system" and HANDOFF in str(e.get("content", ""))
    ]


def at_calls(main: list[Json], needle: str) -> list[int]:
    """The tool calls (0-based) after which `needle` reached the model: request i+1 carries
    what the hooks said after call i."""
    return [i - 1 for i, hit in enumerate(marks(main, needle, last_turn_text_claude)) if hit]


# ------------------------------------------------------------------------------------ tests
def test_warnings_follow_the_debounce_escalate_and_hand_off_once(
    make_rig: Callable[..., Rig],
) -> None:
    # call:       0        1        2(W)     3-6 (quiet, debounced)            7(W: 5th)
    cache_read = [
        95_000,
        295_000,
        655_000,
        660_000,
        665_000,
        670_000,
        675_000,
        685_000,
        # 8(C: escalation) 9        final answer (Stop: 78 % used -> handoff)
        755_000,
        765_000,
        775_000,
    ]
    rig = make_rig(claude_tool_steps(10, cache_read, TOOL_SECONDS))
    res = rig.claude("Run the steps")

    main = rig.main()
    assert len(main) == 11
    assert at_calls(main, WARNING) == [2, 7]
    assert at_calls(main, CRITICAL) == [8]
    # the handoff is for the user: shown by the CLI, never sent to the model
    assert len(handoff_messages(res)) == 1, res.describe()
    assert not any(HANDOFF in json.dumps(r["body"]) for r in main)

    sid = session_id(res)
    row = rig.ctxd.session(sid)
    assert row["agent"] == "claude"
    assert row["tokens"] == 780_000  # the last usage the model reported
    assert row["window"] == 1_000_000  # what Claude Code itself uses for claude-opus-5-5
    assert row["severity"] == "critical"

    # a later Stop in the same session, still above the handoff line: not asked again
    again = rig.claude("Anything else?", "--resume", sid)
    assert handoff_messages(again) == [], again.describe()


def test_silence_below_the_thresholds(make_rig: Callable[..., Rig]) -> None:
    cache_read = [95_000, 295_000, 495_000, 640_000, 640_000]  # up to 645,000: 35.5 % left
    rig = make_rig(claude_tool_steps(4, cache_read, TOOL_SECONDS))
    res = rig.claude("Run the steps")
    bodies = json.dumps([r["body"] for r in rig.main()])
    assert "CONTEXT " not in bodies
    assert handoff_messages(res) == []
    assert rig.ctxd.session(session_id(res))["tokens"] == 645_000


def test_manual_compact_restarts_the_debounce(make_rig: Callable[..., Rig]) -> None:
    """After `/compact` the first below-threshold call warns again at once; without the reset
    it would be the 2nd call after a warning, inside the debounce."""
    steps = [
        *claude_tool_steps(2, [655_000, 660_000, 665_000], TOOL_SECONDS),  # W at call 0
        # after /compact, in the resumed session: one call, still above the WARNING line
        *claude_tool_steps(1, [670_000, 675_000], TOOL_SECONDS),
    ]
    rig = make_rig(steps, counter=True)
    first = rig.claude("Run the steps")
    sid = session_id(first)
    assert at_calls(rig.main(), WARNING) == [0]

    rig.claude("/compact", "--resume", sid)
    assert rig.mock.requests_of_kind("compact"), "no compaction request reached the mock"
    assert rig.ctxd.session(sid)["compactions"] >= 1

    n_before = len(rig.main())
    rig.claude("Run one more step", "--resume", sid)
    after = rig.main()[n_before:]
    assert len(after) == 2
    assert at_calls(after, WARNING) == [0]


def test_auto_compaction_restarts_the_debounce(make_rig: Callable[..., Rig]) -> None:
    """Usage above Claude Code's auto-compact point (about 965-970k of 1M) makes it compact
    before the next request; the first below-threshold call after that warns at once."""
    steps = [
        *claude_tool_steps(1, [655_000], TOOL_SECONDS)[:1],  # call 0: W
        {
            "tool_use": {
                "name": "Bash",
                "input": {"command": f"sleep {TOOL_SECONDS}; echo big", "description": "Print big"},
            },
            "usage": claude_usage(975_000),
        },  # call 1: 980,000 -> CRITICAL, then auto-compaction
        *claude_tool_steps(1, [655_000, 660_000], TOOL_SECONDS),  # call 2: W again at once
    ]
    rig = make_rig(steps, counter=True)
    res = rig.claude("Run the steps")

    assert rig.mock.requests_of_kind("compact"), "Claude Code did not auto-compact"
    main = rig.main()
    assert len(main) == 4
    assert at_calls(main, WARNING)[:1] == [0]
    assert at_calls(main, CRITICAL) in ([1], [])  # the summary may replace call 1's text
    assert at_calls(main, WARNING)[-1] == 2, [m["answer"] for m in main]
    assert rig.ctxd.session(session_id(res))["compactions"] >= 1


def test_handoff_block_continues_the_turn_once(make_rig: Callable[..., Rig]) -> None:
    config = WINDOW_BASIS + '[handoff]\naction = "block"\n'
    rig = make_rig(claude_tool_steps(1, [715_000, 725_000], TOOL_SECONDS), config)
    res = rig.claude("Run the step")

    main = rig.main()
    # call 0, the answer that stops (blocked: 73 % used), and the continuation it caused
    assert len(main) == 3, res.describe()
    carried = marks(main, HANDOFF, last_turn_text_claude)
    assert carried == [False, False, True]
    # the Stop hook fired again (stop_hook_active) and let the agent stop
    assert json.loads(res.stdout.splitlines()[-1])["result"] == "Done."


def test_without_a_daemon_the_session_completes_quietly(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(claude_tool_steps(3, [655_000, 755_000, 765_000, 775_000], TOOL_SECONDS))
    rig.ctxd.stop_with_cli()
    res = rig.claude("Run the steps", CTXD_NO_SPAWN="1")

    events = stream_events(res)
    responses = [e for e in events if e.get("subtype") == "hook_response"]
    assert responses, "no hook ran"
    for e in responses:
        assert e.get("exit_code") == 0 and e.get("outcome") == "success", e
        assert not e.get("stderr") and not e.get("stdout"), e
    assert "CONTEXT " not in json.dumps([r["body"] for r in rig.main()])
    assert events[-1]["result"] == "Done."
    assert not res.stderr.strip(), res.stderr
    assert not Path(rig.ctxd.env["CTXD_SOCKET"]).exists(), "a daemon was spawned"


def test_status_lists_a_session_once(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(claude_tool_steps(1, [95_000, 100_000], TOOL_SECONDS))
    res = rig.claude("Run the step")
    assert len(rig.ctxd.rows(session_id(res))) == 1, rig.ctxd.status()


def test_instant_tools_are_warned_at_their_own_call(make_rig: Callable[..., Rig]) -> None:
    """Claude Code 2.1.332 writes its transcript lazily: after a tool that returns at once,
    PostToolUse fires before the message that made the call is on disk. ctxd waits (bounded)
    for the call's tool_use_id to appear, so the warning still comes at its own call."""
    cache_read = [
        95_000,
        295_000,
        655_000,
        660_000,
        665_000,
        670_000,
        675_000,
        685_000,
        755_000,
        765_000,
        775_000,
    ]
    rig = make_rig(claude_tool_steps(10, cache_read, tool_seconds=0))
    rig.claude("Run the steps")
    assert at_calls(rig.main(), WARNING) == [2, 7]
    assert at_calls(rig.main(), CRITICAL) == [8]


def failing(call: int, work: Path) -> Json:
    """A call that fails as it runs, so Claude Code fires PostToolUseFailure and not
    PostToolUse: a Read of a missing file (it returns at once), or a Bash command exiting 3."""
    if call % 2:
        command = f"sleep {TOOL_SECONDS}; echo step{call}; exit 3"
        return {"tool_use": {"name": "Bash", "input": {"command": command, "description": "Fail"}}}
    return {"tool_use": {"name": "Read", "input": {"file_path": str(work / f"missing-{call}")}}}


def test_a_failed_call_is_warned_and_counted(make_rig: Callable[..., Rig], tmp_path: Path) -> None:
    """Claude Code 2.1.332 fires PostToolUse only after a call that succeeded; one that fails
    fires PostToolUseFailure. The calls where a warning is due fail (2: the first WARNING, a Read
    of a missing file; 7: the repeat, a Bash command exiting 3), and so does one of the four
    quiet calls between (4): the warnings reach the model after the failed calls, and call 7 is
    the fifth since the warning only with the failed calls counted."""
    cache_read = [95_000, 295_000, 655_000, 660_000, 665_000, 670_000, 675_000, 685_000, 690_000]
    steps = claude_tool_steps(8, cache_read, TOOL_SECONDS)
    fails = (2, 4, 7)
    for call in fails:
        # the rig's work dir (RunDir(tmp_path).work): Read wants an absolute path
        steps[call] = {**failing(call, tmp_path / "work"), "usage": steps[call]["usage"]}
    rig = make_rig(steps)
    assert rig.rd.work == tmp_path / "work"
    res = rig.claude("Run the steps")

    main = rig.main()
    assert len(main) == len(steps), res.describe()
    assert at_calls(main, WARNING) == [2, 7]
    # each came from the failure hook, after the failed result
    assert at_calls(main, "PostToolUseFailure:Read hook additional context") == [2]
    assert at_calls(main, "PostToolUseFailure:Bash hook additional context") == [7]
    results = [
        block
        for r in main[1:]
        for m in r["body"]["messages"][-2:]
        if isinstance(m.get("content"), list)
        for block in m["content"]
        if block.get("type") == "tool_result"
    ]
    errors = {b["tool_use_id"]: b.get("is_error") is True for b in results}
    assert list(errors.values()) == [call in fails for call in range(8)], errors
    fired = [e["hook_event"] for e in stream_events(res) if e.get("subtype") == "hook_response"]
    assert fired.count("PostToolUseFailure") == len(fails), fired
    assert fired.count("PostToolUse") == 8 - len(fails), fired


def start_interactive(rig: Rig, tmp_path: Path) -> Tmux:
    """The real CLI's interactive UI in a tmux session of its own, in the rig's environment."""
    tmux = Tmux(tmp_path / "tmux.sock", "cc")
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in rig.env().items())
    tmux.start(
        f"cd {shlex.quote(str(rig.rd.work))} && env -i {env} {shlex.quote(str(rig.bin))} "
        "--permission-mode default; echo CLAUDE-EXITED; sleep 30"
    )
    return tmux


def assert_window_from_the_statusline(rig: Rig, tmux: Tmux, tokens: int, window: int) -> None:
    """`ctxd status` shows the session at `tokens`, its window taken from the statusline."""

    def learned() -> bool:
        rows = [s for s in rig.ctxd.status()["sessions"] if s.get("tokens") == tokens]
        return bool(rows) and rows[0]["window_source"] == "statusline"

    assert wait_for(learned, 30), (tmux.pane(), rig.ctxd.status())
    row = next(s for s in rig.ctxd.status()["sessions"] if s.get("tokens") == tokens)
    assert row["window"] == window


# ------------------------------------------------------------------------------------ tmux
#: What each release's statusline tells of where it compacts claude-opus-5-5: 2.1.332 nothing
#: (the whole window), 2.1.337 its 400,000 auto-compact window (75 % at 300,000 tokens).
STATUSLINE_COMPACTION = {
    "2.1.332": (1_000_000, "window", 967_000),
    "2.1.337": (400_000, "statusline", 367_000),
}


def test_interactive_statusline_shows_ctxd_and_teaches_the_window(
    make_rig: Callable[..., Rig], claude_release: tuple[str, Path], tmp_path: Path
) -> None:
    """Claude Code's interactive UI under tmux with ctxd's statusLine, on each release: the line
    is ctxd's, and the daemon takes the window from it (ctxd's own default here is 200k,
    Claude's is 1M) and, from 2.1.336, the auto-compact window its percentage counts against."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    release, cli = claude_release
    config = WINDOW_BASIS + "[window]\ndefault = 200000\n"
    steps = claude_tool_steps(1, [95_000, 295_000], TOOL_SECONDS)
    rig = replace(make_rig(steps, config), bin=cli)
    # let the scripted Bash call run without a permission dialog
    doc = json.loads(rig.settings.read_text())
    doc["permissions"] = {"allow": ["Bash"]}
    rig.settings.write_text(json.dumps(doc))
    rig.ctxd.install("claude", rig.settings, "--statusline")
    assert "statusline" in json.loads(rig.settings.read_text())["statusLine"]["command"]

    tmux = start_interactive(rig, tmp_path)
    try:
        # ctxd's line before the first reply: the model and the window Claude Code reported
        assert tmux.wait("no usage yet · window 1M", 40), tmux.pane()
        tmux.send("Run the step")
        assert wait_for(lambda: len(rig.main()) >= 2, 60), tmux.pane()

        assert_window_from_the_statusline(rig, tmux, 300_000, 1_000_000)
        # ...and after it: 300k of that 1M window (no "?": not a guessed default)
        assert tmux.wait("30% of window · 300k/1M", 20), tmux.pane()
        (row,) = rig.ctxd.status()["sessions"]
        found = (row["compact_window"], row["compact_window_source"], row["compaction_at"])
        assert found == STATUSLINE_COMPACTION[release], row
        tmux.send("/exit")
        tmux.wait("CLAUDE-EXITED", 30)
    finally:
        tmux.kill()


def test_interactive_foreign_statusline_unchanged_and_ctxd_learns_the_window(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """The user's own statusLine installed first: after `ctxd install claude` Claude Code's UI
    (tmux) shows the user's line exactly as the user's command prints it, from the payload
    Claude Code sent, while the daemon takes the window from that same payload."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    config = WINDOW_BASIS + "[window]\ndefault = 200000\n"
    rig = make_rig(claude_tool_steps(1, [95_000, 295_000], TOOL_SECONDS), config)
    seen = tmp_path / "seen.jsonl"
    script = tmp_path / "my-line.py"
    script.write_text(
        "import json, sys\n"
        "raw = sys.stdin.read()\n"
        f"open({str(seen)!r}, 'a').write(raw.strip() + '\\n')\n"
        "cw = json.loads(raw).get('context_window') or {}\n"
        "print(f\"MY-OWN-LINE size={cw.get('context_window_size')} "
        "pct={cw.get('used_percentage')}\")\n"
    )
    mine = {"type": "command", "command": f"{shlex.quote(sys.executable)} {script}", "padding": 0}
    doc = json.loads(rig.settings.read_text())
    doc["hooks"] = {}  # the rig's own ctxd hooks go; install puts them back
    doc.update(permissions={"allow": ["Bash"]}, statusLine=mine)
    rig.settings.write_text(json.dumps(doc))
    res = rig.ctxd.install("claude", rig.settings)
    assert "still draws the line" in res.stdout, res.describe()
    line = json.loads(rig.settings.read_text())["statusLine"]
    assert line["padding"] == 0 and line["command"] != mine["command"]

    tmux = start_interactive(rig, tmp_path)
    try:
        assert tmux.wait("MY-OWN-LINE size=1000000", 40), tmux.pane()
        tmux.send("Run the step")
        assert wait_for(lambda: len(rig.main()) >= 2, 60), tmux.pane()

        assert_window_from_the_statusline(rig, tmux, 300_000, 1_000_000)
        assert tmux.wait("MY-OWN-LINE size=1000000 pct=30", 20), tmux.pane()
        pane = tmux.pane()
        assert "no usage yet" not in pane and "to compact" not in pane, pane  # not ctxd's line
        tmux.send("/exit")
        tmux.wait("CLAUDE-EXITED", 30)
    finally:
        tmux.kill()
    # the user's command got Claude Code's own payload on stdin
    payloads = [json.loads(x) for x in seen.read_text().splitlines()]
    assert payloads and all("session_id" in p and "context_window" in p for p in payloads)
    # uninstall gives the user's setting back as it was
    rig.ctxd.ctl("uninstall", "claude", "--settings", str(rig.settings))
    assert json.loads(rig.settings.read_text())["statusLine"] == mine


# ------------------------------------------------------------------- the real compaction point
#: (Claude Code's version, model, window, its environment, settings.json keys, the point the
#: measured rule gives, the source of the auto-compact window ctxd reports)
COMPACTION_CASES = [
    ("2.1.332", "claude-sonnet-4-6", 200_000, {}, {}, 167_000, "window"),  # 200k - 20k - 13k
    ("2.1.332", "claude-opus-5-5", 1_000_000, {}, {}, 967_000, "window"),  # 1M - 20k - 13k
    # min(floor(180,000 * 0.5), 167,000)
    ("2.1.332", "claude-sonnet-4-6", 200_000, {_PCT: "50"}, {}, 90_000, "window"),
    # min(floor(980,000 * 0.5), 967,000)
    ("2.1.332", "claude-opus-5-5", 1_000_000, {_PCT: "50"}, {}, 490_000, "window"),
    # The compact window from Claude Code's settings file, read by the daemon: W = 500,000.
    ("2.1.332", "claude-opus-5-5", 1_000_000, {}, {_ACW: 500_000}, 467_000, "settings"),
    # From 2.1.334 a native 1M model compacts against 400,000: 400k - 20k - 13k.
    ("2.1.337", "claude-opus-5-5", 1_000_000, {}, {}, 367_000, "default"),
    ("2.1.337", "claude-opus-5-5", 1_000_000, {_ENV_ACW: "1000000"}, {}, 967_000, "env"),
    ("2.1.337", "claude-sonnet-4-6", 200_000, {}, {}, 167_000, "window"),
]
#: The count Claude Code compares with its point: input + cache + output of the last reply.
#: claude_usage(c) reports input 1,000 + cache creation 4,000 + cache_read c + output 50.
OUTPUT = 50


def _counts(point: int) -> list[int]:
    """The count after each tool call: through ctxd's default thresholds on the compaction basis
    (WARNING at 35 % of the room left, CRITICAL at 25 %), then 17,000 and 1,000 short of the
    point, then just past it (Claude Code also counts a few tokens it estimates for what came
    since)."""
    warning, critical = round(point * 0.65), round(point * 0.75)
    return [
        point // 3,  # 0: ok
        warning - 600,  # 1: ok, just above the WARNING line
        warning + 600,  # 2: WARNING
        critical - 600,  # 3: still WARNING (debounced: nothing said)
        critical + 600,  # 4: CRITICAL (escalation: said at once)
        point - 17_000,  # 5: CRITICAL (350,000 when the point is 367,000)
        point - 1_000,  # 6: CRITICAL, 1,000 tokens before the point: no compaction
        point + 100,  # 7: past the point: Claude Code compacts before its next request
    ]


@pytest.mark.parametrize(
    ("claude_release", "model", "window", "env", "settings", "point", "source"),
    COMPACTION_CASES,
    ids=[f"{c[0]}-{c[1]}-{c[5]}" for c in COMPACTION_CASES],
    indirect=["claude_release"],
)
def test_tokens_to_compaction_reaches_zero_on_the_turn_claude_code_compacts(
    make_release_rig: Callable[..., Rig],
    tmp_path: Path,
    model: str,
    window: int,
    env: dict[str, str],
    settings: Json,
    point: int,
    source: str,
) -> None:
    """The real CLI's auto-compaction, against ctxd's figures at every tool call: each tool
    asks `ctxd status` (after the reply is on disk) what ctxd thinks at that very turn."""
    counts = _counts(point)
    status_dir = tmp_path / "status"
    status_dir.mkdir()
    steps: list[Json] = []
    ctl = f"{shlex.quote(sys.executable)} -m ctxd status --json"
    for i, count in enumerate(counts):
        out = shlex.quote(str(status_dir / f"{i}.json"))
        command = f"sleep {TOOL_SECONDS}; {ctl} > {out} 2>&1"
        steps.append(
            {
                "tool_use": {
                    "name": "Bash",
                    "input": {"command": command, "description": f"Ask ctxd {i}"},
                },
                "usage": claude_usage(count - 5_000 - OUTPUT),
            }
        )
    # After the compaction: one more call, small again, then the answer.
    steps.append({**claude_tool_steps(1, [20_000], TOOL_SECONDS)[0]})
    steps.append({"text": "Done.", "usage": claude_usage(21_000)})
    rig = make_release_rig(steps, "", counter=True)  # the default config
    if settings:
        rig.settings.write_text(json.dumps({**json.loads(rig.settings.read_text()), **settings}))

    res = rig.claude("Run the steps", "--model", model, **env)

    # Claude Code compacted once, right after the reply of the last call before the point.
    kinds = [(r.get("answer") or {}).get("kind") for r in rig.mock.requests()]
    loop = [k for k in kinds if k in ("main", "compact")]
    assert loop.count("compact") == 1, loop
    assert loop.index("compact") == len(counts), loop

    sid = session_id(res)
    rows = []
    # From call 1 on: during call 0 of a fresh session Claude Code has not created the
    # transcript yet (it writes lazily), so ctxd knows the session from its hooks only.
    for i in range(1, len(counts)):
        doc = json.loads((status_dir / f"{i}.json").read_text())
        (row,) = [s for s in doc["sessions"] if s["session_id"] == sid]
        rows.append(row)
    counts = counts[1:]
    assert [r["tokens"] for r in rows] == [c - OUTPUT for c in counts]
    assert {(r["window"], r["window_source"]) for r in rows} == {(window, "table")}
    assert {r["compaction_at"] for r in rows} == {point}
    assert {r["compact_window_source"] for r in rows} == {source}
    assert [r["tokens_to_compaction"] for r in rows] == [max(0, point - c) for c in counts]
    assert rows[-3]["tokens_to_compaction"] == 17_000
    assert rows[-2]["tokens_to_compaction"] == 1_000 and rows[-1]["tokens_to_compaction"] == 0
    assert [r["severity"] for r in rows] == [
        "ok",
        "warning",
        "warning",
        "critical",
        "critical",
        "critical",
        "critical",
    ]
    main = rig.main()
    assert at_calls(main, WARNING) == [2], [m["answer"] for m in main]
    assert at_calls(main, CRITICAL) == [4]

    after = rig.ctxd.session(sid)
    assert after["compactions"] == 1
    assert after["severity"] == "ok"


def test_a_model_that_never_auto_compacts_is_said_so(
    make_rig: Callable[..., Rig], tmp_path: Path
) -> None:
    """claude-sonnet-4-5 never auto-compacts without a compact window (measured with 2.1.197 and
    2.1.332): usage well past where the others compact, no compaction; ctxd measures against
    the window itself and says "no auto-compaction"."""
    status = tmp_path / "status.json"
    ctl = f"{shlex.quote(sys.executable)} -m ctxd status --json > {shlex.quote(str(status))}"
    steps = claude_tool_steps(2, [100_000, 185_000], TOOL_SECONDS)
    steps[1]["tool_use"]["input"]["command"] = f"sleep {TOOL_SECONDS}; {ctl}"
    rig = make_rig(steps, "", counter=True)
    res = rig.claude("Run the steps", "--model", "claude-sonnet-4-5")

    assert not rig.mock.requests_of_kind("compact")
    (row,) = [
        s for s in json.loads(status.read_text())["sessions"] if s["session_id"] == session_id(res)
    ]
    assert (row["tokens"], row["window"]) == (190_000, 200_000)
    assert row["auto_compaction"] is False
    assert (row["compaction_at"], row["tokens_to_compaction"]) == (None, None)
    assert row["basis_used_pct"] == 95.0 and row["severity"] == "critical"
    text = rig.ctxd.ctl("status")
    assert "no auto-compaction" in text.stdout, text.describe()


def test_an_automatic_compaction_teaches_the_window(make_rig: Callable[..., Rig]) -> None:
    """A window table that is wrong for a model (here the user's own `[windows]`, 1M for
    claude-sonnet-4-6): once Claude Code compacts at about 167,000, which only a 200k window
    explains, ctxd says 200k, from the compaction."""
    steps = claude_tool_steps(3, [100_000, 162_000, 20_000], TOOL_SECONDS)
    rig = make_rig(steps, '[windows]\n"claude-sonnet-4-6" = 1000000\n', counter=True)
    res = rig.claude("Run the steps", "--model", "claude-sonnet-4-6")

    assert len(rig.mock.requests_of_kind("compact")) == 1
    row = rig.ctxd.session(session_id(res))
    assert row["compactions"] == 1
    assert (row["window"], row["window_source"]) == (200_000, "compaction")
    assert row["compaction_at"] == 167_000


def _sdk_switch(rig: Rig, model: str, to_model: str) -> list[Json]:
    """One SDK-mode session (`--input-format stream-json`, as the Agent SDK drives the CLI): a
    prompt, a `set_model` control request to `to_model`, a second prompt; its stream events."""
    argv = [
        str(rig.bin),
        "-p",
        "--input-format",
        "stream-json",
        *CLAUDE_STREAM,
        "--model",
        model,
    ]
    proc = subprocess.Popen(
        argv,
        cwd=rig.rd.work,
        env=rig.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    events: list[Json] = []

    def send(message: Json, until: str) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        for line in proc.stdout:
            event = json.loads(line)
            events.append(event)
            if event.get("type") == until:
                return
        raise AssertionError(f"the CLI ended before a {until}: {events}")

    def prompt(text: str) -> Json:
        user = {"role": "user", "content": text}
        return {"type": "user", "message": user, "parent_tool_use_id": None, "session_id": ""}

    with proc:
        send(prompt("hello"), "result")
        request = {"subtype": "set_model", "model": to_model}
        send(
            {"type": "control_request", "request_id": "switch", "request": request},
            "control_response",
        )
        send(prompt("again"), "result")
        proc.stdin.close()
        proc.wait(30)
    return events


@pytest.mark.parametrize(
    ("config", "cache_read", "said"),
    [
        ("", 295_000, "message"),  # 300,000 tokens: more than sonnet-4-6's whole window
        ("", 45_000, None),  # 50,000: quiet
        ('[model_switch]\naction = "deny"\n', 295_000, "deny"),
    ],
)
def test_a_model_switch_past_the_new_models_window_is_said_or_refused(
    make_rig: Callable[..., Rig], config: str, cache_read: int, said: str | None
) -> None:
    """The real CLI's model switch (the SDK's `set_model`, source "sdk"): ctxd's PreModelSwitch
    answer is one the CLI takes, a message the user sees, or a refusal that keeps the model."""
    usage = claude_usage(cache_read)
    rig = make_rig([{"text": "One.", "usage": usage}, {"text": "Two.", "usage": usage}], config)
    events = _sdk_switch(rig, "claude-opus-4-8[1m]", "claude-sonnet-4-6")

    answers = [
        e
        for e in events
        if e.get("subtype") == "hook_response" and e.get("hook_event") == "PreModelSwitch"
    ]
    assert len(answers) == 1, events
    output = str(answers[0].get("output") or answers[0].get("stdout") or "")
    (switched,) = [e for e in events if e.get("type") == "control_response"]
    models = [e["message"]["model"] for e in events if e.get("type") == "assistant"]
    if said is None:
        assert output.strip() == ""
    else:
        # The size the CLI states (`context_tokens`): the last usage and a little more.
        text = r"this session holds 300,0\d\d tokens, more than its 200,000-token window"
        assert re.search(text, output), answers
    if said == "deny":
        assert models == ["claude-opus-4-8", "claude-opus-4-8"], (switched, models)
    else:
        assert models == ["claude-opus-4-8", "claude-sonnet-4-6"], (switched, models)
    rows = rig.ctxd.rows(str(events[-1]["session_id"]))
    assert [r["model"] for r in rows if r.get("transcript_path")] == [models[-1]]


def test_an_interrupted_turn_reaches_ctxd_on_a_release_that_has_the_hook(
    make_rig: Callable[..., Rig], claude_release: tuple[str, Path], tmp_path: Path
) -> None:
    """`ctxd install claude` asks the `claude` on PATH for its version and registers 2.1.335's
    Interrupt hook only for a release that knows it (2.1.332 would stop its UI at a settings
    warning). On 2.1.337, Esc during a tool call fires it, and the daemon records it."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux not installed (apt-get install tmux)")
    release, cli = claude_release
    # A tool call that takes half a minute (2.1.337 refuses a long leading `sleep` at once).
    steps = claude_tool_steps(1, [95_000, 100_000])
    slow = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(30)'"
    steps[0]["tool_use"]["input"] = {"command": slow, "description": "Wait half a minute"}
    rig = replace(make_rig(steps), bin=cli)
    claude_on_path = rig.rd.root / "bin" / "claude"
    claude_on_path.unlink()
    claude_on_path.symlink_to(cli)
    rig.ctxd.install("claude", rig.settings)
    doc = json.loads(rig.settings.read_text())
    assert ("Interrupt" in doc["hooks"]) is (release != "2.1.332"), doc["hooks"].keys()
    if release == "2.1.332":
        return
    doc["permissions"] = {"allow": ["Bash"]}
    # beside ctxd's, a hook that keeps what Claude Code sends
    capture = {"type": "command", "command": capture_hook_command("Interrupt")}
    doc["hooks"]["Interrupt"].append({"hooks": [capture]})
    rig.settings.write_text(json.dumps(doc))

    tmux = start_interactive(rig, tmp_path)
    try:
        assert tmux.wait("no usage yet", 40), tmux.pane()  # ctxd's line: the UI is up
        tmux.send("Run the step")
        assert wait_for(lambda: len(rig.main()) >= 1, 60), tmux.pane()
        assert tmux.wait("esc to interrupt", 20), tmux.pane()  # the tool call is running
        time.sleep(1.0)
        tmux("send-keys", "-t", "cc", "Escape")

        def interrupts() -> int:
            hooks = rig.ctxd.status()["counters"].get("hooks", [])
            return sum(n for agent, name, n in hooks if (agent, name) == ("claude", "Interrupt"))

        assert wait_for(lambda: interrupts() == 1, 20), (tmux.pane(), rig.ctxd.status())
        tmux.send("/exit")
        tmux.wait("CLAUDE-EXITED", 30)
    finally:
        tmux.kill()
    assert "Settings Warning" not in tmux.pane()
    (fired,) = [h["payload"] for h in rig.rd.hooks() if h["label"] == "Interrupt"]
    assert fired["hook_event_name"] == "Interrupt"
    assert (fired["source"], fired["reason"]) == ("user", "stop"), fired
