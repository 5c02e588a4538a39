"""Truth table for Codex CLI's compaction point: 90 % of its catalog window (it reports 95 % of
that window), or `model_auto_compact_token_limit` from config.toml when that is lower (measured
with 0.171.0)."""

from __future__ import annotations

import pytest

from ctxd.agents import spec
from ctxd.agents.codex.compaction import compaction_point
from ctxd.core.compaction import CompactionOverrides

REPORTED = 258_400  # 95 % of 272,000


@pytest.mark.parametrize(
    ("toml", "rules", "expected"),
    [
        (b"", {}, 244_800),  # measured: 250,100 compacted, 120,100 not
        (b"model_auto_compact_token_limit = 100000\n", {}, 100_000),  # measured
        # A limit above the 90 % point changes nothing: the lower one wins.
        (b"model_auto_compact_token_limit = 250000\n", {}, 244_800),
        # The config file outranks ctxd's own [compaction.codex] token_limit.
        (
            b"model_auto_compact_token_limit = 150000\n",
            {"codex": {"token_limit": 100_000}},
            150_000,
        ),
        (b"", {"codex": {"token_limit": 100_000}}, 100_000),
        # Unusable values are ignored.
        (b'model_auto_compact_token_limit = "100000"\n', {}, 244_800),
        (b"model_auto_compact_token_limit = 0\n", {}, 244_800),
        (b"not toml = = =\n", {}, 244_800),
        # A limit inside a profile table is not the top-level one.
        (b"[profiles.x]\nmodel_auto_compact_token_limit = 1000\n", {}, 244_800),
    ],
)
def test_compaction_point(toml: bytes, rules: CompactionOverrides, expected: int) -> None:
    config = spec("codex").read_settings(toml)
    assert spec("codex").compaction(REPORTED, "gpt-5.5", rules, config) == expected


def test_the_table_holds_windows_as_codex_reports_them() -> None:
    windows = spec("codex").windows
    assert windows["gpt-5.5"] == REPORTED
    assert compaction_point(windows["gpt-5.5"], "gpt-5.5", {}, {}) == 244_800


def test_settings_file_is_config_toml_under_codex_home() -> None:
    files = spec("codex").settings_files({"CODEX_HOME": "/c", "HOME": "/h"}, "/w")
    assert [str(p) for p in files] == ["/c/config.toml"]
