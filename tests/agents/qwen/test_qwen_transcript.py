"""The Qwen Code reader against real 0.24.4 transcripts: every figure it reports is a usage the
mock API reported (tests/data/transcripts/qwen-code-0.24.4/usage.*.json), or the compression's
own estimate; split anywhere, it reports the same."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxd.agents import detect_agent, detect_agent_from_path, spec
from ctxd.agents.qwen import files
from ctxd.agents.qwen.transcript import QwenReader
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "qwen-code-0.24.4"
SCENARIOS = ("print", "compress", "interactive")


def _updates(name: str) -> list[UsageUpdate]:
    return QwenReader().feed((DATA / f"transcript.{name}.jsonl").read_bytes())


def _mock_prompts(name: str, kind: str = "main", field: str = "prompt_tokens") -> list[int]:
    """The prompt_tokens (or `field`) the mock reported to the CLI's requests of `kind`."""
    entries = json.loads((DATA / f"usage.{name}.json").read_text())
    return [e["usage"][field] for e in entries if e["kind"] == kind]


def _records(name: str) -> list[dict[str, object]]:
    lines = (DATA / f"transcript.{name}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_answer_reports_the_prompt_the_mock_api_reported(name: str) -> None:
    turn_ids = [r["uuid"] for r in _records(name) if r["type"] == "assistant"]
    # (the figures a compression or a rewind brings are checked below)
    answers = [u for u in _updates(name) if u.turn_id in turn_ids]

    # One update per recorded answer (each is its own turn), in the order the mock answered.
    assert [u.turn_id for u in answers] == turn_ids
    assert [u.tokens for u in answers] == _mock_prompts(name)
    # the answer's output, which the next request carries: completion_tokens
    assert [u.pending for u in answers] == _mock_prompts(name, field="completion_tokens")
    assert {u.model for u in answers} == {"qwen3-coder-plus"}
    assert {u.reported_window for u in answers} == {1_000_000}
    assert {u.agent_version for u in answers} == {"0.24.4"}  # shown in `ctxd status`
    assert all(u.at is not None for u in answers)


def test_the_usage_recorded_is_the_usage_the_api_sent_field_for_field() -> None:
    entries = [e for e in json.loads((DATA / "usage.compress.json").read_text())]
    sent = [e["usage"] for e in entries if e["kind"] == "main"]
    recorded = [r["usageMetadata"] for r in _records("compress") if r["type"] == "assistant"]
    assert recorded == [
        {
            "promptTokenCount": u["prompt_tokens"],
            "candidatesTokenCount": u["completion_tokens"],
            "thoughtsTokenCount": 0,
            "totalTokenCount": u["total_tokens"],
            "cachedContentTokenCount": u["prompt_tokens_details"]["cached_tokens"],
        }
        for u in sent
    ]


def test_a_compression_reports_the_clis_own_estimate_and_the_next_answer_replaces_it() -> None:
    updates = _updates("compress")
    tokens = [u.tokens for u in updates]
    assert [u.compaction for u in updates].count(True) == 1
    at = next(i for i, u in enumerate(updates) if u.compaction)

    # 900,000 >= 850,000: compressed before the next request. Qwen Code carries on with its own
    # estimate of the compressed prompt (`newTokenCount`): the mock's 900,000 was a made-up
    # figure for a few hundred characters, so the estimate stays near it.
    (record,) = [r for r in _records("compress") if r.get("subtype") == "chat_compression"]
    info = record["systemPayload"]["info"]  # type: ignore[index]
    assert tokens[at - 1 : at + 2] == [900_000, info["newTokenCount"], 30_000]
    assert updates[at].turn_id == record["uuid"]
    assert updates[at].estimated and info["newTokenCountIsEstimated"]
    # automatic: the count it compressed at (prompt + output + the pending tool result)
    assert updates[at].compacted_from == info["originalTokenCount"] >= 900_040
    assert updates[at].pending == 0
    # The compression request's own usage (3,000) is never a figure: only answers are.
    assert _mock_prompts("compress", "compress") == [3_000]
    assert 3_000 not in tokens


def test_a_resumed_session_appends_to_the_same_file_and_is_read_on() -> None:
    records = _records("compress")
    assert len({r["sessionId"] for r in records}) == 1
    assert [u.tokens for u in _updates("compress")][-2:] == [31_000, 31_000]


def test_a_manual_compression_and_a_real_rewind_in_the_ui() -> None:
    updates = _updates("interactive")
    (record,) = [r for r in _records("interactive") if r.get("subtype") == "chat_compression"]
    info = record["systemPayload"]["info"]  # type: ignore[index]
    estimate = info["newTokenCount"]
    assert info["triggerReason"] == "manual"
    assert [(u.tokens, u.compaction) for u in updates] == [
        (12_000, False),
        (13_500, False),
        (15_000, False),
        (estimate, True),  # `/compress`: "compressed from 15000 to ~<estimate> tokens"
        (9_000, False),  # "Say bye"
        # Rewound to before "Say bye": the figure in force there, the compression's estimate
        (estimate, False),
        (10_000, False),  # "Say hi"
    ]
    assert updates[3].compacted_from is None  # manual: says nothing about the window
    assert updates[5].turn_id == updates[3].turn_id and updates[5].estimated
    (rewind,) = [r for r in _records("interactive") if r.get("subtype") == "rewind"]
    bye = next(r for r in _records("interactive") if r["type"] == "user" and "Say bye" in str(r))
    assert rewind["parentUuid"] == bye["parentUuid"]


def _line(record: Mapping[str, object]) -> bytes:
    # As Qwen Code writes it: compact JSON, keys in insertion order.
    return json.dumps(record, separators=(",", ":")).encode() + b"\n"


def test_a_rewind_brings_back_the_figure_in_force_before_the_turn_it_went_back_to() -> None:
    records = _records("print")
    first_user = records[0]
    base = {k: first_user[k] for k in ("sessionId", "timestamp")}
    # A second user turn after the whole first one, answered with 40,000 ...
    last = records[-1]["uuid"]
    user = {"uuid": "u2", "parentUuid": last, **base, "type": "user", "message": {"parts": []}}
    answer = {
        "uuid": "a2",
        "parentUuid": "u2",
        **base,
        "type": "assistant",
        "model": "qwen3-coder-plus",
        "usageMetadata": {"promptTokenCount": 40_000},
        "contextWindowSize": 1_000_000,
    }
    # ... then `/rewind` to that turn: the record hangs under the user turn's parent.
    rewind = {
        "uuid": "r1",
        "parentUuid": last,
        **base,
        "type": "system",
        "subtype": "rewind",
        "systemPayload": {},
    }
    reader = QwenReader()
    before = reader.feed(b"".join(_line(r) for r in records))
    assert [u.tokens for u in reader.feed(_line(user) + _line(answer))] == [40_000]

    (back,) = reader.feed(_line(rewind))
    assert back.tokens == before[-1].tokens == 16_500
    assert back.turn_id == before[-1].turn_id
    assert not back.compaction


def test_a_line_laid_out_otherwise_is_decoded() -> None:
    record = {
        "type": "assistant",
        "uuid": "x1",
        "parentUuid": None,
        "sessionId": "s",
        "usageMetadata": {"promptTokenCount": 123},
    }
    (update,) = QwenReader().feed(_line(record))
    assert (update.tokens, update.turn_id) == (123, "x1")


def test_records_without_usage_and_garbage_report_nothing() -> None:
    reader = QwenReader()
    assert reader.feed(b"not json\n[1]\n{}\n\n") == []
    records = _records("print")
    assert reader.feed(b"".join(_line(r) for r in records if r["type"] != "assistant")) == []


def test_reset_reads_the_file_again_from_the_start() -> None:
    data = (DATA / "transcript.print.jsonl").read_bytes()
    reader = QwenReader()
    first = reader.feed(data)
    reader.reset()
    assert reader.feed(data) == first


def test_a_tool_call_is_seen_once_the_answer_that_made_it_is_read() -> None:
    # The PostToolUse payloads name calls by ids of Qwen Code's own ("toolu_..."), which the
    # transcript never holds: what counts is whether the answer with the calls is on disk.
    records = _records("print")
    reader = QwenReader()
    seen = []
    for record in records:
        reader.feed(_line(record))
        seen.append((record["type"], reader.saw_tool_use("toolu_1796080021000_x")))
    calls = [r for r in records if r["type"] == "assistant" and "functionCall" in json.dumps(r)]
    assert len(calls) == 3
    assert [ok for kind, ok in seen if kind == "assistant"] == [True, True, True, False, False]
    assert not any(ok for kind, ok in seen if kind in ("user", "tool_result"))
    reader.reset()
    assert not reader.saw_tool_use("toolu_1796080021000_x")


def test_the_answer_that_ends_a_turn_is_seen_once_it_is_read() -> None:
    # Qwen Code queues its transcript writes: a Stop hook can run before the final answer is on
    # disk, and the daemon waits for it (`saw_answer`) rather than judge the previous figure.
    records = _records("print")
    reader = QwenReader()
    seen = []
    for record in records:
        reader.feed(_line(record))
        if record["type"] in ("user", "tool_result", "assistant"):
            final = record["type"] == "assistant" and "functionCall" not in json.dumps(record)
            seen.append((final, reader.saw_answer()))
    assert seen and all(answered == final for final, answered in seen), seen
    assert any(final for final, _ in seen)
    reader.reset()
    assert not reader.saw_answer()


@pytest.mark.parametrize("name", SCENARIOS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=40))
def test_any_split_gives_the_same_updates(name: str, cuts: list[float]) -> None:
    data = (DATA / f"transcript.{name}.jsonl").read_bytes()
    expected = QwenReader().feed(data)
    points = sorted({int(cut * len(data)) for cut in cuts})
    reader = QwenReader()
    updates: list[UsageUpdate] = []
    for start, end in itertools.pairwise([0, *points, len(data)]):
        updates.extend(reader.feed(data[start:end]))
    assert updates == expected


# ------------------------------------------------------------------------------------ files
def _transcript_path(name: str) -> str:
    (path,) = {
        json.loads(p.read_text())["transcript_path"]
        for p in (DATA.parents[1] / "payloads" / "qwen" / "0.24.4" / name).glob("*.json")
    }
    return str(path)


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_hooks_transcript_path_has_the_layout_and_names_the_session(name: str) -> None:
    path = _transcript_path(name)
    session_id = _records(name)[0]["sessionId"]

    assert detect_agent_from_path(path) == "qwen"
    assert files.is_transcript(path)
    assert files.session_id_from_path(path) == session_id


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_head_of_a_transcript_is_qwen_codes_not_claude_codes(name: str) -> None:
    data = (DATA / f"transcript.{name}.jsonl").read_bytes()
    assert detect_agent(data[:4096]) == "qwen"
    assert detect_agent(data.split(b"\n", 1)[0][:200]) == "qwen"  # a first line cut off


@pytest.mark.parametrize(
    "path",
    [
        "/h/.qwen/projects/-h-src/subagents/s1/agent-a1.jsonl",  # a subagent's own file
        "/h/.gemini/tmp/work/chats/session-2026-11-29T21-11-69ff20f4.jsonl",
        "/h/.qwen/projects/-h-src/chats/notes.txt",
    ],
)
def test_other_files_are_not_transcripts(path: str) -> None:
    assert not files.has_layout(path)
    assert detect_agent_from_path(path) != "qwen"


def test_the_root_follows_qwen_home() -> None:
    assert files.transcript_root({"HOME": "/h"}) == Path("/h/.qwen/projects")
    assert files.transcript_root({"HOME": "/h", "QWEN_HOME": "/q"}) == Path("/q/projects")
    assert files.transcript_root({"HOME": "/h", "QWEN_HOME": "~/q"}) == Path("/h/q/projects")
    assert spec("qwen").files.transcript_root({"HOME": "/h"}) == Path("/h/.qwen/projects")
