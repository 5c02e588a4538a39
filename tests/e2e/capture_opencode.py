#!/usr/bin/env python3
"""Capture OpenCode databases the real CLI writes, for tests/data (how they were made).

    .venv/bin/python tests/e2e/capture_opencode.py OUT_DIR          # run the scenarios
    .venv/bin/python tests/e2e/capture_opencode.py OUT_DIR --save   # ... and refresh tests/data

Runs the OpenCode that install-agents.sh installed (`opencode run`), in a loopback-only network
namespace, against mock_openai_chat.py (steps served in order: "step_mode": "counter"), with the
e2e test's config (the mock as provider `mock`, model `mock-model`, limit.context 200,000,
output 32,000), no plugin: what is captured is the database.

Scenarios:
  compact   bash at 50,000, then a step of 170,000 (OpenCode's point is 168,000: it compacts
            automatically), then bash at 20,000 and an answer at 21,000
  subagent  a `task` call (a subagent: bash at 30,000, its answer at 31,000), then the main
            session's answer at 12,000 (its first step, 10,000, carried the task call)

--save writes tests/data/transcripts/opencode-<version>/opencode.<scenario>.db (the run
directory replaced by `<WORK>` and the event log emptied, as in the first capture) and
usage.<scenario>.json (what the mock reported, request by request), and what `opencode export`
printed of each session of it: export.<scenario>.json (export.<scenario>.task.json, the
subagent's), the run directory replaced by `<WORK>` there too. Run it outside any git checkout
(OUT_DIR under no repository), so that OpenCode's project is "global" and the exports name no
path of this machine but the run directory's.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

E2E = Path(__file__).resolve().parent
sys.path.insert(0, str(E2E))

from e2e_support import Mock, RunDir, cli_version, find_cli, run  # noqa: E402
from test_opencode_e2e import env, opencode_config  # noqa: E402

REPO = E2E.parent.parent


def usage(prompt: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": 40, "cached_tokens": 0}


def bash(i: int, prompt: int) -> dict[str, Any]:
    command = {"command": f"echo CAPTURE-{i}", "description": f"step {i}"}
    return {"tool": {"name": "bash", "arguments": command}, "usage": usage(prompt)}


def answer(text: str, prompt: int) -> dict[str, Any]:
    return {"text": text, "usage": usage(prompt)}


SCENARIOS: dict[str, list[dict[str, Any]]] = {
    "compact": [bash(0, 50_000), bash(1, 170_000), bash(2, 20_000), answer("Done.", 21_000)],
    "subagent": [
        {
            "tool": {
                "name": "task",
                "arguments": {
                    "description": "echo in a subagent",
                    "prompt": "Run echo SUB-1",
                    "subagent_type": "general",
                },
            },
            "usage": usage(10_000),
        },
        bash(1, 30_000),
        answer("Sub done.", 31_000),
        answer("Done.", 12_000),
    ],
}


def sessions(db: Path) -> list[tuple[str, str | None]]:
    """The sessions of the database (id, parent id), oldest first: a subagent's after its
    parent's."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT id, parent_id FROM session ORDER BY time_created")
        return [(row[0], row[1]) for row in rows]
    finally:
        con.close()


def export_name(name: str, parent: str | None) -> str:
    """export.<scenario>.json for the main session, export.<scenario>.task.json for the one its
    `task` call started."""
    return f"export.{name}.json" if parent is None else f"export.{name}.task.json"


def capture(out: Path, name: str, opencode: Path) -> tuple[Path, list[dict[str, Any]], str]:
    rd = RunDir.create(out / name)
    script = {"steps": SCENARIOS[name], "step_mode": "counter"}
    mock = Mock("mock_openai_chat", rd.root, script, netns=True)
    mock.start()
    try:
        stand_in = SimpleNamespace(env={"XDG_CONFIG_HOME": str(rd.root / "xdg-config")})
        opencode_config(rd, stand_in, mock)  # type: ignore[arg-type]
        argv = mock.wrap([str(opencode), "run", "Run the steps"])
        res = run(argv, cwd=rd.work, env=env(rd, mock, stand_in.env), timeout=120)
        assert res.returncode == 0, res.describe()
        print(res.stdout)
    finally:
        mock.stop()
    db = rd.home / ".local" / "share" / "opencode" / "opencode.db"
    for session_id, parent in sessions(db):
        # What `opencode export` prints of each session (its stdout: one JSON document).
        exported = run(
            [str(opencode), "export", session_id],
            cwd=rd.work,
            env=env(rd, mock, stand_in.env),
            timeout=120,
        )
        assert exported.returncode == 0, exported.describe()
        (rd.root / export_name(name, parent)).write_text(exported.stdout)
    answers = [r.get("answer") or {} for r in mock.requests()]
    sent = [
        {"kind": a["kind"], "step": a.get("step"), "usage": a.get("usage")}
        for a in answers
        if a.get("kind") in ("main", "aux", "compress")
    ]
    return rd.home / ".local" / "share" / "opencode" / "opencode.db", sent, str(rd.work)


def save(db: Path, sent: list[dict[str, Any]], work: str, name: str, version: str) -> None:
    target = REPO / "tests" / "data" / "transcripts" / f"opencode-{version}"
    target.mkdir(parents=True, exist_ok=True)
    copy = target / f"opencode.{name}.db"
    copy.unlink(missing_ok=True)
    src = sqlite3.connect(db)
    dst = sqlite3.connect(copy)
    src.backup(dst)  # the WAL's pages included
    src.close()
    for table, column in (("session", "directory"), ("message", "data"), ("part", "data")):
        dst.execute(f"UPDATE {table} SET {column} = replace({column}, ?, '<WORK>')", (work,))
    # OpenCode's event log repeats every row (with the run's paths); ctxd reads none of it.
    dst.execute("DELETE FROM event")
    dst.execute("DELETE FROM event_sequence")
    dst.commit()
    # a rollback journal, as the first capture: read-only readers of a WAL file create files
    dst.execute("PRAGMA journal_mode=delete")
    dst.execute("VACUUM")
    dst.close()
    (target / f"usage.{name}.json").write_text(json.dumps(sent, indent=1) + "\n")
    for exported in db.parents[4].glob(f"export.{name}*.json"):
        # `info.path` is the run directory again, relative to the root
        text = exported.read_text().replace(work, "<WORK>").replace(work.lstrip("/"), "<WORK>")
        (target / exported.name).write_text(text)
    print(f"saved {copy}")


def main() -> None:
    out = Path(sys.argv[1])
    opencode = find_cli("opencode")
    assert opencode is not None, "run tests/e2e/install-agents.sh first"
    version = cli_version(opencode).split()[-1]
    for name in SCENARIOS:
        shutil.rmtree(out / name, ignore_errors=True)
        db, sent, work = capture(out, name, opencode)
        print(name, json.dumps(sent))
        if "--save" in sys.argv:
            save(db, sent, work, name, version)


if __name__ == "__main__":
    main()
