"""Cline CLI's messages document: the figure is the last assistant message's `inputTokens`
(cache included), a half-written document waits, a compaction record beside it is one
compaction at its place, and nothing grows without bound."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ctxd.agents.cline import transcript
from ctxd.agents.cline.digest import ClineFacts
from ctxd.agents.cline.transcript import ClineReader, compaction_mark

DATA = Path(__file__).parents[2] / "data" / "transcripts" / "cline-3.0.65" / "sessions"
SESSION = "1796554282174_e2h89"
#: What the mock reported to the agent loop, in order (`prompt_tokens`, cached half of it).
REPORTED = [12_000, 18_000, 24_000, 28_000, 38_000, 24_500, 26_000, 26_000]


def _session(tmp_path: Path, compaction: bool = True) -> Path:
    folder = tmp_path / "sessions" / SESSION
    shutil.copytree(DATA / SESSION, folder)
    if not compaction:
        (folder / f"{SESSION}.compaction.json").unlink()
    return folder / f"{SESSION}.messages.json"


def test_the_figures_are_the_mocks_and_the_compaction_comes_at_its_place(tmp_path: Path) -> None:
    path = _session(tmp_path)
    updates = ClineReader(str(path)).feed(path.read_bytes())
    figures = [(u.tokens, u.compaction) for u in updates]
    assert [t for t, c in figures if not c] == REPORTED
    # Cline compacted after the answer that reported 38,000 (>= 36,000), before the next
    assert [c for _, c in figures] == [False] * 5 + [True] + [False] * 3
    compacted = updates[5]
    assert compacted.estimated and compacted.compacted_from == 38_000
    assert all(u.model == "mock-model" for u in updates if not u.compaction)
    assert {u.agent_version for u in updates if not u.compaction} == {"3.0.65"}  # in status


def test_a_document_the_desktop_app_wrote_names_no_cli_version() -> None:
    doc = json.loads((DATA / SESSION / f"{SESSION}.messages.json").read_text())
    doc["origin"] = {"source": "desktop", "mode": "user", "version": "0.0.34"}
    assert {u.agent_version for u in ClineReader().feed(json.dumps(doc).encode())} == {None}


def test_cache_reads_are_part_of_input_tokens_not_added() -> None:
    doc = json.loads((DATA / SESSION / f"{SESSION}.messages.json").read_text())
    first = next(m for m in doc["messages"] if m["role"] == "assistant")
    assert first["metrics"]["cacheReadTokens"] == 6_000  # the mock's cached half
    assert ClineReader().feed(json.dumps(doc).encode())[0].tokens == 12_000


def test_a_half_written_document_waits_for_the_rest(tmp_path: Path) -> None:
    path = _session(tmp_path, compaction=False)
    data = path.read_bytes()
    reader = ClineReader(str(path))
    cut = len(data) // 2
    assert reader.feed(data[:cut]) == []
    assert [u.tokens for u in reader.feed(data[cut:])] == REPORTED
    # the same document again (rewritten): nothing new
    reader.reset()
    assert reader.feed(data) == []


def test_a_rewrite_reports_only_the_new_answer(tmp_path: Path) -> None:
    path = _session(tmp_path, compaction=False)
    doc = json.loads(path.read_bytes())
    reader = ClineReader(str(path))
    head = {**doc, "messages": doc["messages"][:2]}
    assert [u.tokens for u in reader.feed(json.dumps(head).encode())] == [12_000]
    reader.reset()
    assert [u.tokens for u in reader.feed(path.read_bytes())] == REPORTED[1:]


def test_the_compaction_is_told_once(tmp_path: Path) -> None:
    path = _session(tmp_path)
    reader = ClineReader(str(path))
    assert sum(u.compaction for u in reader.feed(path.read_bytes())) == 1
    reader.reset()
    assert reader.feed(path.read_bytes()) == []


def test_a_fifo_in_place_of_the_compaction_record_is_not_waited_for(tmp_path: Path) -> None:
    import os

    path = _session(tmp_path)
    record = path.with_name(f"{SESSION}.compaction.json")
    record.unlink()
    os.mkfifo(record)
    updates = ClineReader(str(path)).feed(path.read_bytes())
    assert [u.tokens for u in updates] == REPORTED


def test_a_document_past_the_bound_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transcript, "MAX_DOCUMENT", 1024)
    reader = ClineReader()
    assert reader.feed(b"{" + b" " * 2000) == []
    assert len(reader._data) == 0
    assert reader.feed(b"}") == []  # still passed over until the file is written again
    reader.reset()
    assert reader.feed(b'{"messages": []}') == []


def test_compaction_mark_reads_the_head() -> None:
    head = (DATA / SESSION / f"{SESSION}.compaction.json").read_bytes()[:4096]
    mark = compaction_mark(head)
    assert mark is not None and mark[0] == 13
    assert compaction_mark(b'{"version": 1}') is None


def test_the_digest_has_the_request_the_commands_and_the_compaction(tmp_path: Path) -> None:
    path = _session(tmp_path)
    facts = ClineFacts()
    ClineReader(str(path), facts, usage=False).feed(path.read_bytes())
    digest = facts.digest
    assert digest.compactions == 1
    assert facts.book.first_ask == "Run the steps"
    assert len(digest.commands) == 7


def test_a_whole_document_is_let_go_and_the_state_is_small(tmp_path: Path) -> None:
    from ctxd.agents import state

    path = _session(tmp_path)
    reader = ClineReader(str(path))
    reader.feed(path.read_bytes())
    assert len(reader._data) == 0
    kept = state.dump(reader, (reader.facts,))
    fresh = ClineReader(str(path))
    state.load_into(fresh, kept, keep=("facts",))
    fresh.reset()
    assert fresh.feed(path.read_bytes()) == []  # a restart reports nothing twice
