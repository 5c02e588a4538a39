"""The systemd units and the launchd plist as the service managers read them, and the plans that
install them."""

from __future__ import annotations

import configparser
import json
import os
import plistlib
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxd.cli.service import (
    ServicePlan,
    apply_service_plan,
    detect_manager,
    plan_service_install,
    plan_service_uninstall,
    service_status,
    systemd_quote,
)
from ctxd.errors import CtxdError

REPO = Path(__file__).parents[2]


class FakeRun:
    """Records commands instead of running them; answers from a table of (rc, stdout, stderr)."""

    def __init__(self, answers: dict[str, tuple[int, str, str]] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        rc, out, err = self.answers.get(shlex.join(argv), (0, "", ""))
        return subprocess.CompletedProcess(argv, rc, out, err)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    return {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(run),
        "PATH": os.environ.get("PATH", ""),
    }


def unit(text: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return parser


# --- systemd -------------------------------------------------------------------------------


def test_systemd_plan_writes_both_units_with_this_users_python(env: dict[str, str]) -> None:
    plan = plan_service_install(manager="systemd", env=env, python="/opt/venv/bin/python")
    unit_dir = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    assert set(plan.files) == {unit_dir / "ctxd.service", unit_dir / "ctxd.socket"}

    service = unit(plan.files[unit_dir / "ctxd.service"])["Service"]
    assert service["Type"] == "notify"
    assert service["ExecStart"] == "/opt/venv/bin/python -m ctxd serve"
    assert service["Restart"] == "on-failure"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes" and service["PrivateTmp"] == "yes"
    assert "%S/ctxd" in service["ReadWritePaths"].split()

    socket = unit(plan.files[unit_dir / "ctxd.socket"])["Socket"]
    assert socket["ListenStream"] == "%t/ctxd/ctxd.sock"
    assert (socket["SocketMode"], socket["DirectoryMode"]) == ("0600", "0700")

    assert ("systemctl", "--user", "daemon-reload") in plan.commands
    assert plan.commands[-1] == ("systemctl", "--user", "enable", "--now", "ctxd.socket")


@pytest.mark.parametrize("odd_dir", [None, "my venv%1"])
@pytest.mark.slow
def test_rendered_units_pass_systemd_analyze_verify(
    env: dict[str, str], tmp_path: Path, odd_dir: str | None
) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian/Ubuntu package: systemd)")
    python = sys.executable
    if odd_dir is not None:  # a path systemd would mangle unless quoted and escaped
        link = tmp_path / odd_dir / "python"
        link.parent.mkdir()
        link.symlink_to(sys.executable)
        python = str(link)
    plan = plan_service_install(manager="systemd", env=env, python=python)
    apply_service_plan(plan, run=FakeRun())
    paths = sorted(str(p) for p in plan.files)
    done = subprocess.run(
        [analyze, "--user", "verify", *paths],
        capture_output=True,
        text=True,
        env={**env, "SYSTEMD_LOG_COLOR": "0"},
        timeout=60,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_systemd_quote_escapes_what_systemd_would_expand() -> None:
    assert systemd_quote("/usr/bin/python3") == "/usr/bin/python3"
    assert systemd_quote("/a b/python") == '"/a b/python"'
    assert systemd_quote("/x%i/$HOME/py") == '"/x%%i/$$HOME/py"'
    assert systemd_quote('/q"uote\\/py') == '"/q\\"uote\\\\/py"'


def test_apply_writes_files_then_runs_commands_and_tolerates_no_daemon(
    env: dict[str, str],
) -> None:
    python = "/opt/venv/bin/python"
    plan = plan_service_install(manager="systemd", env=env, python=python)
    run = FakeRun({f"{python} -m ctxd stop": (3, "", "no daemon answers")})
    lines = apply_service_plan(plan, run=run)
    for path, text in plan.files.items():
        assert path.read_text() == text
    assert run.calls == [list(c) for c in plan.commands]
    assert any(line.startswith("wrote") for line in lines)
    assert any("ctxd stop" in line and "exit 3" in line for line in lines)


def test_a_failing_systemctl_is_an_error_with_its_message(env: dict[str, str]) -> None:
    plan = plan_service_install(manager="systemd", env=env, python="/usr/bin/python3")
    enable = "systemctl --user enable --now ctxd.socket"
    run = FakeRun({enable: (1, "", "Failed to connect to bus: No medium found")})
    with pytest.raises(CtxdError, match="No medium found"):
        apply_service_plan(plan, run=run)


def test_uninstall_disables_removes_then_reloads(env: dict[str, str]) -> None:
    apply_service_plan(
        plan_service_install(manager="systemd", env=env, python="/usr/bin/python3"),
        run=FakeRun(),
    )
    plan = plan_service_uninstall(manager="systemd", env=env)
    seen: list[tuple[list[str], bool]] = []
    unit_file = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user" / "ctxd.service"

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        seen.append((argv, unit_file.exists()))
        return subprocess.CompletedProcess(argv, 0, "", "")

    apply_service_plan(plan, run=run)
    assert seen == [
        (["systemctl", "--user", "disable", "--now", "ctxd.socket", "ctxd.service"], True),
        (["systemctl", "--user", "daemon-reload"], False),
    ]
    assert not unit_file.exists()


def test_without_a_service_manager_nothing_is_done_but_everything_is_said(
    env: dict[str, str],
) -> None:
    plan = plan_service_install(
        manager="none", env=env, platform="linux", python="/usr/bin/python3"
    )
    assert (plan.files, plan.commands) == ({}, ())
    (note,) = plan.notes
    unit_dir = Path(env["XDG_CONFIG_HOME"]) / "systemd" / "user"
    assert str(unit_dir / "ctxd.service") in note and str(unit_dir / "ctxd.socket") in note
    assert "systemctl --user enable --now ctxd.socket" in note
    run = FakeRun()
    assert apply_service_plan(plan, run=run) == [note]
    assert run.calls == [] and not unit_dir.exists()
    assert "so nothing was installed" in note


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_uninstall_without_a_service_manager_says_nothing_was_removed(
    env: dict[str, str], platform: str
) -> None:
    """It said "nothing was installed", as if it were the install."""
    plan = plan_service_uninstall(manager="none", env=env, platform=platform, uid=501)
    assert (plan.files, plan.commands, plan.remove) == ({}, (), ())
    (note,) = plan.notes
    assert "so nothing was removed" in note and "installed" not in note, note
    assert "remove " in note


def test_status_reports_installed_out_of_date_and_state(env: dict[str, str]) -> None:
    python = "/usr/bin/python3"
    answers = {
        "systemctl --user is-enabled ctxd.socket": (0, "enabled\n", ""),
        "systemctl --user is-active ctxd.socket ctxd.service": (3, "active\ninactive\n", ""),
    }
    before = service_status(manager="systemd", env=env, python=python, run=FakeRun(answers))
    assert any(line.startswith("ctxd.service: not installed") for line in before)

    apply_service_plan(
        plan_service_install(manager="systemd", env=env, python=python), run=FakeRun()
    )
    now = service_status(manager="systemd", env=env, python=python, run=FakeRun(answers))
    assert any(line.startswith("ctxd.service: installed at") for line in now)
    assert "ctxd.socket: enabled at login" in now
    assert "ctxd.socket: active; ctxd.service: inactive" in now

    moved = service_status(manager="systemd", env=env, python="/new/python", run=FakeRun(answers))
    assert any("ctxd.service" in line and "out of date" in line for line in moved)


def test_detect_manager(tmp_path: Path) -> None:
    runtime = tmp_path / "run" / "user" / "1000"
    (runtime / "systemd").mkdir(parents=True)
    (tmp_path / "run" / "systemd" / "system").mkdir(parents=True)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    assert detect_manager(env, "linux", tmp_path) == "systemd"
    assert detect_manager({}, "linux", tmp_path) == "none"
    assert detect_manager(env, "linux", tmp_path / "no-systemd-here") == "none"
    assert detect_manager(env, "darwin", tmp_path) == "launchd"
    assert detect_manager(env, "win32", tmp_path) == "none"


# --- socket activation, for real ----------------------------------------------------------


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    # AF_UNIX paths are limited to ~108 bytes; pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="ctxd-", dir="/tmp") as name:
        yield Path(name)


@pytest.mark.slow
def test_socket_activation_serves_status(short_tmp: Path) -> None:
    """systemd's way of starting ctxd: the socket is bound by someone else and passed as fd 3
    (LISTEN_FDS/LISTEN_PID); `ctxd status --json` through it must work."""
    activate = shutil.which("systemd-socket-activate")
    if activate is None:
        pytest.skip("systemd-socket-activate is not installed (Debian/Ubuntu package: systemd)")
    run = short_tmp / "run"
    run.mkdir(mode=0o700)
    sock = run / "activated.sock"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(short_tmp / "home"),
        "XDG_RUNTIME_DIR": str(run),
        "XDG_STATE_HOME": str(short_tmp / "state"),
        "XDG_CONFIG_HOME": str(short_tmp / "config"),
        "CLAUDE_CONFIG_DIR": str(short_tmp / "claude"),
        "CODEX_HOME": str(short_tmp / "codex"),
        "CTXD_SOCKET": str(sock),
        "CTXD_NO_SPAWN": "1",
    }
    for key in ("HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        Path(env[key]).mkdir(mode=0o700)
    daemon = subprocess.Popen(
        [activate, "-l", str(sock), sys.executable, "-m", "ctxd", "serve"],
        env=env,
        cwd=short_tmp,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
            assert time.monotonic() < deadline, "systemd-socket-activate did not bind"
            time.sleep(0.05)
        done = subprocess.run(
            [sys.executable, "-m", "ctxd", "status", "--json"],
            env=env,
            cwd=short_tmp,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        status = json.loads(done.stdout)
        assert status["sessions"] == []
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        try:
            daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait(timeout=10)
        if daemon.stderr:
            daemon.stderr.close()


# --- launchd -------------------------------------------------------------------------------


def test_plist_is_valid_with_literal_paths(env: dict[str, str]) -> None:
    python = "/Users/a b/venvs/<ctxd> & co/bin/python"
    plan = plan_service_install(manager="launchd", env=env, python=python, uid=501)
    home = Path(env["HOME"])
    plist_path = home / "Library" / "LaunchAgents" / "dev.ctxd.daemon.plist"
    (text,) = plan.files.values()
    assert list(plan.files) == [plist_path]
    plist = plistlib.loads(text.encode())
    assert plist["Label"] == "dev.ctxd.daemon"
    assert plist["ProgramArguments"] == [python, "-m", "ctxd", "serve"]
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    log = str(home / "Library" / "Logs" / "ctxd.log")
    assert plist["StandardOutPath"] == log and plist["StandardErrorPath"] == log
    assert "@" not in text.replace("dev.ctxd", "")
    assert plan.commands[-1] == ("launchctl", "bootstrap", "gui/501", str(plist_path))


def test_launchd_reinstall_tolerates_a_job_that_was_not_loaded(env: dict[str, str]) -> None:
    plan = plan_service_install(manager="launchd", env=env, python="/usr/bin/python3", uid=501)
    run = FakeRun({"launchctl bootout gui/501/dev.ctxd.daemon": (3, "", "No such process")})
    apply_service_plan(plan, run=run)
    assert run.calls[-1][:2] == ["launchctl", "bootstrap"]

    status = service_status(
        manager="launchd",
        env=env,
        python="/usr/bin/python3",
        uid=501,
        run=FakeRun(
            {
                "launchctl print gui/501/dev.ctxd.daemon": (
                    0,
                    "gui/501/dev.ctxd.daemon = {\n\tstate = running\n\tpid = 4242\n}\n",
                    "",
                )
            }
        ),
    )
    assert status[-1] == "dev.ctxd.daemon: loaded, enabled at login; running, pid 4242"
    assert "installed at" in status[0]

    apply_service_plan(plan_service_uninstall(manager="launchd", env=env, uid=501), run=FakeRun())
    assert not any(p.exists() for p in plan.files)


def test_templates_in_the_repository_carry_only_known_placeholders() -> None:
    service = (REPO / "systemd" / "ctxd.service").read_text()
    assert service.count("@PYTHON@") == 1
    assert "@" not in (REPO / "systemd" / "ctxd.socket").read_text()
    plist = (REPO / "launchd" / "dev.ctxd.daemon.plist").read_text()
    assert plist.count("@PYTHON@") == 1 and plist.count("@LOG@") == 2


def test_plan_describe_lists_every_step(env: dict[str, str]) -> None:
    plan: ServicePlan = plan_service_uninstall(manager="systemd", env=env)
    lines = plan.describe()
    assert lines[0] == "run systemctl --user disable --now ctxd.socket ctxd.service"
    assert any(line.startswith("remove ") and line.endswith("ctxd.socket") for line in lines)
    assert "run systemctl --user daemon-reload" in lines
