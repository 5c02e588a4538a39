"""Copilot CLI events files -> usage updates, checked against the real 1.0.102 captures
(tests/e2e/capture_copilot.py): every figure is what the mock API reported
(tests/data/transcripts/copilot-1.0.102/usage.*.json), the window the one Copilot CLI recorded,
the compaction the one it applied; and the waits for a lagging file."""

from __future__ import annotations

import json
from pathlib import Path

from ctxd.agents.copilot.transcript import CopilotReader
from ctxd.cli.replay import Row, replay

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "copilot-1.0.102"
PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "copilot" / "1.0.102"


def _main_prompts(name: str) -> list[int]:
    usage = json.loads((DATA / f"usage.{name}.json").read_text())
    return [u["usage"]["prompt_tokens"] for u in usage if u["kind"] == "main"]


def test_every_figure_is_what_the_mock_reported() -> None:
    for name in ("print", "interactive", "failure"):
        updates = CopilotReader().feed((DATA / f"transcript.{name}.jsonl").read_bytes())
        assert [u.tokens for u in updates] == _main_prompts(name), name
        assert {u.reported_window for u in updates} == {64_000}
        assert {u.pending for u in updates} == {40}
        assert {u.model for u in updates} == {"gpt-4.1"}
        assert not any(u.compaction or u.estimated for u in updates)


def test_an_applied_compaction_is_its_own_estimate() -> None:
    updates = CopilotReader().feed((DATA / "transcript.compact.jsonl").read_bytes())
    figures = [(u.tokens, u.compaction) for u in updates]
    # 56,000 of 64,000 started it; the request already under way (57,000) came before it was
    # applied; its own estimate of what is left follows, then the calls after it
    compacted = [u for u in updates if u.compaction]
    assert len(compacted) == 1 and compacted[0].estimated
    assert [t for t, c in figures if not c] == _main_prompts("compact")
    assert figures.index((compacted[0].tokens, True)) == 3


def test_the_compact_timeline_replays() -> None:
    rows = [r for r in replay(str(DATA / "transcript.compact.jsonl")) if isinstance(r, Row)]
    timeline = [(r.figures.tokens, r.compaction, r.figures.severity.name.lower()) for r in rows]
    assert timeline[:3] == [
        (20_000, False, "ok"),
        (56_000, False, "critical"),
        (57_000, False, "critical"),
    ]
    # the capture hook's agentStop block makes one more turn: the mock repeats its last step
    after = [(15_000, False, "ok"), (16_000, False, "ok"), (16_000, False, "ok")]
    assert timeline[3][1] is True and timeline[4:] == after
    last = rows[-1].figures
    assert (last.window.size, last.window.source) == (64_000, "agent")
    assert last.compaction_at == 51_200


def test_a_cancelled_compaction_changes_nothing() -> None:
    line = {
        "type": "session.compaction_complete",
        "data": {"success": False, "outcome": "cancelled", "tokenLimit": 64_000},
        "id": "x",
        "timestamp": "2026-12-01T22:31:11.280Z",
        "parentId": None,
    }
    assert CopilotReader().feed(json.dumps(line, separators=(",", ":")).encode() + b"\n") == []


def test_a_post_tool_use_waits_for_its_own_hook_start() -> None:
    """The hook's payload timestamp names its `hook.start` event; before that line is read
    the file may not hold the request the tool call came from."""
    lines = (DATA / "transcript.print.jsonl").read_bytes().splitlines(keepends=True)
    payloads = sorted(PAYLOADS.glob("print/*-postToolUse.json"))
    stamps = [str(json.loads(p.read_text())["timestamp"]) for p in payloads]
    assert len(stamps) == 3
    assert _hook_starts_seen(lines, stamps) == [0, 1, 2]
    assert not CopilotReader().saw_tool_use(stamps[0])


def _hook_starts_seen(lines: list[bytes], stamps: list[str]) -> list[int]:
    """Feeding `lines` one by one: the order in which the hooks of `stamps` are seen, each
    only once the request that made its call is read (its usage is the n+1th)."""
    reader = CopilotReader()
    seen: list[int] = []
    usage_read = 0
    for line in lines:
        usage_read += len(reader.feed(line))
        for n, stamp in enumerate(stamps):
            if n not in seen and reader.saw_tool_use(stamp):
                seen.append(n)
                assert usage_read >= n + 1
    return seen


def test_a_failed_calls_hook_waits_for_its_own_hook_start() -> None:
    """A call that failed fires postToolUseFailure, whose `hook.start` names its timestamp as
    postToolUse's does (without it the hook would wait out TOOL_CALL_WAIT every time)."""
    lines = (DATA / "transcript.failure.jsonl").read_bytes().splitlines(keepends=True)
    payloads = sorted(PAYLOADS.glob("failure/*-postToolUse*.json"))
    assert [p.stem.split("-", 1)[1] for p in payloads] == ["postToolUseFailure"] * 3 + [
        "postToolUse"
    ] * 2
    stamps = [str(json.loads(p.read_text())["timestamp"]) for p in payloads]
    assert _hook_starts_seen(lines, stamps) == [0, 1, 2, 3, 4]


def test_saw_answer_follows_the_final_answer() -> None:
    reader = CopilotReader()
    for line in (DATA / "transcript.print.jsonl").read_bytes().splitlines(keepends=True):
        reader.feed(line)
        if line.startswith(b'{"type":"hook.start"') and b'"hookType":"agentStop"' in line:
            assert reader.saw_answer()
        if line.startswith(b'{"type":"hook.start"') and b'"hookType":"postToolUse"' in line:
            assert not reader.saw_answer()
