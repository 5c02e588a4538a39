"""GeminiReader against real Gemini CLI 0.61.0 chat recordings. Expected figures are the
`promptTokenCount` the mock API reported for each main request (samples/0.61.0/report.md,
"Token fields: gemini messages vs the usageMetadata the mock reported"), and the CLI's own
"Chat history compressed from 13000 to 168 tokens" (pane.interactive.4-after-compress.txt)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ctxd.agents.gemini.transcript import GeminiReader
from ctxd.core.events import UsageUpdate

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "gemini-cli-0.61.0"


def _read(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _replay(data: bytes) -> list[UsageUpdate]:
    return GeminiReader().feed(data)


def _lines(*records: object) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def _gemini(message_id: str, prompt: int, **extra: object) -> dict[str, object]:
    return {
        "id": message_id,
        "timestamp": "2026-11-29T21:11:06.354Z",
        "type": "gemini",
        "content": "",
        "tokens": {
            "input": prompt,
            "output": 40,
            "cached": prompt // 2,
            "thoughts": 0,
            "tool": 0,
            "total": prompt + 40,
        },
        "model": "gemini-3.8-flash",
        **extra,
    }


def _user(message_id: str, text: str = "hi") -> dict[str, object]:
    return {
        "id": message_id,
        "timestamp": "2026-11-29T21:11:06.258Z",
        "type": "user",
        "content": [{"text": text}],
    }


# --------------------------------------------------------------------------- real transcripts


@pytest.mark.parametrize(
    ("name", "prompts"),
    [
        # print: promptTokenCount 12000, 13500, 15000, 16500, then 18000 after --resume.
        ("transcript.print.1.jsonl", [12_000, 13_500, 15_000, 16_500, 18_000]),
        # exitcodes: 12000 + 1000 per main request, seven requests.
        ("transcript.exitcodes.1.jsonl", [12_000 + 1_000 * i for i in range(7)]),
        # defaults: 12000, 13500, 15000.
        ("transcript.defaults.1.jsonl", [12_000, 13_500, 15_000]),
    ],
)
def test_figures_are_the_prompt_token_counts_the_api_reported(
    name: str, prompts: list[int]
) -> None:
    updates = _replay(_read(name))

    # The first answer of each tool call is written twice (again once its toolCalls are known):
    # one update per answer. Cached tokens (8000, ...) are inside promptTokenCount, not added.
    assert [u.tokens for u in updates] == prompts
    assert not any(u.compaction for u in updates)
    assert len({u.turn_id for u in updates}) == len(prompts)
    assert all(u.model == "gemini-3.8-flash" for u in updates)


def test_resume_rewrite_of_the_list_is_not_a_compaction() -> None:
    # print: the resume appends a fresh `$set.messages` (one message), then the whole history
    # again without tokens; the figure must neither drop nor count as a compaction.
    updates = _replay(_read("transcript.print.1.jsonl"))

    assert [u.tokens for u in updates][-2:] == [16_500, 18_000]


def test_automatic_and_manual_compression_are_reported() -> None:
    updates = _replay(_read("transcript.compress.1.jsonl"))

    # compress: promptTokenCount 12000, then 600000 (over 0.5 x 1048576: automatic compression),
    # 5000 after it; `/compress` in a resumed session compresses again; then 7000 twice
    # (two resumed runs, two answers).
    figures = [(u.tokens, u.compaction) for u in updates]
    assert [f for f in figures if not f[1]] == [
        (12_000, False),
        (600_000, False),
        (5_000, False),
        (7_000, False),
        (7_000, False),
    ]
    compactions = [i for i, (_, compaction) in enumerate(figures) if compaction]
    assert compactions == [2, 4]  # right after 600000, and before the first 7000
    # The rebuilt history (session context + summary + acknowledgement) is a few hundred
    # characters: a small estimate, far below the 600000 it replaces.
    assert all(0 < updates[i].tokens < 1_000 for i in compactions)


def test_compression_estimate_is_close_to_gemini_clis_own() -> None:
    updates = _replay(_read("transcript.interactive.1.jsonl"))

    compaction = next(u for u in updates if u.compaction)
    # Gemini CLI printed "Chat history compressed from 13000 to 168 tokens."
    assert compaction.tokens == pytest.approx(168, rel=0.2)


def test_rewind_drops_the_rewound_answer() -> None:
    # interactive: 12000, 13000, /compress, 14000, /rewind (drops the 14000 turn), 15000.
    updates = _replay(_read("transcript.interactive.1.jsonl"))

    compaction = next(u for u in updates if u.compaction)
    assert [u.tokens for u in updates] == [
        12_000,
        13_000,
        compaction.tokens,
        14_000,
        compaction.tokens,
        15_000,
    ]


def test_a_session_file_without_answers_gives_no_update() -> None:
    # compress.2: a resume's fresh 2-line file (metadata + `$set.messages`), twice.
    assert _replay(_read("transcript.compress.2.jsonl")) == []


# --------------------------------------------------------------------------- edge cases


def test_repeated_id_replaces_the_earlier_record() -> None:
    reader = GeminiReader()
    first = reader.feed(_lines(_user("u1"), _gemini("g1", 12_000)))
    rewritten = reader.feed(_lines(_gemini("g1", 12_500, toolCalls=[])))
    same_again = reader.feed(_lines(_gemini("g1", 12_500, toolCalls=[{"id": "t"}])))

    assert [(u.turn_id, u.tokens) for u in first] == [("g1", 12_000)]
    assert [(u.turn_id, u.tokens) for u in rewritten] == [("g1", 12_500)]
    assert same_again == []


def test_rewind_to_a_message_falls_back_to_the_answer_before_it() -> None:
    reader = GeminiReader()
    reader.feed(_lines(_user("u1"), _gemini("g1", 12_000), _user("u2"), _gemini("g2", 13_000)))

    updates = reader.feed(_lines({"$rewindTo": "u2"}))
    unknown = reader.feed(_lines({"$rewindTo": "no-such-id"}))

    assert [(u.turn_id, u.tokens) for u in updates] == [("g1", 12_000)]
    assert unknown == []


def test_metadata_and_set_lines_do_not_change_the_figure() -> None:
    reader = GeminiReader()
    reader.feed(_lines(_gemini("g1", 12_000)))

    updates = reader.feed(
        _lines(
            {
                "sessionId": "s",
                "projectHash": "h",
                "startTime": "2026-11-29T21:11:56.977Z",
                "lastUpdated": "2026-11-29T21:11:56.977Z",
                "kind": "main",
            },
            {"$set": {"lastUpdated": "2026-11-29T21:12:00.493Z"}},
            {"$set": {"summary": "Mock summary"}},
        )
    )

    assert updates == []


def test_blank_and_garbage_lines_are_skipped() -> None:
    reader = GeminiReader()
    updates = reader.feed(
        b"\n\n{oops\n\xff\xfe\n[]\n"
        b'{"id":"x"\n'
        b'{"$set":{"messages":"nope"}}\n'
        b'{"$rewindTo":7}\n'
        b'{"id":"g","type":"gemini","tokens":{"input":"many"}}\n' + _lines(_gemini("g1", 9_000))
    )

    assert [u.tokens for u in updates] == [9_000]


def test_reset_forgets_the_message_list() -> None:
    reader = GeminiReader()
    reader.feed(_lines(_user("u1"), _gemini("g1", 12_000)) + b'{"id":"u2"')

    reader.reset()

    assert [u.tokens for u in reader.feed(_lines(_gemini("g2", 5_000)))] == [5_000]
    # Rewinding the new file's only answer leaves nothing; g1 belonged to the old file.
    assert reader.feed(_lines({"$rewindTo": "g2"})) == []
