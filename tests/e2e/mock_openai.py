#!/usr/bin/env python3
# Adapted from the ctxd team's offline agent harness (mock of the model API for real CLIs).
"""Scriptable mock of the OpenAI Responses API (plus Chat Completions), for driving the real
Codex CLI offline.

Usage:
  python3 mock_openai.py --port 0 --port-file port.txt --log requests.jsonl [--script script.json]

Endpoints (with or without the /v1 prefix):
  POST /v1/responses           SSE stream (the wire API Codex uses) or plain JSON when stream=false
  POST /v1/responses/compact   remote compaction: {"output": [...]} (used by some providers)
  POST /v1/chat/completions    SSE or JSON, same script (Codex no longer uses it; kept for probes)
  GET  /v1/models              {"object": "list", "data": [...], "models": []}
  anything else                logged, answered 404 (GET) / 200 {} (POST)

Every request (method, path, selected headers, JSON body, or the first 2000 chars of a non-JSON
body) is appended to the --log JSONL file with a short summary of the answer.
Request bodies may be zstd/gzip-compressed (Codex's enable_request_compression); gzip is decoded,
zstd is decoded when the `zstandard` module is importable, else logged as {"_compressed": ...}.

Which reply a /responses request gets
-------------------------------------
Requests are classified:
  * "compact" - the request text contains Codex's compaction prompt
                ("CONTEXT CHECKPOINT COMPACTION" / "handoff summary"), or the path is
                /responses/compact.
  * "main"    - the request carries a non-empty `tools` list, or an `additional_tools` input item
                (the agent loop).
  * "aux"     - the thread-title side request (x-codex-turn-metadata thread_source "thread_title",
                or its "Generate a concise, single-line task title" prompt), or anything else
                without tools. Answered with aux_text, or {"title": ...} (aux_json) when the
                request asks for a json_schema output.
For "main" requests the step index is the number of model-produced items (function_call,
custom_tool_call, local_shell_call, assistant message) in the request's `input` (stateless, so
retries get the same answer); with "step_mode": "counter" it is the number of "main" requests served
so far (use this when compaction rewrites history). Step i answers script["steps"][i] (the last
step is repeated past the end).

A step is one of
  {"shell": "echo hello"}            a call of whatever shell tool the request offers:
                                     exec_command {"cmd": ...}, shell_command {"command": ...},
                                     shell {"command": ["bash", "-lc", ...]} or local_shell
  {"tool": {"name": "X", "arguments": {...}}}   a function_call of tool X
  {"custom_tool": {"name": "apply_patch", "input": "*** Begin Patch ..."}}   a custom_tool_call
                                     (freeform tools such as apply_patch)
  {"text": "All done."}              an assistant message
  {"error": {"status": 400, "code": "context_length_exceeded", "message": "..."}}   HTTP error
  {"failed": {"code": "context_length_exceeded", "message": "..."}}   200 + response.failed event
and may carry "usage": {...} to override the reported usage for that step, and "text_before".

Usage reported for step i when the step has no explicit "usage":
  input_tokens   = usage.input_tokens   + i * usage_step.input_tokens
  cached_tokens  = usage.cached_tokens  + i * usage_step.cached_tokens
  output_tokens  = usage.output_tokens  + i * usage_step.output_tokens
  reasoning_tokens likewise; total_tokens = input_tokens + output_tokens
and is sent as response.completed.response.usage =
  {input_tokens, input_tokens_details: {cached_tokens}, output_tokens,
   output_tokens_details: {reasoning_tokens}, total_tokens}.
"""

import gzip
import json
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from mock_server import JsonHandler, ScriptedMock, serve

DEFAULT_SCRIPT = {
    "steps": [
        {"shell": "echo hello"},
        {"shell": "echo world"},
        {"text": "Done: ran echo hello and echo world."},
    ],
    "usage": {
        "input_tokens": 12000,
        "cached_tokens": 8000,
        "output_tokens": 50,
        "reasoning_tokens": 10,
    },
    "usage_step": {
        "input_tokens": 10000,
        "cached_tokens": 9000,
        "output_tokens": 10,
        "reasoning_tokens": 0,
    },
    "compact_summary": "MOCK-COMPACT-SUMMARY: the user asked to run echo commands; they were run.",
    "compact_usage": {
        "input_tokens": 3000,
        "cached_tokens": 0,
        "output_tokens": 200,
        "reasoning_tokens": 0,
    },
    "aux_text": "Mock title",
    "stream_chunk_delay": 0.0,
    "models": ["gpt-5.5", "gpt-5.4", "gpt-5.1-codex", "mock-model"],
}

Json = dict[str, Any]
HEADERS_TO_LOG = (
    "user-agent",
    "authorization",
    "content-type",
    "content-encoding",
    "originator",
    "openai-beta",
    "session_id",
    "session-id",
    "conversation_id",
    "x-codex-turn-metadata",
    "x-client-request-id",
    "x-openai-subagent",
    "version",
    "accept",
    "chatgpt-account-id",
    "x-codex-window-id",
    "x-codex-installation-id",
    "x-codex-beta-features",
    "x-codex-parent-thread-id",
    "x-codex-turn-state",
    "x-stainless-retry-count",
)

COMPACT_MARKERS = ("CONTEXT CHECKPOINT COMPACTION", "handoff summary")
TITLE_MARKER = "Generate a concise, single-line task title"
SHELL_TOOLS = ("exec_command", "shell_command", "shell", "container.exec", "local_shell")


def tool_names(body: Json) -> list[str]:
    out = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "local_shell":
            out.append("local_shell")
        elif t.get("type") == "function" and isinstance(t.get("function"), dict):  # chat shape
            out.append(str(t["function"].get("name")))
        else:
            out.append(str(t.get("name") or t.get("type")))
    return out


def turn_metadata(headers: Any) -> Json:
    try:
        md: Json = json.loads(headers.get("x-codex-turn-metadata") or "{}")
        return md
    except Exception:
        return {}


def classify(path: str, body: Json, headers: Any = None) -> str:
    if path.endswith("/responses/compact"):
        return "compact"
    s = json.dumps(body.get("input") or body.get("messages") or "")
    if any(m in s for m in COMPACT_MARKERS):
        return "compact"
    md = turn_metadata(headers or {})
    if md.get("thread_source") == "thread_title" or TITLE_MARKER in s:
        return "aux"
    if body.get("tools") or any(
        isinstance(it, dict) and it.get("type") == "additional_tools"
        for it in body.get("input") or []
    ):
        return "main"
    return "aux"


def n_model_items(body: Json) -> int:
    n = 0
    for it in body.get("input") or []:
        if not isinstance(it, dict):
            continue
        t = it.get("type")
        is_call = t in ("function_call", "custom_tool_call", "local_shell_call")
        if is_call or (t in ("message", None) and it.get("role") == "assistant"):
            n += 1
    for m in body.get("messages") or []:  # chat completions
        if isinstance(m, dict) and m.get("role") == "assistant":
            n += 1
    return n


class Mock(ScriptedMock):
    USAGE_KEYS = ("input_tokens", "cached_tokens", "output_tokens", "reasoning_tokens")

    def usage_for(self, step_index: int, step: Json | None) -> Json:
        return self.scripted_usage(step_index, step)

    @staticmethod
    def wire_usage(u: Json) -> Json:
        return {
            "input_tokens": u.get("input_tokens", 0),
            "input_tokens_details": {"cached_tokens": u.get("cached_tokens", 0)},
            "output_tokens": u.get("output_tokens", 0),
            "output_tokens_details": {"reasoning_tokens": u.get("reasoning_tokens", 0)},
            "total_tokens": u.get(
                "total_tokens", u.get("input_tokens", 0) + u.get("output_tokens", 0)
            ),
        }

    def shell_call(self, body: Json, cmd: str) -> Json:
        names = tool_names(body)
        call_id = self.next_id("call")
        if "exec_command" in names:
            return {
                "type": "function_call",
                "name": "exec_command",
                "call_id": call_id,
                "arguments": json.dumps({"cmd": cmd, "yield_time_ms": 10000}),
            }
        if "shell_command" in names:
            return {
                "type": "function_call",
                "name": "shell_command",
                "call_id": call_id,
                "arguments": json.dumps({"command": cmd, "timeout_ms": 10000}),
            }
        if "shell" in names:
            return {
                "type": "function_call",
                "name": "shell",
                "call_id": call_id,
                "arguments": json.dumps({"command": ["bash", "-lc", cmd], "timeout_ms": 10000}),
            }
        if "local_shell" in names:
            return {
                "type": "local_shell_call",
                "call_id": call_id,
                "status": "completed",
                "action": {"type": "exec", "command": ["bash", "-lc", cmd], "timeout_ms": 10000},
            }
        # no shell tool offered: fall back to exec_command anyway (an unknown-tool error)
        return {
            "type": "function_call",
            "name": "exec_command",
            "call_id": call_id,
            "arguments": json.dumps({"cmd": cmd}),
        }

    def plan(self, path: str, body: Json, headers: Any = None) -> tuple[str, int, Any, str, Json]:
        """-> (kind, step_index, items | error dict, mode, usage); mode in items/error/failed"""
        kind = classify(path, body, headers)
        if kind == "main":
            steps = self.script.get("steps") or [{"text": "ok"}]
            idx = n_model_items(body)
            if self.script.get("step_mode") == "counter":
                with self.lock:
                    idx = self.main_served
                    self.main_served += 1
            step = steps[min(idx, len(steps) - 1)]
            usage = self.usage_for(idx, step)
            if "error" in step:
                return kind, idx, step["error"], "error", usage
            if "failed" in step:
                return kind, idx, step["failed"], "failed", usage
            items = []
            if step.get("text_before"):
                items.append(self.message(step["text_before"]))
            if "shell" in step:
                items.append(self.shell_call(body, step["shell"]))
            elif "custom_tool" in step:
                t = step["custom_tool"]
                items.append(
                    {
                        "type": "custom_tool_call",
                        "id": self.next_id("ctc"),
                        "status": "completed",
                        "call_id": self.next_id("call"),
                        "name": t["name"],
                        "input": t.get("input", ""),
                    }
                )
            elif "tool" in step:
                t = step["tool"]
                args = t.get("arguments", {})
                items.append(
                    {
                        "type": "function_call",
                        "name": t["name"],
                        "call_id": self.next_id("call"),
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    }
                )
            else:
                items.append(self.message(step.get("text", "ok")))
            return kind, idx, items, "items", usage
        if kind == "compact":
            usage = dict(self.script.get("compact_usage") or {})
            return (
                kind,
                -1,
                [self.message(self.script.get("compact_summary", "summary"))],
                "items",
                usage,
            )
        usage = {"input_tokens": 100, "cached_tokens": 0, "output_tokens": 5, "reasoning_tokens": 0}
        fmt = (
            ((body.get("text") or {}).get("format") or {})
            if isinstance(body.get("text"), dict)
            else {}
        )
        if fmt.get("type") == "json_schema":
            txt = json.dumps(self.script.get("aux_json", {"title": "Mock title"}))
        else:
            txt = self.script.get("aux_text", "Mock title")
        return kind, -1, [self.message(txt)], "items", usage

    def message(self, text: str) -> Json:
        return {
            "type": "message",
            "role": "assistant",
            "id": self.next_id("msg"),
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }


def decode_body(raw: bytes, enc: str | None) -> bytes | None:
    enc = (enc or "").lower()
    if not raw:
        return raw
    if enc == "gzip":
        return gzip.decompress(raw)
    if enc == "zstd":
        try:
            import zstandard  # type: ignore

            out: bytes = zstandard.ZstdDecompressor().decompress(raw, max_output_size=1 << 30)
            return out
        except ImportError:
            return None
    return raw


# C901 adds the methods of the handler class nested here (to close over `mock`) into this one
# factory; each method is within the limit.
def make_handler(mock: Mock) -> type[BaseHTTPRequestHandler]:  # noqa: C901
    class H(JsonHandler):
        request_id_header = "x-request-id"

        def _read_body(self) -> tuple[bytes, Any]:
            if (self.headers.get("transfer-encoding") or "").lower() == "chunked":
                raw = b""
                while True:
                    line = self.rfile.readline().strip()
                    n = int(line.split(b";")[0], 16) if line else 0
                    if n == 0:
                        self.rfile.readline()
                        break
                    raw += self.rfile.read(n)
                    self.rfile.readline()
            else:
                raw = self._read_raw()
            dec = decode_body(raw, self.headers.get("content-encoding"))
            if dec is None:
                return raw, {"_compressed": self.headers.get("content-encoding"), "_len": len(raw)}
            try:
                return dec, (json.loads(dec) if dec else None)
            except Exception:
                return dec, None

        def _rec(self, body: Any, raw: bytes, answer: Json) -> None:
            hdrs = {k: v for k, v in self.headers.items() if k.lower() in HEADERS_TO_LOG}
            hdrs = {
                k: ("<redacted>" if k.lower() in ("authorization",) else v) for k, v in hdrs.items()
            }
            rec = {
                "ts": time.time(),
                "method": self.command,
                "path": self.path,
                "headers": hdrs,
                "body": body
                if body is not None
                else (raw.decode("utf-8", "replace")[:2000] if raw else None),
                "answer": answer,
            }
            mock.log(rec)

        def _path(self) -> str:
            p = self.path.split("?")[0].rstrip("/")
            return p[3:] if p.startswith("/v1/") else p

        def do_GET(self) -> None:
            path = self._path()
            if path == "/models":
                models = mock.script.get("models") or []
                obj = {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 1700000000, "owned_by": "mock"}
                        for m in models
                    ],
                }
                if isinstance(mock.script.get("models_response"), dict):
                    obj = mock.script["models_response"]
                self._rec(None, b"", {"status": 200})
                return self._send_json(200, obj)
            self._rec(None, b"", {"status": 404})
            self._send_json(
                404, {"error": {"message": "mock: no route", "type": "invalid_request_error"}}
            )

        def do_HEAD(self) -> None:
            self._rec(None, b"", {"status": 200})
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            raw, body = self._read_body()
            path = self._path()
            if (
                path in ("/responses", "/responses/compact")
                and isinstance(body, dict)
                and "_compressed" not in body
            ):
                return self._responses(path, body, raw)
            if path == "/chat/completions" and isinstance(body, dict):
                return self._chat(path, body, raw)
            self._rec(body, raw, {"status": 200, "note": "unknown route, answered {}"})
            self._send_json(200, {})

        # ------------------------------------------------------------ Responses API
        def _responses(self, path: str, body: Json, raw: bytes) -> None:
            kind, step, items, mode, usage = mock.plan(path, body, self.headers)
            model = body.get("model", "mock-model")
            if mode == "error":
                err = items
                self._rec(
                    body,
                    raw,
                    {"status": err.get("status", 400), "kind": kind, "step": step, "error": err},
                )
                return self._send_json(
                    err.get("status", 400),
                    {
                        "error": {
                            "type": err.get("type", "invalid_request_error"),
                            "code": err.get("code"),
                            "message": err.get("message", "mock error"),
                            "param": None,
                        }
                    },
                )
            rid = mock.next_id("resp")
            wu = Mock.wire_usage(usage)
            self._rec(
                body,
                raw,
                {
                    "status": 200,
                    "kind": kind,
                    "step": step,
                    "stream": bool(body.get("stream")),
                    "mode": mode,
                    "usage": wu,
                    "items": items if mode == "items" else None,
                    "failed": items if mode == "failed" else None,
                },
            )
            if path == "/responses/compact":  # remote compaction endpoint
                out = (
                    [{"type": "compaction", "encrypted_content": "MOCK-ENCRYPTED-COMPACTION"}]
                    if mock.script.get("remote_compaction_item")
                    else [
                        {
                            "type": "message",
                            "role": "user",
                            "content": [
                                {
                                    "type": "input_text",
                                    "text": mock.script.get("compact_summary", "summary"),
                                }
                            ],
                        }
                    ]
                )
                return self._send_json(200, {"output": out, "usage": wu})
            resp = {
                "id": rid,
                "object": "response",
                "created_at": int(time.time()),
                "model": model,
                "status": "in_progress",
                "output": [],
            }
            if not body.get("stream"):
                done = dict(resp, status="completed", output=items, usage=wu)
                return self._send_json(200, done)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("x-request-id", "req_mock_" + uuid.uuid4().hex[:16])
            self.end_headers()
            delay = float(mock.script.get("stream_chunk_delay", 0) or 0)
            seq = [0]

            def ev(data: Any) -> None:
                data = dict(data)
                data["sequence_number"] = seq[0]
                seq[0] += 1
                payload = f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()
                self.wfile.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
                self.wfile.flush()
                if delay:
                    time.sleep(delay)

            ev({"type": "response.created", "response": resp})
            ev({"type": "response.in_progress", "response": resp})
            if mode == "failed":
                f = items
                ev(
                    {
                        "type": "response.failed",
                        "response": dict(
                            resp,
                            status="failed",
                            error={
                                "type": f.get("type", "invalid_request_error"),
                                "code": f.get("code"),
                                "message": f.get("message", "mock failure"),
                            },
                            usage=wu,
                        ),
                    }
                )
            else:
                for oi, it in enumerate(items):
                    if it["type"] == "message":
                        added = dict(it, status="in_progress", content=[])
                        ev(
                            {
                                "type": "response.output_item.added",
                                "output_index": oi,
                                "item": added,
                            }
                        )
                        ev(
                            {
                                "type": "response.content_part.added",
                                "item_id": it["id"],
                                "output_index": oi,
                                "content_index": 0,
                                "part": {"type": "output_text", "text": "", "annotations": []},
                            }
                        )
                        t = it["content"][0]["text"]
                        for j in range(0, len(t), 40):
                            ev(
                                {
                                    "type": "response.output_text.delta",
                                    "item_id": it["id"],
                                    "output_index": oi,
                                    "content_index": 0,
                                    "delta": t[j : j + 40],
                                }
                            )
                        ev(
                            {
                                "type": "response.output_text.done",
                                "item_id": it["id"],
                                "output_index": oi,
                                "content_index": 0,
                                "text": t,
                            }
                        )
                        ev(
                            {
                                "type": "response.content_part.done",
                                "item_id": it["id"],
                                "output_index": oi,
                                "content_index": 0,
                                "part": it["content"][0],
                            }
                        )
                    elif it["type"] == "function_call":
                        it.setdefault("id", mock.next_id("fc"))
                        it.setdefault("status", "completed")
                        ev(
                            {
                                "type": "response.output_item.added",
                                "output_index": oi,
                                "item": dict(it, arguments="", status="in_progress"),
                            }
                        )
                        a = it["arguments"]
                        for j in range(0, len(a), 30):
                            ev(
                                {
                                    "type": "response.function_call_arguments.delta",
                                    "item_id": it["id"],
                                    "output_index": oi,
                                    "delta": a[j : j + 30],
                                }
                            )
                        ev(
                            {
                                "type": "response.function_call_arguments.done",
                                "item_id": it["id"],
                                "output_index": oi,
                                "arguments": a,
                            }
                        )
                    else:
                        ev({"type": "response.output_item.added", "output_index": oi, "item": it})
                    ev({"type": "response.output_item.done", "output_index": oi, "item": it})
                ev(
                    {
                        "type": "response.completed",
                        "response": dict(resp, status="completed", output=items, usage=wu),
                    }
                )
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        # ------------------------------------------------------------ Chat Completions (probe only)
        def _chat(self, path: str, body: Json, raw: bytes) -> None:
            kind, step, items, mode, usage = mock.plan(path, body)
            model = body.get("model", "mock-model")
            cu = {
                "prompt_tokens": usage.get("input_tokens", 0),
                "completion_tokens": usage.get("output_tokens", 0),
                "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0),
                "prompt_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
            }
            if mode in ("error", "failed"):
                err = items
                self._rec(
                    body,
                    raw,
                    {"status": err.get("status", 400), "kind": kind, "step": step, "error": err},
                )
                return self._send_json(
                    err.get("status", 400),
                    {
                        "error": {
                            "type": "invalid_request_error",
                            "code": err.get("code"),
                            "message": err.get("message", ""),
                        }
                    },
                )
            msg: Json = {"role": "assistant", "content": None}
            finish = "stop"
            for it in items:
                if it["type"] == "message":
                    msg["content"] = it["content"][0]["text"]
                elif it["type"] == "function_call":
                    msg.setdefault("tool_calls", []).append(
                        {
                            "id": it["call_id"],
                            "type": "function",
                            "function": {"name": it["name"], "arguments": it["arguments"]},
                        }
                    )
                    finish = "tool_calls"
            self._rec(
                body, raw, {"status": 200, "kind": kind, "step": step, "usage": cu, "message": msg}
            )
            cid = mock.next_id("chatcmpl")
            if not body.get("stream"):
                return self._send_json(
                    200,
                    {
                        "id": cid,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "usage": cu,
                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    },
                )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

            def ev(data: Any) -> None:
                payload = (
                    "data: %s\n\n" % (data if isinstance(data, str) else json.dumps(data))
                ).encode()
                self.wfile.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
                self.wfile.flush()

            base = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }
            delta: Json = {"role": "assistant"}
            if msg.get("content"):
                delta["content"] = msg["content"]
            if msg.get("tool_calls"):
                delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
            ev(dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]))
            ev(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}], usage=cu))
            ev("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return H


def main() -> None:
    serve("mock_openai", DEFAULT_SCRIPT, lambda script, log: make_handler(Mock(script, log)))


if __name__ == "__main__":
    main()
