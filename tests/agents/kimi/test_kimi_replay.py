"""`ctxd replay` of the captured Kimi Code 2.1.0 session, as a real process: the agent told from
the file, the mock's last figure, the compaction, and the window Kimi compacted at revealed."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import World

WIRE = "tests/data/transcripts/kimi-code-2.1.0/wire.compact.jsonl"


def test_replay_of_a_real_wire_file(world: World) -> None:
    result = world.cli("replay", "--json", str(world.repo / WIRE))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    final = rows[-1]
    assert final["agent"] == "kimi"
    assert final["tokens"] == 30_000  # the mock's last prompt_tokens (usage.compact.json)
    assert final["compactions"] == 1
    assert [r["tokens"] for r in rows[:-1]] == [20_000, 21_000, 22_000, 171_000, 21_739, 30_000]


def test_replay_against_kimis_window_puts_its_point_where_it_compacted(world: World) -> None:
    # The capture ran with a 200,000 window and a 20,000 reserve: Kimi compacted at 170,000,
    # after the answer of 171,000 (+40); with Kimi's default reserve ctxd puts it at 150,000.
    result = world.cli("replay", "--json", "--window", "200000", str(world.repo / WIRE))
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows[3]["tokens"] == 171_000
    assert rows[3]["compaction_at"] == 150_000
