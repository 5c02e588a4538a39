"""What Copilot CLI writes on GitHub-hosted models (no per-request usage: 1.0.49 to 1.0.91),
and what any other writer may do to its lines, read by the Copilot reader: shutdown figures,
compaction starts, compactions without a post figure, the window from the model's limits, keys
in any order with any spacing, a crash's NUL hole, a hook record's timestamp as a string."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from ctxd_process import replay_json

from ctxd.agents.copilot.transcript import CopilotReader
from ctxd.cli.replay import Row, replay

ROOT = Path(__file__).parents[3]
DATA = ROOT / "tests" / "data" / "transcripts" / "copilot-1.0.102"


def _line(kind: str, data: dict[str, Any], n: int, **extra: Any) -> bytes:
    record = {"type": kind, "data": data, "id": f"e{n}", "parentId": None, **extra}
    record.setdefault("timestamp", f"2026-07-01T10:{n // 60:02d}:{n % 60:02d}.000Z")
    return orjson.dumps(record) + b"\n"


def _shutdown(requests: dict[str, int], inputs: dict[str, int], current: int, n: int) -> bytes:
    """A shutdown as 1.0.49-1.0.91 write it (fields as in real sessions)."""
    metrics = {
        model: {
            "requests": {"count": count, "cost": 1},
            "usage": {"inputTokens": inputs[model], "outputTokens": 414, "cacheReadTokens": 0},
        }
        for model, count in requests.items()
    }
    data = {
        "shutdownType": "routine",
        "totalPremiumRequests": 1,
        "modelMetrics": metrics,
        "currentModel": next(iter(requests)),
        "currentTokens": current,
        "systemTokens": 10_530,
        "conversationTokens": 535,
        "toolDefinitionsTokens": 13_097,
    }
    return _line("session.shutdown", data, n)


def _start(version: str, n: int, model: str = "claude-sonnet-4.6") -> bytes:
    data = {"sessionId": "s", "copilotVersion": version, "selectedModel": model}
    return _line("session.start", data, n)


def test_a_shutdown_after_one_request_states_that_requests_prompt() -> None:
    updates = CopilotReader().feed(
        _start("1.0.78", 0)
        + _shutdown({"claude-sonnet-4.6": 1}, {"claude-sonnet-4.6": 24_243}, 24_166, 1)
    )
    (figure,) = updates
    assert (figure.tokens, figure.pending, figure.estimated) == (24_243, 414, False)
    assert (figure.model, figure.agent_version) == ("claude-sonnet-4.6", "1.0.78")


def test_a_shutdown_after_several_requests_states_copilots_own_count() -> None:
    models = {"claude-opus-4.8": 5, "claude-haiku-4.5": 2}
    inputs = {"claude-opus-4.8": 600_000, "claude-haiku-4.5": 9_000}
    (figure,) = CopilotReader().feed(_start("1.0.74", 0) + _shutdown(models, inputs, 81_234, 1))
    assert (figure.tokens, figure.estimated, figure.model) == (81_234, True, "claude-opus-4.8")


def test_every_process_exit_is_a_figure_and_usage_records_outrank_it() -> None:
    resumed = _line("session.resume", {"resumeTime": "x"}, 2)
    updates = CopilotReader().feed(
        _start("1.0.64", 0)
        + _shutdown({"gpt-5.3-codex-spark": 3}, {"gpt-5.3-codex-spark": 90_000}, 31_000, 1)
        + resumed
        + _shutdown({"gpt-5.3-codex-spark": 2}, {"gpt-5.3-codex-spark": 70_000}, 36_500, 3)
    )
    assert [u.tokens for u in updates] == [31_000, 36_500]
    # a process that wrote per-request usage (1.0.102, bring-your-own model): they stand
    capture = (DATA / "transcript.compact.jsonl").read_bytes()
    assert not any(u.estimated and not u.compaction for u in CopilotReader().feed(capture))


def test_a_compaction_without_a_post_figure_is_counted_and_estimated() -> None:
    """1.0.74: `session.compaction_complete` with `preCompactionTokens` and no post figure."""
    start = {
        "systemTokens": 15_570,
        "conversationTokens": 136_711,
        "toolDefinitionsTokens": 9_551,
        "currentTokens": 161_832,
        "tokenLimit": 200_000,
        "trigger": "threshold",
    }
    complete = {
        "success": True,
        "preCompactionTokens": 161_832,
        "preCompactionMessagesLength": 197,
        "summaryContent": "<overview>" + "x" * 3_990 + "</overview>",
        "checkpointNumber": 1,
    }
    updates = CopilotReader().feed(
        _start("1.0.74", 0)
        + _line("session.compaction_start", start, 1)
        + _line("session.compaction_complete", complete, 2)
    )
    before, after = updates
    assert (before.tokens, before.estimated, before.compaction) == (161_832, True, False)
    assert before.reported_window == 200_000
    assert after.compaction and after.estimated and after.compacted_from == 161_832
    # what stays: the system prompt, the tools and the summary (4,011 characters)
    assert after.tokens == 15_570 + 9_551 + 1_003


def test_after_a_compaction_the_whole_context_counts_not_only_the_conversation() -> None:
    """A real completion (GitHub-hosted model): `postCompactionTokens` 11,193 is the
    conversation left; with the system prompt and the tools Copilot's UI shows 37,976."""
    start = {"systemTokens": 10_300, "conversationTokens": 377_155, "toolDefinitionsTokens": 16_516}
    complete = {
        "success": True,
        "preCompactionTokens": 403_971,
        "postCompactionTokens": 11_193,
        "systemTokens": 10_271,
        "conversationTokens": 11_189,
        "toolDefinitionsTokens": 16_516,
    }
    before, after = CopilotReader().feed(
        _start("1.0.88", 0, "claude-opus-4.8")
        + _line("session.compaction_start", start, 1)
        + _line("session.compaction_complete", complete, 2)
    )
    # a start with no currentTokens (older versions): its parts are Copilot's count
    assert (before.tokens, before.estimated) == (403_971, True)
    assert (after.tokens, after.compaction, after.estimated) == (37_976, True, True)
    assert after.compacted_from == 403_971  # the whole context when it started


def test_a_truncation_names_the_window() -> None:
    truncation = {
        "tokenLimit": 128_000,
        "preTruncationTokensInMessages": 130_000,
        "postTruncationTokensInMessages": 90_000,
        "tokensRemovedDuringTruncation": 40_000,
        "performedBy": "BasicTruncator",
    }
    (figure,) = CopilotReader().feed(
        _start("1.0.80", 0)
        + _line("session.truncation", truncation, 1)
        + _shutdown({"gpt-5-mini": 3}, {"gpt-5-mini": 300_000}, 101_000, 2)
    )
    assert (figure.tokens, figure.reported_window) == (101_000, 128_000)


def test_a_post_figure_marked_as_the_whole_context_stands() -> None:
    """1.0.102 marks `postCompactionTokens` as the whole context: it is the figure."""
    complete = {
        "success": True,
        "preCompactionTokens": 10_870,
        "postCompactionTokens": 10_656,
        "tokenAccountingBasis": "local_full_context_estimate",
        "systemTokens": 4_711,
        "conversationTokens": 194,
        "toolDefinitionsTokens": 5_748,
    }
    (after,) = CopilotReader().feed(
        _start("1.0.102", 0) + _line("session.compaction_complete", complete, 1)
    )
    assert (after.tokens, after.compacted_from) == (10_656, 10_870)


def test_a_compaction_is_counted_by_replay_and_resets_nothing_it_should_not(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        _start("1.0.74", 0)
        + _line("session.compaction_start", {"currentTokens": 150_000, "tokenLimit": 168_000}, 1)
        + _line("session.compaction_complete", {"success": True, "preCompactionTokens": 150_000}, 2)
        + _shutdown({"claude-sonnet-4.6": 4}, {"claude-sonnet-4.6": 200_000}, 40_000, 3)
    )
    items = list(replay(str(path)))
    rows = [item for item in items if isinstance(item, Row)]
    assert [(r.figures.tokens, r.compaction) for r in rows][1:] == [(0, True), (40_000, False)]
    assert items[-1].compactions == 1  # type: ignore[union-attr]
    assert (rows[-1].figures.window.size, rows[-1].figures.window.source) == (168_000, "agent")


def test_the_window_comes_from_the_models_limits() -> None:
    """1.0.91: `model.turn_started` / `model.model_call_started` carry the model's limits."""
    limits = {"max_prompt_tokens": 168_000, "max_context_window_tokens": 200_000}
    info = {"modelInfo": {"id": "claude-fable-5", "capabilities": {"limits": limits}}}
    other = {"modelInfo": {"capabilities": {"limits": {"max_context_window_tokens": 400_000}}}}
    reader = CopilotReader()
    (first,) = reader.feed(
        _start("1.0.91", 0, "claude-fable-5")
        + _line("model.turn_started", info, 1)
        + _shutdown({"claude-fable-5": 2}, {"claude-fable-5": 50_000}, 26_000, 2)
    )
    assert (first.reported_window, first.model) == (168_000, "claude-fable-5")
    (second,) = reader.feed(
        _line("session.resume", {}, 3)
        + _line("model.model_call_started", other, 4)
        + _shutdown({"claude-fable-5": 2}, {"claude-fable-5": 60_000}, 29_000, 5)
    )
    assert second.reported_window == 400_000


def test_a_usage_record_in_any_key_order_and_spacing_is_read() -> None:
    usage = {
        "model": "gpt-4.1",
        "interactionType": "conversation-agent",
        "outputTokens": 40,
        "maxPromptTokens": 64_000,
        "inputTokens": 20_000,
    }
    record = {"id": "u1", "timestamp": "2026-12-01T22:47:58.000Z", "data": {"usage": usage}}
    record["type"] = "session.usage_record"  # last, not first
    (figure,) = CopilotReader().feed(json.dumps(record, indent=None).encode() + b"\n")
    assert (figure.tokens, figure.pending, figure.reported_window) == (20_000, 40, 64_000)


def test_the_record_after_a_nul_hole_is_read() -> None:
    """A crash leaves NUL bytes where a write was lost: the next record follows them on the
    same line."""
    capture = (DATA / "transcript.print.jsonl").read_bytes().splitlines(keepends=True)
    usage = [n for n, line in enumerate(capture) if b'"session.usage_record"' in line]
    lost = capture[usage[1] - 1]
    hole = lost[:25] + b"\0" * 4096 + capture[usage[1]]
    holed = [*capture[: usage[1] - 1], hole, *capture[usage[1] + 1 :]]
    whole = [u.tokens for u in CopilotReader().feed(b"".join(capture))]
    assert [u.tokens for u in CopilotReader().feed(b"".join(holed))] == whole
    nuls_only = [*capture[: usage[1]], b"\0" * 512 + capture[usage[1]], *capture[usage[1] + 1 :]]
    assert [u.tokens for u in CopilotReader().feed(b"".join(nuls_only))] == whole


def test_a_hook_records_timestamp_as_a_string_names_its_call() -> None:
    data = {"hookType": "postToolUse", "input": {"sessionId": "s", "timestamp": "1778979970177"}}
    reader = CopilotReader()
    reader.feed(_line("hook.start", data, 1))
    assert reader.saw_tool_use("1778979970177")


def test_replay_reads_a_session_with_no_usage_records(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        _start("1.0.78", 0)
        + _line("user.message", {"content": "hi"}, 1)
        + _line("assistant.message", {"content": "hello", "toolRequests": []}, 2)
        + _shutdown({"claude-sonnet-4.6": 1}, {"claude-sonnet-4.6": 24_243}, 24_166, 3)
    )
    final = replay_json(str(path))[-1]
    assert (final["agent"], final["tokens"]) == ("copilot", 24_243)


def test_a_subagents_final_answer_is_not_the_turns() -> None:
    """1.0.55: a `task` subagent's events carry a top-level `agentId`; its answer without tool
    calls comes while the main turn still runs."""
    answer = {"content": "- Lines in hello.py: 6", "toolRequests": []}
    reader = CopilotReader()
    reader.feed(_line("assistant.turn_start", {"turnId": "1"}, 1))
    reader.feed(_line("assistant.message", answer, 2, agentId="toolu_vrtx_01"))
    assert not reader.saw_answer()
    reader.feed(_line("assistant.message", answer, 3))
    assert reader.saw_answer()


def test_a_first_line_cut_short_is_told_by_its_start_in_any_spacing() -> None:
    from ctxd.agents.copilot.files import recognises_prefix

    assert recognises_prefix(b'{"type":"session.start","data":{"sessionId":"66957610-db49')
    assert recognises_prefix(b'{"type": "session.start", "data": {"sessionId": "66957610-db')
    assert not recognises_prefix(b'{"type": "user", "message": {"role": "user"')


def test_a_compaction_that_states_what_it_removed_leaves_the_rest() -> None:
    """1.0.48: `tokensRemoved` beside `preCompactionTokens`, no post figure and no parts; a
    removal below zero (1.0.48 wrote some) says nothing, and the summary is estimated."""
    removed = {"success": True, "preCompactionTokens": 150_000, "tokensRemoved": 118_500}
    negative: dict[str, Any] = {"success": True, "preCompactionTokens": 40_000}
    negative |= {"tokensRemoved": -2_098, "summaryContent": "s" * 4_000}
    after, odd = CopilotReader().feed(
        _start("1.0.48", 0)
        + _line("session.compaction_complete", removed, 1)
        + _line("session.compaction_complete", negative, 2)
    )
    assert (after.tokens, after.compaction, after.estimated) == (31_500, True, True)
    assert after.compacted_from == 150_000
    assert (odd.tokens, odd.compacted_from) == (1_000, 40_000)


def test_the_usage_copilot_streams_is_read_from_a_capture_of_it() -> None:
    """`assistant.usage` and `session.usage_info` are ephemeral (streamed, not kept in
    events.jsonl): in a capture of the stream they are the agent loop's figures and window."""
    info = {"currentTokens": 18_204, "tokenLimit": 128_000, "messagesLength": 2}
    usage = {
        "model": "gpt-5.4",
        "inputTokens": 21_950,
        "outputTokens": 310,
        "cacheReadTokens": 18_000,
        "maxPromptTokens": 272_000,
    }
    subagent = usage | {"inputTokens": 9_000, "initiator": "sub-agent"}
    reader = CopilotReader()
    (context,) = reader.feed(_start("1.0.102", 0, "gpt-5.4") + _line("session.usage_info", info, 1))
    assert (context.tokens, context.estimated, context.reported_window) == (18_204, True, 128_000)
    (answer,) = reader.feed(
        _line("assistant.usage", usage, 2)
        + _line("assistant.usage", subagent, 3)
        + _line("assistant.usage", usage | {"inputTokens": 5_000}, 4, agentId="a1")
        + _line("session.usage_info", info | {"currentTokens": 22_000}, 5)  # exact figures stand
    )
    assert (answer.tokens, answer.pending, answer.estimated) == (21_950, 310, False)
    assert (answer.reported_window, answer.model) == (272_000, "gpt-5.4")


def test_a_count_written_as_a_float_is_still_a_figure() -> None:
    shutdown = orjson.loads(
        _shutdown({"claude-sonnet-4.6": 3}, {"claude-sonnet-4.6": 90_000}, 35_322, 1)
    )
    shutdown["data"]["currentTokens"] = 35_322.0
    (figure,) = CopilotReader().feed(_start("1.0.4", 0) + orjson.dumps(shutdown) + b"\n")
    assert (figure.tokens, figure.estimated) == (35_322, True)


def test_the_model_that_answered_is_the_figures_not_auto() -> None:
    """A session on "auto": the start and model change name "auto", each answer (1.0.9x) the
    model behind it, which the figure is judged with."""
    reader = CopilotReader()
    (figure,) = reader.feed(
        _start("1.0.93", 0, "auto")
        + _line("session.model_change", {"newModel": "auto"}, 1)
        + _line("assistant.message", {"model": "gpt-5.4", "content": "hi", "toolRequests": []}, 2)
        + _line("session.compaction_start", {"currentTokens": 30_000, "tokenLimit": 272_000}, 3)
    )
    assert (figure.tokens, figure.model) == (30_000, "gpt-5.4")


def test_a_model_any_agent_knows_the_sizes_of_is_raised_to_one_of_them(tmp_path: Path) -> None:
    """gpt-5.6-sol on a GitHub-hosted Copilot session that held 371,566: the window it proved
    is one OpenAI states the model with (372,000), known to pi's table, not 400,000."""
    path = tmp_path / "events.jsonl"
    path.write_bytes(
        _start("1.0.93", 0, "gpt-5.6-sol")
        + _shutdown({"gpt-5.6-sol": 1}, {"gpt-5.6-sol": 371_566}, 360_000, 1)
    )
    rows = [item for item in replay(str(path)) if isinstance(item, Row)]
    window = rows[-1].figures.window
    assert (rows[-1].figures.tokens, window.size, window.source) == (371_566, 372_000, "usage")
