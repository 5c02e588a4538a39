"""Config changes reach a running daemon; a broken config never takes it down."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.daemon.lifecycle import Daemon

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

RELOAD_TIMEOUT = 5.0


def touch_later(world: World) -> None:
    # Make sure the rewrite is seen as a change even on a coarse-mtime file system.
    info = world.config_file.stat()
    os.utime(world.config_file, ns=(info.st_atime_ns, info.st_mtime_ns + 2_000_000_000))


def call(world: World, t: ClaudeTranscript, tokens: int) -> Any:
    t.assistant(tokens)
    return world.hook_out("claude", t.payload("PostToolUse"))


def test_changed_thresholds_apply_to_the_next_hook(world: World) -> None:
    world.write_config("[thresholds]\nwarning = 35\n")
    world.start()
    t = world.claude()
    assert call(world, t, 500_000) is None  # 53 % used of the room: fine at 35 % remaining

    world.write_config("[thresholds]\nwarning = 60\ncritical = 25\n")
    touch_later(world)

    # Above the old line nothing changes state, so polling with hooks is harmless.
    out = world.wait_for(lambda: call(world, t, 500_000), RELOAD_TIMEOUT, "the new thresholds")
    assert out["hookSpecificOutput"]["additionalContext"].startswith("CONTEXT WARNING:")
    assert world.status()["config_error"] is None


def test_broken_config_keeps_the_last_good_one(world: World) -> None:
    world.write_config('[thresholds]\nbasis = "window"\n')
    world.start()
    t = world.claude()
    out = call(world, t, 700_000)  # 30 % of the window left
    assert "of the context window" in out["hookSpecificOutput"]["additionalContext"]

    world.write_config("[thresholds\nbasis = ")
    touch_later(world)

    def config_error() -> str | None:
        error: str | None = world.status()["config_error"]
        return error

    error = world.wait_for(config_error, RELOAD_TIMEOUT, "config_error in status")
    assert str(world.config_file) in error
    assert world.status()["daemon"]["config_error"] == error
    cli = world.cli("status", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["config_error"] == error

    # Still the window basis: a fresh session at 30 % of the window left warns in those words.
    t2 = world.claude()
    out = call(world, t2, 700_000)
    assert "of the context window" in out["hookSpecificOutput"]["additionalContext"]
    assert world.ping() is not None


def test_fixing_the_config_clears_the_error(world: World) -> None:
    world.write_config("not toml at all [")
    world.start()
    assert world.status()["config_error"]
    world.write_config("[handoff]\nat = 50\n")
    touch_later(world)
    world.wait_for(lambda: world.status()["config_error"] is None, RELOAD_TIMEOUT, "no error")
    t = world.claude()
    t.assistant(500_000)  # 53 % used: over the new 50 % handoff line
    assert world.hook_out("claude", t.payload("Stop")) is not None


def test_unknown_key_is_reported_not_ignored(world: World) -> None:
    world.write_config("[thresholds]\nwarnign = 50\n")
    world.start()
    error = world.status()["config_error"]
    assert error and "warnign" in error


def test_config_from_ctxd_config_env(world: World) -> None:
    custom = world.root / "elsewhere.toml"
    custom.write_text('[handoff]\naction = "block"\n')
    world.env["CTXD_CONFIG"] = str(custom)
    world.start()
    t = world.claude()
    t.assistant(700_000)
    out = world.hook_out("claude", t.payload("Stop"))
    assert out is not None and out["decision"] == "block"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_log_says_when_there_is_no_config_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`ctxd serve` logged "config loaded from <path>" for a file that does not exist."""
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    daemon = Daemon(env)
    config = tmp_path / "config" / "ctxd" / "config.toml"
    with caplog.at_level(logging.INFO, logger="ctxd.daemon.lifecycle"):
        await daemon.load_config()
    assert f"no config at {config}: the defaults" in caplog.text
    assert "config loaded" not in caplog.text
    caplog.clear()
    config.parent.mkdir(parents=True)
    config.write_text("[handoff]\nat = 50\n")
    with caplog.at_level(logging.INFO, logger="ctxd.daemon.lifecycle"):
        await daemon.load_config()
    assert f"config loaded from {config}" in caplog.text


@pytest.mark.parametrize(
    "loader", ["load_http_settings", "load_otlp_table", "load_notify_settings"]
)
@pytest.mark.parametrize(
    "content", ["x = " + "[" * 100_000, "x = " + "9" * 5_000], ids=["nested", "digits"]
)
def test_each_table_of_a_choking_config_is_one_clear_error(
    tmp_path: Path, loader: str, content: str
) -> None:
    """A config TOML's parser chokes on (nested past its stack, an integer of thousands of digits)
    is a ConfigError naming the file, from whichever table is read first, never a traceback."""
    from ctxd.daemon import config
    from ctxd.errors import ConfigError

    path = tmp_path / "config.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=str(path)):
        getattr(config, loader)(path)
