"""`ctxd service install|uninstall|status`: run the daemon under systemd (Linux) or launchd (macOS).

Planning is separate from doing: a `ServicePlan` holds the unit files with this user's real paths
and the exact commands to run, so `--dry-run` can show them and a host without a service manager
can be told exactly what would happen. `apply_service_plan` and `service_status` are the only
functions here that touch the file system or run commands, through an injectable `run`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from xml.sax.saxutils import escape as xml_escape

from ctxd import paths
from ctxd.agents.hookcmd import interpreter
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic

Manager = Literal["systemd", "launchd", "none"]
Command = tuple[str, ...]
Runner = Callable[..., "subprocess.CompletedProcess[str]"]

SOCKET_UNIT = "ctxd.socket"
SERVICE_UNIT = "ctxd.service"
LAUNCHD_LABEL = "dev.ctxd.daemon"
PLIST_NAME = f"{LAUNCHD_LABEL}.plist"


@dataclass(frozen=True)
class ServicePlan:
    """What installing or removing the service does, in order.

    `files` are written first (path -> content, with this user's real paths), then `commands`
    run, then `remove` is deleted, then `after_commands` run. A failing command stops the plan
    unless it is listed in `may_fail` (e.g. unloading a job that was not loaded). With manager
    "none" nothing is done: `notes` say exactly what would be done on a host with one.
    """

    manager: Manager
    files: dict[Path, str]
    commands: tuple[Command, ...]
    notes: tuple[str, ...] = ()
    remove: tuple[Path, ...] = ()
    after_commands: tuple[Command, ...] = ()
    may_fail: frozenset[Command] = field(default_factory=frozenset)

    def describe(self) -> list[str]:
        """The plan as lines for `--dry-run`: its steps in order, then its notes."""
        return self.steps() + list(self.notes)

    def steps(self) -> list[str]:
        """One line per step: "write PATH", "run COMMAND", "remove PATH", in order."""
        lines = [f"write {path}" for path in self.files]
        lines += [f"run {shlex.join(cmd)}" for cmd in self.commands]
        lines += [f"remove {path}" for path in self.remove]
        lines += [f"run {shlex.join(cmd)}" for cmd in self.after_commands]
        return lines


def detect_manager(
    env: Mapping[str, str] = os.environ,
    platform: str = sys.platform,
    root: Path = Path("/"),
) -> Manager:
    """Which service manager can run ctxd for this user here.

    "launchd" on macOS; "systemd" when the host booted with systemd and this user's manager runs
    (it keeps `$XDG_RUNTIME_DIR/systemd`); "none" otherwise (containers, WSL without systemd, ...).
    """
    if platform == "darwin":
        return "launchd"
    if not platform.startswith("linux"):
        return "none"
    runtime = env.get("XDG_RUNTIME_DIR")
    booted = (root / "run" / "systemd" / "system").is_dir()
    if booted and runtime and (Path(runtime) / "systemd").is_dir():
        return "systemd"
    return "none"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def systemd_unit_dir(env: Mapping[str, str] = os.environ) -> Path:
    """`$XDG_CONFIG_HOME/systemd/user` (default `~/.config/systemd/user`)."""
    config = env.get("XDG_CONFIG_HOME") or str(_home(env) / ".config")
    return Path(config) / "systemd" / "user"


def launchd_plist_path(env: Mapping[str, str] = os.environ) -> Path:
    """`~/Library/LaunchAgents/dev.ctxd.daemon.plist`."""
    return _home(env) / "Library" / "LaunchAgents" / PLIST_NAME


def launchd_log_path(env: Mapping[str, str] = os.environ) -> Path:
    """`~/Library/Logs/ctxd.log`, where the LaunchAgent sends stdout and stderr."""
    return _home(env) / "Library" / "Logs" / "ctxd.log"


def template_dirs() -> tuple[Path, ...]:
    """Where the unit templates are looked up: packaged data first, then a source checkout."""
    package = Path(__file__).resolve().parent
    return (package.parent / "data", package.parent.parent)


def load_template(relative: str, dirs: tuple[Path, ...] | None = None) -> str:
    """The text of `systemd/ctxd.service` etc.; `CtxdError` when no copy is installed."""
    for directory in dirs if dirs is not None else template_dirs():
        path = directory / relative
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise CtxdError(f"the service template {relative} is not installed with ctxd")


_SYSTEMD_PLAIN = re.compile(r"[A-Za-z0-9/._+:,@=-]+")


def systemd_quote(word: str) -> str:
    """`word` as one argument of a systemd `ExecStart=` line.

    systemd expands `%` specifiers and `$` variables in command lines, so both are doubled;
    a word with spaces or other specials is double-quoted with C-style escapes.
    """
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _SYSTEMD_PLAIN.fullmatch(word):
        return escaped
    return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_systemd(
    python: str, dirs: tuple[Path, ...] | None = None, http_port: int | None = None
) -> dict[str, str]:
    """Unit name -> content, with `python` as the daemon's interpreter; with `http_port` the
    socket unit keeps that loopback port too ([http] on: an HTTP hook then starts ctxd rather
    than failing while it is down; the daemon takes it as its second descriptor)."""
    service = load_template(f"systemd/{SERVICE_UNIT}", dirs).replace(
        "@PYTHON@", systemd_quote(python)
    )
    socket_unit = load_template(f"systemd/{SOCKET_UNIT}", dirs)
    if http_port is not None:
        first = "ListenStream=%t/ctxd/ctxd.sock\n"
        socket_unit = socket_unit.replace(first, f"{first}ListenStream=127.0.0.1:{http_port}\n")
    return {SERVICE_UNIT: service, SOCKET_UNIT: socket_unit}


def _http_port(env: Mapping[str, str]) -> int | None:
    """The [http] port when the config turns the listener on, else None."""
    from ctxd.daemon.config import load_http_settings

    try:
        settings = load_http_settings(paths.config_path(env))
    except CtxdError:
        return None
    return settings.port if settings.enabled else None


def render_plist(python: str, log: Path, dirs: tuple[Path, ...] | None = None) -> str:
    """The LaunchAgent plist with literal paths (launchd expands no variables)."""
    text = load_template(f"launchd/{PLIST_NAME}", dirs)
    return text.replace("@PYTHON@", xml_escape(python)).replace("@LOG@", xml_escape(str(log)))


def _systemctl(*args: str) -> Command:
    return ("systemctl", "--user", *args)


def _stop_command(python: str) -> Command:
    # A daemon that a hook started holds the socket path; it must go for systemd's socket to
    # take over. `ctxd stop` fails harmlessly when none runs.
    return (python, "-m", "ctxd", "stop")


def _systemd_install(env: Mapping[str, str], python: str) -> ServicePlan:
    unit_dir = systemd_unit_dir(env)
    units = render_systemd(python, http_port=_http_port(env))
    stop = _stop_command(python)
    return ServicePlan(
        manager="systemd",
        files={unit_dir / name: text for name, text in units.items()},
        commands=(
            _systemctl("daemon-reload"),
            stop,
            _systemctl("enable", "--now", SOCKET_UNIT),
        ),
        notes=(
            f"systemd now owns {env.get('XDG_RUNTIME_DIR') or '$XDG_RUNTIME_DIR'}/ctxd/ctxd.sock "
            "and starts ctxd on the first hook; logs: journalctl --user -u ctxd",
        ),
        may_fail=frozenset({stop}),
    )


def _launchd_uid(uid: int | None) -> int:
    return os.getuid() if uid is None else uid


def _launchd_install(env: Mapping[str, str], python: str, uid: int) -> ServicePlan:
    plist = launchd_plist_path(env)
    log = launchd_log_path(env)
    bootout = ("launchctl", "bootout", f"gui/{uid}/{LAUNCHD_LABEL}")
    stop = _stop_command(python)
    return ServicePlan(
        manager="launchd",
        files={plist: render_plist(python, log)},
        commands=(bootout, stop, ("launchctl", "bootstrap", f"gui/{uid}", str(plist))),
        notes=(f"ctxd starts at login and restarts when it exits; logs: {log}",),
        may_fail=frozenset({bootout, stop}),
    )


def _none_plan(would: ServicePlan | None, platform: str, done: str = "installed") -> ServicePlan:
    if would is None:
        return ServicePlan(
            "none",
            {},
            (),
            (f"no supported service manager on {platform}: hooks start ctxd on demand",),
        )
    lines = "; ".join(would.steps())
    return ServicePlan(
        "none",
        {},
        (),
        (
            f"no {would.manager} user manager runs here, so nothing was {done}; hooks start "
            f"ctxd on demand. With one, this would: {lines}",
        ),
    )


def plan_service_install(
    *,
    manager: Manager | None = None,
    env: Mapping[str, str] = os.environ,
    platform: str = sys.platform,
    python: str | None = None,
    uid: int | None = None,
    root: Path = Path("/"),
) -> ServicePlan:
    """The plan that installs ctxd as this user's service (nothing is done here).

    `manager` overrides detection; `python` the daemon's interpreter (default: the one running
    ctxd, past any pyenv shim). Raises `CtxdError` when the unit templates are missing.
    """
    chosen = manager if manager is not None else detect_manager(env, platform, root)
    python = python if python is not None else interpreter()
    if chosen == "systemd":
        return _systemd_install(env, python)
    if chosen == "launchd":
        return _launchd_install(env, python, _launchd_uid(uid))
    if platform.startswith("linux"):
        return _none_plan(_systemd_install(env, python), platform)
    if platform == "darwin":
        return _none_plan(_launchd_install(env, python, _launchd_uid(uid)), platform)
    return _none_plan(None, platform)


def _systemd_uninstall(env: Mapping[str, str]) -> ServicePlan:
    unit_dir = systemd_unit_dir(env)
    paths = tuple(unit_dir / name for name in (SOCKET_UNIT, SERVICE_UNIT))
    disable = _systemctl("disable", "--now", SOCKET_UNIT, SERVICE_UNIT)
    return ServicePlan(
        manager="systemd",
        files={},
        commands=(disable,),
        remove=paths,
        after_commands=(_systemctl("daemon-reload"),),
        notes=("hooks start ctxd on demand again",),
        may_fail=frozenset({disable}),
    )


def _launchd_uninstall(env: Mapping[str, str], uid: int) -> ServicePlan:
    bootout = ("launchctl", "bootout", f"gui/{uid}/{LAUNCHD_LABEL}")
    return ServicePlan(
        manager="launchd",
        files={},
        commands=(bootout,),
        remove=(launchd_plist_path(env),),
        notes=("hooks start ctxd on demand again",),
        may_fail=frozenset({bootout}),
    )


def plan_service_uninstall(
    *,
    manager: Manager | None = None,
    env: Mapping[str, str] = os.environ,
    platform: str = sys.platform,
    uid: int | None = None,
    root: Path = Path("/"),
) -> ServicePlan:
    """The plan that stops ctxd's service and removes its files (nothing is done here)."""
    chosen = manager if manager is not None else detect_manager(env, platform, root)
    if chosen == "systemd":
        return _systemd_uninstall(env)
    if chosen == "launchd":
        return _launchd_uninstall(env, _launchd_uid(uid))
    if platform.startswith("linux"):
        return _none_plan(_systemd_uninstall(env), platform, "removed")
    if platform == "darwin":
        return _none_plan(_launchd_uninstall(env, _launchd_uid(uid)), platform, "removed")
    return _none_plan(None, platform)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text.encode(), 0o644)


def _run(run: Runner, command: Command, may_fail: frozenset[Command]) -> str:
    try:
        done = run(list(command), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise CtxdError(f"cannot run {shlex.join(command)}: {exc}") from exc
    if done.returncode != 0:
        if command in may_fail:
            return f"ran    {shlex.join(command)} (exit {done.returncode}, expected when idle)"
        detail = (done.stderr or done.stdout or "").strip()
        raise CtxdError(f"{shlex.join(command)} failed with exit {done.returncode}: {detail}")
    return f"ran    {shlex.join(command)}"


def apply_service_plan(plan: ServicePlan, run: Runner = subprocess.run) -> list[str]:
    """Carry out `plan`; returns the lines to print. Raises `CtxdError` on the first failure."""
    if plan.manager == "none":
        return list(plan.notes)
    lines: list[str] = []
    try:
        for path, text in plan.files.items():
            _write(path, text)
            lines.append(f"wrote  {path}")
        for command in plan.commands:
            lines.append(_run(run, command, plan.may_fail))
        for path in plan.remove:
            if path.exists():
                path.unlink()
                lines.append(f"removed {path}")
        for command in plan.after_commands:
            lines.append(_run(run, command, plan.may_fail))
    except OSError as exc:
        raise CtxdError(f"cannot install the service: {exc}") from exc
    return lines + list(plan.notes)


def _output(run: Runner, command: Command) -> tuple[int, str]:
    try:
        done = run(list(command), capture_output=True, text=True, check=False)
    except OSError as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout or "").strip()


def _file_state(path: Path, expected: str) -> str:
    if not path.exists():
        return f"not installed ({path})"
    try:
        current = path.read_text(encoding="utf-8")
    except OSError as exc:
        return f"unreadable ({path}: {exc})"
    if current != expected:
        return f"installed at {path}, out of date: run `ctxd service install` again"
    return f"installed at {path}"


def service_status(
    *,
    manager: Manager | None = None,
    env: Mapping[str, str] = os.environ,
    platform: str = sys.platform,
    python: str | None = None,
    uid: int | None = None,
    root: Path = Path("/"),
    run: Runner = subprocess.run,
) -> list[str]:
    """Lines describing the service: files installed (and current?), enabled, running."""
    chosen = manager if manager is not None else detect_manager(env, platform, root)
    python = python if python is not None else interpreter()
    if chosen == "systemd":
        unit_dir = systemd_unit_dir(env)
        lines = [
            f"{name}: {_file_state(unit_dir / name, text)}"
            for name, text in render_systemd(python, http_port=_http_port(env)).items()
        ]
        _, enabled = _output(run, _systemctl("is-enabled", SOCKET_UNIT))
        lines.append(f"{SOCKET_UNIT}: {enabled or 'unknown'} at login")
        _, active = _output(run, _systemctl("is-active", SOCKET_UNIT, SERVICE_UNIT))
        states = [*active.splitlines(), "unknown", "unknown"]
        lines.append(f"{SOCKET_UNIT}: {states[0]}; {SERVICE_UNIT}: {states[1]}")
        return lines
    if chosen == "launchd":
        plist = launchd_plist_path(env)
        lines = [f"{PLIST_NAME}: {_file_state(plist, render_plist(python, launchd_log_path(env)))}"]
        code, text = _output(
            run, ("launchctl", "print", f"gui/{_launchd_uid(uid)}/{LAUNCHD_LABEL}")
        )
        if code != 0:
            lines.append(f"{LAUNCHD_LABEL}: not loaded")
        else:
            info = _launchd_fields(text)
            state = info.get("state", "loaded")
            pid = f", pid {info['pid']}" if "pid" in info else ""
            # A loaded LaunchAgent with RunAtLoad comes back at every login.
            lines.append(f"{LAUNCHD_LABEL}: loaded, enabled at login; {state}{pid}")
        return lines
    return [
        "service manager: none here; hooks start ctxd on demand "
        "(or run `ctxd serve` in the foreground)"
    ]


def _launchd_fields(text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(" = ")
        if sep and key in ("state", "pid") and key not in fields:
            fields[key] = value.strip()
    return fields
