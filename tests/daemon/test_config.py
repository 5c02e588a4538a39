"""The TOML config: the documented names work, mistakes get a one-line reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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
[compaction]
gemini_fraction = 0.7
codex_token_limit = 200000
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
    assert s.compaction.gemini_fraction == 0.7
    assert s.compaction.codex_token_limit == 200_000
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
        ("[window]\ndefault = 0\n", "window.default must be a whole number of at least 1"),
        ("thresholds = 3\n", "[thresholds] must be a table"),
    ],
)
def test_mistakes_are_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_settings(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value).strip()


def test_missing_file_means_defaults_and_a_broken_file_names_itself(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "absent.toml") == default_settings()
    broken = tmp_path / "config.toml"
    broken.write_text("[thresholds]\nwarning = 'x'\n")
    with pytest.raises(ConfigError, match=str(broken)):
        load_settings(broken)


def test_values_the_core_refuses_are_config_errors() -> None:
    """Issue 11 (6): `handoff.at = 0` passed here and crashed the daemon later."""
    with pytest.raises(ConfigError, match="handoff"):
        parse_settings("[handoff]\nat = 0\n")


def test_what_is_not_a_small_regular_file_is_a_config_error(tmp_path: Path) -> None:
    """Issue 11 (5): a FIFO hung the daemon, a 60 MB file blocked it, a 100,000-entry
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
