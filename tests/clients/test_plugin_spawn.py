"""ctxd's OpenCode plugin and pi extension, as `ctxd install` leaves them, each loaded in node for
a whole session (as the agent holds it) under a clock the test sets (`performance.now`): a daemon
that is gone later in the session is started again, at most once every SPAWN_MS, and never with
CTXD_NO_SPAWN=1. The daemons are real, started from the `ctxd-command` file beside the client."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest
from plugin_support import install_plugin, node_script

from ctxd.agents.hookcmd import CTXD_COMMAND_FILE, client_dir

if TYPE_CHECKING:
    from conftest import World

#: The plugins' SPAWN_MS: at most one start of the daemon in that many milliseconds.
SPAWN_MS = 10_000

# Each script reads one line per call on stdin, the time (ms) to set the plugin's clock to,
# makes one tool call and writes the text ctxd appended to its output as a JSON line.
OPENCODE = """\
import { createInterface } from "node:readline"
let now = 0
performance.now = () => now
const { CtxdPlugin } = await import(process.env.CTXD_PLUGIN_URL)
const hooks = await CtxdPlugin({ client: {}, directory: process.cwd() })
for await (const line of createInterface({ input: process.stdin })) {
  now = Number(line)
  const output = { title: "", output: "", metadata: {} }
  const input = { tool: "bash", sessionID: "ses_ctxd_test", callID: `call_${line}`, args: {} }
  await hooks["tool.execute.after"](input, output)
  process.stdout.write(`${JSON.stringify(output.output)}\\n`)
}
"""
# pi starts the session (session_start, at clock 0) before the first call.
PI = """\
import { createInterface } from "node:readline"
let now = 0
performance.now = () => now
const { createJiti } = await import(process.env.CTXD_JITI_URL)
const jiti = createJiti(import.meta.url, { moduleCache: false })
const extension = await jiti.import(process.env.CTXD_EXTENSION, { default: true })
const handlers = {}
extension({ on: (name, f) => { handlers[name] = f }, appendEntry() {}, sendUserMessage() {} })
const sessionManager = {
  getSessionId: () => "ctxd-test", getSessionFile: () => undefined, getEntries: () => [],
}
const ctx = { cwd: process.cwd(), hasUI: false, sessionManager, getContextUsage: () => undefined }
await handlers.session_start({}, ctx)
for await (const line of createInterface({ input: process.stdin })) {
  now = Number(line)
  const result = await handlers.tool_result({ toolCallId: `call_${line}`, content: [] }, ctx)
  process.stdout.write(`${JSON.stringify(result?.content[0].text ?? "")}\\n`)
}
"""


@pytest.fixture(params=["opencode", "pi"])
def agent(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@contextmanager
def session(
    world: World, agent: str, command: list[str] | None = None
) -> Iterator[Callable[[int], str]]:
    """The agent's plugin installed and held by a node process; `call(at)` is one tool call at
    `at` ms on the plugin's clock, returning what ctxd appended. `command`: the `ctxd-command`
    file's words instead of those `ctxd install` wrote."""
    env = install_plugin(world, agent)
    if command is not None:
        (client_dir(world.env) / CTXD_COMMAND_FILE).write_text("".join(f"{w}\n" for w in command))
    with node_script(world, OPENCODE if agent == "opencode" else PI, env) as send:

        def call(at: int) -> str:
            text: str = send(str(at))
            return text

        yield call


@pytest.mark.parametrize("how", ["crash", "stop"])
def test_a_daemon_gone_mid_session_is_started_again_by_a_later_call(
    world: World, agent: str, how: str
) -> None:
    del world.env["CTXD_NO_SPAWN"]
    with session(world, agent) as call:
        assert call(0) == ""  # no daemon: started, not waited for
        first = world.wait_for(world.ping, 10, "the spawned daemon")["pid"]
        assert call(1_000) == ""  # the daemon is up: nothing to say about this session yet
        if how == "crash":  # its socket is left behind, refusing connections
            os.kill(first, signal.SIGKILL)
            world.wait_for(lambda: not world.daemon_pids(), 5, "the daemon to die")
        else:
            assert world.cli("stop").returncode == 0
        assert call(SPAWN_MS - 1) == ""
        # A spawned `ctxd serve` would be there already: the call returns only after exec.
        assert world.daemon_pids() == set(), "started again inside the interval"
        assert call(SPAWN_MS) == ""
        second = world.wait_for(world.ping, 10, "the daemon started again")["pid"]
        assert second != first
        assert world.daemon_pids() == {second}


def test_a_broken_install_is_tried_once_per_interval_not_once_per_call(
    world: World, agent: str
) -> None:
    del world.env["CTXD_NO_SPAWN"]
    tries = world.root / "tries"
    broken = ["/bin/sh", "-c", f"echo \"$*\" >> '{tries}'; exit 1", "ctxd"]

    def count() -> int:
        return len(tries.read_text().splitlines()) if tries.exists() else 0

    def tried(want: int) -> None:
        world.wait_for(lambda: count() == want, 5, f"{want} tries")

    with session(world, agent, broken) as call:
        steps = [(0, 1), (1, 1), (SPAWN_MS - 1, 1), (SPAWN_MS, 2), (SPAWN_MS + 1, 2)]
        steps += [(2 * SPAWN_MS - 1, 2), (3 * SPAWN_MS, 3)]
        for at, want in steps:
            assert call(at) == ""
            # Each call tries at most once, so a try too many still shows at a later step.
            tried(want)
    assert tries.read_text() == "serve --spawned\n" * 3


def test_no_spawn_starts_nothing_however_long_the_session(world: World, agent: str) -> None:
    assert world.env["CTXD_NO_SPAWN"] == "1"
    with session(world, agent) as call:
        for at in (0, SPAWN_MS, 2 * SPAWN_MS, 10 * SPAWN_MS):
            assert call(at) == ""
            assert world.daemon_pids() == set()
