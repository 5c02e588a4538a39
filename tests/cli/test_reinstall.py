"""What a user does to ctxd over time, for real: pip-install it into a venv, `ctxd install claude`,
then reinstall it (editable, non-editable, into a moved venv). The hook commands installed at the
start must keep working through all of it (they once named the old site-packages and broke
with `ModuleNotFoundError` on every tool call), and `ctxd doctor` must tell the truth.

The venvs are real (`python -m venv`, pip building ctxd's wheel from this checkout with hatchling);
to stay offline and fast, pip installs ctxd alone (`--no-deps --no-build-isolation`) and the
venvs see ctxd's dependencies and the build backend through one `.pth` file naming a directory of
links to those packages only, never to ctxd itself.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ctxd.agents.hookcmd import base_interpreter
from ctxd.agents.nativeclient import find_compiler

if TYPE_CHECKING:
    from conftest import World

pytestmark = pytest.mark.timeout(180)

#: What a venv with ctxd needs besides ctxd: its dependencies, and hatchling to build it.
THIRD_PARTY = (
    "anyio",
    "sniffio",
    "idna",
    "typing_extensions",
    "orjson",
    "watchfiles",
    "hatchling",
    "packaging",
    "pathspec",
    "pluggy",
    "trove_classifiers",
)
SITE = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages"


@pytest.fixture
def started() -> Iterator[list[int]]:
    """The pids of the daemons the hooks started (a console script's command line does not
    show `ctxd` as a word, so `World.close` would not find them): killed if still running."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def deps(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of links to ctxd's third-party packages (and their dist-info)."""
    if importlib.util.find_spec("hatchling") is None:
        pytest.fail("hatchling is missing: install the test extra (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("deps")
    for name in THIRD_PARTY:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin, name
        origin = Path(spec.origin)
        item = origin.parent if origin.name == "__init__.py" else origin
        (out / item.name).symlink_to(item)
        for info in item.parent.glob(f"{name}-*.dist-info"):
            (out / info.name).symlink_to(info)
    return out


class Venv:
    def __init__(self, path: Path, deps: Path) -> None:
        self.path = path
        subprocess.run([base_interpreter(), "-m", "venv", "--without-pip", str(path)], check=True)
        (path / SITE / "_ctxd_test_deps.pth").write_text(f"{deps}\n")

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def pip_install(self, *args: str) -> None:
        """pip (this interpreter's) installing the checkout into this venv, as a user would."""
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "--python", str(self.python), "install", "-q"),
                *("--disable-pip-version-check", "--no-deps", "--no-build-isolation", *args),
            ],
            check=True,
            capture_output=True,
        )

    def ctxd(self, world: World, *args: str) -> subprocess.CompletedProcess[str]:
        """This venv's `ctxd` console script in the world's environment."""
        return subprocess.run(
            [str(self.path / "bin" / "ctxd"), *args],
            env=world.env,
            cwd=world.root,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def move(self, to: Path) -> None:
        shutil.move(self.path, to)
        self.path = to


def installed(world: World) -> dict[str, str]:
    """The commands in the user's settings.json, as the agent will run them."""
    doc = json.loads((world.claude_dir / "settings.json").read_text())
    (tool_group,) = doc["hooks"]["PostToolUse"]
    (handler,) = tool_group["hooks"]
    return {"hook": handler["command"], "statusline": doc["statusLine"]["command"]}


def run(world: World, command: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[bytes]:
    """What Claude Code does with a hook command: a shell, the payload on stdin."""
    return subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload).encode(),
        env=world.env,
        cwd=world.work,
        capture_output=True,
        timeout=30,
        check=False,
    )


def daemon_cmdline(world: World, started: list[int]) -> list[str]:
    """The command line of the daemon answering in `world` (its pid noted for the clean-up)."""
    pid = world.wait_ready()["pid"]
    started.append(pid)
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def spawn_then_answer(world: World, commands: dict[str, str], started: list[int]) -> list[str]:
    """With no daemon: the installed hook starts one; then the hook and the statusline get the
    daemon's answers. Returns the spawned daemon's command line."""
    assert world.ping() is None
    first = world.claude()
    first.assistant(900_000)
    done = run(world, commands["hook"], first.payload("PostToolUse"))
    assert (done.returncode, done.stderr) == (0, b""), done
    cmdline = daemon_cmdline(world, started)

    t = world.claude()
    t.assistant(900_000)  # 96 % of the room before compaction: a warning is due
    done = run(world, commands["hook"], t.payload("PostToolUse"))
    assert (done.returncode, done.stderr) == (0, b""), done
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PostToolUse" and "CONTEXT" in answer["additionalContext"]

    line = run(world, commands["statusline"], t.payload("PostToolUse"))
    assert line.returncode == 0 and b"900" in line.stdout, line
    return cmdline


def stop(world: World, venv: Venv, started: list[int]) -> None:
    assert venv.ctxd(world, "stop").returncode == 0
    world.wait_for(lambda: not Path(f"/proc/{started[-1]}").exists(), 10, "the daemon to exit")
    # The next step is a reinstall, minutes later for a user: past the hooks' spawn back-off.
    lock = world.runtime_dir / "spawn.lock"
    os.utime(lock, (lock.stat().st_atime - 60, lock.stat().st_mtime - 60))


def test_installed_hooks_survive_every_reinstall_and_doctor_tells_the_truth(
    world: World, deps: Path, tmp_path: Path, started: list[int]
) -> None:
    repo = str(world.repo)
    world.env.pop("CTXD_NO_SPAWN")  # a real user's hooks start the daemon
    world.env["PATH"] = "/usr/bin:/bin"  # no ctxd of ours on PATH unless a step puts it there

    venv = Venv(tmp_path / "venv", deps)
    venv.pip_install(repo)
    result = venv.ctxd(world, "install", "claude")
    assert result.returncode == 0, result.stderr
    commands = installed(world)
    # Nothing that a reinstall moves: not the venv, not its site-packages, not the checkout.
    for command in commands.values():
        assert str(venv.path) not in command and repo not in command
    assert spawn_then_answer(world, commands, started)[0] == str(venv.python)

    doctor = venv.ctxd(world, "doctor")
    assert doctor.returncode == 0, doctor.stdout
    stop(world, venv, started)

    for how in (["-e", repo], ["--force-reinstall", repo]):
        venv.pip_install(*how)
        assert installed(world) == commands  # the settings were not touched
        assert spawn_then_answer(world, commands, started)[0] == str(venv.python), how
        stop(world, venv, started)
    # Data files went in with the code (a non-editable install): pi's model catalog.
    assert (venv.path / SITE / "ctxd" / "agents" / "pi" / "catalog.json").is_file()

    # The venv moves; ctxd is reinstalled into it. The hook's spawn file still names the old
    # place until a ctxd command runs: the hook falls back to the `ctxd` on PATH.
    old = venv.path
    venv.move(tmp_path / "moved")
    venv.pip_install("--force-reinstall", repo)
    world.env["PATH"] = f"{venv.path / 'bin'}:/usr/bin:/bin"
    assert spawn_then_answer(world, commands, started)[:2] == [
        str(venv.python),
        str(venv.path / "bin/ctxd"),
    ]
    doctor = venv.ctxd(world, "doctor")  # a ctxd run: the spawn file now names the moved venv
    assert doctor.returncode == 0, doctor.stdout
    spawn_file = world.home / ".local/share/ctxd/client/ctxd-command"
    assert spawn_file.read_text().split()[0] == str(venv.python)

    # What users once saw: a command naming a site-packages that a reinstall moved away.
    broken = commands["hook"].replace(str(spawn_file.parent), str(old / SITE))
    settings = world.claude_dir / "settings.json"
    doc = json.loads(settings.read_text())
    doc["hooks"]["PostToolUse"][0]["hooks"][0]["command"] = broken
    settings.write_text(json.dumps(doc))
    assert run(world, broken, world.claude().payload("PostToolUse")).returncode != 0
    doctor = venv.ctxd(world, "doctor")
    assert doctor.returncode == 1, doctor.stdout
    # Only PostToolUse's command is broken now, and doctor names it.
    assert "FAIL claude hook command (PostToolUse):" in doctor.stdout, doctor.stdout
    # The Python client's interpreter finds no module; the shell finds no native client.
    native = Path(shlex.split(commands["hook"])[0]).name == "ctxd-hook"
    # ...which a wheel's install builds wherever a C compiler is, as an editable one does.
    assert native == (find_compiler(world.env) is not None)
    assert ("exits 127" if native else "ModuleNotFoundError") in doctor.stdout
    stop(world, venv, started)
