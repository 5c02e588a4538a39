#!/usr/bin/env python3
"""Scriptable mock of the OpenAI Chat Completions API, for driving the real Qwen Code CLI offline
(any OpenAI-compatible client works).

Usage:
  python3 mock_openai_chat.py --port 0 --port-file port.txt --log requests.jsonl [--script s.json]

Endpoints (with or without the /v1 prefix):
  POST /v1/chat/completions   SSE (`stream: true`) or one JSON completion, from the script
  GET  /v1/models             {"object": "list", "data": [...]}
  CONNECT, or a request for an outside absolute URL: refused (403) and logged as kind "proxy"
  anything else                logged, answered 404

Which reply a request gets
--------------------------
Requests are classified:
  * "compress" - the system message or the last message asks for a `<state_snapshot>` (the
                 chat compression prompt of Gemini CLI and its forks): answered with
                 `compress_summary` and `compress_usage`.
  * "main"     - the request offers tools (the agent loop).
  * "aux"      - anything else (titles, summaries, classifiers), and requests whose last
                 message contains one of `aux_markers` (side requests that carry the agent
                 loop's tools for cache sharing, such as Qwen Code's prompt suggestion and
                 memory updates in its UI): `aux_text`.
For "main" requests the step index is the number of assistant messages in `messages`
(stateless: a retry gets the same answer), or with "step_mode": "counter" the number of main
requests served so far (use this when compression rewrites the history). Step i answers
script["steps"][i]; the last step is repeated past the end.

A step is one of
  {"shell": "echo hello"}                       a `run_shell_command` tool call
  {"tool": {"name": "X", "arguments": {...}}}   a call of tool X
  {"text": "All done."}                         an assistant message
  {"error": {"status": 400, "message": "..."}}  an HTTP error
and may carry "usage" (overriding the scripted usage for that step) and "text_before" (text
streamed before a tool call).

Usage for step i without its own "usage":
  prompt_tokens     = usage.prompt_tokens     + i * usage_step.prompt_tokens
  completion_tokens = usage.completion_tokens + i * usage_step.completion_tokens
  cached_tokens     = usage.cached_tokens     + i * usage_step.cached_tokens
sent as {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}.
Streamed, it goes where OpenAI puts it: in a last chunk with `choices: []` when the request asks
for `stream_options.include_usage`; otherwise (script "usage_without_include": true, as some
compatible providers do) on the chunk that carries finish_reason, else nowhere.
The answer's summary in the log (`answer.usage`) is what was sent.
"""

from __future__ import annotations

import json
import time
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from mock_server import JsonHandler, ScriptedMock, serve

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens")
SNAPSHOT = "state_snapshot"

DEFAULT_SCRIPT: dict[str, Any] = {
    "steps": [{"shell": "echo hello"}, {"text": "Done: ran echo hello."}],
    "usage": {"prompt_tokens": 12000, "completion_tokens": 40, "cached_tokens": 8000},
    "usage_step": {"prompt_tokens": 1000, "completion_tokens": 10, "cached_tokens": 1000},
    "compress_summary": "<state_snapshot>MOCK-COMPRESS-SUMMARY: the user asked to run echo"
    " commands; they were run.</state_snapshot>",
    "compress_usage": {"prompt_tokens": 3000, "completion_tokens": 200, "cached_tokens": 0},
    "aux_text": "Mock summary",
    "aux_markers": ["[SUGGESTION MODE:", "Managed memory has TWO directories"],
    "usage_without_include": False,
    "stream_chunk_delay": 0.0,
    "models": ["qwen3-coder-plus", "qwen3-coder-flash", "mock-model"],
}

Json = dict[str, Any]
HEADERS_TO_LOG = (
    "user-agent",
    "authorization",
    "content-type",
    "accept",
    "x-stainless-retry-count",
    "x-dashscope-cachecontrol",
    "x-dashscope-useragent",
    "x-dashscope-authtype",
    "host",
)


def text_of(content: Any) -> str:
    """A message's `content` (a string or a list of parts) as text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


def system_text(body: Json) -> str:
    return "\n".join(
        text_of(m.get("content"))
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") in ("system", "developer")
    )


def last_text(body: Json) -> str:
    msgs = body.get("messages") or []
    return text_of(msgs[-1].get("content")) if msgs and isinstance(msgs[-1], dict) else ""


def classify(body: Json, aux_markers: list[str] | tuple[str, ...] = ()) -> str:
    # Qwen Code first asks with its own system prompt and tools (sharing the prompt cache) and
    # the compression prompt as the last user message; without cache sharing, as the system.
    last = last_text(body)
    if SNAPSHOT in system_text(body) or SNAPSHOT in last:
        return "compress"
    if body.get("tools") and not any(marker in last for marker in aux_markers):
        return "main"
    return "aux"


def n_assistant(body: Json) -> int:
    return sum(
        1
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "assistant"
    )


def wire_usage(u: Json) -> Json:
    prompt = int(u.get("prompt_tokens", 0))
    completion = int(u.get("completion_tokens", 0))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": int(u.get("cached_tokens", 0))},
    }


class Mock(ScriptedMock):
    USAGE_KEYS = USAGE_KEYS

    def plan(self, body: Json) -> tuple[str, int, Json, Json]:
        """-> (kind, step index, step, wire usage)"""
        kind = classify(body, self.script.get("aux_markers") or ())
        if kind == "compress":
            step = {"text": self.script.get("compress_summary", "<state_snapshot/>")}
            return kind, -1, step, wire_usage(self.script.get("compress_usage") or {})
        if kind == "aux":
            step = {"text": self.script.get("aux_text", "Mock summary")}
            return kind, -1, step, wire_usage({"prompt_tokens": 200, "completion_tokens": 5})
        steps = self.script.get("steps") or [{"text": "ok"}]
        index = n_assistant(body)
        if self.script.get("step_mode") == "counter":
            with self.lock:
                index = self.main_served
                self.main_served += 1
        step = steps[min(index, len(steps) - 1)]
        return kind, index, step, wire_usage(self.scripted_usage(index, step))


def message_for(mock: Mock, step: Json) -> tuple[Json, str]:
    """The assistant message a step answers with, and its finish_reason."""
    msg: Json = {"role": "assistant", "content": step.get("text_before")}
    call = None
    if "shell" in step:
        call = {
            "name": "run_shell_command",
            "arguments": {"command": step["shell"], "is_background": False},
        }
    elif "tool" in step:
        call = step["tool"]
    if call is None:
        msg["content"] = step.get("text", "ok")
        return msg, "stop"
    msg["tool_calls"] = [
        {
            "id": mock.next_id("call"),
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
        }
    ]
    return msg, "tool_calls"


# C901 adds the methods of the handler class nested here (to close over `mock`) into this one
# factory; each method is within the limit.
def make_handler(mock: Mock) -> type[BaseHTTPRequestHandler]:  # noqa: C901
    class H(JsonHandler):
        request_id_header = "x-request-id"

        def _rec(self, body: Any, raw: bytes, answer: Json) -> None:
            hdrs = {k.lower(): v for k, v in self.headers.items() if k.lower() in HEADERS_TO_LOG}
            if "authorization" in hdrs:
                hdrs["authorization"] = f"<redacted:{len(hdrs['authorization'])} chars>"
            mock.log(
                {
                    "ts": time.time(),
                    "method": self.command,
                    "path": self.path,
                    "headers": hdrs,
                    "body": body
                    if body is not None
                    else (raw.decode("utf-8", "replace")[:2000] if raw else None),
                    "answer": answer,
                }
            )

        def _is_proxy_request(self) -> bool:
            if self.command == "CONNECT":
                return True
            if self.path.startswith(("http://", "https://")):
                u = urlsplit(self.path)
                if u.hostname in ("127.0.0.1", "localhost", "::1"):
                    self.path = u.path + ("?" + u.query if u.query else "")
                    return False
                return True
            return False

        def _proxy_refuse(self) -> None:
            self._rec(None, b"", {"status": 403, "kind": "proxy", "note": "outside host refused"})
            self.send_response(403)
            self.send_header("content-length", "0")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True

        def _path(self) -> str:
            p = self.path.split("?")[0].rstrip("/")
            return p[3:] if p.startswith("/v1/") else p

        def do_CONNECT(self) -> None:
            self._proxy_refuse()

        def do_GET(self) -> None:
            if self._is_proxy_request():
                return self._proxy_refuse()
            if self._path() == "/models":
                data = [
                    {"id": m, "object": "model", "created": 1700000000, "owned_by": "mock"}
                    for m in mock.script.get("models") or []
                ]
                self._rec(None, b"", {"status": 200, "kind": "models"})
                return self._send_json(200, {"object": "list", "data": data})
            self._rec(None, b"", {"status": 404})
            self._send_json(404, {"error": {"message": "mock: no route", "type": "not_found"}})

        def do_POST(self) -> None:
            if self._is_proxy_request():
                self._read_raw()
                return self._proxy_refuse()
            raw, body = self._read_body()
            if self._path() == "/chat/completions" and isinstance(body, dict):
                return self._chat(body, raw)
            self._rec(body, raw, {"status": 404, "note": "unknown route"})
            self._send_json(404, {"error": {"message": "mock: no route", "type": "not_found"}})

        def _chat(self, body: Json, raw: bytes) -> None:
            kind, index, step, usage = mock.plan(body)
            model = body.get("model", "mock-model")
            if "error" in step:
                err = step["error"]
                status = int(err.get("status", 400))
                self._rec(body, raw, {"status": status, "kind": kind, "step": index, "error": err})
                return self._send_json(
                    status,
                    {
                        "error": {
                            "type": err.get("type", "invalid_request_error"),
                            "code": err.get("code"),
                            "message": err.get("message", "mock error"),
                        }
                    },
                )
            msg, finish = message_for(mock, step)
            stream = bool(body.get("stream"))
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            usage_sent = not stream or include or bool(mock.script.get("usage_without_include"))
            self._rec(
                body,
                raw,
                {
                    "status": 200,
                    "kind": kind,
                    "step": index,
                    "stream": stream,
                    "include_usage": include,
                    "usage": usage if usage_sent else None,
                    "message": msg,
                },
            )
            cid = mock.next_id("chatcmpl")
            if not stream:
                return self._send_json(
                    200,
                    {
                        "id": cid,
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": model,
                        "usage": usage,
                        "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                    },
                )
            self._stream(cid, model, msg, finish, usage, include)

        def _stream(
            self, cid: str, model: str, msg: Json, finish: str, usage: Json, include: bool
        ) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("x-request-id", "req_mock_" + uuid.uuid4().hex[:16])
            self.end_headers()
            delay = float(mock.script.get("stream_chunk_delay", 0) or 0)
            base = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }

            def send(data: Json | str) -> None:
                text = data if isinstance(data, str) else json.dumps(data)
                payload = f"data: {text}\n\n".encode()
                self.wfile.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
                self.wfile.flush()
                if delay:
                    time.sleep(delay)

            def chunk(delta: Json, finish_reason: str | None = None, **extra: Any) -> None:
                send(
                    dict(
                        base,
                        choices=[{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                        **extra,
                    )
                )

            chunk({"role": "assistant", "content": ""})
            text = msg.get("content") or ""
            for j in range(0, len(text), 40):
                chunk({"content": text[j : j + 40]})
            for i, call in enumerate(msg.get("tool_calls") or []):
                fn = call["function"]
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                args = fn["arguments"]
                for j in range(0, len(args), 30):
                    chunk(
                        {"tool_calls": [{"index": i, "function": {"arguments": args[j : j + 30]}}]}
                    )
            if include:
                chunk({}, finish)
                send(dict(base, choices=[], usage=usage))
            elif mock.script.get("usage_without_include"):
                chunk({}, finish, usage=usage)
            else:
                chunk({}, finish)
            send("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return H


def main() -> None:
    serve("mock_openai_chat", DEFAULT_SCRIPT, lambda script, log: make_handler(Mock(script, log)))


if __name__ == "__main__":
    main()
