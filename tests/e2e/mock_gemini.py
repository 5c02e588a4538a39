#!/usr/bin/env python3
# Adapted from the ctxd team's offline agent harness (mock of the model API for real CLIs).
"""Scriptable mock of the Gemini API (generativelanguage v1beta), for driving the real Gemini CLI
offline.

Usage:
  python3 mock_gemini.py --port 0 --port-file port.txt --log requests.jsonl [--script script.json]

Point the CLI at it with  GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT  GEMINI_API_KEY=dummy  and
"security": {"auth": {"selectedType": "gemini-api-key"}} in ~/.gemini/settings.json (without it
the env var alone selects auth type "gateway", which `gemini -p` rejects with "Invalid auth
method selected.").
@google/genai then sends POST <base>/v1beta/models/<model>:<method>.

Endpoints:
  POST /v1beta/models/<m>:streamGenerateContent?alt=sse   SSE ("data: {...}\\r\\n\\r\\n")
  POST /v1beta/models/<m>:generateContent                 one GenerateContentResponse
  POST /v1beta/models/<m>:countTokens                     {"totalTokens": len(body)//4}
  GET  /v1beta/models[/<m>]                               small static list
  CONNECT host:port / absolute-URI requests  logged as kind "proxy" and refused (403), so that
      pointing HTTPS_PROXY here shows which outside hosts the CLI tried to reach
  anything else  logged, answered 404 with a Google error body

Every request (method, path, selected headers, JSON body) is appended to the --log JSONL file
together with a summary of the answer ("answer": {status, kind, step, parts, usageMetadata, ...}).

Which reply a generateContent / streamGenerateContent request gets
------------------------------------------------------------------
Requests are classified:
  * "compress" - systemInstruction mentions <state_snapshot> (chat compression: a summary call and a
                 "verify" call). Answered with script["compress_summary"].
  * "json"     - generationConfig asks for application/json (model router / classifiers /
                 next-speaker checks). Answered with an object built from the response schema
                 (first enum value, "mock" strings, numbers = minimum or 1, ...); properties named
                 in script["json_answers"]
                 take the given values instead (e.g. {"complexity_score": 80}).
  * "main"     - the request carries functionDeclarations (the agent loop).
  * "aux"      - anything else (e.g. the one-sentence summary of the previous session that an
                 interactive start asks for). Answered with script["aux_text"].
For "main" requests the step index is, by default ("step_mode": "model_turns"), the number of
role=model contents already in the request's `contents` (stateless, so retries get the same
answer), not counting the synthetic "Got it. Thanks for the additional context!" turn that
compression inserts.
With "step_mode": "counter" it is the number of "main" requests served so far. Step i answers
script["steps"][i] (the last step is repeated when i runs past the end).

A step is one of
  {"function_call": {"name": "run_shell_command", "args": {"command": "echo hello"}}}
  {"function_calls": [{...}, {...}]}                      several calls in one model turn
  {"text": "All done."}
  {"error": {"status": 429, "message": "Resource exhausted", "status_text": "RESOURCE_EXHAUSTED"}}
optionally with "thought": "...thinking text..." (sent first as a {"thought": true} part),
"text_before": "..." (text part before the function call), "with_id": true (put an id on each
functionCall), "finish_reason": "STOP" and "usage": {...} (overrides the reported usageMetadata).

usageMetadata reported for step i when the step has no explicit "usage":
  promptTokenCount        = usage.promptTokenCount        + i * usage_step.promptTokenCount
  candidatesTokenCount    = usage.candidatesTokenCount    + i * usage_step.candidatesTokenCount
  cachedContentTokenCount = usage.cachedContentTokenCount + i * usage_step.cachedContentTokenCount
  thoughtsTokenCount      = usage.thoughtsTokenCount      + i * usage_step.thoughtsTokenCount
  toolUsePromptTokenCount = usage.toolUsePromptTokenCount + i * usage_step.toolUsePromptTokenCount
  totalTokenCount         = prompt + candidates + thoughts + toolUse (unless given explicitly)
Keys whose value is 0 are left out, as the real API does. In a stream the usageMetadata goes on the
last chunk only (or on every chunk with "usage_every_chunk": true).
"""

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from mock_server import JsonHandler, ScriptedMock, serve

COMPRESS_ACK = "Got it. Thanks for the additional context!"
USAGE_KEYS = (
    "promptTokenCount",
    "candidatesTokenCount",
    "cachedContentTokenCount",
    "thoughtsTokenCount",
    "toolUsePromptTokenCount",
)

DEFAULT_SCRIPT = {
    "steps": [
        {
            "function_call": {
                "name": "run_shell_command",
                "args": {"command": "echo hello", "description": "Print hello"},
            }
        },
        {"text": "Done: ran echo hello."},
    ],
    "usage": {
        "promptTokenCount": 12000,
        "candidatesTokenCount": 40,
        "cachedContentTokenCount": 8000,
    },
    "usage_step": {
        "promptTokenCount": 1000,
        "candidatesTokenCount": 10,
        "cachedContentTokenCount": 1000,
    },
    "compress_summary": "<state_snapshot>MOCK-COMPRESS-SUMMARY: the user asked to run echo"
    " commands."
    "</state_snapshot>",
    "compress_usage": {"promptTokenCount": 3000, "candidatesTokenCount": 200},
    "aux_text": "Mock summary",
    "json_answers": {},
    "model_version": "gemini-mock-001",
    "stream_chunk_delay": 0.0,
    "usage_every_chunk": False,
}

Json = dict[str, Any]
HEADERS_TO_LOG = (
    "user-agent",
    "x-goog-api-client",
    "x-goog-api-key",
    "authorization",
    "content-type",
    "x-gemini-api-privileged-user-id",
    "x-server-timeout",
    "host",
    "proxy-authorization",
)


def text_of_parts(parts: Any) -> str:
    out = []
    for p in parts or []:
        if isinstance(p, dict) and isinstance(p.get("text"), str):
            out.append(p["text"])
    return "\n".join(out)


def system_text(body: Json) -> str:
    si = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(si, str):
        return si
    if isinstance(si, dict):
        return text_of_parts(si.get("parts"))
    return ""


def has_function_declarations(body: Json) -> bool:
    for t in body.get("tools") or []:
        if isinstance(t, dict) and t.get("functionDeclarations"):
            return True
    return False


def wants_json(body: Json) -> bool:
    gc = body.get("generationConfig") or {}
    return gc.get("responseMimeType") == "application/json" or bool(
        gc.get("responseJsonSchema") or gc.get("responseSchema")
    )


def classify(body: Json) -> str:
    si = system_text(body)
    if "state_snapshot" in si:
        return "compress"
    if wants_json(body):
        return "json"
    if has_function_declarations(body):
        return "main"
    return "aux"


def from_schema(schema: Any, depth: int = 0) -> Any:
    """a minimal value that satisfies a JSON schema / Gemini Schema (types may be upper case)"""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for k in ("anyOf", "oneOf"):
        if schema.get(k):
            return from_schema(schema[k][0], depth + 1)
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if str(x).lower() != "null"), t[0] if t else None)
    t = str(t or ("object" if "properties" in schema else "string")).lower()
    if t == "object":
        props = schema.get("properties") or {}
        return {k: from_schema(v, depth + 1) for k, v in props.items()}
    if t == "array":
        n = int(schema.get("minItems") or 0)
        return [from_schema(schema.get("items") or {}, depth + 1) for _ in range(n)]
    if t in ("integer", "number"):
        return int(schema.get("minimum") or 1)
    if t == "boolean":
        return False
    return "mock"


class Mock(ScriptedMock):
    USAGE_KEYS = USAGE_KEYS

    def usage_for(self, step_index: int, step: Json | None) -> Json:
        return finish_usage(self.scripted_usage(step_index, step))

    def plan(self, body: Json) -> tuple[str, int, Any, str, Json]:
        """-> (kind, step_index, parts | error-dict, finish_reason | "error", usageMetadata)"""
        kind = classify(body)
        contents = body.get("contents") or []
        n_model = sum(
            1
            for c in contents
            if isinstance(c, dict)
            and c.get("role") == "model"
            and text_of_parts(c.get("parts")).strip() != COMPRESS_ACK
        )
        if kind == "main":
            steps = self.script.get("steps") or [{"text": "ok"}]
            if self.script.get("step_mode") == "counter":
                with self.lock:
                    n_model = self.main_served
                    self.main_served += 1
            step = steps[min(n_model, len(steps) - 1)]
            usage = self.usage_for(n_model, step)
            if "error" in step:
                return kind, n_model, step["error"], "error", usage
            parts = []
            if step.get("thought"):
                parts.append({"text": step["thought"], "thought": True})
            if step.get("text_before"):
                parts.append({"text": step["text_before"]})
            calls = step.get("function_calls") or (
                [step["function_call"]] if "function_call" in step else []
            )
            for fc in calls:
                call = {"name": fc["name"], "args": fc.get("args", {})}
                if step.get("with_id") or fc.get("with_id"):
                    call["id"] = self.next_id("call")
                parts.append({"functionCall": call})
            if not calls:
                parts.append({"text": step.get("text", "ok")})
            return kind, n_model, parts, step.get("finish_reason", "STOP"), usage
        if kind == "compress":
            usage = finish_usage(dict(self.script.get("compress_usage") or {}))
            return (
                kind,
                -1,
                [{"text": self.script.get("compress_summary", "<state_snapshot/>")}],
                "STOP",
                usage,
            )
        if kind == "json":
            gc = body.get("generationConfig") or {}
            schema = gc.get("responseJsonSchema") or gc.get("responseSchema") or {}
            obj = from_schema(schema)
            answers = self.script.get("json_answers") or {}
            if isinstance(obj, dict):
                obj.update({k: v for k, v in answers.items() if k in obj})
            usage = finish_usage({"promptTokenCount": 300, "candidatesTokenCount": 20})
            return kind, -1, [{"text": json.dumps(obj)}], "STOP", usage
        usage = finish_usage({"promptTokenCount": 200, "candidatesTokenCount": 5})
        return kind, -1, [{"text": self.script.get("aux_text", "Mock summary")}], "STOP", usage


def finish_usage(u: Json) -> Json:
    u = {k: int(v) for k, v in u.items() if v}
    if "totalTokenCount" not in u:
        u["totalTokenCount"] = sum(
            u.get(k, 0) for k in USAGE_KEYS if k != "cachedContentTokenCount"
        )
    return u


# C901 adds the methods of the handler class nested here (to close over `mock`) into this one
# factory; each method is within the limit.
def make_handler(mock: Mock) -> type[BaseHTTPRequestHandler]:  # noqa: C901
    class H(JsonHandler):
        content_type = "application/json; charset=UTF-8"

        def _rec(self, body: Any, raw: bytes, answer: Json) -> None:
            hdrs = {k.lower(): v for k, v in self.headers.items() if k.lower() in HEADERS_TO_LOG}
            for k in ("x-goog-api-key", "authorization", "proxy-authorization"):
                if k in hdrs:
                    hdrs[k] = f"<redacted:{len(hdrs[k])} chars>"
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

        def _google_error(self, code: int, message: str, status: str) -> None:
            self._send_json(code, {"error": {"code": code, "message": message, "status": status}})

        def _is_proxy_request(self) -> bool:
            if self.command == "CONNECT":
                return True
            if self.path.startswith(("http://", "https://")):
                u = urlsplit(self.path)
                if u.hostname in (
                    "127.0.0.1",
                    "localhost",
                    "::1",
                ):  # proxied request for us: serve it
                    self.path = u.path + ("?" + u.query if u.query else "")
                    return False
                return True
            return False

        def _proxy_refuse(self) -> None:
            raw, body = self._read_body() if self.command != "CONNECT" else (b"", None)
            self._rec(
                body, raw, {"status": 403, "kind": "proxy", "note": "outside host refused by mock"}
            )
            self.send_response(403)
            self.send_header("content-length", "0")
            self.send_header("connection", "close")
            self.end_headers()
            self.close_connection = True

        def do_CONNECT(self) -> None:
            self._proxy_refuse()

        def do_GET(self) -> None:
            if self._is_proxy_request():
                return self._proxy_refuse()
            path = self.path.split("?")[0].rstrip("/")
            if path.endswith("/models"):
                names = ("gemini-2.5-pro", "gemini-2.5-flash", "gemini-2.5-flash-lite")
                obj = {
                    "models": [
                        {
                            "name": "models/" + m,
                            "displayName": m,
                            "inputTokenLimit": 1048576,
                            "outputTokenLimit": 65536,
                            "supportedGenerationMethods": ["generateContent", "countTokens"],
                        }
                        for m in names
                    ]
                }
                self._rec(None, b"", {"status": 200, "kind": "models"})
                return self._send_json(200, obj)
            if "/models/" in path and ":" not in path.rsplit("/", 1)[-1]:
                mid = path.rsplit("/", 1)[-1]
                self._rec(None, b"", {"status": 200, "kind": "model"})
                return self._send_json(
                    200,
                    {
                        "name": "models/" + mid,
                        "displayName": mid,
                        "inputTokenLimit": 1048576,
                        "outputTokenLimit": 65536,
                    },
                )
            self._rec(None, b"", {"status": 404})
            self._google_error(404, f"mock: no route for GET {path}", "NOT_FOUND")

        def do_HEAD(self) -> None:
            self._rec(None, b"", {"status": 200})
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            if self._is_proxy_request():
                return self._proxy_refuse()
            raw, body = self._read_body()
            path = self.path.split("?")[0]
            method = path.rsplit(":", 1)[-1] if ":" in path.rsplit("/", 1)[-1] else ""
            if method == "countTokens":
                n = max(1, len(raw) // 4)
                self._rec(body, raw, {"status": 200, "kind": "countTokens", "totalTokens": n})
                return self._send_json(200, {"totalTokens": n})
            if method in ("generateContent", "streamGenerateContent") and isinstance(body, dict):
                return self._generate(body, raw, path, stream=(method == "streamGenerateContent"))
            self._rec(body, raw, {"status": 404, "note": "unknown route"})
            self._google_error(404, f"mock: no route for POST {path}", "NOT_FOUND")

        def _generate(self, body: Json, raw: bytes, path: str, stream: bool) -> None:
            kind, step, parts, finish, usage = mock.plan(body)
            model = path.rsplit("/", 1)[-1].split(":")[0]
            if finish == "error":
                err = parts
                code = int(err.get("status", 500))
                self._rec(
                    body,
                    raw,
                    {"status": code, "kind": kind, "step": step, "stream": stream, "error": err},
                )
                return self._google_error(
                    code, err.get("message", "mock error"), err.get("status_text", "INTERNAL")
                )
            rid = mock.next_id("resp")
            self._rec(
                body,
                raw,
                {
                    "status": 200,
                    "kind": kind,
                    "step": step,
                    "stream": stream,
                    "model": model,
                    "finishReason": finish,
                    "usageMetadata": usage,
                    "parts": parts,
                },
            )
            mv = mock.script.get("model_version") or model

            def resp(chunk_parts: list[Json], last: bool) -> Json:
                r: Json = {
                    "candidates": [
                        {"content": {"role": "model", "parts": chunk_parts}, "index": 0}
                    ],
                    "modelVersion": mv,
                    "responseId": rid,
                }
                if last:
                    r["candidates"][0]["finishReason"] = finish
                if last or mock.script.get("usage_every_chunk"):
                    r["usageMetadata"] = usage
                return r

            if not stream:
                return self._send_json(200, resp(parts, True))
            # split answer text into ~40-char chunks; a thought part or a functionCall is one chunk
            chunks = []
            for p in parts:
                if "text" in p and not p.get("thought") and len(p["text"]) > 40:
                    t = p["text"]
                    for j in range(0, len(t), 40):
                        q = dict(p)
                        q["text"] = t[j : j + 40]
                        chunks.append([q])
                else:
                    chunks.append([p])
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            delay = float(mock.script.get("stream_chunk_delay", 0) or 0)
            for i, cp in enumerate(chunks):
                payload = (f"data: {json.dumps(resp(cp, i == len(chunks) - 1))}\r\n\r\n").encode()
                self.wfile.write(b"%x\r\n" % len(payload) + payload + b"\r\n")
                self.wfile.flush()
                if delay:
                    time.sleep(delay)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return H


def main() -> None:
    serve("mock_gemini", DEFAULT_SCRIPT, lambda script, log: make_handler(Mock(script, log)))


if __name__ == "__main__":
    main()
