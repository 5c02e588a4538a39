"""How `ctxd doctor` runs ctxd's installed OpenCode (or Kilo) plugin: loaded in the agent's own
runtime (its binary is Bun, which `BUN_BE_BUN=1` runs as the `bun` CLI) or else in node, with
its `tool.execute.after` called once for a sample bash call, as the agent calls it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from ctxd.agents.opencode_family.family import Family
from ctxd.agents.opencode_family.install import installed_plugin, plugin_path
from ctxd.agents.spec import Json, PluginRun

__all__ = ["SCRIPT", "plugin_run"]

#: An ES module for `-e`: the plugin's URL comes in `CTXD_PLUGIN_URL`.
SCRIPT = """\
const { CtxdPlugin } = await import(process.env.CTXD_PLUGIN_URL)
const hooks = await CtxdPlugin({ client: {}, directory: process.cwd() })
const output = { title: "", output: "", metadata: {} }
const input = { tool: "bash", sessionID: "ses_ctxd_doctor", callID: "call_ctxd_doctor", args: {} }
const start = performance.now()
await hooks["tool.execute.after"](input, output)
process.stdout.write(JSON.stringify({ output: output.output, ms: performance.now() - start }))
"""


def plugin_run(family: Family, doc: Json, env: Mapping[str, str]) -> PluginRun | None:
    url = installed_plugin(family, doc)
    if url is None:
        return None
    path = plugin_path(url)
    search = env.get("PATH")
    agent, node = shutil.which(family.name, path=search), shutil.which("node", path=search)
    if agent is not None:
        env_run = {"CTXD_PLUGIN_URL": url, "BUN_BE_BUN": "1"}
        return PluginRun((agent, "-e", SCRIPT), f"{family.name} (Bun) loading {path}", env_run)
    if node is not None:
        argv = (node, "--input-type=module", "-e", SCRIPT)
        return PluginRun(argv, f"node loading {path}", {"CTXD_PLUGIN_URL": url})
    return PluginRun((), f"neither {family.name} nor node on PATH to load {path}")
