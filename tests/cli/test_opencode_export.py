"""`ctxd replay` reads what `opencode export` prints: the exports the real CLI 1.18.33 made of the
sessions of the captured databases (tests/data/transcripts/opencode-1.18.33/export.*.json, made by
tests/e2e/capture_opencode.py --save from the same runs as the databases), told by their content,
with the figures of the database they came from. Real `ctxd` processes, and the replay itself in
process for the figures row by row."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from ctxd_process import ctxd, json_lines
from opencode_db import CAPTURE

from ctxd.agents.opencode_family.export import MAX_BYTES, ExportReader
from ctxd.cli.replay import Row, replay, replay_store
from ctxd.core.session import SessionState

DATA = CAPTURE.parent
#: Each export, the database it was made from and the session's place in it (0: the main one).
EXPORTS = [
    ("export.compact.json", "opencode.compact.db", 0),
    ("export.subagent.json", "opencode.subagent.db", 0),
    ("export.subagent.task.json", "opencode.subagent.db", 1),
]


def _figures(items: list[Row | SessionState]) -> tuple[list[tuple[Any, ...]], tuple[Any, ...]]:
    # All but the times: an export's step is timed by its message, the database's by its part.
    rows = [
        (
            item.turn,
            item.figures.tokens,
            item.figures.window,
            item.figures.compaction_at,
            item.figures.tokens_to_compaction,
            item.figures.used_pct,
            item.figures.severity,
            item.figures.estimated,
            item.compaction,
        )
        for item in items
        if isinstance(item, Row)
    ]
    final = items[-1]
    assert isinstance(final, SessionState)
    return rows, (final.tokens, final.turns, final.compactions, final.model)


@pytest.mark.parametrize(("export", "database", "index"), EXPORTS)
def test_an_export_gives_the_figures_of_its_session_in_the_database(
    export: str, database: str, index: int
) -> None:
    from_export = _figures(list(replay(str(DATA / export))))
    sessions = list(replay_store(str(DATA / database)))
    info, timeline = sessions[index]
    assert info.session_id == orjson.loads((DATA / export).read_bytes())["info"]["id"]
    assert from_export == _figures(list(timeline))
    assert from_export[0], "the session has usage"


def test_the_cli_tells_an_export_by_its_content_and_prints_its_figures(
    env: dict[str, str], tmp_path: Path
) -> None:
    # Under any name: what a session archiver keeps is named as it likes.
    path = tmp_path / "saved-session"
    path.write_bytes((DATA / "export.compact.json").read_bytes())
    lines = json_lines(ctxd(env, "replay", "--json", str(path)))
    assert [(line["tokens"], line["compaction"]) for line in lines[:-1]] == [
        (50_000, False),
        (170_000, False),
        (5, True),
        (20_000, False),
        (21_000, False),
    ]
    final = lines[-1]
    assert (final["agent"], final["tokens"], final["turns"], final["compactions"]) == (
        "opencode",
        21_000,
        4,
        1,
    )
    named = json_lines(ctxd(env, "replay", "--json", "--agent", "opencode", str(path)))
    assert named == lines


def test_an_export_saved_on_one_line_is_told_too(env: dict[str, str], tmp_path: Path) -> None:
    doc = orjson.loads((DATA / "export.subagent.task.json").read_bytes())
    # a short one decodes whole from the head; a long one by how it starts
    short = tmp_path / "short.json"
    short.write_bytes(orjson.dumps(doc))
    doc["info"]["title"] = "x" * (100 * 1024)
    long = tmp_path / "long.json"
    long.write_bytes(orjson.dumps(doc))
    for path in (short, long):
        lines = json_lines(ctxd(env, "replay", "--json", str(path)))
        assert [line["tokens"] for line in lines] == [30_000, 31_000, 31_000], path.name


def test_an_export_without_its_steps_gives_each_answers_own_tokens(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Archivers keep the messages and drop their parts: OpenCode sets an answer's `tokens` to
    its last step's, so each answer still states its figure; a failed answer states none."""
    doc = orjson.loads((DATA / "export.subagent.task.json").read_bytes())
    for message in doc["messages"]:
        message["parts"] = [p for p in message["parts"] if p["type"] != "step-finish"]
    failed = orjson.loads(orjson.dumps(doc["messages"][-1]))
    failed["info"] |= {"id": "msg_failed", "error": {"name": "MessageAbortedError"}}
    doc["messages"].append(failed)
    path = tmp_path / "kept-messages.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    lines = json_lines(ctxd(env, "replay", "--json", str(path)))
    # the database's steps were 30,000 then 31,000, one answer each
    assert [line["tokens"] for line in lines] == [30_000, 31_000, 31_000]
    assert (lines[-1]["agent"], lines[-1]["turns"]) == ("opencode", 2)


def test_an_export_saved_with_its_exporting_line_is_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    """`opencode export ID > file 2>&1` (1.15 seen) keeps the "Exporting session: ID" line
    before the document: told and read as the document alone."""
    source = (DATA / "export.subagent.task.json").read_bytes()
    session_id = orjson.loads(source)["info"]["id"]
    path = tmp_path / "export.json"
    path.write_bytes(f"Exporting session: {session_id}\n".encode() + source)
    lines = json_lines(ctxd(env, "replay", "--json", str(path)))
    assert [line["tokens"] for line in lines] == [30_000, 31_000, 31_000]
    assert lines[-1]["agent"] == "opencode"


def test_an_export_fed_in_pieces_cut_anywhere_gives_the_same_updates() -> None:
    data = (DATA / "export.compact.json").read_bytes()
    whole = ExportReader().feed(data)
    assert [u.tokens for u in whole] == [50_000, 170_000, 5, 20_000, 21_000]
    rng = random.Random(7)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(data)), 12))
        reader = ExportReader()
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        assert [u for piece in pieces for u in reader.feed(piece)] == whole


def test_an_export_too_large_is_refused_in_one_line_before_it_is_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "huge.json"
    path.write_bytes((DATA / "export.compact.json").read_bytes())
    os.truncate(path, MAX_BYTES + 1)  # sparse: nothing of it is on disk
    result = ctxd(env, "replay", str(path))
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        f"ctxd replay: {path} is larger than {MAX_BYTES // 2**20} MiB, more than ctxd reads "
        "of an OpenCode export"
    ]


def test_a_fifo_is_refused_not_waited_on(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    os.mkfifo(path)
    result = ctxd(env, "replay", str(path))  # no writer ever opens it
    assert result.returncode != 0
    assert result.stderr.strip() == f"ctxd replay: cannot read {path}: not a regular file (a FIFO)"


def test_a_summary_written_under_its_agents_mode_is_a_compaction_too() -> None:
    """Older OpenCode wrote a compaction's summary as `summary: true` under the mode of the
    agent that ran it ("build"); 1.x writes mode "compaction". Both reset the figure."""
    step = {"type": "step-finish", "tokens": {"input": 150_000, "output": 900, "cache": {}}}
    after = {"type": "step-finish", "tokens": {"input": 2_000, "output": 10, "cache": {}}}
    doc = {
        "info": {"id": "ses_old", "version": "0.15.8", "directory": "/w"},
        "messages": [
            {
                "info": {"id": "m1", "role": "assistant", "summary": True, "mode": "build"},
                "parts": [step | {"id": "p1"}],
            },
            {
                "info": {"id": "m2", "role": "assistant", "mode": "build"},
                "parts": [after | {"id": "p2"}],
            },
        ],
    }
    summary, next_step = ExportReader().feed(orjson.dumps(doc))
    assert (summary.tokens, summary.compaction, summary.estimated) == (900, True, True)
    assert (next_step.tokens, next_step.compaction) == (2_000, False)
