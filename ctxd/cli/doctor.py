"""`ctxd doctor`: one check per line, each with what to do when it fails.

A check is ok, FAIL, or skip (not applicable: an agent you don't use, no service manager, a
daemon that the first hook will start). Doctor exits non-zero only on a FAIL. The hook commands
it judges are the ones really installed in each agent's settings, run as the agent runs them.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import statistics
import subprocess
import time
from collections.abc import Iterator, Mapping
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

from ctxd import __version__, agents, paths
from ctxd.agents.hookcmd import (
    CLIENT_SCRIPT,
    CTXD_COMMAND_FILE,
    client_dir,
    client_path,
    hook_command,
    is_ctxd_command,
    unwrap_command,
)
from ctxd.agents.nativeclient import client_choice
from ctxd.agents.settings_file import parse, read_text
from ctxd.agents.spec import Check, PlacedFile, PluginRun
from ctxd.cli.web import http_hook_checks, http_listener_checks
from ctxd.daemon.config import load_settings
from ctxd.errors import CtxdError

__all__ = ["SLOW_MS", "Check", "installed_commands", "run_checks"]

#: Runs of each installed command; the verdict on speed is their median.
HOOK_RUNS = 3
#: Slower than this (median) is a FAIL: ctxd's own command takes ~12 ms, the `ctxd-hook`
#: console script ~20 ms (measured as pyproject.toml's [project.scripts] says); beyond this a
#: shim or a wrapper is in the way.
SLOW_MS = 100.0
#: The agents stop waiting long before this; so does doctor.
HOOK_TIMEOUT = 10.0


def _daemon(env: Mapping[str, str]) -> tuple[Check, bool]:
    """The daemon check, and whether a daemon answered."""
    from ctxd.cli.client import request_json
    from ctxd.errors import DaemonUnavailable

    try:
        info = request_json("ping", env=env)
    except DaemonUnavailable:
        check = Check(
            "daemon",
            False,
            f"not running (nothing answers on {paths.socket_path(env)}); the first hook starts it",
            "start it now with `ctxd serve`, or `ctxd service install` to run it as a service",
            skipped=True,
        )
        return check, False
    except CtxdError as exc:
        return Check("daemon", False, str(exc), "`ctxd stop`, then `ctxd serve`"), False
    same = info.get("version") == __version__
    check = Check(
        "daemon",
        same,
        f"ctxd {info.get('version')} (pid {info.get('pid')}) answers on {info.get('socket')}",
        None if same else f"restart it to run this ctxd ({__version__}): `ctxd stop`",
    )
    return check, True


def _runtime(env: Mapping[str, str]) -> Iterator[Check]:
    run_dir = paths.runtime_dir(env)
    try:
        info = run_dir.lstat()
    except FileNotFoundError:
        yield Check("runtime dir", False, f"{run_dir} does not exist", "start the daemon")
        return
    private = stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
    yield Check(
        "runtime dir",
        private,
        f"{run_dir} mode {stat.S_IMODE(info.st_mode):o}, owner uid {info.st_uid}",
        None if private else f"chmod 700 {shlex.quote(str(run_dir))} (and own it)",
    )
    sock = paths.socket_path(env)
    try:
        sinfo = sock.lstat()
    except FileNotFoundError:
        yield Check("socket", False, f"{sock} does not exist", "start the daemon")
        return
    ok = stat.S_ISSOCK(sinfo.st_mode) and not sinfo.st_mode & 0o077
    yield Check(
        "socket",
        ok,
        f"{sock} mode {stat.S_IMODE(sinfo.st_mode):o}",
        None if ok else "stop the daemon, remove the file, start it again",
    )


def _service() -> Check:
    from ctxd.cli import service

    try:
        lines = service.service_status()
    except Exception as exc:  # a broken service manager must not break the other checks
        return Check("service", False, f"cannot ask the service manager: {exc}")
    text = "; ".join(lines)
    enabled = any("enabled" in line and "not enabled" not in line for line in lines)
    return Check(
        "service",
        enabled,
        text or "no service manager",
        None if enabled else "`ctxd service install` (optional: the first hook starts ctxd)",
        skipped=not enabled,
    )


def installed_commands(doc: Mapping[str, Any], statusline: bool) -> dict[str, list[str]]:
    """ctxd's commands in a parsed settings document: command -> the events that run it
    ("statusline" for the statusLine command, when the agent has one)."""
    found: dict[str, list[str]] = {}
    hooks = doc.get("hooks")
    # A TOML config's `[[hooks]]`: a flat list of handlers, each naming its event.
    for handler in hooks if isinstance(hooks, list) else []:
        command, event = _command_of(handler), handler.get("event")
        if isinstance(command, str) and is_ctxd_command(command) and isinstance(event, str):
            found.setdefault(command, []).append(event)
    for event, groups in (hooks if isinstance(hooks, dict) else {}).items():
        for group in groups if isinstance(groups, list) else []:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(group, dict) and "bash" in group:
                handlers = [group]  # a flat list of handlers, the command under "bash"
            for handler in handlers if isinstance(handlers, list) else []:
                command = _command_of(handler)
                if isinstance(command, str) and is_ctxd_command(command):
                    found.setdefault(command, []).append(event)
    line = doc.get("statusLine")
    command = line.get("command") if statusline and isinstance(line, dict) else None
    if isinstance(command, str) and is_ctxd_command(command):
        found.setdefault(command, []).append("statusline")
    return found


def _command_of(handler: object) -> object:
    if not isinstance(handler, dict):
        return None
    return handler.get("command", handler.get("bash"))


def _probe_payload(agent: str, statusline: bool) -> bytes | None:
    name = f"{agent}.statusline.json" if statusline else f"{agent}.json"
    try:
        return (resources.files("ctxd.cli") / "probes" / name).read_bytes()
    except OSError:
        return None


def _hooks(env: Mapping[str, str]) -> Iterator[Check]:
    """Per agent: its settings, ctxd's hooks in them, and a real run of each installed command."""
    for agent in agents.AGENTS:
        spec = agents.spec(agent)
        placed = spec.installer.files(env, partial(hook_command, agent, env=env))
        if placed:
            yield from _placed_checks(agent, placed, env)
            continue
        path = spec.installer.settings_path(env)
        name = f"{agent} hooks"
        try:
            text = read_text(path)
            document = spec.installer.document
            doc = document.parse(text, path) if document is not None else parse(text, path)
        except CtxdError as exc:
            yield Check(name, False, str(exc), "fix the file by hand")
            continue
        if spec.installer.plugin:
            yield from spec.installer.checks(doc)
            run = spec.installer.plugin_run and spec.installer.plugin_run(doc, env)
            if run:
                yield _run_plugin(agent, run, env)
            continue
        commands = installed_commands(doc, spec.statusline is not None)
        events = sorted({e for found in commands.values() for e in found} - {"statusline"})
        packaged = spec.installer.packaged(doc, path)
        if packaged is not None and not events:
            # Its hooks run the per-user client when `ctxd install` made one, else the console
            # script: named apart from "hooks".
            yield Check(
                f"{agent} {packaged.kind}",
                True,
                f"ctxd's {packaged.kind} {packaged.where} runs `{CLIENT_SCRIPT} {agent}` (the "
                f"per-user client in {client_dir(env)} instead, when `ctxd install` made one)",
            )
            yield from spec.installer.checks(doc)
            fix = (
                f"`{CLIENT_SCRIPT}` must be on {spec.title}'s PATH (install ctxd "
                f"where it runs), or disable the {packaged.kind} and run `ctxd install {agent}`"
            )
            yield _run_installed(agent, packaged.command, False, env, fix)
            continue
        if not events:
            state = "does not exist" if not path.exists() else "has no ctxd hooks"
            yield Check(
                name,
                False,
                f"{path} {state}",
                f"`ctxd install {agent}` if you use {spec.title}",
                skipped=True,
            )
            continue
        if packaged is None:
            yield Check(name, True, f"{path}: {', '.join(events)}")
        else:
            yield Check(
                name,
                False,
                f"{path} has ctxd's hooks and ctxd's {packaged.kind} {packaged.where} is "
                "enabled too: every hook runs twice, and the warnings come twice as often",
                f"keep one: `ctxd uninstall {agent}`, or disable the {packaged.kind}",
            )
        yield from spec.installer.checks(doc)
        yield from spec.installer.placed_checks(doc, path)
        # Several hook commands (Copilot CLI's name their event; a user's edit or an old install
        # can leave one event's apart): each check names the events that run its command.
        several = sum("statusline" not in found for found in commands.values()) > 1
        for command, found in commands.items():
            label = ", ".join(found) if several and "statusline" not in found else None
            yield _run_installed(agent, command, "statusline" in found, env, events=label)


def _placed_checks(
    agent: str, placed: tuple[PlacedFile, ...], env: Mapping[str, str]
) -> Iterator[Check]:
    """The files `ctxd install` places for an agent: each there, still ctxd's, executable and
    naming an interpreter that exists; then one of them run as the agent runs it."""
    from ctxd.cli.placed import NotCtxds, hook_interpreter, read_placed

    title = _title(agent)
    fix = f"`ctxd install {agent}` writes them again"
    found: list[tuple[PlacedFile, str | None]] = []
    for file in placed:
        try:
            found.append((file, read_placed(file.path, file.earlier)))
        except NotCtxds as exc:
            found.append((file, None))
            yield Check(
                f"{agent} hook file",
                False,
                f"{exc}: {title} runs it instead of ctxd's",
                f"move it aside, then {fix}",
            )
            return
    if all(text is None for _, text in found):
        where = placed[0].path.parent
        yield Check(
            f"{agent} hooks",
            False,
            f"no hook files of ctxd's in {where}",
            f"`ctxd install {agent}` if you use {title}",
            skipped=True,
        )
        return
    for file, text in found:
        name = f"{agent} hook file"
        if text is None:
            yield Check(name, False, f"{file.path} is missing", fix)
            continue
        python = hook_interpreter(text)
        if not os.access(file.path, os.X_OK):
            yield Check(name, False, f"{file.path} is not executable", fix)
        elif python is None:
            yield Check(name, False, f"{file.path} runs no ctxd hook command", fix)
        elif not os.access(python, os.X_OK):
            yield Check(name, False, f"{file.path} runs {python}, which is gone", fix)
        else:
            yield Check(name, True, f"{file.path}: ctxd's, executable, runs {python}")
    first = next(file for file, text in found if text is not None)
    yield _run_installed(agent, shlex.quote(str(first.path)), False, env, fix)


def _run_installed(
    agent: str,
    command: str,
    statusline: bool,
    env: Mapping[str, str],
    fix: str | None = None,
    events: str | None = None,
) -> Check:
    """Run one installed command as the agent does (through a shell, payload on stdin), against
    a probe socket; FAIL when it exits non-zero, prints anything but ctxd's answer, or is slow.
    `events`, when given, is named in the check's name: the events that run this command."""
    from ctxd.cli.probe import open_probe

    name = f"{agent} {'statusline' if statusline else 'hook'} command"
    if events:
        name += f" ({events})"
    payload = _probe_payload(agent, statusline)
    if payload is None:
        return Check(name, False, "no sample payload to run it with", skipped=True)
    fix = fix or f"`ctxd install {agent}` writes a working command"
    foreign = unwrap_command(command)
    if foreign is not None:
        return _run_wrapped(name, command, foreign, payload, env, fix)
    timings: list[float] = []
    with open_probe() as probe:
        run_env = dict(env, CTXD_SOCKET=str(probe.path), CTXD_NO_SPAWN="1")
        for run in range(HOOK_RUNS):
            start = time.perf_counter()
            try:
                done = _run_command(command, payload, run_env)
            except subprocess.TimeoutExpired:
                return Check(name, False, f"`{command}` ran over {HOOK_TIMEOUT:g} s", fix)
            timings.append((time.perf_counter() - start) * 1000)
            if done.returncode != 0:
                said = done.stderr.decode(errors="replace").strip().splitlines()
                last = f": {said[-1]}" if said else ""
                return Check(name, False, f"`{command}` exits {done.returncode}{last}", fix)
            if len(probe.exchanges) <= run:
                return Check(
                    name,
                    False,
                    f"`{command}` never reached ctxd (it printed {done.stdout[:80]!r})",
                    fix,
                )
            exchange = probe.exchanges[run]
            if exchange.error is not None:
                return Check(
                    name,
                    False,
                    f"ctxd refused the {_title(agent)} sample payload: {exchange.error}",
                    "reinstall ctxd",
                )
            if done.stdout != exchange.answer:
                return Check(
                    name,
                    False,
                    f"`{command}` printed {done.stdout[:120]!r} instead of ctxd's answer "
                    f"{exchange.answer[:120]!r}",
                    fix,
                )
    median = statistics.median(timings)
    if median > SLOW_MS:
        return Check(
            name,
            False,
            f"slow: {median:.0f} ms median of {HOOK_RUNS} runs of `{command}` (over "
            f"{SLOW_MS:.0f} ms)",
            f"{fix}: it names the base interpreter, no shim or wrapper",
        )
    return Check(
        name,
        True,
        f"exit 0, ctxd's answer verbatim, {median:.1f} ms median of {HOOK_RUNS} runs "
        f"(sample {_title(agent)} payload)",
    )


def _run_plugin(agent: str, run: PluginRun, env: Mapping[str, str]) -> Check:
    """Load the installed plugin in the agent's runtime and call its tool-call hook once
    against a probe socket; FAIL unless the tool output it leaves carries the probe's answer."""
    from ctxd.cli.probe import PROBE_TEXT, open_probe

    name = f"{agent} plugin run"
    if not run.argv:
        return Check(name, False, run.detail, skipped=True)
    fix = f"`ctxd install {agent}` copies a working plugin"
    with open_probe() as probe:
        run_env = dict(env, **run.env, CTXD_SOCKET=str(probe.path), CTXD_NO_SPAWN="1")
        try:
            done = subprocess.run(
                run.argv, env=run_env, capture_output=True, timeout=HOOK_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired:
            return Check(name, False, f"{run.detail}: ran over {HOOK_TIMEOUT:g} s", fix)
        except OSError as exc:
            return Check(name, False, f"{run.detail}: {exc.strerror or exc}", fix)
        exchanges = list(probe.exchanges)
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        # JavaScript runtimes end with their version or a stack: the error names itself
        said = [line for line in said if "error" in line.lower()] or said
        last = f": {said[-1].strip()}" if said else ""
        return Check(name, False, f"{run.detail}: exits {done.returncode}{last}", fix)
    if not exchanges:
        return Check(name, False, f"{run.detail}: its hook never reached ctxd", fix)
    if exchanges[0].error is not None:
        refused = f"ctxd refused what the plugin sent: {exchanges[0].error}"
        return Check(name, False, f"{run.detail}: {refused}", "reinstall ctxd")
    try:
        result = json.loads(done.stdout)
        output, ms = str(result["output"]), float(result["ms"])
    except (ValueError, TypeError, KeyError):
        return Check(name, False, f"{run.detail}: printed {done.stdout[:120]!r}", fix)
    if PROBE_TEXT not in output:
        return Check(name, False, f"{run.detail}: the tool output lacks ctxd's answer", fix)
    return Check(name, True, f"{run.detail}: the answer reached the tool output, {ms:.1f} ms")


def _run_wrapped(
    name: str, command: str, foreign: str, payload: bytes, env: Mapping[str, str], fix: str
) -> Check:
    """A statusline that is the user's own command run by ctxd's client: what it prints and its
    exit code are the user's; the check is that the payload reaches ctxd."""
    from ctxd.cli.probe import open_probe

    with open_probe() as probe:
        run_env = dict(env, CTXD_SOCKET=str(probe.path), CTXD_NO_SPAWN="1")
        try:
            _run_command(command, payload, run_env)
        except subprocess.TimeoutExpired:
            return Check(name, False, f"your statusline `{foreign}` ran over {HOOK_TIMEOUT:g} s")
        if not probe.exchanges:
            return Check(name, False, f"`{command}` never reached ctxd", fix)
    return Check(name, True, f"your own `{foreign}`, run by ctxd's client, which reaches ctxd")


def _run_command(
    command: str, payload: bytes, env: Mapping[str, str]
) -> subprocess.CompletedProcess[bytes]:
    """The installed command run as the agent runs it (a shell, the payload on stdin), bounded
    by HOOK_TIMEOUT (subprocess.TimeoutExpired past it)."""
    return subprocess.run(
        command,
        shell=True,
        input=payload,
        env=env,
        capture_output=True,
        timeout=HOOK_TIMEOUT,
        check=False,
    )


def _title(agent: str) -> str:
    return agents.spec(agent).title


def _client(env: Mapping[str, str], hooks_installed: bool) -> Iterator[Check]:
    """The copy of the hook client, and the command in it that starts ctxd."""
    directory = client_dir(env)
    copy = directory / client_path().name
    if not copy.exists():
        yield Check(
            "hook client",
            False,
            f"{directory} has no client",
            "`ctxd install AGENT` copies it",
            skipped=not hooks_installed,
        )
        return
    current = copy.read_bytes() == client_path().read_bytes()
    # Which client `ctxd install` writes into command hooks, and why (the native one is several
    # times cheaper per hook; without a C compiler it is the Python client).
    choice = client_choice(directory, env).describe()
    yield Check(
        "hook client",
        current,
        f"{choice}; {directory} ({'this' if current else 'another'} ctxd's copy)",
        None if current else f"make {directory} writable; any ctxd command refreshes it",
    )
    try:
        words = (directory / CTXD_COMMAND_FILE).read_text().split("\n")
    except OSError as exc:
        yield Check("hook spawn", False, f"cannot read {CTXD_COMMAND_FILE}: {exc}", "run `ctxd`")
        return
    command = [w for w in words if w]
    try:
        done = subprocess.run(
            [*command, "--version"], capture_output=True, timeout=30, check=False, env=dict(env)
        )
        said = done.stdout.decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = str(exc)
    ok = said == f"ctxd {__version__}"
    yield Check(
        "hook spawn",
        ok,
        f"a hook that finds no daemon starts `{shlex.join(command)} serve` ({said or 'no answer'})",
        None if ok else "run any `ctxd` command from the ctxd you use: it rewrites the file",
    )


def _config(env: Mapping[str, str]) -> Check:
    path = paths.config_path(env)
    try:
        load_settings(path)
    except CtxdError as exc:
        return Check(
            "config",
            False,
            str(exc),
            f"fix {path}; until then a running daemon keeps the settings it had (the defaults if "
            "it never read this file whole)",
        )
    where = str(path) if path.exists() else f"{path} (absent: defaults)"
    return Check("config", True, where)


def _roots(env: Mapping[str, str]) -> Check:
    roots: dict[str, Path] = agents.transcript_roots(env)
    found = [f"{agent} {root}" for agent, root in roots.items() if root.is_dir()]
    return Check(
        "watched roots",
        bool(found),
        ", ".join(found) or "no agent transcripts yet",
        None if found else "run an agent once; ctxd watches its folder when it appears",
        skipped=not found,
    )


def _watches(env: Mapping[str, str], running: bool) -> Check:
    """Whether every folder under the agents' roots can be watched (the inotify cap): as the
    daemon measured it when one answers, else the folders there against the cap."""
    from ctxd.daemon import watches

    if running:
        from ctxd.cli.client import request_json

        try:
            watching = request_json("ping", env=env).get("watching")
        except CtxdError:
            watching = None
        if isinstance(watching, dict) and watching.get("measured"):
            unwatched = watching.get("unwatched") or 0
            detail = (
                f"the daemon watches {watching.get('watched', 0):,} of "
                f"{watching.get('folders', 0):,} folders under the agents' roots "
                f"({watching.get('limit_text')})"
            )
            if watching.get("error"):
                detail = (
                    f"the daemon cannot watch the agents' roots ({watching['error']}): all "
                    f"{unwatched:,} folders are polled every {watching.get('poll_interval_s')} s"
                )
            elif unwatched:
                detail += (
                    f": inotify limit reached, the other {unwatched:,} are polled every "
                    f"{watching.get('poll_interval_s')} s"
                )
            fix = None if not unwatched else str(watching.get("fix"))
            return Check("inotify watches", not unwatched, detail, fix)
    roots = [root for root in agents.transcript_roots(env).values() if root.is_dir()]
    limit = watches.watch_limit()
    if not roots or limit is None:
        return Check("inotify watches", True, "nothing to watch or no limit known", skipped=True)
    folders = len(watches.find_folders(roots))
    ok = folders < limit.value
    return Check(
        "inotify watches",
        ok,
        f"{folders:,} folders under the agents' roots, {limit.describe()} (shared with every "
        "program that watches files)",
        None if ok else watches.raise_command(limit, folders),
    )


def _stores(env: Mapping[str, str], running: bool) -> Iterator[Check]:
    """Whether each agent's session database can be read as that agent's: as the daemon found
    it when one answers, else as this process finds it."""
    reported: dict[str, str] = {}
    if running:
        from ctxd.cli.client import request_json

        try:
            problems = request_json("ping", env=env).get("store_problems")
        except CtxdError:
            problems = None
        for p in problems if isinstance(problems, list) else []:
            if isinstance(p, dict) and isinstance(p.get("agent"), str):
                reported[p["agent"]] = str(p.get("problem"))
    for agent, path in agents.store_paths(env).items():
        store = agents.spec(agent).store
        name = f"{_title(agent)} database"
        problem = reported.get(agent)
        if not running and store is not None and store.problem is not None:
            problem = store.problem(str(path))
        if problem is not None:
            fix = "move it aside, or update ctxd if the agent was updated"
            yield Check(name, False, f"cannot read {path}: {problem}", fix)
        elif not os.path.lexists(path):
            yield Check(name, True, f"none at {path} yet", skipped=True)
        else:
            yield Check(name, True, f"{path} is read")


def _refused(env: Mapping[str, str], running: bool) -> Check:
    """The agents' files the running daemon did not read (a settings file that is a FIFO, a
    transcript that links to a device, one too big): their settings are not in its figures."""
    from ctxd.cli.client import request_json

    refused = None
    if running:
        try:
            refused = request_json("ping", env=env).get("refused_files")
        except CtxdError:
            refused = None
    if not isinstance(refused, list):
        return Check("agents' files", True, "no daemon to ask", skipped=True)
    if not refused:
        return Check("agents' files", True, "the daemon read every agent file it looked at")
    named = "; ".join(
        f"{r.get('what')} {r.get('path')}: {r.get('reason')}"
        for r in refused
        if isinstance(r, dict)
    )
    return Check(
        "agents' files",
        False,
        f"not read: {named}",
        "make each a regular file (or remove it); the daemon reads it again once it changes",
    )


def run_checks(env: Mapping[str, str] = os.environ) -> list[Check]:
    daemon, running = _daemon(env)
    checks: list[Check] = [daemon]
    if running:
        checks += _runtime(env)
    checks.append(_service())
    hooks = list(_hooks(env))
    installed = any(c.name.endswith(" hooks") and c.ok for c in hooks)
    checks += [*hooks, *_client(env, installed), _config(env), _roots(env)]
    checks.append(_watches(env, running))
    checks += http_listener_checks(env)
    checks += _stores(env, running)
    checks.append(_refused(env, running))
    checks += http_hook_checks(env)
    return checks
