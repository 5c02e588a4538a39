// ctxd's extension for pi: forwards five of pi's events to the ctxd daemon over its Unix socket
// (the framing of clients/ctxd_wire.py) and applies the answer: a warning appended to a tool's
// result (the model reads it next), a handoff note shown to the user. Bounded (1 s, answers up to
// MAX_ANSWER) and fail-open: no daemon, a slow one or any error changes nothing pi does, and the
// agent_end that follows its own message sends no other, whatever the daemon answers (a broken
// daemon would otherwise drive a model turn per agent_end, for ever). When no daemon listens,
// any event starts one (at most once per SPAWN_MS), as OpenCode's plugin does, without waiting.
// `ctxd install pi` copies it beside the hook client and lists it in pi's settings.json.
// Runs in pi 0.73.1 and 1.x (1.6.0). pi 1.x's newer events need nothing here: a compaction that
// fails (`session_compact_failed`) writes no entry, so the daemon counts none from the session;
// `agent_end` still ends each run, which is where a handoff belongs (`agent_settled` comes only
// after pi's own follow-ups, a compaction among them, have run).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";

const TIMEOUT_MS = 1000;
/** One start of the daemon at most in this long: one that stops mid-session is started again by
 * the next event that finds it gone, yet a broken install costs one short-lived process per
 * SPAWN_MS, not one per tool call, and a daemon still coming up is not started twice. */
const SPAWN_MS = 10_000;
/** The largest answer read, as the hook client reads (ctxd_wire.MAX_RESPONSE). */
const MAX_ANSWER = 1024 * 1024;
const OK = '{"v":1,"ok":true}';
/** The variables ctxd reads from the agent's environment (ctxd_wire.HOOK_ENV, pi's part). */
const ENV = ["PI_CODING_AGENT_DIR"];

function socketPath(env: NodeJS.ProcessEnv): string {
  if (env.CTXD_SOCKET) return env.CTXD_SOCKET;
  if (env.XDG_RUNTIME_DIR) return `${env.XDG_RUNTIME_DIR}/ctxd/ctxd.sock`;
  const state = env.XDG_STATE_HOME || `${env.HOME}/.local/state`;
  return `${state}/ctxd/run/ctxd.sock`;
}

let spawnedAt = -Infinity; // performance.now(): monotonic, so a clock set back delays nothing

/** Start `ctxd serve --spawned` detached, as the hook client does: the command is in the
 * `ctxd-command` file every ctxd run writes beside the client. A daemon already starting or
 * running keeps its lock, and the new one exits. */
function startDaemon(): void {
  if (process.env.CTXD_NO_SPAWN === "1" || performance.now() - spawnedAt < SPAWN_MS) return;
  spawnedAt = performance.now();
  try {
    const file = fileURLToPath(new URL("../ctxd-command", import.meta.url));
    const command = readFileSync(file, "utf8").split("\n").filter(Boolean);
    if (!command.length) return;
    const child = spawn(command[0], [...command.slice(1), "serve", "--spawned"], {
      detached: true,
      stdio: "ignore",
    });
    child.on("error", () => {});
    child.unref();
  } catch {}
}

/** One hook request; the daemon's answer as JSON, or null (nothing due, or any failure). */
function ask(payload: Record<string, unknown>): Promise<any> {
  return new Promise((resolve) => {
    const env: Record<string, string> = {};
    for (const name of ENV) if (process.env[name]) env[name] = process.env[name] as string;
    const head = JSON.stringify({ v: 1, op: "hook", agent: "pi", event: null, env });
    const body = Buffer.from(`${head}\n${JSON.stringify(payload)}`);
    const size = Buffer.alloc(4);
    size.writeUInt32BE(body.length);
    const chunks: Buffer[] = [];
    let done = false;
    const sock = connect(socketPath(process.env));
    const finish = (answer: any) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => finish(null), TIMEOUT_MS);
    sock.on("error", (err: NodeJS.ErrnoException) => {
      if (!done && (err.code === "ENOENT" || err.code === "ECONNREFUSED")) startDaemon();
      finish(null);
    });
    sock.on("connect", () => sock.write(Buffer.concat([size, body])));
    sock.on("data", (chunk: Buffer) => {
      chunks.push(chunk);
      const got = Buffer.concat(chunks);
      if (got.length < 4) return;
      const want = got.readUInt32BE(0);
      if (want > MAX_ANSWER) return finish(null);
      if (got.length < 4 + want) return;
      const text = got.subarray(4, 4 + want).toString("utf8");
      const cut = text.indexOf("\n");
      const result = cut < 0 ? "" : text.slice(cut + 1);
      if (cut < 0 || text.slice(0, cut) !== OK || !result.trim()) return finish(null);
      try {
        finish(JSON.parse(result));
      } catch {
        finish(null);
      }
    });
    sock.on("close", () => finish(null));
  });
}

export default function (pi: any) {
  // The last agent_end's answer started a new turn: the next agent_end is the one it caused
  // (Claude Code's `stop_hook_active`), and starts none, whatever the answer.
  let blocked = false;
  let ending: Promise<void> = Promise.resolve(); // the last agent_end's handling

  const payload = (name: string, ctx: any, extra: Record<string, unknown> = {}) => ({
    session_id: ctx.sessionManager.getSessionId(),
    transcript_path: ctx.sessionManager.getSessionFile(),
    cwd: ctx.cwd,
    hook_event_name: name,
    model: ctx.model?.id,
    ...extra,
  });

  // The window pi runs the model with, written into the session (a custom entry, which pi never
  // sends to the model) when it differs from the one written last: the daemon reads it there.
  const noteWindow = (ctx: any) => {
    try {
      const window = ctx.getContextUsage()?.contextWindow;
      if (!window) return;
      const last = ctx.sessionManager
        .getEntries()
        .filter((e: any) => e.type === "custom" && e.customType === "ctxd")
        .pop();
      if (last?.data?.contextWindow !== window) pi.appendEntry("ctxd", { contextWindow: window });
    } catch {}
  };

  const forward = async (name: string, ctx: any, extra?: Record<string, unknown>) => {
    try {
      return await ask(payload(name, ctx, extra));
    } catch {
      return null;
    }
  };

  pi.on("session_start", async (_event: any, ctx: any) => {
    noteWindow(ctx);
    await forward("session_start", ctx);
  });
  pi.on("model_select", async (_event: any, ctx: any) => noteWindow(ctx));
  pi.on("session_compact", async (_event: any, ctx: any) => {
    await forward("session_compact", ctx);
  });
  pi.on("session_shutdown", async (_event: any, ctx: any) => {
    // pi -p shuts down without waiting for the agent_end handlers (0.73.1): let ours finish.
    await ending;
    await forward("session_shutdown", ctx);
  });

  pi.on("tool_result", async (event: any, ctx: any) => {
    const answer = await forward("tool_result", ctx, { tool_use_id: event.toolCallId });
    const text = answer?.hookSpecificOutput?.additionalContext;
    if (typeof text !== "string" || !text) return undefined;
    return { content: [...(event.content ?? []), { type: "text", text }] };
  });

  const agentEnd = async (ctx: any) => {
    const active = blocked;
    const answer = await forward("agent_end", ctx, { stop_hook_active: active });
    blocked = false;
    try {
      if (typeof answer?.systemMessage === "string") {
        if (ctx.hasUI) ctx.ui.notify(answer.systemMessage, "warning");
        else process.stderr.write(`${answer.systemMessage}\n`);
      }
      if (!active && answer?.decision === "block" && typeof answer.reason === "string") {
        blocked = true;
        // pi 1.x is still running at agent_end (it may compact or retry next): the message
        // waits as a follow-up and starts the next run; pi 0.x, idle there, starts it at once.
        const sent = pi.sendUserMessage(answer.reason, { deliverAs: "followUp" });
        sent?.catch?.(() => {
          blocked = false; // not sent: the next agent_end is a user's
        });
      }
    } catch {
      blocked = false; // no turn of ours started: the next agent_end is a user's
    }
  };
  pi.on("agent_end", async (_event: any, ctx: any) => {
    ending = agentEnd(ctx);
    await ending;
  });
}
