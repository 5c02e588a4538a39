"""The versioned status document is the contract other tools build on: the JSON Schema that
ships with ctxd validates what a real daemon gives, through `ctxd status --json` and
`GET /api/v1/status` (and its old path `/api/status`), on real sessions of every agent (each
session one of the real captures in tests/data, its transcript where the agent writes it and
its hook sent by the real hook client); a row whose figures cannot be computed and the document
with no session validate too."""

from __future__ import annotations

import importlib.resources
import json
import shutil
import sqlite3
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema
import pytest
from loopback import free_port
from opencode_db import CAPTURED, copy_capture
from referencing import Registry, Resource

from ctxd.agents.kilo import FAMILY as KILO
from ctxd.agents.opencode import database_path
from ctxd.agents.opencode_family.store import database_path as family_database_path
from ctxd.daemon.centre import Centre
from ctxd.daemon.config import parse_settings

if TYPE_CHECKING:
    from conftest import World

DATA = Path(__file__).parents[1] / "data"
TRANSCRIPTS = DATA / "transcripts"
PAYLOADS = DATA / "payloads"
SCHEMA_ID = "ctxd.status/v1"


def shipped_schema() -> dict[str, Any]:
    """The schema as ctxd ships it, found as an installed ctxd's package data."""
    text = importlib.resources.files("ctxd").joinpath("schemas/status.v1.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def errors_of(doc: object, part: str = "") -> list[str]:
    """Where `doc` breaks the schema (`part`: "" for the document, "#/$defs/api" for the HTTP
    answer), one line each; [] when it validates. The schema is found by its `$id`, as a
    consumer would find it."""
    schema = shipped_schema()
    registry: Registry[Any] = Registry().with_resource(
        schema["$id"], Resource.from_contents(schema)
    )
    validator = jsonschema.Draft202012Validator({"$ref": schema["$id"] + part}, registry=registry)
    return [f"{e.json_path}: {e.message}" for e in validator.iter_errors(doc)]


def test_the_shipped_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = shipped_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"] == {"const": SCHEMA_ID}
    empty = {**_empty_document(), "daemon": DAEMON}
    assert errors_of(empty) == []
    # another version, or a row without what consumers rely on, is refused
    assert errors_of({**empty, "schema": "ctxd.status/v2"}) == [
        "$.schema: 'ctxd.status/v1' was expected"
    ]
    row = {"session_id": "s", "agent": "claude", "tokens": "many"}
    assert errors_of({**empty, "sessions": [row]})


#: The daemon's part of a document made in process (a real daemon's has more).
DAEMON = {
    "version": "0",
    "pid": 1,
    "uptime_s": 0.0,
    "socket": "s",
    "config": "c",
    "config_error": None,
    **dict.fromkeys(
        ["sessions", "requests", "refused", "connections", "evicted", "accept_errors"], 0
    ),
    "catching_up": 0,
    "watching": None,
    "http": None,
}


def _empty_document() -> dict[str, Any]:
    return {
        "schema": SCHEMA_ID,
        "sessions": [],
        "learned_windows": {},
        "proved_contexts": {},
        "config_error": None,
        "refused_files": [],
        "hooks_answered": 0,
        "counters": {},
    }


# ---------------------------------------------------------------- a session of every agent


def _payload(path: Path, transcript: Path | None, cwd: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    for key in ("transcript_path", "transcriptPath"):
        if key in doc and transcript is not None:
            doc[key] = str(transcript)
    doc["cwd"] = str(cwd)
    return doc


def _place(capture: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(capture, dest)
    return dest


def _session_id(payload: Path) -> str:
    doc = json.loads(payload.read_text())
    sid: str = doc.get("session_id") or doc["sessionId"]
    return sid


def _claude(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "claude" / "2.1.332" / "interactive" / "06-Stop.json"
    sid = _session_id(stop)
    capture = TRANSCRIPTS / "claude-code-2.1.332" / "transcript.interactive.jsonl"
    path = _place(capture, world.claude_projects / "-work" / f"{sid}.jsonl")
    return sid, json.dumps(_payload(stop, path, world.work)), []


def _codex(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "codex" / "0.171.0" / "exec" / "09-Stop.json"
    name = Path(json.loads(stop.read_text())["transcript_path"]).name
    capture = TRANSCRIPTS / "codex-cli-0.171.0" / "rollout.exec.jsonl"
    path = _place(capture, world.codex_dir / "sessions" / "2026" / "11" / "29" / name)
    return _session_id(stop), json.dumps(_payload(stop, path, world.work)), []


def _gemini(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "gemini" / "0.61.0" / "print" / "10-AfterAgent.json"
    name = Path(json.loads(stop.read_text())["transcript_path"]).name
    capture = TRANSCRIPTS / "gemini-cli-0.61.0" / "transcript.print.1.jsonl"
    path = _place(capture, world.home / ".gemini" / "tmp" / "work" / "chats" / name)
    return _session_id(stop), json.dumps(_payload(stop, path, world.work)), []


def _qwen(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "qwen" / "0.24.4" / "print" / "18-Stop.json"
    sid = _session_id(stop)
    capture = TRANSCRIPTS / "qwen-code-0.24.4" / "transcript.print.jsonl"
    path = _place(capture, world.home / ".qwen" / "projects" / "-work" / "chats" / f"{sid}.jsonl")
    return sid, json.dumps(_payload(stop, path, world.work)), []


def _pi(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "pi" / "1.6.0" / "print" / "05-agent_end.json"
    name = Path(json.loads(stop.read_text())["transcript_path"]).name
    capture = TRANSCRIPTS / "pi-1.6.0" / "session.print.jsonl"
    folder = "--" + str(world.work).strip("/").replace("/", "-") + "--"
    path = _place(capture, world.home / ".pi" / "agent" / "sessions" / folder / name)
    return _session_id(stop), json.dumps(_payload(stop, path, world.work)), []


def _copilot(world: World) -> tuple[str, str, list[str]]:
    stop = PAYLOADS / "copilot" / "1.0.102" / "print" / "11-agentStop.json"
    sid = _session_id(stop)
    capture = TRANSCRIPTS / "copilot-1.0.102" / "transcript.print.jsonl"
    path = _place(capture, world.home / ".copilot" / "session-state" / sid / "events.jsonl")
    return sid, json.dumps(_payload(stop, path, world.work)), ["agentStop"]


def _cline(world: World) -> tuple[str, str, list[str]]:
    # Cline's hooks name the session alone: its messages are where its layout puts them.
    hook = PAYLOADS / "cline" / "3.0.65" / "tool_result.json"
    sid: str = json.loads(hook.read_text())["sessionContext"]["rootSessionId"]
    captured = "1796554282174_e2h89"
    capture = TRANSCRIPTS / "cline-3.0.65" / "sessions" / captured / f"{captured}.messages.json"
    folder = world.home / ".cline" / "data" / "sessions" / sid
    _place(capture, folder / f"{sid}.messages.json")
    return sid, hook.read_text(), []


def _opencode(world: World) -> tuple[str, str, list[str]]:
    # OpenCode keeps its sessions in one database; its plugin names the session that went idle.
    path = database_path(world.env)
    path.parent.mkdir(parents=True, exist_ok=True)
    copy_capture(path.parent)
    payload = {"hook_event_name": "session_idle", "session_id": CAPTURED, "cwd": str(world.work)}
    return CAPTURED, json.dumps(payload), []


def _kimi(world: World) -> tuple[str, str, list[str]]:
    # Kimi Code's hooks name the session alone: its wire file is under a workspace's folder.
    stop = PAYLOADS / "kimi" / "2.1.0" / "compact" / "13-Stop.json"
    sid = _session_id(stop)
    capture = TRANSCRIPTS / "kimi-code-2.1.0" / "wire.compact.jsonl"
    folder = world.home / ".kimi-code" / "sessions" / "work" / sid / "agents" / "main"
    _place(capture, folder / "wire.jsonl")
    return sid, json.dumps(_payload(stop, None, world.work)), []


def kilo_database_path(env: dict[str, str]) -> Path:
    return family_database_path(KILO, env)


def _kilo(world: World) -> tuple[str, str, list[str]]:
    # Kilo CLI, OpenCode's fork: its database, its plugin naming the session that went idle.
    path = kilo_database_path(world.env)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TRANSCRIPTS / "kilo-7.7.7" / "kilo.compact.db", path)
    db = sqlite3.connect(path)
    (sid,) = db.execute("SELECT id FROM session").fetchone()
    # Touched now, as Kilo leaves a session just used: the daemon reads the live window only.
    db.execute("UPDATE session SET time_updated = ?", (int(time.time() * 1000),))
    db.commit()
    db.close()
    payload = {"hook_event_name": "session_idle", "session_id": sid, "cwd": str(world.work)}
    return sid, json.dumps(payload), []


#: Each agent ctxd supports: its captured session placed where the agent keeps it, and the
#: session id, the hook's payload and the hook command's arguments after the agent's name.
AGENTS: dict[str, Callable[[World], tuple[str, str, list[str]]]] = {
    "claude": _claude,
    "cline": _cline,
    "codex": _codex,
    "copilot": _copilot,
    "gemini": _gemini,
    "kilo": _kilo,
    "kimi": _kimi,
    "opencode": _opencode,
    "pi": _pi,
    "qwen": _qwen,
}


def http_get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as answer:
        assert answer.status == 200 and answer.headers["Content-Type"] == "application/json"
        body: bytes = answer.read()
    return body


#: What moves between two requests: the clock, the daemon's counts of requests, the folders
#: watched (the agents' new folders are taken in as they appear), the dashboard's history (a
#: point a second).
MOVING = frozenset({"age_s", "uptime_s", "requests", "connections", "watching", "history"})


def _without_moving_figures(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_moving_figures(v) for k, v in value.items() if k not in MOVING}
    if isinstance(value, list):
        return [_without_moving_figures(v) for v in value]
    return value


def test_every_agents_real_session_validates_through_the_cli_and_http(world: World) -> None:
    from ctxd import agents

    assert set(AGENTS) == set(agents.AGENTS), "an agent ctxd supports without a session here"
    port = free_port()
    world.write_config(f"[http]\nenabled = true\nport = {port}\n")
    world.start()
    assert errors_of(json.loads(world.cli("status", "--json").stdout)) == []  # no session yet

    ids = {}
    for agent, place in AGENTS.items():
        sid, payload, args = place(world)
        ids[agent] = sid
        result = world.hook(agent, payload.encode(), *args)
        assert result.returncode == 0 and result.stderr == b"", (agent, result)

    def every_agent_counted() -> dict[str, Any] | None:
        doc = world.status()
        rows = {(r["agent"], r["session_id"]): r for r in doc["sessions"]}
        found = [rows.get((agent, sid)) for agent, sid in ids.items()]
        return doc if all(r is not None and r.get("tokens") for r in found) else None

    world.wait_for(every_agent_counted, 10, "a counted session of every agent")

    shown = world.cli("status", "--json")
    assert shown.returncode == 0, shown
    doc = json.loads(shown.stdout)
    assert errors_of(doc) == []
    assert doc["schema"] == SCHEMA_ID
    assert {r["agent"] for r in doc["sessions"]} == set(AGENTS)
    assert all("error" not in r for r in doc["sessions"])

    # the dashboard's series are recorded once a second: the answer is checked with them
    api = world.wait_for(
        lambda: (a := json.loads(http_get(port, "/api/v1/status")))["history"] and a,
        5,
        "the dashboard's history",
    )
    assert errors_of(api, "#/$defs/api") == []
    assert errors_of(api["status"]) == []
    assert api["status"]["schema"] == SCHEMA_ID
    assert {(r["agent"], r["session_id"]) for r in api["status"]["sessions"]} == set(ids.items())
    # the old path is the same document
    old = json.loads(http_get(port, "/api/status"))
    assert set(old) == {"status", "history"}
    new = json.loads(http_get(port, "/api/v1/status"))
    assert _without_moving_figures(old) == _without_moving_figures(new)

    # one session in full, as `ctxd status SESSION --json` prints it
    one = json.loads(world.cli("status", "--json", ids["copilot"]).stdout)
    assert errors_of(one) == [] and [r["agent"] for r in one["sessions"]] == ["copilot"]


@pytest.mark.in_process
def test_a_row_that_cannot_be_computed_and_the_empty_document_validate(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    centre = Centre.open(
        world.env, {}, lambda: 1_800_000_000.0, lambda: 0.0, settings=parse_settings("")
    )
    daemon: dict[str, object] = dict(DAEMON)
    empty = json.loads(centre.status.encoded(daemon=daemon))
    assert errors_of(empty) == [] and empty["sessions"] == [] and empty["schema"] == SCHEMA_ID

    fine = centre.sessions.open("claude", "fine", None, cwd=str(world.work))
    broken = centre.sessions.open("claude", "broken", None, cwd=str(world.work))
    grounds = centre.answers.grounds

    def failing_for_one(state: Any) -> Any:
        if state.key == broken.key:
            raise ValueError("a figure no session could have")
        return grounds(state)

    monkeypatch.setattr(centre.answers, "grounds", failing_for_one)
    doc = json.loads(centre.status.encoded(daemon=daemon))
    rows = {row["session_id"]: row for row in doc["sessions"]}
    assert rows["broken"]["error"].startswith("cannot compute") and "error" not in rows["fine"]
    assert fine.key != broken.key
    assert errors_of(doc) == []
