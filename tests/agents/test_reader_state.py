"""Property: a reader (and its digest) stopped anywhere in a transcript, kept as plain JSON
values and put back into a fresh one, goes on exactly as if it had never stopped: the same
updates, the same digest, the same answers about tool calls. It is what lets a restart read only
what was appended while the daemon was down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.agents import spec as agent_spec
from ctxd.agents import state
from ctxd.agents.reader import NO_FACTS

DATA = Path(__file__).parents[1] / "data" / "transcripts"

SAMPLES: list[tuple[str, str]] = [
    ("claude", "claude-code-2.1.332/transcript.continuity.jsonl"),
    ("claude", "claude-code-2.1.332/transcript.compact.jsonl"),
    ("claude", "claude-code-2.1.197/transcript.autocompact.jsonl"),
    ("gemini", "gemini-cli-0.61.0/transcript.continuity.1.jsonl"),
    ("gemini", "gemini-cli-0.61.0/transcript.compress.1.jsonl"),
    ("codex", "codex-cli-0.171.0/rollout.continuity.jsonl"),
    ("codex", "codex-cli-0.171.0/rollout.autocompact.jsonl"),
    ("qwen", "qwen-code-0.24.4/transcript.compress.jsonl"),
    ("pi", "pi-0.73.1/session.compact.jsonl"),
    ("copilot", "copilot-1.0.102/transcript.compact.jsonl"),
    ("kimi", "kimi-code-2.1.0/wire.compact.jsonl"),
]


def opened(agent: str, path: str) -> tuple[Any, Any]:
    facts = agent_spec(agent).open_facts(path)
    return agent_spec(agent).open_reader(path, facts or NO_FACTS), facts


def kept(reader: Any, facts: Any) -> bytes:
    """What a snapshot holds of them: JSON bytes."""
    doc = {
        "reader": state.dump(reader, (facts, NO_FACTS)),
        "facts": None if facts is None else state.dump(facts),
    }
    return orjson.dumps(doc)


@pytest.mark.parametrize(("agent", "name"), SAMPLES)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.floats(min_value=0.0, max_value=1.0))
def test_a_reader_put_back_anywhere_goes_on_as_if_never_stopped(
    agent: str, name: str, cut: float
) -> None:
    path = str(DATA / name)
    data = (DATA / name).read_bytes()
    at = int(cut * len(data))
    reader, facts = opened(agent, path)
    reader.feed(data[:at])

    doc = orjson.loads(kept(reader, facts))
    again, again_facts = opened(agent, path)
    state.load_into(again, doc["reader"], keep=("facts",))
    if again_facts is not None:
        state.load_into(again_facts, doc["facts"])

    assert again.feed(data[at:]) == reader.feed(data[at:])
    if facts is not None:
        assert again_facts.digest == facts.digest
    assert again.saw_answer() == reader.saw_answer()


def test_a_state_naming_a_class_outside_ctxd_is_refused() -> None:
    reader, _ = opened("claude", "/t.jsonl")
    doc = orjson.loads(kept(reader, None))
    doc["reader"]["_lines"]["$o"] = "subprocess:Popen"
    with pytest.raises(state.StateError):
        state.load_into(opened("claude", "/t.jsonl")[0], doc["reader"], keep=("facts",))


def test_a_state_of_other_attributes_is_refused() -> None:
    reader, _ = opened("claude", "/t.jsonl")
    doc = orjson.loads(kept(reader, None))
    doc["reader"]["_renamed_since"] = None
    with pytest.raises(state.StateError):
        state.load_into(opened("claude", "/t.jsonl")[0], doc["reader"], keep=("facts",))


def test_what_is_not_plain_data_is_not_kept() -> None:
    reader, _ = opened("claude", "/t.jsonl")
    reader._final_id = print  # not a value of a transcript
    with pytest.raises(state.StateError):
        state.dump(reader)
    reader._final_id = "x" * (state.MAX_STATE + 1)
    with pytest.raises(state.StateError):
        state.dump(reader)
