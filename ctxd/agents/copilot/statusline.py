"""Copilot CLI's statusLine command: its payload in, ctxd's line out.

Copilot CLI runs the statusLine command in its interactive UI only (not with `-p`), on its
events or every `refreshInterval` seconds. The payload, as 1.0.102's bundle builds it
(cli-main.js, the statusline hook): `{cwd, session_id, session_name, transcript_path,
model: {id, display_name, ...}, workspace, version, cost, context_window: {
context_window_size, used_percentage, remaining_tokens, current_context_tokens,
displayed_context_limit, current_context_used_percentage, current_usage: {input_tokens,
output_tokens, cache_creation_input_tokens, cache_read_input_tokens}, ...}}`: Claude Code's
shape, with the live context as `current_context_tokens` of `displayed_context_limit`.
"""

from __future__ import annotations

from ctxd.agents.claude.statusline import MAX_PAYLOAD_BYTES, render_figures
from ctxd.agents.hooks import load_payload
from ctxd.agents.lines import count
from ctxd.core.events import StatuslineReport

__all__ = ["parse_statusline", "render_figures"]


def parse_statusline(payload: bytes) -> StatuslineReport:
    """Parse the statusline command's stdin. Raises `InvalidInput` with a one-line reason."""
    data = load_payload(payload, "statusline payload", MAX_PAYLOAD_BYTES)
    model = _object(data.get("model"))
    context = _object(data.get("context_window"))
    window = count(context.get("displayed_context_limit")) or count(
        context.get("context_window_size")
    )
    pct = context.get("current_context_used_percentage")
    return StatuslineReport(
        session_id=str(data["session_id"]),
        transcript_path=_text(data.get("transcript_path")),
        cwd=_text(data.get("cwd")),
        model_id=_text(model.get("id")),
        model_name=_text(model.get("display_name")),
        window=window or None,
        used_pct=float(pct)
        if isinstance(pct, int | float) and not isinstance(pct, bool) and pct >= 0
        else None,
        tokens=count(context.get("current_context_tokens")),
        agent_version=_text(data.get("version")),
    )


def _object(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
