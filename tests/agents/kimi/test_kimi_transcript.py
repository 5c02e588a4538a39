"""Kimi Code wire files: the real 2.1.0 capture (tests/e2e/capture_kimi.py) gives the mock's
figures, and the records that are not the agent loop's context give none."""

from __future__ import annotations

import json
from pathlib import Path

from ctxd import agents
from ctxd.agents.kimi.transcript import KimiReader
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "kimi-code-2.1.0"


def feed(*records: dict[str, object]) -> list[UsageUpdate]:
    return KimiReader().feed(b"".join(json.dumps(r).encode() + b"\n" for r in records))


def usage(
    prompt: int, output: int = 40, scope: str = "turn", agent: str = "main"
) -> dict[str, object]:
    half = prompt // 2
    return {
        "type": "usage.record",
        "agentId": agent,
        "model": "__kimi_env_model__",
        "usage": {
            "inputOther": prompt - half,
            "output": output,
            "inputCacheRead": half,
            "inputCacheCreation": 0,
        },
        "usageScope": scope,
        "time": 1796554821000,
    }


def test_the_capture_gives_the_mocks_prompts_then_kimis_count_after_its_compaction() -> None:
    reported = json.loads((DATA / "usage.compact.json").read_text())
    main = [r["usage"]["prompt_tokens"] for r in reported if r["kind"] == "main"]
    updates = agents.spec("kimi").open_reader(None).feed((DATA / "wire.compact.jsonl").read_bytes())

    before = [u for u in updates if not u.compaction]
    assert [u.tokens for u in before] == main == [20_000, 21_000, 22_000, 171_000, 30_000]
    assert {u.pending for u in before} == {40}
    assert {u.model for u in updates} == {"kimi-mock-model"}
    (compaction,) = (u for u in updates if u.compaction)
    # Kimi's own estimate of the compacted context (`token_counting.rebased`, PostCompact's
    # estimated_token_count in the same run), after the 171,040 it compacted at
    assert (compaction.tokens, compaction.estimated, compaction.compacted_from) == (
        21_739,
        True,
        171_040,
    )
    assert updates.index(compaction) == 4


def test_a_side_request_or_a_subagents_usage_is_not_the_context() -> None:
    assert feed(usage(5_000, scope="session"), usage(9_000, agent="agent_1")) == []
    (update,) = feed(usage(12_000))
    assert (update.tokens, update.pending, update.at) == (12_000, 40, 1796554821.0)


def test_a_cancelled_compaction_resets_nothing() -> None:
    records: list[dict[str, object]] = [
        usage(150_000),
        {"type": "full_compaction.begin", "source": "auto", "agentId": "main"},
        {"type": "token_counting.rebased", "agentId": "main", "tokens": 9_000, "measured": False},
        {"type": "full_compaction.cancel", "agentId": "main"},
        {"type": "full_compaction.complete", "agentId": "main"},
    ]
    assert [u.tokens for u in feed(*records)] == [150_000]


def test_the_answer_that_ends_a_turn_is_seen_until_the_turn_ends() -> None:
    reader = KimiReader()
    step_end = {
        "type": "context.append_loop_event",
        "agentId": "main",
        "event": {"type": "step.end", "finishReason": "tool_use"},
    }
    reader.feed(json.dumps(step_end).encode() + b"\n")
    assert not reader.saw_answer()
    step_end["event"] = {"type": "step.end", "finishReason": "end_turn"}
    reader.feed(json.dumps(step_end).encode() + b"\n")
    assert reader.saw_answer()
    # the turn's end is written after its Stop hooks: a Stop whose own turn is not on disk
    # yet must not be judged on the turn before
    reader.feed(b'{"type":"turn.ended","agentId":"main","turnId":0,"reason":"completed"}\n')
    assert not reader.saw_answer()
    reader.feed(json.dumps(step_end).encode() + b"\n")
    reader.feed(b'{"type":"turn.prompt","agentId":"main","turnId":1}\n')
    assert not reader.saw_answer()


def test_a_crash_hole_and_garbage_lines_are_skipped() -> None:
    data = b"\0\0" + json.dumps(usage(1_000)).encode() + b"\n{not json\n[1]\n"
    assert [u.tokens for u in KimiReader().feed(data)] == [1_000]
