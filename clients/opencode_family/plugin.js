// ctxd's plugin for OpenCode and its fork Kilo CLI, shared: clients/opencode/ctxd.js and
// clients/kilo/ctxd.js each make it for their agent (`ctxdPlugin(agent)`), the name the daemon
// is told whose session a call is about (both load every function a plugin file exports, so this
// module, which exports the factory, is named in no config). After each tool call it asks the ctxd daemon over its Unix socket
// and appends its warning to the tool output the model sees; when a session goes idle it asks
// again and sends ctxd's handoff request, if any, as the user's next message (OpenCode has no
// Stop hook to block, so this is the one way to have the model answer it), marking the next idle
// as the one that answer caused. It speaks the hook client's wire format (clients/ctxd_wire.py):
// a 4-byte big-endian length, then a JSON header line and the payload; the answer's header line
// is {"v":1,"ok":true}, its result the hook answer ctxd renders for OpenCode. Fail-open and
// bounded: any error, an answer over MAX_ANSWER or none within TIMEOUT_MS changes nothing, and
// it never trusts the daemon to end a stop chain: the idle that follows its own message sends no
// other, whatever the daemon answers (a broken daemon would otherwise drive a model turn per
// idle, for ever). When no daemon listens
// it starts one (at any point of the session, at most once per SPAWN_MS), as pi's extension
// does (clients/pi/ctxd.ts), and goes on without waiting.
// `ctxd install opencode` (`kilo`) copies these files beside the hook client and names the
// agent's own in opencode.json (kilo.json).
import { spawn } from "node:child_process"
import { readFileSync } from "node:fs"
import net from "node:net"
import os from "node:os"

const TIMEOUT_MS = 1000
// The largest answer read, as the hook client reads (ctxd_wire.MAX_RESPONSE): one announced
// bigger is not read at all.
const MAX_ANSWER = 1024 * 1024
// One start of the daemon at most in this long: one that stops mid-session is started again by
// the next call that finds it gone, yet a broken install costs one short-lived process per
// SPAWN_MS, not one per tool call, and a daemon still coming up is not started twice.
const SPAWN_MS = 10_000
const OK = '{"v":1,"ok":true}'

function socketPath(env) {
  if (env.CTXD_SOCKET) return env.CTXD_SOCKET
  if (env.XDG_RUNTIME_DIR) return `${env.XDG_RUNTIME_DIR}/ctxd/ctxd.sock`
  const state = env.XDG_STATE_HOME || `${env.HOME || os.homedir()}/.local/state`
  return `${state}/ctxd/run/ctxd.sock`
}

let spawnedAt = -Infinity // performance.now(): monotonic, so a clock set back delays nothing

// `ctxd serve --spawned`, detached: the command is in the `ctxd-command` file every ctxd run
// writes beside the client (this file's parent directory). A daemon already starting or running
// keeps its lock, and the new one exits.
function startDaemon() {
  if (process.env.CTXD_NO_SPAWN === "1" || performance.now() - spawnedAt < SPAWN_MS) return
  spawnedAt = performance.now()
  try {
    const file = new URL("../ctxd-command", import.meta.url)
    const [command, ...args] = readFileSync(file, "utf8").split("\n").filter(Boolean)
    if (!command) return
    const argv = [...args, "serve", "--spawned"]
    const child = spawn(command, argv, { detached: true, stdio: "ignore" })
    child.on("error", () => {})
    child.unref()
  } catch {}
}

function ask(agent, event, payload) {
  return new Promise((resolve) => {
    let done = false
    const chunks = []
    const finish = (value) => {
      if (done) return
      done = true
      clearTimeout(timer)
      sock.destroy()
      resolve(value)
    }
    const sock = net.createConnection(socketPath(process.env))
    const timer = setTimeout(() => finish(null), TIMEOUT_MS)
    sock.on("error", (err) => {
      if (!done && (err.code === "ENOENT" || err.code === "ECONNREFUSED")) startDaemon()
      finish(null)
    })
    sock.on("data", (chunk) => {
      chunks.push(chunk)
      const data = Buffer.concat(chunks)
      if (data.length < 4) return
      const size = data.readUInt32BE(0)
      if (size > MAX_ANSWER) return finish(null)
      if (data.length >= 4 + size) {
        const body = data.subarray(4, 4 + size).toString()
        const cut = body.indexOf("\n")
        finish(cut >= 0 && body.slice(0, cut) === OK ? parsed(body.slice(cut + 1)) : null)
      }
    })
    sock.on("end", () => finish(null))
    const head = `{"v":1,"op":"hook","agent":"${agent}","event":"${event}"}\n`
    const body = Buffer.from(head + JSON.stringify({ hook_event_name: event, ...payload }))
    const size = Buffer.alloc(4)
    size.writeUInt32BE(body.length)
    sock.write(Buffer.concat([size, body]))
  })
}

function parsed(result) {
  try {
    return result ? JSON.parse(result) : null
  } catch {
    return null
  }
}

export const ctxdPlugin = (agent) => async ({ client, directory }) => {
  // Sessions whose last idle sent ctxd's request as a prompt: their next idle is the one that
  // prompt caused (Claude Code's `stop_hook_active`), and sends nothing, whatever the answer.
  const continued = new Set()
  let idling = Promise.resolve() // the last idle's handling, awaited by `dispose`

  const idle = async (id) => {
    const active = continued.delete(id)
    const payload = { session_id: id, cwd: directory, stop_hook_active: active }
    const answer = await ask(agent, "session_idle", payload)
    const text = answer?.decision === "block" ? answer.reason : null
    if (active || typeof text !== "string" || !text) return
    continued.add(id)
    try {
      await client.session.prompt({ path: { id }, body: { parts: [{ type: "text", text }] } })
    } catch (err) {
      continued.delete(id) // no turn of ours started: the next idle is a user's
      throw err
    }
  }

  return {
    "tool.execute.after": async (input, output) => {
      try {
        const payload = { session_id: input.sessionID, cwd: directory, tool_use_id: input.callID }
        const answer = await ask(agent, "tool_execute_after", payload)
        const text = answer?.hookSpecificOutput?.additionalContext
        if (typeof text === "string" && text && typeof output.output === "string") {
          output.output += `\n\n${text}`
        }
      } catch {}
    },
    event: async ({ event }) => {
      try {
        const id = event.properties?.sessionID
        if (event.type === "session.idle" && id) {
          idling = idle(id).catch(() => {})
        } else if (event.type === "session.compacted" && id) {
          await ask(agent, "session_compacted", { session_id: id, cwd: directory })
        }
      } catch {}
    },
    // `opencode run` shuts down once the session is idle and awaits this first, so the
    // handoff turn runs to its end; the interactive UI's /exit does not wait for it.
    dispose: () => idling,
  }
}
