"""A Claude Code session whose statusline reported its prompt cache, through `ctxd stop` and a new
daemon, as a user restarts ctxd: everything about it still works, as real processes (the CLI,
the hook client, the HTTP listener)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopback import free_port

if TYPE_CHECKING:
    from conftest import World

#: Claude Code 2.1.332's statusline payloads, as it wrote them (the third has `prompt_cache`).
STATUSLINE = Path(__file__).parents[1] / "data" / "payloads" / "statusline" / "claude-2.1.332.jsonl"


def api_status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=10) as answer:
        doc: dict[str, Any] = json.loads(answer.read())
    return doc


def test_a_session_with_a_prompt_cache_keeps_its_figures_and_its_handoff_after_a_restart(
    world: World,
) -> None:
    port = free_port()
    world.write_config(f"[http]\nenabled = true\nport = {port}\n")
    world.start()
    t = world.claude()
    t.assistant(300_000)
    world.hook_out("claude", t.payload("PostToolUse"))
    doc = json.loads(STATUSLINE.read_text().splitlines()[2])
    assert "prompt_cache" in doc  # the real payload, not one made up for the test
    doc.update(session_id=t.session_id, transcript_path=str(t.path), cwd=str(world.work))
    usage = doc["context_window"]["current_usage"]
    usage.update(input_tokens=300_000, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    doc["prompt_cache"].update(ttl="1h", expires_at=int(time.time()) + 3600, warm=True)
    assert world.hook("claude", json.dumps(doc).encode(), "statusline").returncode == 0
    world.wait_for(lambda: (r := world.row(t)) and r.get("idle_compaction_at"), 5, "the cache")

    assert world.cli("stop").returncode == 0  # as a user stops it: the snapshot is written
    assert world.stop() == 0  # our handle on the process: it has exited, and cleanly
    world.start()

    shown = world.cli("status")
    assert shown.returncode == 0, shown
    assert "cannot compute" not in shown.stdout, shown.stdout
    assert "300,000" in shown.stdout or "300k" in shown.stdout, shown.stdout
    row = world.row(t)
    assert row is not None and "error" not in row, row
    assert row["tokens"] == 300_000 and row["idle_compaction_at"] is not None

    # Its Stop hook is judged, not failed inside the daemon: the handoff is asked for (shown to
    # the user, the default `[handoff] action`).
    t.assistant(720_000)
    answer = world.hook_out("claude", t.payload("Stop"))
    assert answer is not None and "CONTEXT HANDOFF" in answer.get("systemMessage", ""), answer

    listed = {r["session_id"]: r for r in api_status(port)["status"]["sessions"]}
    assert listed[t.session_id]["compactions"] == 0
    assert listed[t.session_id]["handoff_asked"] is True
