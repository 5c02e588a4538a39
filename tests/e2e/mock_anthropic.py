#!/usr/bin/env python3
# Adapted from the ctxd team's offline agent harness (mock of the model API for real CLIs).
"""Scriptable mock of the Anthropic Messages API, for driving the real Claude Code CLI offline.

Usage:
  python3 mock_anthropic.py --port 0 --port-file port.txt --log requests.jsonl \
      [--script script.json] [--lo-up]

Endpoints:
  POST /v1/messages               streaming (SSE) and non-streaming
  POST /v1/messages/count_tokens  {"input_tokens": N}
  GET  /v1/models[/id]            small static list
  anything else                   logged, answered 200 {} (POST) / 404 (GET)

Every request (method, path, selected headers, JSON body) is appended to the --log JSONL file,
together with a short summary of what the mock answered.

Which reply a /v1/messages request gets
---------------------------------------
Requests are classified:
  * "main"      - the request carries a non-empty `tools` list (the agent loop).
  * "compact"   - the last user message is Claude Code's compaction prompt ("Your task is to
                  create a detailed summary of the conversation so far").
  * "aux"       - anything else (title generation, quota probe, ...). Answered with short text.
For "main" requests the step index is the number of assistant messages already in the request's
`messages` array (stateless, so retries get the same answer), or, with "step_mode": "counter" in the
script, the number of "main" requests served so far (use this when compaction rewrites history).
Step i answers script["steps"][i] (the last step is repeated when i runs past the end).

A step is one of
  {"tool_use": {"name": "Bash", "input": {"command": "echo hello", "description": "say hi"}}}
  {"text": "All done."}
  {"error": {"status": 400, "type": "invalid_request_error",
             "message": "prompt is too long: 1000001 tokens > 1000000 maximum"}}
and may carry "usage": {...} to override the reported usage for that step.

Usage reported for step i when the step has no explicit "usage":
  X = usage.X + i * usage_step.X  for X in input_tokens, cache_creation_input_tokens,
  cache_read_input_tokens and output_tokens.
"""

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any

from mock_server import JsonHandler, ScriptedMock, serve

DEFAULT_SCRIPT = {
    "steps": [
        {
            "tool_use": {
                "name": "Bash",
                "input": {"command": "echo hello", "description": "Print hello"},
            }
        },
        {
            "tool_use": {
                "name": "Bash",
                "input": {"command": "echo world", "description": "Print world"},
            }
        },
        {"text": "Done: ran echo hello and echo world."},
    ],
    "usage": {
        "input_tokens": 1000,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 10000,
        "output_tokens": 50,
    },
    "usage_step": {
        "input_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 50000,
        "output_tokens": 0,
    },
    "compact_summary": "<summary>MOCK-COMPACT-SUMMARY: the user asked to run echo commands."
    "</summary>",
    "aux_text": "Mock title",
    "stream_chunk_delay": 0.0,
}

Json = dict[str, Any]
HEADERS_TO_LOG = (
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "x-app",
    "x-api-key",
    "authorization",
    "content-type",
    "x-stainless-retry-count",
    "x-claude-code-session-id",
)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    for b in content or []:
        if isinstance(b, dict):
            if b.get("type") == "text":
                out.append(b.get("text", ""))
            elif b.get("type") == "tool_result":
                out.append(_text_of(b.get("content")))
    return "\n".join(out)


def classify(body: Json) -> str:
    msgs = body.get("messages") or []
    last_user = next((m for m in reversed(msgs) if m.get("role") == "user"), None)
    last_text = _text_of(last_user.get("content")) if last_user else ""
    low = last_text.lower()
    # Claude Code's compaction prompt, and nothing looser: a post-compaction request whose last
    # message carries both a hook's note mentioning the summary and the compaction and a skill
    # list saying "summarize" was once answered as a second compaction here.
    if "your task is to create a detailed summary of the conversation" in low:
        return "compact"
    if body.get("tools"):
        return "main"
    return "aux"


class Mock(ScriptedMock):
    USAGE_KEYS = (
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    )

    def usage_for(self, step_index: int, step: Json | None) -> Json:
        return self.scripted_usage(step_index, step)

    def plan(self, body: Json) -> tuple[str, int, Any, str, Json]:
        kind = classify(body)
        msgs = body.get("messages") or []
        n_assistant = sum(1 for m in msgs if m.get("role") == "assistant")
        if kind == "main":
            steps = self.script.get("steps") or [{"text": "ok"}]
            if self.script.get("step_mode") == "counter":
                with self.lock:
                    n_assistant = self.main_served
                    self.main_served += 1
            step = steps[min(n_assistant, len(steps) - 1)]
            usage = self.usage_for(n_assistant, step)
            if "error" in step:
                return kind, n_assistant, step["error"], "error", usage
            if "tool_use" in step:
                tu = step["tool_use"]
                blocks = [
                    {
                        "type": "tool_use",
                        "id": self.next_id("toolu"),
                        "name": tu["name"],
                        "input": tu.get("input", {}),
                    }
                ]
                if step.get("text_before"):
                    blocks.insert(0, {"type": "text", "text": step["text_before"]})
                stop = "tool_use"
            else:
                blocks = [{"type": "text", "text": step.get("text", "ok")}]
                stop = "end_turn"
        elif kind == "compact":
            usage = dict(
                self.script.get("compact_usage")
                or {
                    "input_tokens": 500,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 200,
                }
            )
            blocks = [
                {"type": "text", "text": self.script.get("compact_summary", "<summary>s</summary>")}
            ]
            stop = "end_turn"
            n_assistant = -1
        else:
            usage = {
                "input_tokens": 100,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 5,
            }
            fmt = body.get("output_format") or (body.get("output_config") or {}).get("format") or {}
            if fmt.get("type") == "json_schema":
                blocks = [
                    {
                        "type": "text",
                        "text": json.dumps(self.script.get("aux_json", {"title": "Mock title"})),
                    }
                ]
            else:
                blocks = [{"type": "text", "text": self.script.get("aux_text", "Mock title")}]
            stop = "end_turn"
            n_assistant = -1
        return kind, n_assistant, blocks, stop, usage


# C901 adds the methods of the handler class nested here (to close over `mock`) into this one
# factory; each method is within the limit.
def make_handler(mock: Mock) -> type[BaseHTTPRequestHandler]:  # noqa: C901
    class H(JsonHandler):
        request_id_header = "request-id"

        def _rec(self, body: Any, raw: bytes, answer: Json) -> None:
            hdrs = {k: v for k, v in self.headers.items() if k.lower() in HEADERS_TO_LOG}
            if "x-api-key" in {k.lower() for k in hdrs}:
                hdrs = {
                    k: ("<redacted>" if k.lower() in ("x-api-key", "authorization") else v)
                    for k, v in hdrs.items()
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

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            if path.rstrip("/") == "/v1/models":
                obj = {
                    "data": [
                        {
                            "type": "model",
                            "id": m,
                            "display_name": m,
                            "created_at": "2025-01-01T00:00:00Z",
                        }
                        for m in ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")
                    ],
                    "has_more": False,
                    "first_id": None,
                    "last_id": None,
                }
                self._rec(None, b"", {"status": 200})
                return self._send_json(200, obj)
            if path.startswith("/v1/models/"):
                mid = path.split("/")[-1]
                self._rec(None, b"", {"status": 200})
                return self._send_json(
                    200,
                    {
                        "type": "model",
                        "id": mid,
                        "display_name": mid,
                        "created_at": "2025-01-01T00:00:00Z",
                    },
                )
            self._rec(None, b"", {"status": 404})
            self._send_json(
                404,
                {
                    "type": "error",
                    "error": {"type": "not_found_error", "message": "mock: no route"},
                },
            )

        def do_HEAD(self) -> None:
            self._rec(None, b"", {"status": 200})
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            raw, body = self._read_body()
            path = self.path.split("?")[0]
            if path == "/v1/messages/count_tokens":
                n = max(1, len(raw) // 4)
                self._rec(body, raw, {"status": 200, "input_tokens": n})
                return self._send_json(200, {"input_tokens": n})
            if path == "/v1/messages" and isinstance(body, dict):
                return self._messages(body, raw)
            self._rec(body, raw, {"status": 200, "note": "unknown route, answered {}"})
            self._send_json(200, {})

        def _messages(self, body: Json, raw: bytes) -> None:
            kind, step, blocks, stop, usage = mock.plan(body)
            model = body.get("model", "claude-mock")
            if stop == "error":
                err = blocks
                self._rec(
                    body,
                    raw,
                    {"status": err.get("status", 400), "kind": kind, "step": step, "error": err},
                )
                return self._send_json(
                    err.get("status", 400),
                    {
                        "type": "error",
                        "error": {
                            "type": err.get("type", "invalid_request_error"),
                            "message": err.get("message", "mock error"),
                        },
                    },
                )
            mid = mock.next_id("msg")
            self._rec(
                body,
                raw,
                {
                    "status": 200,
                    "kind": kind,
                    "step": step,
                    "stream": bool(body.get("stream")),
                    "stop_reason": stop,
                    "usage": usage,
                    "content": blocks,
                },
            )
            if not body.get("stream"):
                return self._send_json(
                    200,
                    {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": blocks,
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                )
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", "req_mock_" + uuid.uuid4().hex[:16])
            self.end_headers()
            delay = float(mock.script.get("stream_chunk_delay", 0) or 0)

            def ev(name: str, data: Json) -> None:
                payload = (f"event: {name}\ndata: {json.dumps(data)}\n\n").encode()
                self.wfile.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
                self.wfile.flush()
                if delay:
                    time.sleep(delay)

            start_usage = dict(usage)
            start_usage["output_tokens"] = 1
            ev(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": mid,
                        "type": "message",
                        "role": "assistant",
                        "model": model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": start_usage,
                    },
                },
            )
            ev("ping", {"type": "ping"})
            for i, b in enumerate(blocks):
                if b["type"] == "text":
                    ev(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                    t = b["text"]
                    for j in range(0, len(t), 40):
                        ev(
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {"type": "text_delta", "text": t[j : j + 40]},
                            },
                        )
                else:
                    ev(
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": i,
                            "content_block": {
                                "type": "tool_use",
                                "id": b["id"],
                                "name": b["name"],
                                "input": {},
                            },
                        },
                    )
                    js = json.dumps(b["input"])
                    for j in range(0, len(js), 30):
                        ev(
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": i,
                                "delta": {
                                    "type": "input_json_delta",
                                    "partial_json": js[j : j + 30],
                                },
                            },
                        )
                ev("content_block_stop", {"type": "content_block_stop", "index": i})
            ev(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage.get("output_tokens", 0)},
                },
            )
            ev("message_stop", {"type": "message_stop"})
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return H


def main() -> None:
    serve("mock_anthropic", DEFAULT_SCRIPT, lambda script, log: make_handler(Mock(script, log)))


if __name__ == "__main__":
    main()
