"""Cline's handoff through the real daemon and hook client: Cline reads nothing a stop hook
prints, so a stop past the handoff point asks nothing, and the next PostToolUse answer carries
the request as `contextModification`, once; only then is it recorded as asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import World

DATA = Path(__file__).parents[2] / "data"
PAYLOADS = DATA / "payloads" / "cline" / "3.0.65"
CAPTURED = "1796554282174_e2h89"
#: The capture's last answer reported 26,000; with this window Cline compacts at 36,000, and
#: 26,000 is 72 % of that room: past the default handoff point (70 %).
WINDOW = 40_000


def _payload(name: str, sid: str) -> bytes:
    doc = json.loads((PAYLOADS / f"{name}.json").read_text())
    doc["sessionContext"]["rootSessionId"] = sid
    return json.dumps(doc).encode()


def _place_session(world: World) -> str:
    data = world.home / ".cline" / "data"
    settings = data / "settings" / "providers.json"
    settings.parent.mkdir(parents=True)
    provider = {"settings": {"model": "mock-model", "contextWindow": WINDOW}}
    doc = {
        "version": 1,
        "lastUsedProvider": "openai-compatible",
        "providers": {"openai-compatible": provider},
    }
    settings.write_text(json.dumps(doc))
    sid = "1796555003918_0ta12"
    folder = data / "sessions" / sid
    folder.mkdir(parents=True)
    source = DATA / "transcripts" / "cline-3.0.65" / "sessions" / CAPTURED
    shutil.copyfile(source / f"{CAPTURED}.messages.json", folder / f"{sid}.messages.json")
    return sid


def _row(world: World, sid: str) -> dict[str, Any]:
    rows: list[dict[str, Any]] = [s for s in world.status()["sessions"] if s["session_id"] == sid]
    assert len(rows) == 1, rows
    return rows[0]


def test_the_handoff_goes_with_the_next_tool_call_once(ctxd: World) -> None:
    sid = _place_session(ctxd)
    assert ctxd.hook_out("cline", _payload("agent_end", sid)) is None
    row = _row(ctxd, sid)
    assert (row["tokens"], row["handoff_asked"]) == (26_000, False)

    out = ctxd.hook_out("cline", _payload("tool_result", sid))
    assert set(out) == {"contextModification"}
    said = out["contextModification"]
    assert said.count("CONTEXT HANDOFF:") == 1, said
    draft = ctxd.state_home / "ctxd" / "handoffs" / f"{sid}.md"
    assert f"at {draft}: please review" in said and draft.is_file()
    assert _row(ctxd, sid)["handoff_asked"] is True

    again = ctxd.hook_out("cline", _payload("tool_result", sid))
    assert "CONTEXT HANDOFF:" not in json.dumps(again)
