"""Real-shaped transcript lines with a chosen context size, for tests that write transcripts by
hand rather than through the `world` fixture's transcript helpers."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
LINES: dict[str, Any] = json.loads((DATA / "daemon" / "lines.json").read_text())


def claude_assistant(session_id: str, tokens: int, **fields: Any) -> bytes:
    """One final Claude Code assistant line whose context is `tokens` (input plus the two cache
    parts; at least 3,000); `fields` are set on the record (a timestamp, say)."""
    assert tokens >= 3000
    record = copy.deepcopy(LINES["claude-assistant"])
    record.update(sessionId=session_id, uuid=str(uuid.uuid4()), **fields)
    record["message"]["id"] = f"msg_{uuid.uuid4().hex[:20]}"
    record["message"]["usage"].update(
        input_tokens=1000,
        cache_creation_input_tokens=2000,
        cache_read_input_tokens=tokens - 3000,
        output_tokens=100,
    )
    return json.dumps(record).encode() + b"\n"
