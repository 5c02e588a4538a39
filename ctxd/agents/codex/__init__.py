"""Codex CLI: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ctxd.agents.codex import files, install
from ctxd.agents.codex.compaction import compaction_point
from ctxd.agents.codex.hooks import DIALECT
from ctxd.agents.codex.transcript import CodexReader
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json

__all__ = ["SPEC"]

NAME = "codex"


def _open_reader(path: str | None) -> CodexReader:
    return CodexReader()


def _read_config(path: Path) -> Json | None:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError):
        return None


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    new = install.install(doc, request.command(None))
    config_path = request.path.parent / "config.toml"
    config = _read_config(config_path)
    notes = install.notes(new, request.path, config, config_path, changed=new != doc)
    if config is None:
        notes = (f"{config_path} could not be read; trust state unknown", *notes)
    return new, notes


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc), ()


SPEC = AgentSpec(
    name=NAME,
    title="Codex CLI",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=compaction_point,
    installer=Installer(
        settings_path=install.settings_path, install=_install, uninstall=_uninstall
    ),
)
