"""The user's settings: a TOML file resolved once into a frozen `Settings`.

```toml
[thresholds]
warning = 35          # remaining %, at or below
critical = 25
basis = "compaction"  # or "window" (GSD's literal behaviour)
debounce = 5          # tool calls between repeats
[handoff]
enabled = true
at = 70               # USED %, same basis (unlike [thresholds], which count what is left)
# remaining = 30      # or this: the same point in remaining %, as [thresholds] count
action = "message"    # or "block"
[windows]             # model id -> window, consulted after authoritative sources
"claude-sonnet-4-5" = 200000
[window]
default = 1000000
[compaction.gemini]   # where each agent compacts: the keys its `AgentSpec.config_keys` declare
fraction = 0.5
[compaction.codex]
fraction = 0.9
# token_limit = 200000  # as Codex's model_auto_compact_token_limit, when you set one
[sessions]
idle_minutes = 360    # a session with no activity this long counts as ended
ended_minutes = 15    # an ended session stays listed this long
[continuity]          # the session digest (see `ctxd handoff`)
inject = true         # a compact digest into the agent's context after each compaction
compact_tokens = 1000 # its size limit
handoff_file = true   # write a handoff draft at the handoff point
handoff_tokens = 2000 # its size limit
[http]                # the loopback listener: Claude Code's HTTP hooks, /metrics, the dashboard
enabled = false       # read when the daemon starts
port = 0              # 0: 20000 + uid % 10000
[otlp]                # OpenTelemetry metrics export (ctxd[otel]); each key over its OTEL_* variable
enabled = true        # false: off even when OTEL_EXPORTER_OTLP_ENDPOINT is set
endpoint = "http://collector:4318/v1/metrics"  # full URL: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT
interval_seconds = 60 # as OTEL_METRIC_EXPORT_INTERVAL (which is in ms)
timeout_seconds = 10  # one export's bound, retries included
include_cwd = false   # the session's working directory as an attribute
[otlp.headers]        # merged over OTEL_EXPORTER_OTLP_HEADERS
[otlp.resource_attributes]  # merged over OTEL_RESOURCE_ATTRIBUTES
[notify]              # desktop notifications when a session crosses a line (read at start)
enabled = false       # D-Bus (ctxd[notify]) or notify-send on Linux, osascript on macOS
command = ["my-alert"]  # also run this (argv, no shell) per notification: JSON on stdin
timeout_seconds = 10  # the command's bound
```

The keys of `[compaction.<agent>]` belong to the agent (`ctxd.agents.<agent>.compaction`); their
older spellings directly under `[compaction]` (`gemini_fraction = 0.5`) are still read.

Unknown keys are errors: a typo that silently does nothing is worse than a clear message, and so
is a value the core refuses (its own checks are config errors here, never a crash later). Only
a regular file of at most MAX_CONFIG_BYTES is read, without blocking on what is not one (a FIFO);
`[windows]` holds at most MAX_WINDOWS entries, since every hook may look a model up in it.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from ctxd.agents import AGENTS, builtin_windows, spec
from ctxd.core.compaction import CompactionOverrides
from ctxd.core.measure import parse_tokens
from ctxd.core.settings import (
    ContinuitySettings,
    HandoffSettings,
    ModelSwitchSettings,
    SessionSettings,
    Settings,
    Thresholds,
)
from ctxd.core.window import DEFAULT_WINDOW, model_key
from ctxd.errors import ConfigError, InvalidInput

_T = TypeVar("_T")

__all__ = [
    "DEFAULT_WINDOWS",
    "MAX_CONFIG_BYTES",
    "MAX_WINDOWS",
    "HttpSettings",
    "NotifySettings",
    "OtlpTable",
    "default_settings",
    "load_http_settings",
    "load_notify_settings",
    "load_otlp_table",
    "load_settings",
    "parse_settings",
]

MAX_CONFIG_BYTES = 256 * 1024
MAX_WINDOWS = 1000

#: The agents' built-in model table (model id prefix -> window), under the user's [windows].
DEFAULT_WINDOWS: Mapping[str, int] = MappingProxyType(builtin_windows())


def _tables(user: Mapping[str, int]) -> tuple[Mapping[str, int], Mapping[str, Mapping[str, int]]]:
    """The shared table and each agent's own (`Settings.windows`, `Settings.agent_windows`).

    The user's entries outrank the built-in ones whatever their length: a built-in entry that
    a user's key is a prefix of would otherwise win the longest-prefix match, and
    `"claude-opus-5" = 800000` would not apply to claude-opus-5-5."""
    keys = [model_key(model) for model in user]

    def unshadowed(rows: Mapping[str, int]) -> dict[str, int]:
        return {
            m: size for m, size in rows.items() if not any(model_key(m).startswith(k) for k in keys)
        }

    shared = {**unshadowed(DEFAULT_WINDOWS), **user}
    own = {
        name: MappingProxyType({**shared, **unshadowed(spec(name).windows), **user})
        for name in AGENTS
        if spec(name).windows
    }
    return MappingProxyType(shared), MappingProxyType(own)


_DEFAULT_TABLES = _tables({})


def default_settings() -> Settings:
    """The settings in force without a config file."""
    return Settings(windows=_DEFAULT_TABLES[0], agent_windows=_DEFAULT_TABLES[1])


def _number(table: Mapping[str, Any], key: str, where: str, low: float, high: float) -> float:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(f"{where}.{key} must be a number from {low:g} to {high:g}, got {value!r}")
    return float(value)


def _integer(table: Mapping[str, Any], key: str, where: str, low: int) -> int:
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where}.{key} must be a whole number of at least {low}, got {value!r}")
    return value


def _tokens(table: Mapping[str, Any], key: str, where: str) -> int:
    """A window or a number of tokens: a whole number, or a string as ctxd prints one
    ("200k", "1M", "200_000")."""
    value = table[key]
    if isinstance(value, str):
        try:
            return parse_tokens(value)
        except ValueError as exc:
            raise ConfigError(f"{where}.{key}: {exc}") from None
    return _integer(table, key, where, 1)


def _choice(table: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...]) -> str:
    value = table[key]
    if value not in choices:
        wanted = " or ".join(repr(c) for c in choices)
        raise ConfigError(f"{where}.{key} must be {wanted}, got {value!r}")
    return str(value)


def _table(doc: Mapping[str, Any], name: str, known: set[str]) -> dict[str, Any]:
    table = doc.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"[{name}] must be a table")
    unknown = sorted(set(table) - known) if known else []
    if unknown:
        raise ConfigError(
            f"[{name}] has unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}"
        )
    return table


def _thresholds(doc: Mapping[str, Any]) -> Thresholds:
    t = _table(
        doc,
        "thresholds",
        {"warning", "critical", "basis", "debounce", "warning_tokens", "critical_tokens"},
    )
    base = Thresholds()
    warning = _number(t, "warning", "thresholds", 0, 100) if "warning" in t else base.warning
    critical = _number(t, "critical", "thresholds", 0, 100) if "critical" in t else base.critical
    if critical > warning:
        raise ConfigError(
            f"thresholds.critical ({critical:g}) must not be above thresholds.warning ({warning:g})"
        )
    basis = _choice(t, "basis", "thresholds", ("compaction", "window")) if "basis" in t else None
    return Thresholds(
        warning=warning,
        critical=critical,
        basis="window" if basis == "window" else base.basis if basis is None else "compaction",
        debounce=_integer(t, "debounce", "thresholds", 1) if "debounce" in t else base.debounce,
        warning_tokens=_integer(t, "warning_tokens", "thresholds", 1)
        if "warning_tokens" in t
        else None,
        critical_tokens=_integer(t, "critical_tokens", "thresholds", 1)
        if "critical_tokens" in t
        else None,
    )


def _handoff(doc: Mapping[str, Any]) -> HandoffSettings:
    h = _table(doc, "handoff", {"enabled", "at", "remaining", "action"})
    base = HandoffSettings()
    enabled = h.get("enabled", base.enabled)
    if not isinstance(enabled, bool):
        raise ConfigError(f"handoff.enabled must be true or false, got {enabled!r}")
    action = _choice(h, "action", "handoff", ("message", "block")) if "action" in h else None
    # `at` counts used %; `remaining` the same point in remaining %, as [thresholds] counts.
    if "at" in h and "remaining" in h:
        raise ConfigError(
            "[handoff] sets both at (used %) and remaining (remaining %): set one of the two"
        )
    at = base.at
    if "at" in h:
        at = _number(h, "at", "handoff", 0, 100)
    elif "remaining" in h:
        at = 100 - _number(h, "remaining", "handoff", 0, 100)
    return HandoffSettings(
        enabled=enabled,
        at=at,
        action="block" if action == "block" else "message" if action else base.action,
    )


def _model_switch(doc: Mapping[str, Any]) -> ModelSwitchSettings:
    m = _table(doc, "model_switch", {"action"})
    if "action" not in m:
        return ModelSwitchSettings()
    action = _choice(m, "action", "model_switch", ("warn", "deny"))
    return ModelSwitchSettings(action="deny" if action == "deny" else "warn")


def _windows(doc: Mapping[str, Any]) -> tuple[Mapping[str, int], Mapping[str, Mapping[str, int]]]:
    table = _table(doc, "windows", set())
    if len(table) > MAX_WINDOWS:
        raise ConfigError(f"[windows] has {len(table):,} entries; at most {MAX_WINDOWS:,} are read")
    return _tables({model: _tokens(table, model, "windows") for model in table})


def _compaction(doc: Mapping[str, Any]) -> CompactionOverrides:
    """`[compaction.<agent>]` for every agent, by the keys its spec declares."""
    aliases = {key.alias for name in AGENTS for key in spec(name).config_keys if key.alias}
    c = _table(doc, "compaction", {*AGENTS, *aliases})
    return MappingProxyType(
        {name: values for name in AGENTS if (values := _agent_compaction(c, name))}
    )


def _agent_compaction(c: Mapping[str, Any], name: str) -> Mapping[str, float | int]:
    keys = spec(name).config_keys
    table = c.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"[compaction.{name}] must be a table")
    known = {key.name for key in keys}
    unknown = sorted(set(table) - known)
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise ConfigError(f"[compaction.{name}] has unknown key {unknown[0]!r}; known: {listed}")
    values: dict[str, float | int] = {}
    for key in keys:
        where = f"compaction.{name}.{key.name}"
        value = table.get(key.name)  # TOML has no null: None is "not set"
        if key.alias is not None and key.alias in c:  # the older spelling, still read
            if value is not None:
                raise ConfigError(f"{where} and compaction.{key.alias} are one setting; keep one")
            where, value = f"compaction.{key.alias}", c[key.alias]
        if value is None:
            continue
        if not key.accepts(value):
            raise ConfigError(f"{where} must be {key.expected}, got {value!r}")
        values[key.name] = key.kind(value)
    return MappingProxyType(values)


def _sessions(doc: Mapping[str, Any]) -> SessionSettings:
    s = _table(doc, "sessions", {"idle_minutes", "ended_minutes"})
    base = SessionSettings()
    return SessionSettings(
        idle_seconds=_number(s, "idle_minutes", "sessions", 1, 10**6) * 60
        if "idle_minutes" in s
        else base.idle_seconds,
        ended_keep_seconds=_number(s, "ended_minutes", "sessions", 0, 10**6) * 60
        if "ended_minutes" in s
        else base.ended_keep_seconds,
    )


def _continuity(doc: Mapping[str, Any]) -> ContinuitySettings:
    c = _table(doc, "continuity", {"inject", "compact_tokens", "handoff_file", "handoff_tokens"})
    base = ContinuitySettings()
    for key in ("inject", "handoff_file"):
        if key in c and not isinstance(c[key], bool):
            raise ConfigError(f"continuity.{key} must be true or false, got {c[key]!r}")
    return ContinuitySettings(
        inject=c.get("inject", base.inject),
        compact_tokens=_integer(c, "compact_tokens", "continuity", 100)
        if "compact_tokens" in c
        else base.compact_tokens,
        handoff_file=c.get("handoff_file", base.handoff_file),
        handoff_tokens=_integer(c, "handoff_tokens", "continuity", 200)
        if "handoff_tokens" in c
        else base.handoff_tokens,
    )


def parse_settings(text: str) -> Settings:
    """Settings from TOML text; ConfigError with a one-line reason when anything is off."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}") from exc
    except (RecursionError, ValueError) as exc:  # nested past the stack, thousands of digits
        raise ConfigError(f"not valid TOML: {str(exc).splitlines()[0]}") from None
    known = {"thresholds", "handoff", "windows", "window", "compaction", "sessions", "continuity"}
    known |= {"http", "model_switch", "otlp", "notify"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ConfigError(f"unknown section [{unknown[0]}]; known: {', '.join(sorted(known))}")
    _http(doc)  # checked with the rest; the listener reads it when the daemon starts
    _otlp(doc)  # likewise, for the exporter
    _notify(doc)  # and the notifier
    window = _table(doc, "window", {"default"})
    windows, agent_windows = _windows(doc)
    try:
        return Settings(
            thresholds=_thresholds(doc),
            handoff=_handoff(doc),
            windows=windows,
            agent_windows=agent_windows,
            default_window=_tokens(window, "default", "window")
            if "default" in window
            else DEFAULT_WINDOW,
            compaction=_compaction(doc),
            sessions=_sessions(doc),
            continuity=_continuity(doc),
            model_switch=_model_switch(doc),
        )
    except InvalidInput as exc:  # the core's own checks, for what the ones above let through
        raise ConfigError(str(exc)) from exc


def load_settings(path: Path) -> Settings:
    """Settings from `path`; defaults when it does not exist; ConfigError naming the file."""
    try:
        data = _read_config(path)
    except FileNotFoundError:
        return default_settings()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text: {exc}") from exc
    try:
        return parse_settings(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """`[http]`: the optional loopback listener (ctxd/daemon/http.py)."""

    enabled: bool = False
    port: int = 0  # 0: default_http_port()
    host: str = "127.0.0.1"


def default_http_port(uid: int | None = None) -> int:
    """20000 + uid % 10000: below Linux's ephemeral range, and another user's on the same host
    gets another port."""
    return 20000 + (os.getuid() if uid is None else uid) % 10000


def _http(doc: Mapping[str, Any]) -> HttpSettings:
    h = _table(doc, "http", {"enabled", "port"})
    enabled = h.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"http.enabled must be true or false, got {enabled!r}")
    port = _integer(h, "port", "http", 0) if "port" in h else 0
    if port > 65535:
        raise ConfigError(f"http.port must be a TCP port (1 to 65535, or 0), got {port}")
    return HttpSettings(enabled=enabled, port=port or default_http_port())


def _load_table(path: Path, parse: Callable[[Mapping[str, Any]], _T], absent: _T) -> _T:
    """One table of the config file at `path`, read by `parse`; `absent` when there is no file;
    ConfigError naming the file when it cannot be used."""
    try:
        data = _read_config(path)
    except FileNotFoundError:
        return absent
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        return parse(tomllib.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    except (RecursionError, ValueError) as exc:  # nested past the stack, thousands of digits
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0]}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def load_http_settings(path: Path) -> HttpSettings:
    """`[http]` from the config file at `path` (disabled when there is none); ConfigError
    naming the file when it cannot be used."""
    return _load_table(path, _http, HttpSettings(port=default_http_port()))


@dataclass(frozen=True, slots=True)
class OtlpTable:
    """`[otlp]` as written (None: not set, the OTEL_* variable or the default applies);
    ctxd/daemon/outputs/otlp.py resolves it with the environment."""

    enabled: bool | None = None
    endpoint: str | None = None
    interval_seconds: float | None = None
    timeout_seconds: float | None = None
    include_cwd: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)
    resource_attributes: Mapping[str, str] = field(default_factory=dict)


def _flag(table: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = table.get(key)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _strings(table: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"[{where}.{key}] must be a table of strings")
    return MappingProxyType(dict(value))


def _otlp(doc: Mapping[str, Any]) -> OtlpTable:
    known = {"enabled", "endpoint", "interval_seconds", "timeout_seconds", "include_cwd"}
    t = _table(doc, "otlp", known | {"headers", "resource_attributes"})
    endpoint = t.get("endpoint")
    if endpoint is not None and (
        not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"otlp.endpoint must be an http:// or https:// URL, got {endpoint!r}")
    return OtlpTable(
        enabled=_flag(t, "enabled", "otlp"),
        endpoint=endpoint,
        interval_seconds=_number(t, "interval_seconds", "otlp", 1, 86400)
        if "interval_seconds" in t
        else None,
        timeout_seconds=_number(t, "timeout_seconds", "otlp", 0.1, 300)
        if "timeout_seconds" in t
        else None,
        include_cwd=bool(_flag(t, "include_cwd", "otlp")),
        headers=_strings(t, "headers", "otlp"),
        resource_attributes=_strings(t, "resource_attributes", "otlp"),
    )


def load_otlp_table(path: Path) -> OtlpTable:
    """`[otlp]` from the config file at `path` (empty when there is none); ConfigError naming
    the file when it cannot be used."""
    return _load_table(path, _otlp, OtlpTable())


@dataclass(frozen=True, slots=True)
class NotifySettings:
    """`[notify]`: desktop notifications (ctxd/daemon/outputs/notify.py)."""

    enabled: bool = False
    #: run per notification, as given (never through a shell); empty: none
    command: tuple[str, ...] = ()
    timeout_seconds: float = 10.0  # NOTIFY_TIMEOUT


NOTIFY_TIMEOUT = 10.0


def _notify(doc: Mapping[str, Any]) -> NotifySettings:
    t = _table(doc, "notify", {"enabled", "command", "timeout_seconds"})
    command = t.get("command", [])
    if not isinstance(command, list) or not all(isinstance(w, str) and w for w in command):
        raise ConfigError(
            f"notify.command must be a list of words (argv, no shell), got {command!r}"
        )
    return NotifySettings(
        enabled=bool(_flag(t, "enabled", "notify")),
        command=tuple(command),
        timeout_seconds=_number(t, "timeout_seconds", "notify", 0.1, 300)
        if "timeout_seconds" in t
        else NOTIFY_TIMEOUT,
    )


def load_notify_settings(path: Path) -> NotifySettings:
    """`[notify]` from the config file at `path` (off when there is none); ConfigError naming
    the file when it cannot be used."""
    return _load_table(path, _notify, NotifySettings())


def _read_config(path: Path) -> bytes:
    """The bytes of the config file; ConfigError when it is not a regular file or too big."""
    # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{path}: not a regular file ({stat.filemode(info.st_mode)})")
        if info.st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: {info.st_size:,} bytes; a config file is at most {MAX_CONFIG_BYTES:,}"
            )
        data = b""
        while len(data) <= MAX_CONFIG_BYTES and (chunk := os.read(fd, 65536)):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: grew past {MAX_CONFIG_BYTES:,} bytes while being read")
    return data
