#!/usr/bin/env python3
"""A trivial hook for the smoke tests: `capture_hook.py EVENT`.

Appends `{"label", "payload", "env"}` to `$E2E_CAPTURE_DIR/hooks.jsonl`. After a tool call
(PostToolUse / AfterTool) it answers with `additionalContext` "E2E-SMOKE-MARKER-<n>" (n counts
the tool calls from 1), so a test can see in the mock's request log that hook output reached the
model after exactly that call. Stdlib only; always exits 0.
"""

from __future__ import annotations

import json
import os
import sys

TOOL_EVENTS = ("PostToolUse", "AfterTool")


def main() -> int:
    label = sys.argv[1] if len(sys.argv) > 1 else "unknown"
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = {"_unparsed": raw}
    cap = os.environ.get("E2E_CAPTURE_DIR", ".")
    os.makedirs(cap, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k.startswith(("CTXD_", "E2E_", "XDG_"))}
    with open(os.path.join(cap, "hooks.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"label": label, "payload": payload, "env": env}) + "\n")
    if label in TOOL_EVENTS:
        counter = os.path.join(cap, ".tool_calls")
        try:
            with open(counter, encoding="utf-8") as f:
                n = int(f.read()) + 1
        except (OSError, ValueError):
            n = 1
        with open(counter, "w", encoding="utf-8") as f:
            f.write(str(n))
        event = payload.get("hook_event_name", label) if isinstance(payload, dict) else label
        out = {
            "hookSpecificOutput": {
                "hookEventName": event,
                "additionalContext": f"E2E-SMOKE-MARKER-{n}",
            }
        }
        sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
