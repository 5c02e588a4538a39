"""Property: a transcript fed in arbitrary pieces gives the same updates as the whole file,
for every agent and every sample transcript."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.agents import spec as agent_spec
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[1] / "data" / "transcripts"

SAMPLES: list[tuple[str, str]] = [
    ("claude", "claude-code-2.1.332/transcript.compact.jsonl"),
    ("claude", "claude-code-2.1.332/transcript.interactive.jsonl"),
    ("claude", "claude-code-2.1.197/transcript.compact.jsonl"),
    ("gemini", "gemini-cli-0.61.0/transcript.compress.1.jsonl"),
    ("gemini", "gemini-cli-0.61.0/transcript.interactive.1.jsonl"),
    ("gemini", "gemini-cli-0.61.0/transcript.print.1.jsonl"),
    ("codex", "codex-cli-0.171.0/rollout.autocompact.jsonl"),
    ("codex", "codex-cli-0.171.0/rollout.interactive.jsonl"),
    ("codex", "codex-cli-0.171.0/rollout.ctxerror.jsonl"),
    ("copilot", "copilot-1.0.102/transcript.compact.jsonl"),
    ("copilot", "copilot-1.0.102/transcript.print.jsonl"),
    ("cline", "cline-3.0.65/sessions/1796554282174_e2h89/1796554282174_e2h89.messages.json"),
]


def _whole(agent: str, data: bytes) -> list[UsageUpdate]:
    return agent_spec(agent).open_reader(None).feed(data)


@pytest.mark.parametrize(("agent", "name"), SAMPLES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=40))
def test_any_split_gives_the_same_updates(agent: str, name: str, cuts: list[float]) -> None:
    data = (DATA / name).read_bytes()
    expected = _whole(agent, data)
    points = sorted({int(cut * len(data)) for cut in cuts})
    bounds = [0, *points, len(data)]

    reader = agent_spec(agent).open_reader(None)
    updates: list[UsageUpdate] = []
    for start, end in itertools.pairwise(bounds):
        updates.extend(reader.feed(data[start:end]))

    assert updates == expected
    assert updates, "every sample here reports usage"


@pytest.mark.parametrize(("agent", "name"), SAMPLES)
def test_line_by_line_and_tiny_chunks_give_the_same_updates(agent: str, name: str) -> None:
    data = (DATA / name).read_bytes()
    expected = _whole(agent, data)

    by_line = agent_spec(agent).open_reader(None)
    lines = [u for line in data.splitlines(keepends=True) for u in by_line.feed(line)]
    tiny = agent_spec(agent).open_reader(None)
    chunks = [u for i in range(0, len(data), 7) for u in tiny.feed(data[i : i + 7])]

    assert lines == expected
    assert chunks == expected
