"""Kimi Code's status line command: its payload in, ctxd's line out.

Kimi runs `tui.toml`'s `[status_line] command` (written by `ctxd install kimi`: `tui.py`) in its
interactive UI (not with `-p`), at most once a second, with `sh -c`, `KIMI_CODE_STATUS_LINE=1` in
its environment, one JSON object on stdin, and shows the first line of its stdout if it exits 0
within 300 ms. The payload, as 2.1.0's bundle builds it (`statusLinePayload`; real ones in
tests/data/payloads/kimi/2.1.0/interactive/): `{model, cwd, gitBranch, permissionMode, planMode,
contextUsage, contextTokens, maxContextTokens, sessionId, version}`, `model` being the model's
display name and `sessionId` "" before the session's first message (refused: nothing to report),
`contextUsage` the share `contextTokens / maxContextTokens`.

`maxContextTokens` is the window Kimi runs the model with, which no record of the wire file states:
that is what the report gives. `contextTokens` is Kimi's own count of the context, the last
request's input and output plus its estimate of what was added since; the wire file's exact
figures (input apart from output) stand instead, so the report leaves the count out.
"""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.hooks import load_payload
from ctxd.agents.lines import count
from ctxd.agents.statusline import MAX_PAYLOAD_BYTES, render_figures
from ctxd.core.events import StatuslineReport

__all__ = ["parse_statusline", "render_figures"]

_KEYS = MappingProxyType({"sessionId": "session_id"})


def parse_statusline(payload: bytes) -> StatuslineReport:
    """Parse the status line command's stdin. Raises `InvalidInput` with a one-line reason."""
    data = load_payload(payload, "statusline payload", MAX_PAYLOAD_BYTES, keys=_KEYS)
    return StatuslineReport(
        session_id=str(data["session_id"]),
        transcript_path=None,
        cwd=_text(data.get("cwd")),
        model_id=None,
        model_name=_text(data.get("model")),
        window=count(data.get("maxContextTokens")) or None,
        used_pct=None,
        tokens=None,
        agent_version=_text(data.get("version")),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
