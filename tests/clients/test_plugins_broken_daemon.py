"""ctxd's OpenCode plugin and pi extension, as `ctxd install` leaves them, each loaded in node for
a whole session, against a broken stand-in daemon on a real Unix socket: the plugins protect the
agent from it.

- A daemon that answers every stop with a handoff block would drive one model turn per stop, for
  ever. A plugin sends at most one message per stop chain: the stop its own message caused
  (`stop_hook_active`) sends none, whatever the answer, until a user's turn starts a new chain.
- A daemon that answers 10 MB would have it all appended to a tool's output (OpenCode): an
  answer over the wire's limit (`ctxd_wire.MAX_RESPONSE`, as the hook client reads) is dropped
  unread, as the hook client drops it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import ctxd_wire as wire
import pytest
from plugin_support import StandIn, install_plugin, node_script

if TYPE_CHECKING:
    from conftest import World

HANDOFF = "CONTEXT HANDOFF: write the handoff note now"

# Each script reads one command a line on stdin: "stop" (the agent's loop ends: OpenCode's
# `session.idle`, pi's `agent_end`) or "tool" (one tool call), and writes one JSON line: the
# messages the plugin sent as the user's so far, and what a tool call appended to its output.
OPENCODE = """\
import { createInterface } from "node:readline"
const sent = []
const client = { session: { prompt: async ({ body }) => { sent.push(body.parts[0].text) } } }
const { CtxdPlugin } = await import(process.env.CTXD_PLUGIN_URL)
const hooks = await CtxdPlugin({ client, directory: process.cwd() })
let n = 0
for await (const line of createInterface({ input: process.stdin })) {
  const output = { title: "", output: "", metadata: {} }
  if (line === "stop") {
    await hooks.event({ event: { type: "session.idle", properties: { sessionID: "ses_ctxd" } } })
    await hooks.dispose()
  } else {
    const input = { tool: "bash", sessionID: "ses_ctxd", callID: `call_${n++}`, args: {} }
    await hooks["tool.execute.after"](input, output)
  }
  process.stdout.write(`${JSON.stringify({ sent, output: output.output })}\\n`)
}
"""
PI = """\
import { createInterface } from "node:readline"
const { createJiti } = await import(process.env.CTXD_JITI_URL)
const jiti = createJiti(import.meta.url, { moduleCache: false })
const extension = await jiti.import(process.env.CTXD_EXTENSION, { default: true })
const handlers = {}
const sent = []
const pi = { on: (name, f) => { handlers[name] = f }, appendEntry() {}, sendUserMessage: (m) => {
  sent.push(m) } }
extension(pi)
const sessionManager = {
  getSessionId: () => "ctxd-test", getSessionFile: () => undefined, getEntries: () => [],
}
const ui = { notify() {} }
const getContextUsage = () => undefined
const ctx = { cwd: process.cwd(), hasUI: true, ui, sessionManager, getContextUsage }
let n = 0
for await (const line of createInterface({ input: process.stdin })) {
  let output = ""
  if (line === "stop") {
    await handlers.agent_end({}, ctx)
  } else {
    const result = await handlers.tool_result({ toolCallId: `call_${n++}`, content: [] }, ctx)
    output = result?.content.map((c) => c.text).join("") ?? ""
  }
  process.stdout.write(`${JSON.stringify({ sent, output })}\\n`)
}
"""


@pytest.fixture(params=["opencode", "pi"])
def agent(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@contextmanager
def plugin_session(
    world: World, agent: str, *results: bytes
) -> Iterator[tuple[Callable[[str], dict[str, Any]], StandIn]]:
    """The agent's plugin, installed and held by node, talking to a stand-in answering `results`;
    `step("stop" | "tool")` runs one event and returns what the plugin has done."""
    env = install_plugin(world, agent)
    standin = StandIn(world.root / "standin.sock", results)
    env["CTXD_SOCKET"] = str(standin.path)
    try:
        with node_script(world, OPENCODE if agent == "opencode" else PI, env) as step:
            yield step, standin
    finally:
        standin.close()


def test_a_daemon_that_blocks_every_stop_gets_one_message_per_chain(
    world: World, agent: str
) -> None:
    result = json.dumps({"decision": "block", "reason": HANDOFF}).encode()
    with plugin_session(world, agent, result) as (step, standin):
        # A user's turn ends: the handoff request goes to the model as the next message.
        assert step("stop")["sent"] == [HANDOFF]
        # The turn that message started ends: the daemon blocks again, nothing more is sent.
        assert step("stop")["sent"] == [HANDOFF]
        # The user's next turn starts a new chain: one message again, and only one.
        step("tool")
        assert step("stop")["sent"] == [HANDOFF, HANDOFF]
        assert step("stop")["sent"] == [HANDOFF, HANDOFF]
    stops = [p["stop_hook_active"] for p in standin.payloads if "stop_hook_active" in p]
    assert stops == [False, True, False, True]  # and the daemon was told which stop was which


def test_an_answer_over_the_wire_limit_is_dropped_unread_one_within_it_is_kept(
    world: World, agent: str
) -> None:
    text = "x" * (10 * 1024 * 1024)
    huge = {
        "decision": "block",
        "reason": text,
        "systemMessage": text,
        "hookSpecificOutput": {"additionalContext": text},
    }
    # The limit is the wire's, not smaller: a large answer that fits still reaches the model.
    fits = "CONTEXT WARNING: " + "y" * (wire.MAX_RESPONSE - 1000)
    within = {"hookSpecificOutput": {"additionalContext": fits}}
    answers = [json.dumps(a).encode() for a in (huge, huge, within)]
    with plugin_session(world, agent, *answers) as (step, standin):
        assert step("tool")["output"] == ""
        assert step("stop")["sent"] == []
        assert step("tool")["output"].endswith(fits)
    # The plugin hung up after the big frames' length: it never took their 10 MB in.
    assert standin.sent[:2] and all(n < wire.MAX_RESPONSE for n in standin.sent[:2]), standin.sent
