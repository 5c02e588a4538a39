"""Gemini CLI's older single-object recordings (`chats/session-*.json`), rewritten whole on every
change: read, and watched (the daemon reads the file again when it is rewritten in place)."""

from __future__ import annotations

from pathlib import Path

import orjson

from ctxd import agents
from ctxd.agents.gemini.transcript import GeminiJsonReader
from ctxd.daemon.files import TranscriptFile

PUBLIC = Path(__file__).parents[2] / "data" / "public" / "gemini" / "chats"


def _doc(*inputs: int, summary: bool = False) -> bytes:
    messages: list[dict[str, object]] = [
        {"id": "u0", "timestamp": "2026-03-27T10:19:12.584Z", "type": "user", "content": "hi"}
    ]
    if summary:
        messages = [
            {"id": "s", "type": "user", "content": [{"text": "<state_snapshot>" + "x" * 396}]}
        ]
    for n, prompt in enumerate(inputs):
        messages.append(
            {
                "id": f"g{n}",
                "timestamp": "2026-03-27T10:19:18.274Z",
                "type": "gemini",
                "content": "",
                "tokens": {"input": prompt, "output": 10, "cached": 0, "total": prompt + 10},
                "model": "gemini-2.5-pro",
            }
        )
    doc = {"sessionId": "s1", "projectHash": "h", "startTime": "t", "messages": messages}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def test_a_recording_gives_one_update_per_gemini_turn_and_none_until_whole() -> None:
    data = _doc(1_000, 2_000)
    reader = GeminiJsonReader()
    assert reader.feed(data[:40]) == []
    updates = reader.feed(data[40:])
    assert [(u.tokens, u.turn_id, u.model) for u in updates] == [
        (1_000, "g0", "gemini-2.5-pro"),
        (2_000, "g1", "gemini-2.5-pro"),
    ]


def test_a_rewrite_reports_only_what_is_new_and_counts_a_compression() -> None:
    reader = GeminiJsonReader()
    reader.feed(_doc(1_000, 2_000))
    reader.reset()
    assert [u.tokens for u in reader.feed(_doc(1_000, 2_000, 3_000))] == [3_000]
    reader.reset()
    updates = reader.feed(_doc(1_000, 2_000, 3_000, 500, summary=True))
    assert [(u.compaction, u.estimated) for u in updates] == [(True, True), (False, False)]


def test_the_path_picks_the_reader_and_the_layout() -> None:
    path = str(PUBLIC / "session-2026-03-kind.json")
    spec = agents.spec("gemini")
    assert isinstance(spec.open_reader(path), GeminiJsonReader)
    assert spec.files.has_layout(path) and spec.files.is_transcript(path)
    assert agents.detect_agent_from_path(path) == "gemini"
    assert spec.files.session_id_from_path(path) == "session-2026-03-kind"


def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / "chats" / "session-2026-03-27T10-19-8a20078e.json"
    path.parent.mkdir()
    path.write_bytes(_doc(1_000))
    tracked = TranscriptFile(str(path), "gemini")
    assert [u.tokens for u in tracked.read_appended()] == [1_000]
    inode = path.stat().st_ino
    with path.open("r+b") as f:  # Gemini CLI rewrites the same file (writeFileSync)
        f.truncate(0)
        f.write(_doc(1_000, 4_000))
    assert path.stat().st_ino == inode
    assert [u.tokens for u in tracked.read_appended()] == [4_000]


def test_the_fast_path_reads_gemini_lines_as_a_full_decode_does() -> None:
    from ctxd.agents.gemini.transcript import _figure, _gemini_line

    samples = [
        PUBLIC.parent.parent / "gemini" / "chats" / "session-2026-04-23-jsonl.jsonl",
        *sorted((PUBLIC.parents[2] / "data" / "transcripts").glob("gemini-cli-*/*.jsonl")),
    ]
    fast = 0
    for path in samples:
        for line in path.read_bytes().splitlines():
            found = _gemini_line(line) if line.startswith(b'{"id":"') else None
            if found is None:
                continue
            record = orjson.loads(line)
            assert found == (record["id"], _figure(record)), line[:200]
            fast += 1
    assert fast >= 11
    # Nested "tokens" (a tool's result) or another key order: decoded whole instead.
    line = b'{"id":"a","timestamp":"t","type":"gemini","content":{"tokens":{"input":1}},'
    line += b'"tokens":{"input":5},"model":"m"}'
    assert _gemini_line(line) is None
    assert _gemini_line(b'{"id":"a","type":"gemini","tokens":{"input":5},"model":"m"}') is None
