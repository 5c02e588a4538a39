"""The store of sessions stays bounded however many ids come (ctxd/daemon/sessions.py), in
process under a controlled clock: what is forgotten first, and that a restored snapshot holding
more than the bound is brought under it at the next new session; and what the snapshot keeps of
each session costs what it encodes to."""

from __future__ import annotations

import tracemalloc
from dataclasses import replace

from ctxd.core import session as core
from ctxd.daemon import snapshot
from ctxd.daemon.sessions import MAX_SESSIONS, Sessions


def test_a_snapshot_over_the_bound_is_brought_under_it_keeping_the_ones_worth_keeping() -> None:
    now = [1_000_000.0]
    sessions = Sessions(lambda: now[0])
    flood = [core.new_session("claude", f"id-{n}", None, float(n)) for n in range(MAX_SESSIONS)]
    followed = core.new_session("claude", "followed", "/t/followed.jsonl", 0.0)  # oldest
    ended = replace(core.new_session("claude", "ended", None, 2e6), ended_at=2e6)  # newest
    sessions.restore([followed, *flood, ended], {})
    assert len(sessions) == MAX_SESSIONS + 2

    sessions.open("claude", "new", None)

    assert len(sessions) <= MAX_SESSIONS * 9 // 10 + 1
    assert sessions.key_for("claude", "new") is not None
    assert sessions.key_for("claude", "followed") is not None  # a transcript backs it
    assert sessions.key_for("claude", "ended") is None  # ended: forgotten first
    assert sessions.key_for("claude", f"id-{MAX_SESSIONS - 1}") is not None  # heard of last
    assert sessions.key_for("claude", "id-0") is None


def test_the_snapshots_kept_encodings_cost_their_size_not_orjsons_buffer() -> None:
    """Each session's bytes are kept from one snapshot to the next; orjson's result holds a
    buffer of ~16 KB however short the document, so 20,000 sessions held ~300 MB."""
    states = [core.new_session("claude", f"id-{n}", None, float(n)) for n in range(2_000)]
    exporter = snapshot.Exporter()
    tracemalloc.start()
    try:
        document = exporter.sessions(states)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 3 * len(document), f"{held:,} bytes held for a {len(document):,}-byte array"
