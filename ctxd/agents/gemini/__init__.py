"""Gemini CLI: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from types import MappingProxyType

from ctxd.agents.gemini import files, install
from ctxd.agents.gemini.compaction import WINDOWS, compaction_point
from ctxd.agents.gemini.hooks import DIALECT
from ctxd.agents.gemini.transcript import GeminiReader
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json

__all__ = ["SPEC"]

NAME = "gemini"


def _open_reader(path: str | None) -> GeminiReader:
    return GeminiReader()


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    new, notes = install.install(doc, request.command(None))
    extension = request.path.parent / "extensions" / install.NAME / "gemini-extension.json"
    if extension.exists():
        notes = (
            *notes,
            f"the ctxd Gemini extension is installed too ({extension.parent}): every hook "
            "would run twice; keep one (`gemini extensions uninstall ctxd`, or "
            "`ctxd uninstall gemini`)",
        )
    return new, notes


def _uninstall(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    return install.uninstall(doc)


SPEC = AgentSpec(
    name=NAME,
    title="Gemini CLI",
    dialect=DIALECT,
    files=files,
    open_reader=_open_reader,
    compaction=compaction_point,
    installer=Installer(
        settings_path=install.settings_path, install=_install, uninstall=_uninstall
    ),
    windows=MappingProxyType(dict(WINDOWS)),
)
