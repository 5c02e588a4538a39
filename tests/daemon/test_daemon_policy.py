"""What the agent sees, through real `ctxd-hook` processes against a real daemon: the GSD
warning trace, the reset on compaction, the handoff once, and silence when nothing is due.

Claude Code figures used below (no statusline, so the window is the 1,000,000 default):
on basis "window", remaining 40 % / 30 % / 20 % are 600k / 700k / 800k tokens; on the default
basis "compaction" the room is 967,000 tokens (window - 20,000 for output - 13,000: Claude Code's
rule, output tokens counted), so WARNING starts at 65 % of it (~628,500 tokens), CRITICAL at 75 %
(~725,200), the handoff at 70 % (~676,900).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

WINDOW_BASIS = '[thresholds]\nbasis = "window"\n'
TOKENS_AT_REMAINING = {40: 600_000, 30: 700_000, 20: 800_000}


def tool_call(world: World, t: ClaudeTranscript, tokens: int) -> Any:
    """The agent gets a response with `tokens` of context, runs a tool, the hook fires."""
    t.assistant(tokens)
    return world.hook_out("claude", t.payload("PostToolUse"))


def kind(out: Any) -> str | None:
    """None, "WARNING" or "CRITICAL", checking the envelope names the event it answers."""
    if out is None:
        return None
    assert set(out) == {"hookSpecificOutput"}, out
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "PostToolUse"
    text: str = spec["additionalContext"]
    for level in ("WARNING", "CRITICAL"):
        if text.startswith(f"CONTEXT {level}:"):
            return level
    raise AssertionError(f"unexpected context text: {text!r}")


def test_gsd_trace_on_window_basis(world: World) -> None:
    world.write_config(WINDOW_BASIS)
    world.start()
    t = world.claude()
    remaining = [40, 30, 30, 30, 30, 30, 30, 20, 20, 20, 20, 20, 20, 30]
    expected = [
        None, "WARNING", None, None, None, None, "WARNING",
        "CRITICAL", None, None, None, None, "CRITICAL", None,
    ]  # fmt: skip
    got = [kind(tool_call(world, t, TOKENS_AT_REMAINING[r])) for r in remaining]
    assert got == expected


def test_warning_text_states_the_figures(world: World) -> None:
    world.write_config(WINDOW_BASIS)
    world.start()
    t = world.claude()
    out = tool_call(world, t, 700_000)
    text = out["hookSpecificOutput"]["additionalContext"]
    assert text.startswith("CONTEXT WARNING: 70% of the context window is used, 30% left")
    assert "700,000 of 1,000,000 tokens" in text
    assert "266,900 tokens before compaction" in text


def test_default_basis_is_the_room_before_compaction(shared: World) -> None:
    # 640k of 1M is 36 % remaining of the window (silent on that basis) but only 34 % of the
    # 967,000 tokens before Claude Code compacts: one crossing, one warning.
    t = shared.claude()
    assert tool_call(shared, t, 500_000) is None
    out = tool_call(shared, t, 640_000)
    assert kind(out) == "WARNING"
    assert "of the room before auto-compaction" in out["hookSpecificOutput"]["additionalContext"]
    assert tool_call(shared, t, 641_000) is None
    assert kind(tool_call(shared, t, 740_000)) == "CRITICAL"


def test_compact_boundary_resets_the_debounce(shared: World) -> None:
    t = shared.claude()
    assert kind(tool_call(shared, t, 650_000)) == "WARNING"
    assert tool_call(shared, t, 650_000) is None  # debounced: call 1 of 5
    t.compact_boundary(post_tokens=30_000, pre_tokens=650_000)
    # The new context fills up again fast; the first call back above the line warns at once.
    assert kind(tool_call(shared, t, 650_000)) == "WARNING"
    row = shared.row(t)
    assert row is not None and row["compactions"] == 1


def test_precompact_hook_resets_the_debounce(shared: World) -> None:
    t = shared.claude()
    assert kind(tool_call(shared, t, 650_000)) == "WARNING"
    assert tool_call(shared, t, 650_000) is None
    assert shared.hook_out("claude", t.payload("PreCompact")) is None
    assert kind(tool_call(shared, t, 650_000)) == "WARNING"


def test_handoff_is_asked_once(shared: World) -> None:
    t = shared.claude()
    t.assistant(700_000)  # 72.4 % of the room before compaction
    out = shared.hook_out("claude", t.payload("Stop"))
    assert set(out) == {"systemMessage"}
    assert out["systemMessage"].startswith("CONTEXT HANDOFF: 72% of the room")
    assert shared.hook_out("claude", t.payload("Stop")) is None
    row = shared.row(t)
    assert row is not None and row["handoff_asked"] is True


def test_no_handoff_below_the_threshold(shared: World) -> None:
    t = shared.claude()
    t.assistant(600_000)  # 62 %
    assert shared.hook_out("claude", t.payload("Stop")) is None
    t.assistant(680_000)  # 70.3 %
    assert shared.hook_out("claude", t.payload("Stop")) is not None


def test_no_handoff_while_a_stop_hook_is_active(shared: World) -> None:
    t = shared.claude()
    t.assistant(700_000)
    assert shared.hook_out("claude", t.payload("Stop.active")) is None
    # Not "used up" by the active stop: the next plain Stop still asks.
    assert shared.hook_out("claude", t.payload("Stop")) is not None


def test_handoff_block_action(world: World) -> None:
    world.write_config('[handoff]\naction = "block"\n')
    world.start()
    t = world.claude()
    t.assistant(700_000)
    out = world.hook_out("claude", t.payload("Stop"))
    assert set(out) == {"decision", "reason"}
    assert out["decision"] == "block"
    assert out["reason"].startswith("CONTEXT HANDOFF:")
    # The agent continues and Stop fires again with stop_hook_active: never block twice.
    assert world.hook_out("claude", t.payload("Stop.active")) is None
    assert world.hook_out("claude", t.payload("Stop")) is None


def test_silence_below_thresholds(shared: World) -> None:
    t = shared.claude()
    events = ["SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUse", "Stop"]
    for event in events:
        t.assistant(300_000)
        result = shared.hook("claude", t.payload(event))
        assert (result.returncode, result.stdout, result.stderr) == (0, b"", b""), event


def test_no_output_for_a_session_without_usage_yet(shared: World) -> None:
    t = shared.claude()  # an empty transcript: no assistant message yet
    for event in ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop"):
        result = shared.hook("claude", t.payload(event))
        assert (result.returncode, result.stdout) == (0, b""), event


def test_half_written_line_is_not_read_until_complete(shared: World) -> None:
    # The agent is mid-write when the hook fires: the figure is the last complete line's.
    t = shared.claude()
    t.assistant(100_000)
    t.assistant(740_000)
    data = t.path.read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1] + b"\n"
    t.path.write_bytes(data[: -len(last)] + last[:200])  # same inode, cut mid-line
    assert shared.hook_out("claude", t.payload("PostToolUse")) is None
    with t.path.open("ab") as f:
        f.write(last[200:])
    assert kind(shared.hook_out("claude", t.payload("PostToolUse"))) == "CRITICAL"


def test_transcript_rewritten_from_scratch_is_read_again(shared: World) -> None:
    t = shared.claude()
    t.assistant(740_000)
    assert kind(shared.hook_out("claude", t.payload("PostToolUse"))) == "CRITICAL"
    replacement = t.path.with_suffix(".new")
    t.path.rename(replacement)
    t.path.touch()
    t.assistant(120_000)  # a new, smaller file at the same path (a new inode)
    replacement.unlink()
    shared.hook_out("claude", t.payload("PostToolUse"))
    row = shared.row(t)
    assert row is not None and row["tokens"] == 120_000


def test_many_sessions_at_once_each_get_their_own_answer(shared: World) -> None:
    sessions = [shared.claude() for _ in range(12)]
    for i, t in enumerate(sessions):
        t.assistant(650_000 if i % 2 else 300_000)
    procs = [
        subprocess.Popen(
            [sys.executable, "-S", "-I", str(shared.hook_client), "claude"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=shared.env,
        )
        for _ in sessions
    ]
    outs = [
        proc.communicate(json.dumps(t.payload("PostToolUse")).encode(), timeout=10)[0]
        for proc, t in zip(procs, sessions, strict=True)
    ]
    assert [bool(out) for out in outs] == [bool(i % 2) for i in range(12)]
    for out in outs:
        if out:
            assert kind(json.loads(out)) == "WARNING"


def test_a_tool_call_is_judged_by_its_own_message_even_if_written_late(world: World) -> None:
    """Claude Code writes its transcript lazily: PostToolUse may fire before the message that
    made the call is on disk. The answer must still use that message's usage, not the last."""
    world.write_config(WINDOW_BASIS)
    world.start()
    t = world.claude()
    assert kind(tool_call(world, t, TOKENS_AT_REMAINING[40])) is None
    held: list[dict[str, Any]] = []
    append = t.append
    t.append = lambda *records: held.extend(records)  # type: ignore[method-assign]  # held back
    t.assistant(TOKENS_AT_REMAINING[30])
    t.append = append  # type: ignore[method-assign]
    payload = t.payload("PostToolUse")
    writer = threading.Timer(0.1, lambda: t.append(*held))
    writer.start()
    try:
        out = world.hook_out("claude", payload)
    finally:
        writer.join()
    assert kind(out) == "WARNING"
