"""What `ctxd dashboard`, `ctxd metrics` and `ctxd install --transport http` need of the daemon's
optional HTTP listener (ctxd/daemon/http.py): its addresses, and the metrics text."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from ctxd import agents, paths
from ctxd.agents.hookcmd import is_ctxd_command
from ctxd.agents.hookmap import hook_urls
from ctxd.agents.settings_file import parse, read_text
from ctxd.agents.spec import Check
from ctxd.daemon import http, metrics, peer
from ctxd.daemon.config import HttpSettings, load_http_settings
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic

__all__ = [
    "dashboard_url",
    "hook_url",
    "http_hook_checks",
    "http_listener_checks",
    "http_settings",
    "listener_problem",
    "metrics_text",
    "write_textfile",
]


def http_settings(env: Mapping[str, str] = os.environ) -> HttpSettings:
    """`[http]` of the config file; CtxdError saying how to turn it on when it is off."""
    config = paths.config_path(env)
    settings = load_http_settings(config)
    if not settings.enabled:
        raise CtxdError(
            f"ctxd's HTTP listener is off: add `[http]` with `enabled = true` to {config}, "
            "then restart the daemon (`ctxd stop`; the next hook starts it)"
        )
    return settings


def hook_url(agent: str, env: Mapping[str, str] = os.environ) -> str:
    """Where `agent`'s HTTP hooks post; CtxdError when the listener is off."""
    return http.hook_url(http_settings(env).port, agent)


def dashboard_url(env: Mapping[str, str] = os.environ, *, check: bool = True) -> str:
    """The dashboard's address (with the per-user token where the daemon asks for one), after
    checking that ctxd's own listener is the one there (`check`): another program holding the
    port answers too, and its address is no dashboard."""
    settings = http_settings(env)
    base = f"http://{settings.host}:{settings.port}/"
    url = base
    if not peer.proc_net_available():
        token = peer.load_or_create_token(paths.state_dir(env) / peer.TOKEN_FILE)
        url = f"{base}?token={token}"
    if check:
        why = listener_problem(settings, env)
        if why is None:
            return url
        if why != _NO_DAEMON:
            raise CtxdError(f"ctxd does not listen at {base}: {why}")
        # No daemon: where systemd keeps the port, this starts one.
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                answer.read()
        except (urllib.error.URLError, OSError) as exc:
            raise CtxdError(
                f"nothing answers at {base} ({getattr(exc, 'reason', exc)}): is the daemon "
                "running, and was it started after [http] was enabled?"
            ) from None
        why = listener_problem(settings, env)
        if why is not None:
            reason = "no ctxd daemon runs" if why == _NO_DAEMON else why
            raise CtxdError(f"something answers at {base}, but not ctxd: {reason}")
    return url


_NO_DAEMON = "no ctxd daemon is running"


def listener_problem(settings: HttpSettings, env: Mapping[str, str]) -> str | None:
    """Why the running daemon does not serve `settings`' address (None when it does): it was
    started before `[http]` was enabled or with another port (a config change takes a restart),
    or it could not listen (the port taken, say). `_NO_DAEMON` when none answers."""
    from ctxd.cli.client import request_json

    try:
        info = request_json("ping", env=env)
    except CtxdError:
        return _NO_DAEMON
    pid = info.get("pid", "?") if isinstance(info, dict) else "?"
    state = info.get("http") if isinstance(info, dict) else None
    if not isinstance(state, dict):
        return f"the daemon running (pid {pid}) says nothing of [http]"
    wanted = f"http://{settings.host}:{settings.port}/"
    if not state.get("enabled"):
        return f"the daemon running (pid {pid}) started before [http] was enabled"
    if not state.get("url"):
        return f"the daemon running (pid {pid}) could not listen: {state.get('error')}"
    if state["url"] != wanted:
        return (
            f"the daemon running (pid {pid}) listens at {state['url']}: it started before "
            "the port was changed"
        )
    return None


def http_listener_checks(env: Mapping[str, str] = os.environ) -> list[Check]:
    """`ctxd doctor`'s line on the `[http]` listener when the config enables it and a daemon
    runs: whether it listens where the config says, and why not (a config change takes a
    restart; a port another program holds is named)."""
    try:
        settings = load_http_settings(paths.config_path(env))
    except CtxdError:
        return []  # the config check says so
    if not settings.enabled:
        return []
    why = listener_problem(settings, env)
    wanted = f"http://{settings.host}:{settings.port}/"
    if why == _NO_DAEMON:
        return []
    if why is None:
        return [Check("http listener", True, f"ctxd listens at {wanted}")]
    fix = "`ctxd stop` (a config change takes a restart; the next hook starts ctxd again)"
    if "could not listen" in why:
        fix = (
            f"free port {settings.port} or set another `port` under [http] in "
            f"{paths.config_path(env)}, then {fix}"
        )
    return [Check("http listener", False, f"[http] is on, but {why}", fix)]


def metrics_text(status: Mapping[str, object]) -> str:
    return metrics.render(status)


def write_textfile(path: Path, text: str) -> None:
    """`text` into `path` atomically (node_exporter's textfile collector reads `*.prom`)."""
    try:
        write_atomic(path, text.encode(), 0o644)
    except OSError as exc:
        raise CtxdError(f"cannot write {path}: {exc.strerror or exc}") from None


def http_hook_checks(env: Mapping[str, str] = os.environ) -> list[Check]:
    """`ctxd doctor`'s lines about HTTP hooks, when an agent's settings hold ctxd's: the listener
    they post to is on, and a service manager keeps its port while ctxd is down. Without one,
    Claude Code reports every HTTP hook that finds nothing on the port as a failed hook
    ("connect ECONNREFUSED", measured with 2.1.332) until a SessionStart starts ctxd again."""
    from ctxd.cli.service import SOCKET_UNIT, systemd_unit_dir

    checks = []
    for agent in agents.AGENTS:
        path = agents.spec(agent).installer.settings_path(env)
        try:
            doc = parse(read_text(path), path)
        except CtxdError:
            continue  # `ctxd doctor`'s hooks check says so
        urls = sorted(hook_urls(doc, is_ctxd_command))
        if not urls:
            continue
        name = f"{agent} http hooks"
        fix_command = f"`ctxd install {agent}` for command hooks"
        try:
            settings = load_http_settings(paths.config_path(env))
        except CtxdError as exc:
            checks.append(Check(name, False, str(exc), "fix the config file"))
            continue
        wanted = http.hook_url(settings.port, agent)
        if not settings.enabled or urls != [wanted]:
            state = "[http] is off" if not settings.enabled else f"the listener is at {wanted}"
            checks.append(
                Check(
                    name,
                    False,
                    f"they post to {', '.join(urls)}, but {state}",
                    f"enable [http] in {paths.config_path(env)} with that port, or {fix_command}",
                )
            )
            continue
        stale = _daemon_without_listener(settings, env)
        if stale is not None:
            checks.append(
                Check(
                    name,
                    False,
                    f"they post to {wanted}, but {stale}",
                    "see `http listener` below; then `ctxd stop` (the next hook starts it "
                    "again, listening)",
                )
            )
            continue
        unit = systemd_unit_dir(env) / SOCKET_UNIT
        try:
            kept = f"ListenStream=127.0.0.1:{settings.port}\n" in unit.read_text()
        except OSError:
            kept = False
        if kept:
            checks.append(
                Check(name, True, f"{wanted}; systemd keeps the port ({unit}): a hook starts ctxd")
            )
        else:
            checks.append(
                Check(
                    name,
                    False,
                    f"{wanted}, but nothing keeps port {settings.port} while ctxd is down: "
                    f"{agents.spec(agent).title} then reports every hook as failed",
                    f"`ctxd service install` (systemd keeps the port and starts ctxd), or "
                    f"{fix_command}",
                )
            )
    return checks


def _daemon_without_listener(settings: HttpSettings, env: Mapping[str, str]) -> str | None:
    """Why the running daemon does not listen on the [http] port, else None (also when no
    daemon runs: the first hook, or systemd, starts one, listening)."""
    why = listener_problem(settings, env)
    return None if why == _NO_DAEMON else why
