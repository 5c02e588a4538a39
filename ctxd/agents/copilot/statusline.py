"""Copilot CLI's statusLine command: its payload in, ctxd's line out.

Copilot CLI runs the statusLine command in its interactive UI only (not with `-p`), on its
events or every `refreshInterval` seconds. The payload, as 1.0.102's bundle builds it
(cli-main.js, the statusline hook): `{cwd, session_id, session_name, transcript_path,
model: {id, display_name, ...}, workspace, version, cost, context_window: {
context_window_size, used_percentage, remaining_tokens, current_context_tokens,
displayed_context_limit, current_context_used_percentage, current_usage: {input_tokens,
output_tokens, cache_creation_input_tokens, cache_read_input_tokens}, ...}}`: Claude Code's
shape. Seen with 1.0.102 (tests/data/payloads/copilot/1.0.102/interactive/): `transcript_path`
is the session's directory, not its events file; `last_call_input_tokens` is the last request's
prompt as the provider reported it (what the events file records), `used_percentage` and
`remaining_tokens` count it with the answer's output (`last_call_output_tokens`) against
`context_window_size`, while `current_context_tokens` is Copilot's own local estimate of the
context (12,734 where the provider reported 15,000), so it is not taken. A payload that names
no last call (a GitHub-hosted model's) gives `context_window_size - remaining_tokens`, the
figure `used_percentage` is (Copilot's own, the exact one there). Before the first answer
every count is 0 and nothing remains used: no figure yet.
"""

from __future__ import annotations

import os

from ctxd.agents.copilot.files import EVENTS_FILE
from ctxd.agents.hooks import load_payload
from ctxd.agents.lines import count
from ctxd.agents.statusline import MAX_PAYLOAD_BYTES, percent, render_figures
from ctxd.core.events import StatuslineReport

__all__ = ["parse_statusline", "render_figures"]


def parse_statusline(payload: bytes) -> StatuslineReport:
    """Parse the statusline command's stdin. Raises `InvalidInput` with a one-line reason."""
    data = load_payload(payload, "statusline payload", MAX_PAYLOAD_BYTES)
    model = _object(data.get("model"))
    context = _object(data.get("context_window"))
    window = count(context.get("context_window_size")) or count(
        context.get("displayed_context_limit")
    )
    tokens = count(context.get("last_call_input_tokens")) or _used(context, window)
    pct = context.get("used_percentage") if tokens is not None else None
    path = _text(data.get("transcript_path"))
    if path is not None and os.path.basename(path) != EVENTS_FILE:
        path = os.path.join(path, EVENTS_FILE)
    return StatuslineReport(
        session_id=str(data["session_id"]),
        transcript_path=path,
        cwd=_text(data.get("cwd")),
        model_id=_text(model.get("id")),
        model_name=_text(model.get("display_name")),
        window=window or None,
        used_pct=percent(pct),
        tokens=tokens,
        agent_version=_text(data.get("version")),
    )


def _used(context: dict[str, object], window: int | None) -> int | None:
    """The context in use as `used_percentage` and `remaining_tokens` count it: what a
    GitHub-hosted model's payload states when it names no last call."""
    remaining = count(context.get("remaining_tokens"))
    pct = context.get("used_percentage")
    if not window or remaining is None or remaining >= window:
        return None
    if not isinstance(pct, int | float) or isinstance(pct, bool) or pct <= 0:
        return None
    return window - remaining


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
