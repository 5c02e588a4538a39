"""Past the inotify watch limit nothing goes stale: a real daemon in a user namespace whose own
limit leaves most folders unwatched keeps every session current, lists a new session there,
and says so in `ctxd status` and `ctxd doctor`.

The limit is the user namespace's own (`/proc/sys/user/max_inotify_watches`, writable by the
namespace's root), so the test changes nothing outside it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import ClaudeTranscript, World

pytestmark = pytest.mark.slow

#: Watches the daemon may hold: far fewer than the folders below.
LIMIT = 12
PROJECTS = 30


def _namespace_limit_works() -> bool:
    probe = f"echo {LIMIT} > /proc/sys/user/max_inotify_watches"
    try:
        done = subprocess.run(
            ["unshare", "--user", "--map-root-user", "sh", "-c", probe],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _under_limit(*command: str, limit: str = f"max_inotify_watches={LIMIT}") -> list[str]:
    """`command` in a new user namespace (the test's uid mapped to its root) with the limit
    `limit` (of /proc/sys/user/); the process is the command itself (`unshare` and `sh` exec
    it)."""
    name, value = limit.split("=")
    script = f'echo {value} > /proc/sys/user/{name} && exec "$@"'
    return ["unshare", "--user", "--map-root-user", "sh", "-c", script, "sh", *command]


def _serve_under_limit(
    world: World, limit: str = f"max_inotify_watches={LIMIT}"
) -> subprocess.Popen[bytes]:
    log = (world.root / "daemon-1.log").open("wb")
    world._logs = 1
    command = [sys.executable, "-m", "ctxd", "serve", "--log-level", "debug"]
    try:
        return subprocess.Popen(
            _under_limit(*command, limit=limit),
            env=world.env,
            cwd=world.root,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    finally:
        log.close()


def _watching(world: World) -> dict[str, Any]:
    daemon = world.status()["daemon"]
    watching: dict[str, Any] = daemon["watching"]
    return watching


def test_past_the_limit_every_session_stays_current_and_doctor_names_the_limit(
    world: World,
) -> None:
    if not _namespace_limit_works():
        pytest.skip("no user namespaces here (unshare --user --map-root-user)")
    sessions: list[ClaudeTranscript] = []
    for i in range(PROJECTS):
        t = world.claude(slug=f"-work-p{i:02d}")
        t.assistant(10_000)
        sessions.append(t)
    world.proc = _serve_under_limit(world)
    world.wait_ready(world.proc)
    for t in sessions:
        world.wait_row(t, lambda row: row["tokens"] == 10_000)

    watching = _watching(world)
    assert watching["measured"]
    assert watching["unwatched"] > PROJECTS // 2, watching
    assert watching["folders"] >= PROJECTS + 3  # the projects and the three agents' roots
    assert watching["limit"] == LIMIT
    assert world.log().count("inotify watch limit is reached") == 1

    # Every session, watched folder or not, shows what its transcript says within seconds.
    for t in sessions:
        t.assistant(250_000)
    for t in sessions:
        world.wait_row(t, lambda row: row["tokens"] == 250_000, timeout=10.0)

    # A new session in every folder (most of them unwatched) is listed.
    fresh = [world.claude(slug=f"-work-p{i:02d}") for i in range(PROJECTS)]
    for t in fresh:
        t.assistant(40_000)
    # ...and one in a project that did not exist: a folder the kernel can no longer watch.
    new_project = world.claude(slug="-work-new-project")
    new_project.assistant(60_000)
    for t in fresh:
        world.wait_row(t, lambda row: row["tokens"] == 40_000, timeout=10.0)
    world.wait_row(new_project, lambda row: row["tokens"] == 60_000, timeout=10.0)
    new_project.assistant(70_000)
    world.wait_row(new_project, lambda row: row["tokens"] == 70_000, timeout=10.0)

    status = world.cli("status")
    assert status.returncode == 0, status.stderr
    assert "inotify limit reached" in status.stdout
    assert "fs.inotify.max_user_watches" in status.stdout

    doctor = world.cli("doctor")
    lines = [line for line in doctor.stdout.splitlines() if "inotify watches" in line]
    assert lines, doctor.stdout
    assert "FAIL" in lines[0], doctor.stdout
    assert "user.max_inotify_watches = 12" in doctor.stdout
    assert "sudo sysctl -w fs.inotify.max_user_watches=" in doctor.stdout
    assert doctor.returncode != 0
    assert world.log().count("inotify watch limit is reached") == 1, "said once"

    # With no daemon running, doctor compares the folders there with the limit itself.
    world.stop()
    alone = subprocess.run(
        _under_limit(sys.executable, "-m", "ctxd", "doctor"),
        env=world.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    (line,) = [line for line in alone.stdout.splitlines() if "inotify watches" in line]
    assert line.startswith("FAIL"), alone.stdout
    assert f"{watching['folders'] + 1} folders under the agents' roots" in line  # + the new one
    assert "user.max_inotify_watches = 12" in line


def test_with_no_watcher_to_be_had_every_folder_is_polled_and_doctor_says_why(
    world: World,
) -> None:
    if not _namespace_limit_works():
        pytest.skip("no user namespaces here (unshare --user --map-root-user)")
    sessions = [world.claude(slug=f"-work-p{i}") for i in range(3)]
    for t in sessions:
        t.assistant(10_000)
    world.proc = _serve_under_limit(world, "max_inotify_instances=0")
    world.wait_ready(world.proc)
    for t in sessions:
        world.wait_row(t, lambda row: row["tokens"] == 10_000)
    watching = _watching(world)
    assert watching["watched"] == 0
    assert "Too many open files" in watching["error"], watching

    for t in sessions:
        t.assistant(90_000)
    fresh = world.claude(slug="-work-p1")
    fresh.assistant(20_000)
    for t in sessions:
        world.wait_row(t, lambda row: row["tokens"] == 90_000, timeout=10.0)
    world.wait_row(fresh, lambda row: row["tokens"] == 20_000, timeout=10.0)

    status = world.cli("status")
    assert "cannot watch the agents' folders" in status.stdout, status.stdout
    doctor = world.cli("doctor")
    (line,) = [line for line in doctor.stdout.splitlines() if "inotify watches" in line]
    assert line.startswith("FAIL"), doctor.stdout
    assert "sudo sysctl -w fs.inotify.max_user_instances=" in doctor.stdout


WATCH_ORDER_PROBE = """
import json, sys, time
from pathlib import Path
from ctxd.daemon import watcher, watches
root = Path(sys.argv[1])
folders = watches.find_folders([root])
live = [str(root / name) for name in sys.argv[2:]]
with watcher.open_notify(watches.watch_order([root], folders, live, time.time())):
    coverage = watches.measure(folders)
print(json.dumps({"watched": coverage.watched, "unwatched": list(coverage.unwatched)}))
"""


def test_past_the_limit_the_live_folders_are_the_ones_watched(tmp_path: Path) -> None:
    # The folders of live sessions are asked for first: the limit, when it bites, bites on
    # history. (watchfiles itself walks in no useful order.)
    if not _namespace_limit_works():
        pytest.skip("no user namespaces here (unshare --user --map-root-user)")
    root = tmp_path / "projects"
    month_ago = time.time() - 30 * 86_400
    for i in range(40):
        folder = root / f"-old-{i:02d}"
        folder.mkdir(parents=True)
        os.utime(folder, (month_ago, month_ago))
    live = ["-old-07", "-old-23", "-old-31"]
    done = subprocess.run(
        _under_limit(sys.executable, "-c", WATCH_ORDER_PROBE, str(root), *live),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    got = json.loads(done.stdout)
    assert got["watched"] == LIMIT
    assert not {str(root / name) for name in live} & set(got["unwatched"])
