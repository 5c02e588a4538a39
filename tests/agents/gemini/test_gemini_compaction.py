"""Truth table for Gemini CLI's compression point: a share of the window, from
`model.compressionThreshold` in its settings.json (0.5 by default, measured with 0.61.0)."""

from __future__ import annotations

import orjson
import pytest

from ctxd.agents import spec
from ctxd.agents.gemini.compaction import compaction_point, settings_config
from ctxd.core.compaction import CompactionOverrides

W = 1_048_576


@pytest.mark.parametrize(
    ("settings", "rules", "expected"),
    [
        ({}, {}, 524_288),  # measured: 600,000 compressed, 12,000 not
        ({"model": {"compressionThreshold": 0.7}}, {}, 734_003),
        ({"model": {"compressionThreshold": 1}}, {}, W),
        # Older versions' key, and the newer one winning over it.
        ({"chatCompression": {"contextPercentageThreshold": 0.3}}, {}, 314_572),
        (
            {
                "model": {"compressionThreshold": 0.6},
                "chatCompression": {"contextPercentageThreshold": 0.3},
            },
            {},
            629_145,
        ),
        # Unusable values are ignored, as the CLI would not use them.
        ({"model": {"compressionThreshold": 0}}, {}, 524_288),
        ({"model": {"compressionThreshold": 1.5}}, {}, 524_288),
        ({"model": {"compressionThreshold": "0.7"}}, {}, 524_288),
        ({"model": {"compressionThreshold": True}}, {}, 524_288),
        ({"model": "gemini-2.5-pro"}, {}, 524_288),
        # What the CLI reads outranks ctxd's own [compaction.gemini] fraction...
        ({"model": {"compressionThreshold": 0.7}}, {"gemini": {"fraction": 0.4}}, 734_003),
        # ...which applies when the settings say nothing.
        ({}, {"gemini": {"fraction": 0.4}}, 419_430),
    ],
)
def test_compression_point(
    settings: dict[str, object], rules: CompactionOverrides, expected: int
) -> None:
    config = settings_config(settings)
    assert compaction_point(W, "gemini-2.5-pro", rules.get("gemini", {}), config) == expected
    # The same through the agent's spec (which picks its own overrides), from the file's bytes.
    read = spec("gemini").read_settings(orjson.dumps(settings))
    assert spec("gemini").compaction(W, None, rules, read) == expected


def test_settings_with_comments_are_read_as_gemini_cli_reads_them() -> None:
    # Gemini CLI accepts `//` and `/* */` comments in settings.json; so must the threshold read.
    text = b'{\n  // compress early\n  "model": {"compressionThreshold": 0.3 /* of 1M */}\n}\n'
    read = spec("gemini").read_settings(text)
    assert spec("gemini").compaction(1_000_000, None, {}, read) == 300_000


def test_unreadable_settings_are_no_configuration() -> None:
    assert spec("gemini").read_settings(b"{not json") == {}
    assert spec("gemini").read_settings(b"[1, 2]") == {}


def test_settings_files_user_then_workspace() -> None:
    files = spec("gemini").settings_files({"HOME": "/h"}, "/w")
    assert [str(p) for p in files] == ["/h/.gemini/settings.json", "/w/.gemini/settings.json"]
