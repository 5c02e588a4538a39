"""Gemini CLI: everything ctxd knows about it, as one `AgentSpec`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from ctxd.agents.gemini import files, install
from ctxd.agents.gemini.compaction import CONFIG_KEYS, compaction_point, settings_config
from ctxd.agents.gemini.digest import GeminiFacts
from ctxd.agents.gemini.hooks import DIALECT
from ctxd.agents.gemini.models import MODELS
from ctxd.agents.gemini.transcript import GeminiJsonReader, GeminiReader
from ctxd.agents.hookcmd import plugin_command
from ctxd.agents.models import windows as model_windows
from ctxd.agents.reader import NO_FACTS, FactListener
from ctxd.agents.settings_file import settings_reader
from ctxd.agents.spec import AgentSpec, Installer, InstallRequest, Json, Packaged
from ctxd.core.compaction import for_agent
from ctxd.untrusted import read_head

__all__ = ["SPEC"]

NAME = "gemini"


#: Enough of a recording to tell its format by.
_HEAD = 256


def _is_legacy(path: str | None) -> bool:
    """Whether `path` is an older single-object recording: told by its first bytes, so that a
    copy under any name reads right; by its name while it has none yet."""
    if path is None:
        return False
    try:
        head = read_head(path, _HEAD)  # a hook's path: whatever is there, it must not block
    except OSError:
        head = b""
    if head.strip():
        return files.is_document(head)
    return path.endswith(".json")


def _open_reader(
    path: str | None, facts: FactListener = NO_FACTS, *, usage: bool = True
) -> GeminiReader | GeminiJsonReader:
    if _is_legacy(path):
        return GeminiJsonReader()  # keeps no digest: it has no facts to tell
    return GeminiReader(facts, usage)


def _open_facts(path: str | None) -> GeminiFacts | None:
    if _is_legacy(path):
        return None  # rewritten whole on every change: no digest kept
    return GeminiFacts()


def _settings_files(env: Mapping[str, str], cwd: str | None) -> tuple[Path, ...]:
    # User settings, then the workspace's, which outrank them.
    user = install.settings_path(env)
    return (user, Path(cwd) / ".gemini" / "settings.json") if cwd else (user,)


def _extension(settings: Path) -> Path | None:
    """ctxd's Gemini extension's folder, when Gemini CLI has it installed."""
    folder = settings.parent / "extensions" / install.NAME
    return folder if (folder / "gemini-extension.json").exists() else None


def _packaged(doc: Json, path: Path) -> Packaged | None:
    folder = _extension(path)
    return None if folder is None else Packaged("extension", str(folder), plugin_command(NAME))


def _install(doc: Json, request: InstallRequest) -> tuple[Json, tuple[str, ...]]:
    new, notes = install.install(doc, request.command(None))
    folder = _extension(request.path)
    if folder is not None:
        notes = (
            *notes,
            f"the ctxd Gemini extension is installed too ({folder}): every hook "
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
    compaction=for_agent(NAME, compaction_point),
    config_keys=CONFIG_KEYS,
    installer=Installer(
        settings_path=install.settings_path,
        install=_install,
        uninstall=_uninstall,
        packaged=_packaged,
    ),
    windows=MappingProxyType(model_windows(MODELS)),
    settings_files=_settings_files,
    read_settings=settings_reader(settings_config),
    open_facts=_open_facts,
)
