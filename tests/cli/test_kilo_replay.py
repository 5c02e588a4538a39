"""`ctxd replay` of the database Kilo CLI 7.7.7 wrote in the e2e compaction run
(tests/data/transcripts/kilo-7.7.7/kilo.compact.db): Kilo is told from OpenCode by its own tables,
and the figures are the mock's prompt_tokens (tests/e2e/test_kilo_e2e.py's compaction test), with
Kilo's compaction. A real `ctxd` process."""

from __future__ import annotations

from pathlib import Path

import pytest
from ctxd_process import ctxd, json_lines

pytestmark = pytest.mark.slow

CAPTURE = Path(__file__).parents[1] / "data" / "transcripts" / "kilo-7.7.7" / "kilo.compact.db"
#: What the mock reported for the eight steps, and the summary's output after step 4's.
PROMPTS = [50_000, 115_000, 116_000, 170_000, 5, 60_000, 115_000, 116_000, 117_000]


def test_replay_of_a_kilo_database_names_kilo_and_the_mocks_figures(env: dict[str, str]) -> None:
    result = ctxd(env, "replay", "--window", "200000", str(CAPTURE))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Kilo CLI session ses_"), result.stdout
    rows = json_lines(ctxd(env, "replay", "--json", "--window", "200000", str(CAPTURE)))
    steps, final = rows[:-1], rows[-1]
    assert [row["tokens"] for row in steps] == PROMPTS
    assert (final["agent"], final["model"], final["tokens"]) == ("kilo", "mock-model", 117_000)
    assert final["compactions"] == 1
    # OpenCode's rule with Kilo's names: 200,000 - 32,000 (no limit.output known to replay)
    assert final["compaction_at"] == 168_000


def test_replay_of_kilos_export_of_that_session_names_kilo_and_the_same_figures(
    env: dict[str, str],
) -> None:
    export = CAPTURE.with_name("export.compact.json")  # `kilo export` of that database's session
    rows = json_lines(ctxd(env, "replay", "--json", "--window", "200000", str(export)))
    assert [row["tokens"] for row in rows[:-1]] == PROMPTS
    assert (rows[-1]["agent"], rows[-1]["compactions"]) == ("kilo", 1)
    # OpenCode's own export stays OpenCode's
    opencode = CAPTURE.parents[1] / "opencode-1.18.33" / "export.compact.json"
    assert json_lines(ctxd(env, "replay", "--json", str(opencode)))[-1]["agent"] == "opencode"


def test_kilo_is_refused_for_an_opencode_database(env: dict[str, str]) -> None:
    opencode = CAPTURE.parents[1] / "opencode-1.18.33" / "opencode.db"
    result = ctxd(env, "replay", "--agent", "kilo", str(opencode))
    assert result.returncode != 0
    assert "OpenCode" in result.stderr
