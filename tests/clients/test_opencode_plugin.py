"""ctxd's OpenCode plugin as `ctxd install opencode` leaves it, loaded in node and its tool hook
called once, as OpenCode calls it (doctor's script): with no daemon it starts one in the
background, without waiting for it, unless CTXD_NO_SPAWN=1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.agents.opencode import installed_plugin
from ctxd.agents.opencode_family.doctor import SCRIPT

if TYPE_CHECKING:
    from conftest import World


def run_tool_hook(world: World) -> dict[str, Any]:
    """Install the plugin, call its `tool.execute.after` once in node; what it printed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    assert world.cli("install", "opencode").returncode == 0
    doc = json.loads((world.config_home / "opencode" / "opencode.json").read_text())
    env = {**world.env, "CTXD_PLUGIN_URL": str(installed_plugin(doc))}
    done = subprocess.run(
        [node, "--input-type=module", "-e", SCRIPT], env=env, capture_output=True, timeout=20
    )
    assert (done.returncode, done.stderr) == (0, b""), done
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_no_daemon_spawns_one_in_the_background(world: World) -> None:
    del world.env["CTXD_NO_SPAWN"]
    result = run_tool_hook(world)
    assert result["output"] == ""  # nothing to say yet, and the call did not wait for it
    assert result["ms"] < 1000
    info = world.wait_for(world.ping, 10, "the spawned daemon")
    assert world.daemon_pids() == {info["pid"]}
    # Detached: its own session, not a child of the agent that started it.
    assert os.getsid(info["pid"]) == info["pid"]


def test_no_spawn_starts_nothing(world: World) -> None:
    assert world.env["CTXD_NO_SPAWN"] == "1"
    assert run_tool_hook(world)["output"] == ""
    # A spawned `ctxd serve` would be there already: node exits only after starting it.
    assert world.daemon_pids() == set()
