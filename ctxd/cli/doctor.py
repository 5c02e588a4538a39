"""`ctxd doctor`: one check per line, each with what to do when it fails."""

from __future__ import annotations

import os
import shlex
import stat
import statistics
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import orjson

from ctxd import __version__, agents, paths
from ctxd.agents.spec import Check
from ctxd.daemon.config import load_settings
from ctxd.errors import CtxdError

__all__ = ["Check", "run_checks"]

HOOK_RUNS = 5


def _daemon(env: Mapping[str, str]) -> Check:
    from ctxd.cli.client import request_json

    try:
        info = request_json("ping", env=env)
    except CtxdError as exc:
        return Check(
            "daemon",
            False,
            str(exc),
            "start it: `ctxd serve`, or `ctxd service install` to run it as a service",
        )
    same = info.get("version") == __version__
    return Check(
        "daemon",
        same,
        f"ctxd {info.get('version')} (pid {info.get('pid')}) answers on {info.get('socket')}",
        None if same else f"restart it to run this ctxd ({__version__}): `ctxd stop`",
    )


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
        None if enabled else "`ctxd service install` (optional: hooks start ctxd)",
        skipped=service.detect_manager() == "none",
    )


def _hooks(env: Mapping[str, str]) -> Iterator[Check]:
    from ctxd.agents.hookcmd import is_ctxd_command

    for agent in agents.AGENTS:
        spec = agents.spec(agent)
        path = spec.installer.settings_path(env)
        try:
            doc = orjson.loads(path.read_bytes())
        except FileNotFoundError:
            yield Check(
                f"{agent} hooks",
                False,
                f"{path} does not exist",
                f"`ctxd install {agent}` if you use {spec.title}",
                skipped=True,
            )
            continue
        except (OSError, orjson.JSONDecodeError) as exc:
            yield Check(f"{agent} hooks", False, f"{path}: {exc}", "fix the file by hand")
            continue
        events = sorted(
            event
            for event, entries in (doc.get("hooks") or {}).items()
            if any(is_ctxd_command(h.get("command")) for e in entries for h in e.get("hooks", []))
        )
        yield Check(
            f"{agent} hooks",
            bool(events),
            f"{path}: {', '.join(events) or 'no ctxd hooks'}",
            None if events else f"`ctxd install {agent}`",
        )
        yield from spec.installer.checks(doc)


def _round_trip(env: Mapping[str, str]) -> Check:
    from ctxd.agents.hookcmd import hook_command

    command = hook_command(agents.AGENTS[0])
    probe_env = dict(env, CTXD_NO_SPAWN="1")
    timings = []
    for _ in range(HOOK_RUNS):
        start = time.perf_counter()
        subprocess.run(
            shlex.split(command),
            input=b"{}",
            env=probe_env,
            capture_output=True,
            timeout=10,
            check=False,
        )
        timings.append((time.perf_counter() - start) * 1000)
    median = statistics.median(timings)
    return Check(
        "hook round trip",
        median < 50,
        f"{median:.1f} ms median of {HOOK_RUNS} runs of `{command}`",
        None if median < 50 else "check that the hook names the real interpreter",
    )


def _config(env: Mapping[str, str]) -> Check:
    path = paths.config_path(env)
    try:
        load_settings(path)
    except CtxdError as exc:
        return Check("config", False, str(exc), f"fix {path}; the daemon keeps the last good one")
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
    )


def run_checks(env: Mapping[str, str] = os.environ) -> list[Check]:
    checks: list[Check] = [_daemon(env), *_runtime(env), _service(), *_hooks(env)]
    checks += [_round_trip(env), _config(env), _roots(env)]
    return checks
