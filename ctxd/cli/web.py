"""What `ctxd dashboard`, `ctxd metrics` and `ctxd install --transport http` need of the daemon's
optional HTTP listener (ctxd/daemon/http.py): its addresses, and the metrics text."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from ctxd import paths
from ctxd.daemon import http, metrics
from ctxd.daemon.config import HttpSettings, load_http_settings
from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic

__all__ = ["dashboard_url", "hook_url", "http_settings", "metrics_text", "write_textfile"]


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
    checking that the daemon answers there (`check`)."""
    settings = http_settings(env)
    base = f"http://{settings.host}:{settings.port}/"
    url = base
    if not http.proc_net_available():
        token = http.load_or_create_token(paths.state_dir(env) / http.TOKEN_FILE)
        url = f"{base}?token={token}"
    if check:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                answer.read()
        except (urllib.error.URLError, OSError) as exc:
            raise CtxdError(
                f"nothing answers at {base} ({getattr(exc, 'reason', exc)}): is the daemon "
                "running, and was it started after [http] was enabled?"
            ) from None
    return url


def metrics_text(status: Mapping[str, object]) -> str:
    return metrics.render(status)


def write_textfile(path: Path, text: str) -> None:
    """`text` into `path` atomically (node_exporter's textfile collector reads `*.prom`)."""
    try:
        write_atomic(path, text.encode(), 0o644)
    except OSError as exc:
        raise CtxdError(f"cannot write {path}: {exc.strerror or exc}") from None
