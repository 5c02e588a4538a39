"""The package's shape is its design: checked over every module's imports (AST), so that a move
that breaks it fails here, not in a reviewer's head.

  cli/     commands, report, replay, doctor, service, install
  daemon/  rooms (sessions, transcripts, answers, status), server, files, watcher, lifecycle
  agents/  one package per agent, and the agent registry
  core/    pure: values in, values out
  bottom   errors, paths, fileio, protocol (and the stdlib `ctxd_wire`)

Each layer imports only from the layers below it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ctxd"
LAYERS = {"core": 1, "agents": 2, "daemon": 3, "cli": 4}
BOTTOM = {"errors", "paths", "fileio", "protocol", "__init__", "__main__"}
AGENT_NAMES = {"claude", "gemini", "codex", "qwen"}
# What a pure module may not import: I/O, clocks, event loops, config files, the file watcher.
IMPURE = {"os", "socket", "_socket", "anyio", "trio", "asyncio", "pathlib", "time", "tomllib"}
IMPURE |= {"watchfiles", "subprocess", "shutil", "tempfile", "io", "logging", "fcntl", "signal"}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    if module == "ctxd.__main__":  # `python -m ctxd`: the entry point sits on top of all
        return len(LAYERS) + 1
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "ctxd":
        return 0
    return LAYERS.get(parts[1], 0)


def _imports(path: Path) -> list[str]:
    """Every module `path` imports, at any depth of the file (function-level imports too)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            # `from ctxd import agents` imports the module ctxd.agents.
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def test_the_layers_exist_as_packages() -> None:
    for layer in LAYERS:
        assert (PACKAGE / layer / "__init__.py").is_file(), layer
    flat = {p.stem for p in PACKAGE.glob("*.py")}
    assert flat <= BOTTOM, f"modules outside the layers: {sorted(flat - BOTTOM)}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: _name(p))
def test_no_module_imports_from_a_layer_above_its_own(path: Path) -> None:
    own = _layer(_name(path))
    upward = [
        imported
        for imported in _imports(path)
        if imported.startswith("ctxd.") and _layer(imported) > own
    ]
    assert not upward, f"{_name(path)} (layer {own}) imports {upward}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "core").glob("*.py")), ids=lambda p: _name(p))
def test_the_core_imports_nothing_that_does_io(path: Path) -> None:
    impure = sorted({name for name in _imports(path) if name.split(".")[0] in IMPURE})
    assert not impure, f"{_name(path)} imports {impure}"


def test_importing_the_core_in_a_fresh_interpreter_loads_no_io_library() -> None:
    modules = [_name(p) for p in sorted((PACKAGE / "core").glob("*.py"))]
    code = (
        "import sys\n"
        f"for name in {modules!r}: __import__(name)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=PACKAGE.parent,
            capture_output=True,
            check=True,
            text=True,
        ).stdout.split()
    )
    heavy = {"anyio", "socket", "_socket", "tomllib", "watchfiles", "orjson", "asyncio"}
    assert not loaded & heavy, sorted(loaded & heavy)
    assert not {m for m in loaded if m.startswith(("ctxd.agents", "ctxd.daemon", "ctxd.cli"))}


def _agent_literals(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in AGENT_NAMES
    ]


def test_no_module_outside_the_agents_names_an_agent() -> None:
    agents_dir = PACKAGE / "agents"
    named = {
        _name(path): found
        for path in _modules()
        if agents_dir not in path.parents and (found := _agent_literals(path))
    }
    assert not named, f"agents named outside ctxd/agents: {named}"


def test_each_agent_is_one_package_listed_in_the_registry() -> None:
    from ctxd import agents

    packages = {p.parent.name for p in (PACKAGE / "agents").glob("*/__init__.py")}
    assert packages == set(agents.AGENTS)
    for name in agents.AGENTS:
        assert agents.spec(name).name == name
