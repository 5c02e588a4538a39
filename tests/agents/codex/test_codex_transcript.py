"""CodexReader against real Codex CLI 0.171.0 rollouts. Expected figures are the usage the mock
Responses API sent back (scenarios/*.mock.json; samples/0.171.0/report.md "requests (kind,
status, reported total_tokens)") and Codex's own token_count estimates after compaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from ctxd.agents import spec
from ctxd.agents.codex.transcript import CodexReader
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "codex-cli-0.171.0"

#: model_context_window in every rollout: 95 % of gpt-5.5's catalog window of 272,000.
WINDOW = 258_400


def _read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _replay(data: bytes) -> list[UsageUpdate]:
    return CodexReader().feed(data)


def _line(kind: str, payload: dict[str, object], ordinal: int = 1) -> bytes:
    record = {
        "timestamp": "2026-11-29T21:02:05.210Z",
        "ordinal": ordinal,
        "type": kind,
        "payload": payload,
    }
    return orjson.dumps(record) + b"\n"


def _usage(prompt: int, output: int) -> dict[str, int]:
    return {
        "input_tokens": prompt,
        "cached_input_tokens": prompt // 2,
        "cache_write_input_tokens": 0,
        "output_tokens": output,
        "reasoning_output_tokens": 0,
        "total_tokens": prompt + output,
    }


def _token_count(last: dict[str, int], cumulative: int) -> bytes:
    total = {**last, "total_tokens": cumulative}
    info = {"total_token_usage": total, "last_token_usage": last, "model_context_window": WINDOW}
    return _line("event_msg", {"type": "token_count", "info": info, "rate_limits": None})


# --------------------------------------------------------------------------- real rollouts


def test_exec_figures_are_the_per_response_totals() -> None:
    # scenarios/exec.mock.json: input 12000 + output 50, then +10000 / +10 per request
    # (cached 8000, +9000, is a part of the input); six main requests over two runs.
    updates = _replay(_read("rollout.exec.jsonl"))

    assert [u.tokens for u in updates] == [12_050, 22_060, 32_070, 42_080, 52_090, 62_100]
    assert all(u.reported_window == WINDOW and u.model == "gpt-5.5" for u in updates)
    assert len({u.turn_id for u in updates}) == 6
    assert not any(u.compaction for u in updates)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # autocompact: 120000+100, 250000+100 (over 90 % of 272000: compaction), the compaction
        # request's own 3000+200; the `compacted` line counts at once, with ctxd's estimate (the
        # smallest context seen, 3,200, + the replacement history's length / 4); then Codex's
        # estimate of the rebuilt history (the token_count after `compacted`: 6884) replaces
        # it under the same turn; then 9000+20.
        (
            "rollout.autocompact.jsonl",
            [
                (120_100, False, False),
                (250_100, False, False),
                (3_200, False, False),
                (5_115, True, True),
                (6_884, False, True),
                (9_020, False, False),
            ],
        ),
        (
            "rollout.autocompact_limit.jsonl",
            [
                (120_100, False, False),
                (3_200, False, False),
                (5_119, True, True),
                (6_889, False, True),
                (9_020, False, False),
            ],
        ),
        # interactive: 20000+50, 30000+60, /compact (3000+200, estimate 7221), 6000+20.
        (
            "rollout.interactive.jsonl",
            [
                (20_050, False, False),
                (30_060, False, False),
                (3_200, False, False),
                (5_485, True, True),
                (7_221, False, True),
                (6_020, False, False),
            ],
        ),
    ],
)
def test_compaction_counts_at_once_then_takes_codex_own_estimate(
    name: str, expected: list[tuple[int, bool, bool]]
) -> None:
    updates = _replay(_read(name))

    assert [(u.tokens, u.compaction, u.estimated) for u in updates] == expected
    estimate, codex_estimate = (u for u in updates if u.estimated)
    assert estimate.turn_id == codex_estimate.turn_id


def test_a_compaction_with_nothing_after_it_still_counts() -> None:
    lines = _read("rollout.autocompact.jsonl").splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if b'"type":"compacted"' in line) + 1
    updates = _replay(b"".join(lines[:cut]))
    assert (updates[-1].compaction, updates[-1].estimated) == (True, True)


def test_impossible_token_counts_are_skipped_and_counted() -> None:
    # Codex 0.104 (madshn/localpush's fixture) wrote every category 0 and total_tokens 940,499
    # on a 258,400 window, before and after a `compacted` line.
    def token_count(total: int, **usage: int) -> dict[str, object]:
        categories = dict.fromkeys(
            ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens"), 0
        )
        return {
            "timestamp": "2026-02-23T12:54:34.000Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "last_token_usage": {**categories, **usage, "total_tokens": total},
                    "total_token_usage": {**categories, "total_tokens": 22_545_849 + total},
                    "model_context_window": 258_400,
                },
            },
        }

    compacted = {
        "timestamp": "2026-02-23T12:54:35.000Z",
        "type": "compacted",
        "payload": {"message": "", "replacement_history": [{"type": "message"}]},
    }
    records = [
        token_count(212_134, input_tokens=209_950, output_tokens=2_184),
        token_count(940_499),
        compacted,
        token_count(940_499),
        token_count(48_687, input_tokens=48_297, output_tokens=390),
    ]
    reader = CodexReader()
    updates = reader.feed(b"".join(orjson.dumps(r) + b"\n" for r in records))

    assert [(u.tokens, u.compaction) for u in updates] == [
        (212_134, False),
        (212_134 + len(b'[{"type":"message"}]') // 4, True),
        (48_687, False),
    ]
    assert reader.skipped == 2


def test_context_overflow_reports_codex_estimate_of_the_failed_prompt() -> None:
    # ctxerror: 120000+100, then a 400 context_length_exceeded; Codex writes a token_count of
    # zeros with total_tokens 138300, the size of the prompt that did not fit.
    updates = _replay(_read("rollout.ctxerror.jsonl"))

    assert [u.tokens for u in updates] == [120_100, 138_300]


def test_usage_is_known_before_the_tools_output_is_written() -> None:
    # Brief, timing: when PostToolUse fires, the rollout holds the response's
    # token_usage_record but not yet its token_count.
    lines = _read("rollout.exec.jsonl").splitlines(keepends=True)
    first_record = next(i for i, line in enumerate(lines) if b'"token_usage_record"' in line)
    first_count = next(i for i, line in enumerate(lines) if b'"token_count"' in line)
    assert first_record < first_count

    updates = _replay(b"".join(lines[: first_record + 1]))

    assert [u.tokens for u in updates] == [12_050]


def test_repeated_token_counts_are_not_new_turns() -> None:
    # autocompact_limit writes the first response's token_count twice.
    reader = CodexReader()
    lines = _read("rollout.autocompact_limit.jsonl").splitlines(keepends=True)

    per_line = [reader.feed(line) for line in lines]

    counts = [
        updates for line, updates in zip(lines, per_line, strict=True) if b'"token_count"' in line
    ]
    assert counts[0] == counts[1] == []  # both repeat the record already reported


# --------------------------------------------------------------------------- edge cases


def test_token_count_without_usage_records_still_counts_each_response_once() -> None:
    # Older rollouts have no token_usage_record lines: turns come from the running total.
    first, second = _usage(10_000, 50), _usage(20_000, 60)
    data = (
        _line("event_msg", {"type": "token_count", "info": None})
        + _token_count(first, 10_050)
        + _token_count(first, 10_050)
        + _token_count(second, 30_110)
    )

    updates = _replay(data)

    assert [u.tokens for u in updates] == [10_050, 20_060]
    assert updates[0].turn_id != updates[1].turn_id


def test_model_comes_from_turn_context() -> None:
    data = _line("turn_context", {"model": "gpt-5.5-mini", "turn_id": "t1"}) + _line(
        "token_usage_record", {"response_id": "r1", "usage": _usage(1_000, 10)}
    )

    (update,) = _replay(data)

    assert (update.model, update.turn_id, update.tokens) == ("gpt-5.5-mini", "r1", 1_010)


def test_lines_in_another_key_order_are_still_read() -> None:
    # The cheap filter looks at the first "type" value; payload-first lines must not be lost.
    usage = {
        "payload": {"response_id": "r1", "usage": _usage(1_000, 10)},
        "type": "token_usage_record",
        "timestamp": "2026-11-29T21:02:05.210Z",
    }
    compacted = {
        "payload": {
            "replacement_history": [{"type": "message", "role": "user"}],
            "window_id": "w2",
        },
        "type": "compacted",
    }
    estimate = {
        "payload": {"type": "token_count", "info": {"last_token_usage": {"total_tokens": 700}}},
        "type": "event_msg",
    }
    data = b"".join(orjson.dumps(record) + b"\n" for record in (usage, compacted, estimate))

    updates = _replay(data)

    history = len(orjson.dumps(compacted["payload"]["replacement_history"]))  # type: ignore[index]
    assert [(u.tokens, u.compaction, u.turn_id) for u in updates] == [
        (1_010, False, "r1"),
        (1_010 + history // 4, True, "w2"),
        (700, False, "w2"),
    ]


def test_blank_and_garbage_lines_are_skipped() -> None:
    data = (
        b"\n{\n\xff\n[]\n"
        b'{"type":"token_usage_record"}\n'
        b'{"type":"token_usage_record","payload":{"usage":{"total_tokens":"x"}}}\n'
        b'{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":1}}}\n'
        + _line("token_usage_record", {"response_id": "r1", "usage": _usage(2_000, 20)})
    )

    assert [u.tokens for u in _replay(data)] == [2_020]


def test_reset_forgets_model_window_and_partial_line() -> None:
    reader = CodexReader()
    reader.feed(_read("rollout.exec.jsonl") + b'{"timestamp":"2026')

    reader.reset()
    (update,) = reader.feed(
        _line("token_usage_record", {"response_id": "r9", "usage": _usage(5_000, 5)})
    )

    assert (update.tokens, update.model, update.reported_window) == (5_005, None, None)


def test_the_daemon_logs_skipped_records_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ctxd.daemon.centre import Centre

    info = {
        "last_token_usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 940_499},
        "model_context_window": 258_400,
    }
    line = {"timestamp": "2026-02-23T12:54:34.000Z", "type": "event_msg"}
    first = {**line, "payload": {"type": "task_started", "model_context_window": 258_400}}
    bad = {**line, "payload": {"type": "token_count", "info": info}}
    path = tmp_path / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in (first, bad)))
    transcripts = Centre.open({"HOME": str(tmp_path)}, {"codex": tmp_path}).transcripts
    with caplog.at_level("DEBUG", logger="ctxd.daemon.transcripts"):
        transcripts.track(str(path), "codex")
        transcripts.catch_up(str(path))
    logged = [r.getMessage() for r in caplog.records if "impossible" in r.getMessage()]
    assert logged == [f"{path}: 1 record(s) with impossible figures ignored"]


# --------------------------------------------------------------------------- the listener

PUBLIC = Path(__file__).parents[2] / "data" / "public" / "codex"
ROLLOUTS = sorted(DATA.glob("*.jsonl")) + sorted(PUBLIC.glob("*.jsonl"))


class _Recorder:
    """A listener that keeps what it is told."""

    wants_records = True

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.flushes = 0
        self.resets = 0

    def take(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def flush(self) -> None:
        self.flushes += 1

    def reset(self) -> None:
        self.resets += 1


@pytest.mark.parametrize("path", ROLLOUTS, ids=lambda p: p.name)
@pytest.mark.parametrize("step", [7, 4096, 0])
def test_a_reader_with_facts_reports_the_same_usage_and_skips(path: Path, step: int) -> None:
    """Decoding every line for the digest changes no update and no count of impossible
    figures (the public 0.104 rollout has two)."""
    data = path.read_bytes()
    alone = CodexReader()
    expected = alone.feed(data)
    facts = spec("codex").open_facts(str(path))
    assert facts is not None
    reader = CodexReader(facts)
    step = step or len(data)
    got = [u for i in range(0, len(data), step) for u in reader.feed(data[i : i + step])]
    assert got == expected
    assert reader.skipped == alone.skipped
    if path.name == "rollout-codex0.104-desktop-compacted.jsonl":
        assert reader.skipped == 2


def test_every_record_goes_to_the_listener_once_and_each_feed_flushes() -> None:
    data = _read("rollout.continuity.jsonl")
    recorder = _Recorder()
    reader = CodexReader(recorder)
    feeds = 0
    for i in range(0, len(data), 1000):
        reader.feed(data[i : i + 1000])
        feeds += 1
    assert recorder.records == [orjson.loads(line) for line in data.splitlines()]
    assert recorder.flushes == feeds


def test_reset_resets_the_listener_too() -> None:
    facts = spec("codex").open_facts(None)
    assert facts is not None
    reader = CodexReader(facts)
    reader.feed(_read("rollout.continuity.jsonl"))
    assert facts.digest.commands_run and facts.compactions == 1

    reader.reset()

    fresh = spec("codex").open_facts(None)
    assert fresh is not None
    assert (facts.digest, facts.compactions) == (fresh.digest, 0)
