"""The package's shape is its design: checked over every module's imports (AST), so that a move
that breaks it fails here, not in a reviewer's head.

  cli/     commands, report, replay, doctor, service, install
  daemon/  rooms (sessions, transcripts, answers, status), server, files, watcher, lifecycle
  agents/  one package per agent, and the agent registry
  core/    pure: values in, values out
  bottom   errors, paths, fileio, untrusted, protocol (and the stdlib `ctxd_wire`)

Each layer imports only from the layers below it, the core does no I/O, and no module outside
ctxd/agents names an agent (in an identifier or a string; docstrings may).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ctxd"
LAYERS = {"core": 1, "agents": 2, "daemon": 3, "cli": 4}
BOTTOM = {"errors", "paths", "fileio", "untrusted", "protocol", "__init__", "__main__"}
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


def _agent_names() -> frozenset[str]:
    from ctxd.agents import AGENTS

    return frozenset(AGENTS)


#: Every agent's name, from the registry: a new agent is covered as soon as it is listed there.
AGENT_NAMES = _agent_names()


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes in `tree` (module, classes, functions)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _words(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, kind, text) for every identifier and every non-docstring string in `tree`."""
    docstrings = _docstrings(tree)
    found: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            found.append((line, "name", node.id))
        elif isinstance(node, ast.Attribute):
            found.append((line, "attribute", node.attr))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.append((line, "definition", node.name))
        elif isinstance(node, ast.arg):
            found.append((line, "argument", node.arg))
        elif isinstance(node, ast.keyword) and node.arg is not None:
            found.append((line, "keyword", node.arg))
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append((line, "import", node.module))
        elif isinstance(node, ast.alias):
            found += [(line, "import", name) for name in (node.name, node.asname) if name]
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ):
            found.append((line, "string", node.value))
    return found


#: A name this short is also a part of common words ("pi" of "typing", "pid"): it is matched
#: as a whole word part only (split at case changes, digits and anything not a letter).
_SHORT = 3
_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _names_an_agent(text: str) -> bool:
    lowered = text.lower()
    parts: set[str] | None = None
    for agent in AGENT_NAMES:
        if len(agent) > _SHORT:
            if agent in lowered:
                return True
            continue
        if parts is None:
            parts = {part.lower() for part in _PARTS.findall(text)}
        if agent in parts:
            return True
    return False


def _agent_words(path: Path) -> list[tuple[int, str, str]]:
    """The identifiers and strings of `path` that hold an agent's name (any case, any part)."""
    tree = ast.parse(path.read_text(), str(path))
    return sorted((line, kind, text) for line, kind, text in _words(tree) if _names_an_agent(text))


def test_no_module_outside_the_agents_names_an_agent() -> None:
    agents_dir = PACKAGE / "agents"
    named = {
        _name(path): [f"{line}: {kind} {text!r}" for line, kind, text in found]
        for path in _modules()
        if agents_dir not in path.parents and (found := _agent_words(path))
    }
    assert not named, f"agents named outside ctxd/agents: {named}"


def test_the_check_sees_names_inside_identifiers_and_strings() -> None:
    source = (
        '"""A docstring may say Claude Code."""\n'
        "def fit(claude_reserve: int) -> str:\n"
        "    rules.codex_fraction = ClaudeConfig(kind=1, gemini_x=2)\n"
        '    return f"{qwen} Gemini CLI"\n'
    )
    found = {(kind, text) for _, kind, text in _words(ast.parse(source))}
    named = {(k, t) for k, t in found if _names_an_agent(t)}
    assert named == {
        ("argument", "claude_reserve"),
        ("attribute", "codex_fraction"),
        ("name", "ClaudeConfig"),
        ("keyword", "gemini_x"),
        ("name", "qwen"),
        ("string", " Gemini CLI"),
    }


def test_a_short_name_is_seen_as_a_word_part_only() -> None:
    assert "pi" in AGENT_NAMES
    named = ("pi_window", "PiReader", "the pi extension", "PI_CODING_AGENT_DIR", "ctxd/pi.ts")
    assert all(_names_an_agent(text) for text in named)
    assert not any(_names_an_agent(t) for t in ("typing", "pid", "ping", "Mapping", "pick_up"))


def _defines_spec(package: Path) -> bool:
    tree = ast.parse((package / "__init__.py").read_text(), str(package))
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and any(isinstance(t, ast.Name) and t.id == "SPEC" for t in _targets(node))
        for node in tree.body
    )


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def test_each_agent_is_one_package_listed_in_the_registry() -> None:
    """An agent is a package with a `SPEC`, listed in the registry; a package beside them with
    none is what agents share (`opencode_family`), itself no agent."""
    from ctxd import agents

    packages = {p.parent for p in (PACKAGE / "agents").glob("*/__init__.py")}
    assert {p.name for p in packages if _defines_spec(p)} == set(agents.AGENTS)
    assert set(agents.AGENTS) <= {p.name for p in packages}
    for name in agents.AGENTS:
        assert agents.spec(name).name == name


def _agent_of(module: str) -> str | None:
    """The agent package `module` belongs to (`ctxd.agents.<name>...`), None for the others."""
    parts = module.split(".")
    if len(parts) > 2 and parts[:2] == ["ctxd", "agents"] and parts[2] in _agent_packages():
        return parts[2]
    return None


def _agent_packages() -> set[str]:
    return set(AGENT_NAMES)


@pytest.mark.parametrize(
    "path",
    [p for p in _modules() if _agent_of(_name(p))],
    ids=lambda p: _name(p),
)
def test_no_agent_imports_another_agent(path: Path) -> None:
    """What two agents share lives beside them in `ctxd/agents/`, never in one of them: an
    agent changed for its own users must not change another's behaviour."""
    own = _agent_of(_name(path))
    others = [m for m in _imports(path) if _agent_of(m) not in (None, own)]
    assert not others, f"{_name(path)} imports another agent: {others}"
