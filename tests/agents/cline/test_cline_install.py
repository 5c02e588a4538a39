"""`ctxd install cline` names the hook files to save (it edits no document), and `ctxd doctor`
finds ctxd's PostToolUse file among the user's own hooks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxd.agents.cline import install
from ctxd.agents.hookcmd import build_command
from ctxd.agents.spec import InstallRequest

SETTINGS = Path("/h/.cline/data/settings/providers.json")
COMMAND = build_command("/usr/bin/python3", "/h/.local/share/ctxd/client/ctxd_hook.py", "cline")


def _request() -> InstallRequest:
    return InstallRequest(path=SETTINGS, command=lambda event: COMMAND)


def test_install_changes_no_document_and_names_each_file() -> None:
    doc = {"version": 1, "providers": {}}
    new, notes = install.install(doc, _request())
    assert new is doc
    text = " ".join(notes)
    for name in install.HOOK_FILES:
        assert f"/h/.cline/hooks/{name}" in text
    assert repr(install.hook_script(COMMAND)) in text
    assert install.uninstall(doc, _request())[0] is doc


def _hook(folder: Path, name: str, text: str, mode: int = 0o755) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_doctor_finds_ctxds_file_beside_the_users_own(tmp_path: Path) -> None:
    folder = tmp_path / ".cline" / "hooks"
    settings = tmp_path / ".cline" / "data" / "settings" / "providers.json"
    _hook(folder, "PostToolUse", "#!/bin/sh\necho '{}'\n")  # the user's own
    assert install.packaged({}, settings) is None
    ours = _hook(folder, "PostToolUse.bash", install.hook_script(COMMAND))
    found = install.packaged({}, settings)
    assert found is not None and found.where == str(ours)


def test_doctor_is_not_held_by_a_fifo_named_as_a_hook(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "hooks"
    folder.mkdir()
    os.mkfifo(folder / "PostToolUse.sh")
    assert install.ours_in(folder) is None
    assert install.ours_in(tmp_path / "missing") is None


def test_doctor_runs_the_hook_file_as_cline_does(tmp_path: Path) -> None:
    from ctxd.agents.hookcmd import hook_command, install_client

    env = {
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    (tmp_path / "run").mkdir(mode=0o700)
    install_client(env)
    _hook(
        tmp_path / ".cline" / "hooks",
        "PostToolUse.bash",
        install.hook_script(hook_command("cline", None, env)),
    )
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = [line for line in out.stdout.splitlines() if "cline hook" in line]
    assert len(lines) == 2 and all(line.startswith("ok") for line in lines), out.stdout


def test_the_cli_prints_the_files_and_writes_nothing(tmp_path: Path) -> None:
    settings = tmp_path / ".cline" / "data" / "settings" / "providers.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"version": 1}\n')
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "s")}
    out = subprocess.run(
        [sys.executable, "-m", "ctxd", "install", "cline"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / ".cline" / "hooks" / "PostToolUse.bash") in out.stdout + out.stderr
    assert settings.read_text() == '{"version": 1}\n'
    assert not (tmp_path / ".cline" / "hooks").exists()
