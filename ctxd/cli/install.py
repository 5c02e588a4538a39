"""`ctxd install|uninstall AGENT`: plan a change to an agent's settings file, then apply it.

A plan is computed without writing anything (`--dry-run` prints its diff); `apply_plan` writes
it atomically after a backup. Install is idempotent, uninstall removes only what ctxd added, and
install followed by uninstall gives back a document equal to the original as parsed JSON (an
empty `"hooks": {}` aside, which comes back absent). Every foreign key and hook is kept.

An agent that runs hook files instead (`Installer.files`) gets them placed beside: the plan
carries what to write or remove (`ctxd.cli.placed`), and a user's file of the same name is never
touched.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ctxd import agents
from ctxd.agents.hookcmd import client_dir, hook_command
from ctxd.agents.settings_file import comments, parse, read_text, render, write_settings
from ctxd.agents.spec import InstallRequest
from ctxd.cli.placed import FileStep, plan_files
from ctxd.errors import InvalidInput, SettingsFileError

__all__ = [
    "Plan",
    "Transport",
    "apply_plan",
    "default_transport",
    "plan_install",
    "plan_uninstall",
    "settings_path",
]


@dataclass(frozen=True)
class Plan:
    """A planned rewrite of one agent's settings file.

    `before` is the file's text (None: no file); `after` the text to write; `changed` is false
    when the file already says what ctxd wants (then `after == before`, or both describe an
    empty document). `notes` are for the user: trust steps, a statusline left alone, ...
    """

    agent: str
    path: Path
    before: str | None
    after: str
    changed: bool
    notes: tuple[str, ...] = ()
    #: The plans of the files the agent's install edits besides this one (its companion).
    also: tuple[Plan, ...] = ()

    @property
    def changes(self) -> bool:
        """Whether applying it writes anything: this file or one of `also`."""
        return self.changed or any(plan.changed for plan in self.also)

    #: The agent's own files to write or remove (`Installer.files`), apart from the document.
    files: tuple[FileStep, ...] = ()

    def diff(self) -> str:
        """A unified diff from `before` to `after` ("" when nothing changes)."""
        if not self.changed:
            return "".join(plan.diff() for plan in self.also)
        old = (self.before or "").splitlines(keepends=True)
        new = self.after.splitlines(keepends=True)
        lines = difflib.unified_diff(
            old,
            new,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        own = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        return own + "".join(plan.diff() for plan in self.also)


def settings_path(agent: str, env: Mapping[str, str] = os.environ) -> Path:
    """The settings file ctxd edits for `agent` in this environment."""
    return agents.spec(agent).installer.settings_path(env)


def _parse(agent: str, text: str | None, path: Path) -> dict[str, Any]:
    """The settings file's document, in the agent's format (JSON unless it declares another)."""
    document = agents.spec(agent).installer.document
    return document.parse(text, path) if document is not None else parse(text, path)


def _finish(
    agent: str,
    path: Path,
    before: str | None,
    old: dict[str, Any],
    new: dict[str, Any],
    notes: tuple[str, ...],
) -> Plan:
    if new == old:
        return Plan(agent, path, before, before if before is not None else "", False, notes)
    document = agents.spec(agent).installer.document
    if document is not None:  # its renderer keeps the user's text as it is
        return Plan(agent, path, before, document.render(new, before), True, notes)
    if comments(before):
        notes = (
            *notes,
            f"{path} has comments: the rewritten file cannot keep them (the backup does)",
        )
    return Plan(agent, path, before, render(new, like=before), True, notes)


def _companion_plans(
    agent: str, path: Path, request: InstallRequest, *, uninstall: bool
) -> tuple[Plan, ...]:
    """The plan of the second file the agent's install edits beside `path`, if it has one."""
    companion = agents.spec(agent).installer.companion
    if companion is None:
        return ()
    where = companion.path(path)
    before = read_text(where)
    doc = companion.document.parse(before, where)
    new, notes = (companion.uninstall if uninstall else companion.install)(doc, request)
    if new == doc:
        return (Plan(agent, where, before, before if before is not None else "", False, notes),)
    return (Plan(agent, where, before, companion.document.render(new, before), True, notes),)


def _settings_path(agent: str, settings: Path | None, env: Mapping[str, str]) -> Path:
    """The file to edit: `settings` (whose directory must exist: a typo must not create
    directories), else the agent's own."""
    if settings is None:
        return agents.spec(agent).installer.settings_path(env)
    if not settings.parent.is_dir():
        raise SettingsFileError(
            f"{settings.parent} is not a directory: check the --settings path (ctxd creates "
            "the file, not the directories above it)"
        )
    return settings


#: How long the agent may take to print its version (a native binary's first start is slow).
VERSION_TIMEOUT = 20.0
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def installed_version(argv: tuple[str, ...], env: Mapping[str, str]) -> str | None:
    """The version the agent's `argv` prints ("2.1.337"), found on `env`'s PATH; None when it
    is not installed, fails, or prints none within VERSION_TIMEOUT."""
    if not argv:
        return None
    program = shutil.which(argv[0], path=env.get("PATH", os.defpath))
    if program is None:
        return None
    try:
        done = subprocess.run(
            [program, *argv[1:]],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    found = _VERSION.search(done.stdout or "") if done.returncode == 0 else None
    return found.group(0) if found else None


def plan_install(
    agent: str,
    *,
    settings: Path | None = None,
    statusline: bool = False,
    env: Mapping[str, str] = os.environ,
    transport: str = "command",
) -> Plan:
    """What installing ctxd's hooks for `agent` would do to its settings file (nothing written).

    `settings` overrides the file's path; `statusline` (Claude Code only) replaces a foreign
    statusLine; `transport` "http" registers HTTP hooks posting to the daemon's listener where
    the agent can post them (CtxdError when `[http]` is off, InvalidInput when the agent
    cannot). Raises `SettingsFileError` when the file cannot be read or parsed, and
    `InvalidInput` for an unknown agent.
    """
    spec = agents.spec(agent)
    path = _settings_path(agent, settings, env)
    edits = spec.installer.edits_settings  # else the document is neither read nor written
    before = read_text(path) if edits else None
    doc = _parse(agent, before, path)
    http_url = None
    if transport == "http":
        if not spec.installer.http_hooks:
            raise InvalidInput(f"{spec.title} cannot post its hooks over HTTP: use command hooks")
        from ctxd.cli.web import hook_url

        http_url = hook_url(agent, env)
    request = InstallRequest(
        path=path,
        command=lambda event: hook_command(agent, event, env),
        statusline=statusline,
        http_url=http_url,
        client_dir=client_dir(env),
        agent_version=installed_version(spec.version_command, env) if edits else None,
    )
    new, notes = spec.installer.install(doc, request)
    if http_url is not None:
        notes = (
            *notes,
            f"HTTP hooks post to {http_url}: the daemon must be running with [http] enabled "
            "(SessionStart's command hook starts it)",
        )
    if statusline and spec.statusline is None:
        notes = (*notes, f"--statusline applies to agents with a statusline; ignored for {agent}")
    also = _companion_plans(agent, path, request, uninstall=False)
    hint = f"move it aside (keep it under another name) and run `ctxd install {agent}` again"
    placed = plan_files(spec.installer.files(env, request.command), "install", hint)
    return replace(_finish(agent, path, before, doc, new, notes), also=also, files=placed)


def plan_uninstall(
    agent: str,
    *,
    settings: Path | None = None,
    statusline: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Plan:
    """What removing ctxd's hooks and its statusline would do (nothing written).

    `statusline`: remove only what ctxd set besides its hooks (Claude Code's statusLine), and
    keep the hooks.
    """
    spec = agents.spec(agent)
    path = _settings_path(agent, settings, env)
    command = partial(hook_command, agent, env=env)
    placed = () if statusline else plan_files(spec.installer.files(env, command), "uninstall", "")
    if not spec.installer.edits_settings:
        said = (f"{spec.title} has no statusline: nothing to remove",) if statusline else ()
        return Plan(agent, path, None, "", False, said, files=placed)
    before = read_text(path)
    request = InstallRequest(path=path, command=command, client_dir=client_dir(env))
    if before is None:
        gone = Plan(agent, path, None, "", False, (f"{path} does not exist: nothing to remove",))
        return replace(gone, also=_companion_plans(agent, path, request, uninstall=True))
    doc = _parse(agent, before, path)
    new, notes = spec.installer.uninstall(doc, request)
    if statusline:
        if spec.statusline is None:
            notes = (*notes, f"{spec.title} has no statusline: nothing to remove")
            new = doc
        else:
            # Everything the full uninstall changes except the hooks, in the file's key order.
            full = new
            new = {k: doc[k] if k == "hooks" else full[k] for k in doc if k == "hooks" or k in full}
            if new == doc:
                notes = (*notes, f"no statusline of ctxd's in {path}: nothing to remove")
    elif new == doc:
        notes = (*notes, f"no ctxd hooks in {path}: nothing to remove")
    also = _companion_plans(agent, path, request, uninstall=True)
    return replace(_finish(agent, path, before, doc, new, notes), also=also)


@dataclass(frozen=True)
class Transport:
    """How an agent's hooks reach the daemon ("command" or "http"), and why, for the user ("":
    the agent has no other way)."""

    name: str
    reason: str


def default_transport(
    agent: str,
    env: Mapping[str, str] = os.environ,
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
) -> Transport:
    """The transport `ctxd install AGENT` uses when none is asked for.

    HTTP spares the process every hook otherwise starts, but an HTTP hook that finds nothing on
    the port is a failed hook the agent shows under every tool call, where the command client
    starts the daemon. So HTTP only when something keeps the port while ctxd is down: the agent
    can post hooks, `[http]` is on, and systemd's `ctxd.socket` lists that port and is active
    and enabled (`systemctl --user`, through `run`). Otherwise the command client.
    """
    from ctxd import paths
    from ctxd.cli.service import SOCKET_UNIT, systemd_unit_dir
    from ctxd.daemon.config import load_http_settings
    from ctxd.errors import CtxdError

    spec = agents.spec(agent)
    if not spec.installer.http_hooks:
        return Transport("command", "")  # nothing to choose, nothing to explain
    could = f"{spec.title} could post its hooks over HTTP, with no process per event"
    config = paths.config_path(env)
    try:
        http = load_http_settings(config)
    except CtxdError as exc:
        return Transport("command", f"{could}, but the config does not load: {exc}")
    if not http.enabled:
        where = (
            f"add `enabled = true` under `[http]` in {config}"
            if config.is_file()
            else f"create {config} with the two lines `[http]` and `enabled = true`"
        )
        return Transport(
            "command",
            f"optional: {could}: {where}, run `ctxd service install` (systemd then keeps the "
            "port), and install again",
        )
    unit = systemd_unit_dir(env) / SOCKET_UNIT
    try:
        kept = f"ListenStream=127.0.0.1:{http.port}\n" in unit.read_text(encoding="utf-8")
    except OSError:
        kept = False
    if not kept:
        return Transport(
            "command",
            f"{could}, but nothing keeps port {http.port} while ctxd is down, and every hook "
            "would then fail: `ctxd service install` makes systemd keep it",
        )
    state = (_systemctl(run, "is-active", SOCKET_UNIT), _systemctl(run, "is-enabled", SOCKET_UNIT))
    if state != ("active", "enabled"):
        said = (
            "not known to be active (`systemctl --user` did not say)"
            if "unknown" in state
            else " and ".join(state)
        )
        return Transport(
            "command",
            f"{could}, but {SOCKET_UNIT} is {said}: "
            f"`systemctl --user enable --now {SOCKET_UNIT}`, then install again",
        )
    return Transport(
        "http",
        f"systemd's {SOCKET_UNIT} keeps port {http.port} and starts ctxd for a hook, so "
        f"{spec.title} posts its hooks there, with no process per event (`--transport command` "
        "for command hooks)",
    )


def _systemctl(run: Callable[..., subprocess.CompletedProcess[str]], *args: str) -> str:
    """What `systemctl --user ARGS` prints ("unknown" when it cannot run)."""
    try:
        done = run(
            ["systemctl", "--user", *args], capture_output=True, text=True, check=False, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (done.stdout or "").strip() or "unknown"


def apply_plan(plan: Plan) -> Path | None:
    """Write `plan.after` to `plan.path` atomically, keeping the file's mode; then the same for
    each of `plan.also` (the companion file's).

    The old file is copied first to `<name>.ctxd-backup-<time>`; returns that path (the
    settings file's), or None when there was no old file or nothing changed (then nothing is
    written at all). Raises `SettingsFileError` if the file changed since the plan was made, or
    cannot be written.
    """
    backup = _apply_one(plan, _parse)
    companion = agents.spec(plan.agent).installer.companion
    for extra in plan.also:
        if companion is not None:
            _apply_one(extra, lambda agent, text, path: companion.document.parse(text, path))
    return backup


def _apply_one(plan: Plan, reparse: Callable[[str, str | None, Path], object]) -> Path | None:
    if not plan.changed:
        return None
    if plan.before is not None:
        # Re-parse to be sure the plan was made from this text: never overwrite a file that
        # does not parse (a hand-built Plan could carry anything).
        reparse(plan.agent, plan.before, plan.path)
    if not plan.after.strip():
        raise SettingsFileError(f"refusing to write an empty {plan.path}")
    return write_settings(plan.path, plan.after, plan.before)
