"""`ctxd install AGENT` without `--transport`: HTTP hooks (no process per event) where they are
safe, i.e. systemd keeps the daemon's port while ctxd is down, and otherwise the command client,
saying which and why. systemctl is a stand-in (a script on PATH, or a function in process): the
container has no user manager."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.cli.install import default_transport
from ctxd.cli.service import plan_service_install

if TYPE_CHECKING:
    from conftest import World

PORT = 24311
URL = f"http://127.0.0.1:{PORT}/ctxd/hook/claude"


def _systemctl(active: str = "active", enabled: str = "enabled") -> Any:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv[:2] == ["systemctl", "--user"], argv
        out = {"is-active": active, "is-enabled": enabled}[argv[2]]
        return subprocess.CompletedProcess(argv, 0 if out in ("active", "enabled") else 3, out)

    return run


def _no_systemctl(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
    raise FileNotFoundError(argv[0])


def _env(tmp_path: Path, http: str | None) -> dict[str, str]:
    config = tmp_path / "config" / "ctxd" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    if http is not None:
        config.write_text(http)
    return {
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
    }


def _install_units(env: dict[str, str]) -> None:
    """What `ctxd service install` writes (the socket unit lists the [http] port)."""
    plan = plan_service_install(manager="systemd", env=env, python=sys.executable)
    for path, text in plan.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


ON = f"[http]\nenabled = true\nport = {PORT}\n"


@pytest.mark.parametrize(
    ("http", "units", "run", "name", "why"),
    [
        (None, False, _systemctl(), "command", "with the two lines `[http]` and `enabled = true`"),
        ("[http]\nenabled = false\n", True, _systemctl(), "command", "true` under `[http]` in"),
        (ON, False, _systemctl(), "command", f"nothing keeps port {PORT}"),
        (ON, True, _systemctl(active="inactive"), "command", "ctxd.socket is inactive"),
        (ON, True, _systemctl(enabled="disabled"), "command", "and disabled"),
        (ON, True, _no_systemctl, "command", "ctxd.socket is not known to be active"),
        (ON, True, _systemctl(), "http", f"keeps port {PORT} and starts ctxd"),
    ],
)
def test_http_only_where_systemd_keeps_the_port(
    tmp_path: Path, http: str | None, units: bool, run: Any, name: str, why: str
) -> None:
    env = _env(tmp_path, http)
    if units:
        _install_units(env)

    chosen = default_transport("claude", env, run)

    assert (chosen.name, why in chosen.reason) == (name, True), chosen.reason


def test_a_port_the_socket_unit_does_not_list_is_not_kept(tmp_path: Path) -> None:
    env = _env(tmp_path, ON)
    _install_units(env)
    (tmp_path / "config" / "ctxd" / "config.toml").write_text(ON.replace(str(PORT), "24312"))

    chosen = default_transport("claude", env, _systemctl())

    assert chosen.name == "command" and "nothing keeps port 24312" in chosen.reason


def test_an_agent_without_http_hooks_is_not_told_about_them(tmp_path: Path) -> None:
    env = _env(tmp_path, ON)
    _install_units(env)

    assert default_transport("gemini", env, _systemctl()) == default_transport(
        "codex", env, _systemctl()
    )
    assert default_transport("gemini", env, _systemctl()).name == "command"
    assert default_transport("gemini", env, _systemctl()).reason == ""


# ---------------------------------------------------------------------- as a user runs it


def _fake_systemctl(world: World, active: str) -> None:
    bin_dir = world.root / "bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "systemctl"
    script.write_text(
        f'#!/bin/sh\ncase "$2" in is-active) echo {active};; is-enabled) echo enabled;; esac\n'
    )
    script.chmod(0o755)
    world.env["PATH"] = f"{bin_dir}:{world.env['PATH']}"


def _hook_kinds(settings: Path) -> set[str]:
    hooks = json.loads(settings.read_text())["hooks"]
    return {
        h["type"]
        for event, groups in hooks.items()
        if event != "SessionStart"
        for g in groups
        for h in g["hooks"]
    }


def test_install_posts_over_http_where_systemd_keeps_the_port(world: World) -> None:
    world.write_config(ON)
    _install_units(world.env)
    _fake_systemctl(world, "active")

    done = world.cli("install", "claude")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("registered ctxd's hooks in "), done.stdout
    assert done.stdout.splitlines()[-1].startswith(
        "transport: http: systemd's ctxd.socket keeps port"
    ), done.stdout
    settings = world.claude_dir / "settings.json"
    assert _hook_kinds(settings) == {"http"}
    assert URL in settings.read_text()


def test_install_keeps_command_hooks_and_says_why_when_nothing_keeps_the_port(
    world: World,
) -> None:
    world.write_config(ON)
    _fake_systemctl(world, "active")  # a user manager, but no ctxd.socket installed

    done = world.cli("install", "claude")

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("registered ctxd's hooks in "), done.stdout
    last = done.stdout.splitlines()[-1]
    assert last.startswith("transport: command: Claude Code could post its hooks over HTTP")
    assert "`ctxd service install`" in last
    assert _hook_kinds(world.claude_dir / "settings.json") == {"command"}


def test_install_says_what_it_did_first_and_how_to_create_the_config_it_names(
    world: World,
) -> None:
    """A fresh HOME has no ctxd config: the HTTP hint comes after what was done, and says how
    to create the file it names rather than naming it as if it existed."""
    config = world.env["XDG_CONFIG_HOME"] + "/ctxd/config.toml"
    assert not Path(config).exists()

    done = world.cli("install", "claude")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("registered ctxd's hooks in "), lines
    assert lines[-1].startswith("transport: command: optional: "), lines
    assert f"create {config} with the two lines `[http]` and `enabled = true`" in lines[-1]
    assert not any(line.startswith("transport:") for line in lines[:-1])


def test_an_explicit_transport_is_taken_as_asked(world: World) -> None:
    world.write_config(ON)
    _install_units(world.env)
    _fake_systemctl(world, "active")

    done = world.cli("install", "claude", "--transport", "command")

    assert done.returncode == 0, done.stderr
    assert "transport:" not in done.stdout
    assert _hook_kinds(world.claude_dir / "settings.json") == {"command"}


def test_http_asked_of_an_agent_that_cannot_post_it_says_so_whatever_the_listener(
    world: World,
) -> None:
    """Turning the listener on would not help Gemini CLI: the one line says what would."""
    done = world.cli("install", "gemini", "--transport", "http")

    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "ctxd install: Gemini CLI cannot post its hooks over HTTP: use command hooks"
    ]
