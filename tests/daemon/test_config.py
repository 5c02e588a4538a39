"""The TOML config: the documented names work, mistakes get a one-line reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxd.agents import AGENTS, spec
from ctxd.core.window import lookup_table
from ctxd.daemon.config import (
    DEFAULT_WINDOWS,
    MAX_CONFIG_BYTES,
    MAX_WINDOWS,
    default_settings,
    load_settings,
    parse_settings,
)
from ctxd.errors import ConfigError

DOCUMENTED = """
[thresholds]
warning = 40
critical = 20
basis = "window"
debounce = 3
[handoff]
enabled = false
at = 80
action = "block"
[windows]
"claude-sonnet-4-5" = 200000
[window]
default = 400000
[compaction.gemini]
fraction = 0.7
[compaction.codex]
token_limit = 200000
[compaction.claude]
reserve = 33000
[sessions]
idle_minutes = 30
ended_minutes = 5
"""


def test_documented_names_are_honoured() -> None:
    s = parse_settings(DOCUMENTED)
    assert (s.thresholds.warning, s.thresholds.critical) == (40, 20)
    assert (s.thresholds.basis, s.thresholds.debounce) == ("window", 3)
    assert (s.handoff.enabled, s.handoff.at, s.handoff.action) == (False, 80, "block")
    assert s.windows["claude-sonnet-4-5"] == 200_000
    assert s.default_window == 400_000
    assert s.compaction == {
        "gemini": {"fraction": 0.7},
        "codex": {"token_limit": 200_000},
        "claude": {"reserve": 33_000},
    }
    assert (s.sessions.idle_seconds, s.sessions.ended_keep_seconds) == (1800, 300)


def test_empty_file_gives_gsd_defaults_on_the_compaction_basis() -> None:
    s = parse_settings("")
    assert s == default_settings()
    assert (s.thresholds.warning, s.thresholds.critical, s.thresholds.debounce) == (35, 25, 5)
    assert s.thresholds.basis == "compaction"
    assert (s.handoff.enabled, s.handoff.at, s.handoff.action) == (True, 70, "message")


def test_user_windows_extend_the_builtin_table() -> None:
    s = parse_settings('[windows]\n"gemini-" = 2000000\n"my-model" = 50000\n')
    assert s.windows["gemini-"] == 2_000_000
    assert s.windows["my-model"] == 50_000
    assert default_settings().windows == DEFAULT_WINDOWS


def test_a_user_prefix_outranks_the_longer_builtin_entries_it_covers() -> None:
    """`"claude-opus-5" = 800000` applies to claude-opus-5-5 too: the built-in table's own
    claude-opus-5-5 entry, a longer prefix, used to win and the user's line did nothing."""
    s = parse_settings('[windows]\n"Claude-Opus-5" = 800000\n')
    assert lookup_table("claude-opus-5-5", s.windows) == 800_000
    assert lookup_table("claude-opus-5", s.windows) == 800_000
    # The built-in entries the user's key does not cover stay.
    assert lookup_table("claude-opus-4-8", s.windows) == DEFAULT_WINDOWS["claude-opus-4-8"]
    assert lookup_table("claude-sonnet-5-5", s.windows) == DEFAULT_WINDOWS["claude-sonnet-5-5"]
    # A user entry longer than a built-in one beside it changes only what it names.
    s = parse_settings('[windows]\n"claude-opus-5-5-exp" = 300000\n')
    assert lookup_table("claude-opus-5-5-exp-1", s.windows) == 300_000
    assert lookup_table("claude-opus-5-5", s.windows) == DEFAULT_WINDOWS["claude-opus-5-5"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[thresholds\n", "not valid TOML"),
        ("[threshold]\nwarning = 3\n", "unknown section [threshold]"),
        ("[thresholds]\nwarnign = 30\n", "unknown key 'warnign'"),
        ("[thresholds]\nwarning = 'high'\n", "thresholds.warning must be a number"),
        ("[thresholds]\nwarning = 130\n", "thresholds.warning must be a number from 0 to 100"),
        ("[thresholds]\nwarning = 20\ncritical = 30\n", "must not be above thresholds.warning"),
        ("[thresholds]\nbasis = 'tokens'\n", "thresholds.basis must be 'compaction' or 'window'"),
        ("[thresholds]\ndebounce = 0\n", "thresholds.debounce must be a whole number"),
        ("[handoff]\nenabled = 'yes'\n", "handoff.enabled must be true or false"),
        ("[handoff]\naction = 'stop'\n", "handoff.action must be 'message' or 'block'"),
        ("[windows]\n'm' = -5\n", "windows.m must be a whole number of at least 1"),
        ("[windows]\n'm' = 'lots'\n", "windows.m: not a number of tokens: 'lots'"),
        ("[handoff]\nat = 70\nremaining = 30\n", "set one of the two"),
        ("[handoff]\nremaining = 130\n", "handoff.remaining must be a number from 0 to 100"),
        ("[window]\ndefault = 0\n", "window.default must be a whole number of at least 1"),
        ("thresholds = 3\n", "[thresholds] must be a table"),
        (
            "[compaction.gemini]\nfraction = 1.5\n",
            "compaction.gemini.fraction must be a number from 0.01 to 1, got 1.5",
        ),
        (
            "[compaction]\ngemini_fraction = 0\n",
            "compaction.gemini_fraction must be a number from 0.01 to 1, got 0",
        ),
        (
            "[compaction.codex]\ntoken_limit = 0\n",
            "compaction.codex.token_limit must be a whole number of at least 1, got 0",
        ),
        (
            "[compaction.claude]\nreserve = 1.5\n",
            "compaction.claude.reserve must be a whole number of at least 0, got 1.5",
        ),
        ("[compaction.codex]\nfractoin = 0.5\n", "[compaction.codex] has unknown key 'fractoin'"),
        ("[compaction.qwen]\nfraction = 0.5\n", "known: none"),
        ("[compaction]\ncodex = 0.5\n", "[compaction.codex] must be a table"),
        ("[compaction]\nopencode_fraction = 0.5\n", "[compaction] has unknown key"),
        (
            "[compaction]\ncodex_fraction = 0.8\n[compaction.codex]\nfraction = 0.7\n",
            "compaction.codex.fraction and compaction.codex_fraction are one setting",
        ),
    ],
)
def test_mistakes_are_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value).strip()


def test_the_older_compaction_keys_still_work() -> None:
    """What README documented before `[compaction.<agent>]`: the same values, the same rules."""
    old = parse_settings(
        "[compaction]\ngemini_fraction = 0.7\ncodex_fraction = 1\n"
        "codex_token_limit = 200000\nclaude_reserve = 33000\n"
    )
    new = parse_settings(
        "[compaction.gemini]\nfraction = 0.7\n[compaction.codex]\nfraction = 1\n"
        "token_limit = 200000\n[compaction.claude]\nreserve = 33000\n"
    )
    assert old == new
    assert old.compaction["codex"] == {"fraction": 1.0, "token_limit": 200_000}


def test_every_agents_keys_are_read_from_its_table() -> None:
    for name in AGENTS:
        for key in spec(name).config_keys:
            value = key.default if key.default is not None else key.low
            parsed = parse_settings(f"[compaction.{name}]\n{key.name} = {value!r}\n")
            assert parsed.compaction == {name: {key.name: value}}


def test_missing_file_means_defaults_and_a_broken_file_names_itself(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.toml") == default_settings()
    broken = tmp_path / "config.toml"
    broken.write_text("[thresholds]\nwarning = 'x'\n")
    with pytest.raises(ConfigError, match=str(broken)):
        load_settings(broken)


def test_values_the_core_refuses_are_config_errors() -> None:
    """`handoff.at = 0` passed here and crashed the daemon later."""
    with pytest.raises(ConfigError, match="handoff"):
        parse_settings("[handoff]\nat = 0\n")


def test_what_is_not_a_small_regular_file_is_a_config_error(tmp_path: Path) -> None:
    """A FIFO hung the daemon, a 60 MB file blocked it, a 100,000-entry
    [windows] table slowed every hook."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_settings(fifo)  # returns at once: no writer is waited for
    huge = tmp_path / "huge.toml"
    huge.write_text("# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    with pytest.raises(ConfigError, match="at most"):
        load_settings(huge)
    many = "[windows]\n" + "".join(f'"m{n}" = 1000\n' for n in range(MAX_WINDOWS + 1))
    with pytest.raises(ConfigError, match=r"\[windows\] has 1,001 entries"):
        parse_settings(many)
    assert len(parse_settings("[windows]\n" + '"m" = 1\n').windows) == len(DEFAULT_WINDOWS) + 1


def test_windows_are_written_as_ctxd_prints_them() -> None:
    s = parse_settings('[window]\ndefault = "1M"\n[windows]\n"my-model" = "200k"\n"m2" = "1.5M"\n')
    assert (s.default_window, s.windows["my-model"], s.windows["m2"]) == (
        1_000_000,
        200_000,
        1_500_000,
    )


def test_the_handoff_point_in_remaining_percent_as_the_thresholds_count() -> None:
    assert parse_settings("[handoff]\nremaining = 30\n").handoff.at == 70
    assert parse_settings("[handoff]\nat = 80\n").handoff.at == 80  # used %, as before
