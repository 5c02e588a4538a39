"""ClaudeReader against real Claude Code 2.1.197 / 2.1.332 transcripts and edge cases built from
their line shapes. Expected figures come from what Claude Code itself reported (statusline,
compactMetadata) and from the usage the mock API was scripted to send; each is cited."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from ctxd.agents.claude.transcript import ClaudeReader
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[2] / "data" / "transcripts"


def _read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _replay(data: bytes) -> list[UsageUpdate]:
    return ClaudeReader().feed(data)


def _assistant_line(
    name: str = "claude-code-2.1.332/transcript.compact.jsonl",
) -> dict[str, object]:
    """The first real assistant line of a sample, as a template for edge cases."""
    for line in _read(name).splitlines():
        record = orjson.loads(line)
        if record["type"] == "assistant":
            return dict(record)
    raise AssertionError("no assistant line in the sample")


def _with_usage(
    template: dict[str, object],
    *,
    message_id: str,
    cache_read: int,
    stop_reason: str | None = "end_turn",
    **fields: object,
) -> bytes:
    record = orjson.loads(orjson.dumps(template))
    message = record["message"]
    message["id"] = message_id
    message["stop_reason"] = stop_reason
    message["usage"].update(
        input_tokens=1000, cache_creation_input_tokens=2000, cache_read_input_tokens=cache_read
    )
    record.update(fields)
    return orjson.dumps(record) + b"\n"


# --------------------------------------------------------------------------- real transcripts

# Scenario `compact` (scenarios/compact.mock.json): six tool-use steps scripted with
# input 5000 + cache_creation 20000 + cache_read 100000, 250000, ... 850000, a 400 "prompt is too
# long", auto-compaction, a final answer of 3000 + 5000 + 0, then a manual /compact.
COMPACT_STEPS = [125_000, 275_000, 425_000, 575_000, 725_000, 875_000]


@pytest.mark.parametrize(
    ("name", "auto_post", "manual_post"),
    [
        # compactMetadata.postTokens of the two compact_boundary lines in each transcript.
        ("claude-code-2.1.332/transcript.compact.jsonl", 2723, 2625),
        ("claude-code-2.1.197/transcript.compact.jsonl", 652, 598),
    ],
)
def test_compact_scenario_follows_the_api_usage_and_both_compactions(
    name: str, auto_post: int, manual_post: int
) -> None:
    updates = _replay(_read(name))

    assert [(u.tokens, u.compaction) for u in updates] == [
        *[(tokens, False) for tokens in COMPACT_STEPS],
        (auto_post, True),
        (8_000, False),
        (manual_post, True),
    ]
    # Claude Code's own preTokens (875101 auto, 8020 manual) add the last answer's output
    # tokens (100 and 20) and one more to the context we report just before each boundary.
    assert 875_101 - updates[5].tokens == 101
    assert 8_020 - updates[7].tokens == 20
    assert updates[-1].tokens == manual_post


@pytest.mark.parametrize(
    ("name", "post"),
    [
        ("claude-code-2.1.332/transcript.interactive.jsonl", 2900),
        ("claude-code-2.1.197/transcript.interactive.jsonl", 745),
    ],
)
def test_interactive_figures_equal_the_statusline_current_usage(name: str, post: int) -> None:
    updates = _replay(_read(name))

    # statusline.jsonl of the same run: current_usage after the first reply was
    # 1000 + 2000 + 100000 (used_percentage 10), after the second 5000 + 20000 + 900000 (93).
    # Then /compact: compactMetadata {preTokens 925100, postTokens <post>}.
    assert [u.tokens for u in updates] == [103_000, 925_000, post]
    assert [u.compaction for u in updates] == [False, False, True]
    assert updates[0].model in ("claude-opus-5-5", "claude-opus-4-8")


def test_print_scenario_follows_the_growing_cache_reads() -> None:
    # scenarios/print.mock.json: usage 1000 + 2000 + 10000, cache_read +50000 per request.
    updates = _replay(_read("claude-code-2.1.197/transcript.print.jsonl"))

    assert [u.tokens for u in updates] == [13_000, 63_000, 113_000, 163_000]


def test_autocompact_scenario_2_1_197_reaches_970k() -> None:
    # scenarios/autocompact.mock.json: 5000 + 20000 + 100000, then + 945000, then 3000 + 5000.
    updates = _replay(_read("claude-code-2.1.197/transcript.autocompact.jsonl"))

    assert [u.tokens for u in updates] == [125_000, 970_000, 8_000]


def test_updates_carry_message_id_model_and_line_timestamp() -> None:
    first = _replay(_read("claude-code-2.1.332/transcript.compact.jsonl"))[0]

    assert first.turn_id == "msg_mock00024e9586cefd34"
    assert first.model == "claude-opus-5-5"
    assert first.at == pytest.approx(1795984631.416)  # "2026-11-29T20:37:11.416Z"
    assert first.reported_window is None


# --------------------------------------------------------------------------- edge cases


def test_sidechain_messages_do_not_count() -> None:
    template = _assistant_line()
    reader = ClaudeReader()
    main = reader.feed(_with_usage(template, message_id="msg_main", cache_read=10_000))
    side = reader.feed(
        _with_usage(template, message_id="msg_side", cache_read=500_000, isSidechain=True)
    )

    assert [u.tokens for u in main] == [13_000]
    assert side == []


def test_api_error_messages_do_not_reset_the_figure() -> None:
    template = _assistant_line()
    error = orjson.loads(_with_usage(template, message_id="msg_err", cache_read=0))
    error["isApiErrorMessage"] = True
    error["message"]["model"] = "<synthetic>"
    error["message"]["usage"] = {"input_tokens": 0, "output_tokens": 0}
    synthetic_only = orjson.loads(_with_usage(template, message_id="msg_syn", cache_read=0))
    synthetic_only["message"]["model"] = "<synthetic>"

    reader = ClaudeReader()
    before = reader.feed(_with_usage(template, message_id="msg_ok", cache_read=40_000))
    after = reader.feed(orjson.dumps(error) + b"\n" + orjson.dumps(synthetic_only) + b"\n")

    assert [u.tokens for u in before] == [43_000]
    assert after == []


def test_streamed_copies_share_a_turn_and_the_final_copy_wins() -> None:
    template = _assistant_line()
    partial = _with_usage(template, message_id="msg_s", cache_read=0, stop_reason=None)
    final = _with_usage(template, message_id="msg_s", cache_read=60_000)
    late_partial = _with_usage(template, message_id="msg_s", cache_read=0, stop_reason=None)
    next_turn = _with_usage(template, message_id="msg_t", cache_read=70_000)

    updates = ClaudeReader().feed(partial + partial + final + late_partial + next_turn)

    # The repeated partial says nothing new; the late partial copy must not undo the final one.
    assert [(u.turn_id, u.tokens) for u in updates] == [
        ("msg_s", 3_000),
        ("msg_s", 63_000),
        ("msg_t", 73_000),
    ]


def test_usage_inside_other_line_kinds_does_not_count() -> None:
    # A Task tool's result carries its subagent's usage; it is not the main chain's context.
    user = {
        "parentUuid": "p",
        "isSidechain": False,
        "type": "user",
        "uuid": "u",
        "sessionId": "s",
        "message": {"role": "user", "content": [{"type": "tool_result", "content": "done"}]},
        "toolUseResult": {"usage": {"input_tokens": 1, "cache_read_input_tokens": 700_000}},
    }
    attachment = {
        "type": "attachment",
        "sessionId": "s",
        "uuid": "a",
        "attachment": {"type": "file", "content": '{"usage": 5} ' * 4_000},
    }

    updates = ClaudeReader().feed(orjson.dumps(user) + b"\n" + orjson.dumps(attachment) + b"\n")

    assert updates == []


def test_partial_last_line_waits_for_its_newline() -> None:
    line = _with_usage(_assistant_line(), message_id="msg_p", cache_read=1_000)
    reader = ClaudeReader()

    assert reader.feed(line[:700]) == []
    assert reader.feed(line[700:-1]) == []
    assert [u.tokens for u in reader.feed(line[-1:])] == [4_000]


def test_blank_and_garbage_lines_are_skipped() -> None:
    garbage = (
        b'\n   \n{not json\n\x00\xff\xfe\n[1, 2]\n"usage"\n'
        b'{"type":"assistant","message":{"usage":"lots"}}\n'
        b'{"type":"assistant","message":{"usage":{"input_tokens":-5}}}\n'
        b'{"type":"system","subtype":"compact_boundary","compactMetadata":"x"}\n'
    )
    line = _with_usage(_assistant_line(), message_id="msg_g", cache_read=5_000)

    updates = ClaudeReader().feed(garbage + line)

    # The malformed boundary still marks a compaction, at 0 tokens (no postTokens to trust).
    assert [(u.tokens, u.compaction) for u in updates] == [(0, True), (8_000, False)]


def _boundary(uuid: str, **metadata: object) -> bytes:
    record = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": uuid,
        "timestamp": "2026-11-29T20:37:13.777Z",
        "compactMetadata": metadata,
    }
    return orjson.dumps(record) + b"\n"


def _summary(text: str) -> bytes:
    # The shape Claude Code 2.1.39 writes right after the boundary (marot/spotter's fixture).
    record = {
        "type": "user",
        "isSidechain": False,
        "isVisibleInTranscriptOnly": True,
        "isCompactSummary": True,
        "uuid": "s-1",
        "timestamp": "2026-11-29T20:37:13.800Z",
        "message": {"role": "user", "content": text},
    }
    return orjson.dumps(record) + b"\n"


def test_compact_boundary_without_post_tokens_reports_an_estimate_until_new_usage() -> None:
    """2.1.3x boundaries carry preTokens only: the figure is an estimate, first the session's
    first context (prompt, tools), then that plus the summary's length / 4."""
    reader = ClaudeReader()
    reader.feed(_with_usage(_assistant_line(), message_id="msg_first", cache_read=17_000))
    reader.feed(_with_usage(_assistant_line(), message_id="msg_before", cache_read=872_000))

    updates = reader.feed(
        _boundary("b-1", trigger="auto", preTokens=875_101)
        + _summary("x" * 40_000)
        + _with_usage(_assistant_line(), message_id="msg_after", cache_read=0)
    )

    assert [(u.tokens, u.compaction, u.estimated, u.turn_id) for u in updates] == [
        (20_000, True, True, "b-1"),
        (30_000, False, True, "b-1"),
        (3_000, False, False, "msg_after"),
    ]
    assert updates[0].compacted_from == 875_101


def test_compact_boundary_with_post_tokens_is_exact_and_manual_ones_teach_no_window() -> None:
    reader = ClaudeReader()
    updates = reader.feed(
        _boundary("b-2", trigger="manual", preTokens=120_000, postTokens=2_625)
        + _summary("y" * 4_000)  # a summary after an exact figure changes nothing
    )
    assert [(u.tokens, u.compaction, u.estimated, u.compacted_from) for u in updates] == [
        (2_625, True, False, None)
    ]


def test_each_update_carries_the_reply_output_as_pending() -> None:
    line = orjson.loads(_with_usage(_assistant_line(), message_id="msg_out", cache_read=9_000))
    line["message"]["usage"]["output_tokens"] = 777
    (update,) = ClaudeReader().feed(orjson.dumps(line) + b"\n")
    assert (update.tokens, update.pending) == (12_000, 777)


def test_a_final_copy_with_more_output_is_reported_again() -> None:
    template = orjson.loads(_with_usage(_assistant_line(), message_id="m", cache_read=1_000))
    partial = orjson.loads(orjson.dumps(template))
    partial["message"]["stop_reason"] = None
    partial["message"]["usage"]["output_tokens"] = 1
    template["message"]["usage"]["output_tokens"] = 500
    updates = ClaudeReader().feed(orjson.dumps(partial) + b"\n" + orjson.dumps(template) + b"\n")
    assert [(u.tokens, u.pending) for u in updates] == [(4_000, 1), (4_000, 500)]


def test_reset_forgets_the_partial_line_and_the_last_figure() -> None:
    line = _with_usage(_assistant_line(), message_id="msg_r", cache_read=9_000)
    reader = ClaudeReader()
    assert [u.tokens for u in reader.feed(line + line[:300])] == [12_000]

    reader.reset()  # the file was truncated and written again from the start

    # Neither the stale partial line nor "already reported" may hide the rewritten line.
    assert [u.tokens for u in reader.feed(line)] == [12_000]


def test_the_reader_remembers_the_tool_calls_it_has_read() -> None:
    """What lets a PostToolUse hook wait until the message that made its call is on disk."""
    reader = ClaudeReader()
    path = DATA / "claude-code-2.1.332" / "transcript.compact.jsonl"
    reader.feed(path.read_bytes())
    assert reader.saw_tool_use("toolu_mock0001bb4c7b8948f2")
    assert not reader.saw_tool_use("toolu_not_written_yet")
    reader.reset()
    assert not reader.saw_tool_use("toolu_mock0001bb4c7b8948f2")


def test_a_failed_calls_hook_finds_its_call_as_soon_as_it_is_written() -> None:
    """PostToolUseFailure names the failed call's `tool_use_id`; the assistant message that made
    the call is written as for a call that succeeds (the result after it only says
    `is_error: true`), so the hook waits for that message and no longer."""
    payloads = DATA.parent / "payloads" / "claude" / "2.1.332" / "failure"
    ids = [
        json.loads(p.read_text())["tool_use_id"]
        for p in sorted(payloads.glob("*-PostToolUse*.json"))
    ]
    assert [p.name.split("-", 1)[1] for p in sorted(payloads.glob("*-PostToolUse*.json"))] == [
        "PostToolUseFailure.json",
        "PostToolUseFailure.json",
        "PostToolUse.json",
    ]
    lines = _read("claude-code-2.1.332/transcript.failure.jsonl").splitlines(keepends=True)
    reader = ClaudeReader()
    seen: list[int] = []
    for line in lines:
        reader.feed(line)
        for n, call in enumerate(ids):
            if n not in seen and reader.saw_tool_use(call):
                seen.append(n)
                record = json.loads(line)
                assert record["type"] == "assistant"
                assert record["message"]["content"][0]["id"] == call
    assert seen == [0, 1, 2]
    # the figures are the mock's: cache_read 100,000 + 1,000 a step, plus 5,000
    updates = ClaudeReader().feed(b"".join(lines))
    assert [u.tokens for u in updates] == [105_000, 106_000, 107_000, 108_000]


@pytest.mark.parametrize("digest", [False, True])
def test_a_line_in_another_json_layout_is_still_read(digest: bool) -> None:
    """Lines that hold nothing are known from the first bytes of Claude Code's own compact
    layout; a line written otherwise (spaces after the colons, keys in another order) is
    decoded, with or without the digest as the reader's listener."""
    from ctxd.agents.claude.digest import ClaudeFacts
    from ctxd.agents.reader import NO_FACTS

    record = orjson.loads(_with_usage(_assistant_line(), message_id="m1", cache_read=40_000))
    spaced = {"type": record["type"], **record}
    data = json.dumps(spaced).encode() + b"\n"
    assert data.startswith(b'{"type": "assistant"')
    reader = ClaudeReader(False, ClaudeFacts() if digest else NO_FACTS)
    assert [u.tokens for u in reader.feed(data)] == [43_000]


@pytest.mark.parametrize("version", ["2.1.197", "2.1.332"])
def test_each_update_names_the_claude_code_version_that_wrote_its_line(version: str) -> None:
    # The compaction rule needs it: 2.1.197 never auto-compacted claude-opus-4-8 on 1M.
    path = DATA / f"claude-code-{version}" / "transcript.compact.jsonl"
    updates = ClaudeReader().feed(path.read_bytes())
    assert {u.agent_version for u in updates if not u.compaction} == {version}
