"""`ctxd install cline` places ctxd's hook files in Cline's global hooks folder, as a real
process in a private HOME; `ctxd uninstall cline` takes exactly those away; a user's own hook
file, beside them or under ctxd's name, is never touched; `ctxd doctor` checks them."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ctxd.agents.cline import install

if TYPE_CHECKING:
    from conftest import World

NAMES = ("PostToolUse.bash", "TaskComplete.bash", "SessionShutdown.bash")


def _hooks(world: World) -> Path:
    return world.home / ".cline" / "hooks"


def _listing(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in sorted(folder.iterdir())
    }


def _users_own(world: World) -> Path:
    """The user's own PostToolUse hook (Cline runs it beside ctxd's) and a providers.json."""
    folder = _hooks(world)
    folder.mkdir(parents=True)
    own = folder / "PostToolUse"
    own.write_text("#!/bin/sh\necho '{}'\n")
    own.chmod(0o700)
    settings = world.home / ".cline" / "data" / "settings" / "providers.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"version": 1}\n')
    return settings


def test_install_writes_the_hook_files_and_uninstall_takes_exactly_them(world: World) -> None:
    settings = _users_own(world)
    before = _listing(_hooks(world))

    dry = world.cli("install", "cline", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would write {_hooks(world) / NAMES[0]}" in dry.stdout
    assert "already in" not in dry.stdout  # nothing claims the hooks are in providers.json
    assert _listing(_hooks(world)) == before

    done = world.cli("install", "cline")
    assert done.returncode == 0, done.stderr
    after = _listing(_hooks(world))
    assert after["PostToolUse"] == before["PostToolUse"]
    for name in NAMES:
        text, mode = after[name]
        assert mode == 0o755
        assert b"written by `ctxd install`" in text
        # the hook client `ctxd install` chose: the native one where it built, else Python's
        assert text.startswith(b"#!/bin/sh\n")
        assert b"/ctxd-hook cline" in text or b"ctxd_hook.py cline" in text
    assert settings.read_text() == '{"version": 1}\n'

    again = world.cli("install", "cline")
    assert again.returncode == 0, again.stderr
    assert "unchanged" in again.stdout and "wrote" not in again.stdout
    assert _listing(_hooks(world)) == after

    gone = world.cli("uninstall", "cline")
    assert gone.returncode == 0, gone.stderr
    assert _listing(_hooks(world)) == before
    assert settings.read_text() == '{"version": 1}\n'


def test_a_hook_file_written_by_install_runs_the_hook_client(world: World) -> None:
    """The file itself, run as Cline runs it (stdin a payload), exits 0 quickly with no daemon
    allowed to start: the command inside is the one every other agent's hooks run."""
    assert world.cli("install", "cline").returncode == 0
    env = dict(world.env, CTXD_NO_SPAWN="1")
    done = subprocess.run(
        [str(_hooks(world) / NAMES[0])], input=b"{}", env=env, capture_output=True, timeout=20
    )
    assert done.returncode == 0, done.stderr


def test_a_users_file_under_ctxds_name_is_never_overwritten_nor_removed(world: World) -> None:
    _users_own(world)
    mine = _hooks(world) / NAMES[1]
    mine.write_text("#!/bin/sh\necho mine\n")
    before = _listing(_hooks(world))

    refused = world.cli("install", "cline")
    assert refused.returncode != 0
    assert str(mine) in refused.stderr and "yours" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert _listing(_hooks(world)) == before  # nothing written, not even the other two

    # installed once it was moved aside; then the user's file comes back under that name
    mine.rename(mine.with_name("kept"))
    assert world.cli("install", "cline").returncode == 0
    (_hooks(world) / "kept").replace(mine)
    gone = world.cli("uninstall", "cline")
    assert gone.returncode == 0, gone.stderr
    assert f"{mine} is not ctxd's" in gone.stdout
    assert _listing(_hooks(world)) == before


def test_a_file_saved_by_hand_as_an_earlier_ctxd_asked_is_replaced(world: World) -> None:
    """Before ctxd placed its files itself, `ctxd install cline` printed one to save: such a
    file is ctxd's (any interpreter, any client path), not the user's."""
    folder = _hooks(world)
    folder.mkdir(parents=True)
    old = folder / NAMES[0]
    old.write_text(
        '#!/bin/sh\nexec /usr/bin/python3 -S -I -c \'import sys;sys.path[:0]=["/old"];'
        "import ctxd_hook as h;h.main()' cline\n"
    )
    assert world.cli("install", "cline").returncode == 0
    assert "written by `ctxd install`" in old.read_text()
    assert world.cli("uninstall", "cline").returncode == 0
    assert list(folder.iterdir()) == []


def test_a_symlink_or_fifo_under_ctxds_name_is_the_users(world: World) -> None:
    folder = _hooks(world)
    folder.mkdir(parents=True)
    os.mkfifo(folder / NAMES[0])
    (folder / NAMES[1]).symlink_to(world.root / "elsewhere")
    assert world.cli("install", "cline", timeout=10).returncode != 0
    assert world.cli("uninstall", "cline", timeout=10).returncode == 0
    assert stat.S_ISFIFO(os.lstat(folder / NAMES[0]).st_mode)
    assert (folder / NAMES[1]).is_symlink() and not (world.root / "elsewhere").exists()


def test_cline_dir_moves_the_hooks_folder(world: World) -> None:
    """Cline reads its global hooks from `$CLINE_DIR/hooks` when that is set."""
    moved = world.root / "cline-dir"
    env = dict(world.env, CLINE_DIR=str(moved))
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", "install", "cline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (moved / "hooks").iterdir()) == sorted(NAMES)
    assert install.hooks_dir(env) == moved / "hooks"


def test_doctor_checks_the_placed_files(world: World) -> None:
    def cline_lines() -> list[str]:
        out = world.cli("doctor", timeout=120).stdout
        return [line for line in out.splitlines() if " cline hook" in line]

    assert [line.split()[0] for line in cline_lines()] == ["skip"]
    assert world.cli("install", "cline").returncode == 0
    lines = cline_lines()
    assert len(lines) == 4 and all(line.startswith("ok") for line in lines), lines
    (_hooks(world) / NAMES[1]).chmod(0o644)
    lines = cline_lines()
    assert [line.split()[0] for line in lines] == ["ok", "FAIL", "ok", "ok"], lines
    assert "not executable" in lines[1]
