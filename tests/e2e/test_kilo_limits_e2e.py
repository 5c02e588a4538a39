"""Kilo CLI's `compaction.threshold_percent`, against the real CLI (as test_opencode_limits_e2e.py
checks OpenCode's limits): with 50 % of a 200,000 window, ctxd puts Kilo's compaction point at
100,000 (`opencode_family.compaction.threshold_point`), not OpenCode's 168,000, and Kilo does
compact there: a session that ended its turn at 110,040 (prompt + output) is compacted before
the next turn's first request, as Kilo's check before a turn says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_kilo_e2e import SUMMARY_PROMPT, Rig, rig, start
from test_opencode_e2e import bash_steps, usage

__all__ = ["rig"]

pytestmark = pytest.mark.e2e


def test_threshold_percent_lowers_the_point_and_kilo_compacts_at_the_next_turn(rig: Rig) -> None:
    steps = bash_steps([50_000, 110_000])  # a call, then "Done." at 110,000 + 40
    steps.append({"text": "Again.", "usage": usage(60_000)})
    start(rig, steps, {"threshold_percent": 50}, step_mode="counter")
    rig.ctxd.start(rig.mock.wrap)
    rig.kilo("Run the steps")
    [row] = rig.rows()
    assert (row["compaction_at"], row["tokens"], row["compactions"]) == (100_000, 110_000, 0)

    res = rig.kilo("Go on", "--continue")
    assert "Again." in res.stdout, res.describe()
    main = rig.main()
    assert len(main) == 3, res.describe()
    summaries = [r for r in rig.mock.requests() if SUMMARY_PROMPT in json.dumps(r.get("body"))]
    assert len(summaries) == 1, [r.get("answer") for r in rig.mock.requests()]
    assert main[1]["ts"] < summaries[0]["ts"] < main[2]["ts"]
    [row] = rig.rows()
    assert (row["compactions"], row["tokens"]) == (1, 60_000)
    assert Path(rig.ctxd.env["CTXD_SOCKET"]).exists()
