// ctxd's plugin for OpenCode: after each tool call, ask the ctxd daemon over its Unix socket
// and append its warning or handoff request to the tool output the model sees. It speaks the
// hook client's wire format (clients/ctxd_wire.py): a 4-byte big-endian length, then a JSON
// header line and the payload; the answer's header line is {"v":1,"ok":true}, its result the
// hook answer ctxd renders for OpenCode. Fail-open and bounded: any error, or no answer within
// TIMEOUT_MS, changes nothing. `ctxd install opencode` names this file in opencode.json.
import net from "node:net"
import os from "node:os"

const TIMEOUT_MS = 1000
const OK = '{"v":1,"ok":true}'

function socketPath(env) {
  if (env.CTXD_SOCKET) return env.CTXD_SOCKET
  if (env.XDG_RUNTIME_DIR) return `${env.XDG_RUNTIME_DIR}/ctxd/ctxd.sock`
  const state = env.XDG_STATE_HOME || `${env.HOME || os.homedir()}/.local/state`
  return `${state}/ctxd/run/ctxd.sock`
}

function ask(event, payload) {
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
    sock.on("error", () => finish(null))
    sock.on("data", (chunk) => {
      chunks.push(chunk)
      const data = Buffer.concat(chunks)
      if (data.length >= 4 && data.length >= 4 + data.readUInt32BE(0)) {
        const body = data.subarray(4, 4 + data.readUInt32BE(0)).toString()
        const cut = body.indexOf("\n")
        finish(cut >= 0 && body.slice(0, cut) === OK ? body.slice(cut + 1) : null)
      }
    })
    sock.on("end", () => finish(null))
    const head = `{"v":1,"op":"hook","agent":"opencode","event":"${event}"}\n`
    const body = Buffer.from(head + JSON.stringify({ hook_event_name: event, ...payload }))
    const size = Buffer.alloc(4)
    size.writeUInt32BE(body.length)
    sock.write(Buffer.concat([size, body]))
  })
}

function context(answer) {
  try {
    const text = answer && JSON.parse(answer).hookSpecificOutput?.additionalContext
    return typeof text === "string" && text ? text : null
  } catch {
    return null
  }
}

export const CtxdPlugin = async ({ directory }) => ({
  "tool.execute.after": async (input, output) => {
    try {
      const payload = { session_id: input.sessionID, cwd: directory, tool_use_id: input.callID }
      const text = context(await ask("tool_execute_after", payload))
      if (text && typeof output.output === "string") output.output += `\n\n${text}`
    } catch {}
  },
  event: async ({ event }) => {
    try {
      if (event.type === "session.compacted" && event.properties?.sessionID) {
        await ask("session_compacted", { session_id: event.properties.sessionID, cwd: directory })
      }
    } catch {}
  },
})
