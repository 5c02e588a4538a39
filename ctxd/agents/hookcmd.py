"""The exact command line an agent runs for a ctxd hook, the copy of the client it runs, and how
to recognise one.

Hooks run on every tool call, so the command skips everything that costs start-up time: it names
a real interpreter (no shim, no console-script wrapper), runs with `-S -I` (no site import, no
user site, no environment-driven paths, not the agent's cwd on sys.path) and *imports* the
one-file client from its directory rather than running it as a script: a script is compiled on
every run, an imported module comes from its cached bytecode (docs/benchmarks.md).

A hook command must also outlive every reinstall of ctxd (editable or not, an upgrade, a moved
venv, `pipx reinstall`): none of them may leave the agent running a path that is gone. So the
command names nothing a reinstall moves:

- the client (`ctxd_hook.py` + `ctxd_wire.py`, stdlib only) is copied to a per-user directory,
  `$XDG_DATA_HOME/ctxd/client` (default `~/.local/share/ctxd/client`), by `ctxd install`, and
  refreshed by every later run of ctxd whose copy differs (`refresh_client`);
- the interpreter is the *base* Python under the venv (`sys._base_executable`, past any pyenv
  shim): the client needs no site-packages, and a venv can move or be rebuilt while its base
  stays where it is;
- the one thing that does move, where ctxd itself is installed, matters only when a hook finds
  no daemon and starts one: the file `ctxd-command` beside the copy names it (one argument per
  line), and every ctxd run rewrites it. The client falls back to `ctxd` on PATH when the named
  interpreter is gone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from ctxd.errors import CtxdError
from ctxd.fileio import write_atomic

CLIENT_MODULE = "ctxd_hook"
CLIENT_SCRIPT = "ctxd-hook"
#: The modules copied into the client directory: the client, the wire module it imports, and
#: the tmux line (run from there by the base interpreter with `-S -I`, it starts fastest).
CLIENT_MODULES = (CLIENT_MODULE, "ctxd_wire", "ctxd_line")
#: Plugin files of agents that load a plugin instead of running a command (`clients/<path>`),
#: copied beside the client: where `ctxd install` points the agent at them.
CLIENT_FILES = ("opencode_family/plugin.js", "opencode/ctxd.js", "kilo/ctxd.js", "pi/ctxd.ts")
#: The file beside the copied client that names the command running ctxd (one word per line).
CTXD_COMMAND_FILE = "ctxd-command"
#: The path under which the daemon's HTTP listener takes hooks (`ctxd.daemon.http.HOOK_PATH`).
HOOK_URL_PATH = "/ctxd/hook/"

__all__ = [
    "CLIENT_MODULE",
    "CTXD_COMMAND_FILE",
    "base_interpreter",
    "build_command",
    "client_dir",
    "client_file_source",
    "client_path",
    "ctxd_command",
    "hook_command",
    "install_client",
    "interpreter",
    "is_ctxd_command",
    "real_interpreter",
    "refresh_client",
    "replacing_command",
    "unwrap_command",
    "user_statusline",
    "wrap_command",
]

#: The client's flag for a statusline that is the user's own command run by ctxd's client
#: (`ctxd_hook.WRAP_FLAG`).
WRAP_FLAG = "--wrap"
#: Ends ctxd's statusline command when it replaced the user's own statusline (`install
#: --statusline`), followed by that statusline as JSON: what uninstall puts back. The client
#: ignores every word after the agent and the event, so any client runs the command.
REPLACED_FLAG = "--replaced"


def _module_source(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise CtxdError(f"the hook client module {module!r} is not importable; reinstall ctxd")
    return Path(spec.origin).absolute()


def client_path() -> Path:
    """Where this install's own `ctxd_hook.py` is (the source of the copy); `CtxdError` when it
    cannot be found."""
    return _module_source(CLIENT_MODULE)


def client_file_source(name: str) -> Path | None:
    """This install's copy of plugin file `name` (one of `CLIENT_FILES`): beside the client
    modules (`clients/` in a source tree), else inside the package (a wheel); None if absent."""
    for candidate in (
        _module_source("ctxd_wire").parent / name,
        Path(__file__).parent / Path(name).parent / Path(name).name,
    ):
        if candidate.is_file():
            return candidate
    return None


def client_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where hooks find the client: `$XDG_DATA_HOME/ctxd/client`, default
    `~/.local/share/ctxd/client`. Nothing in it moves when ctxd is reinstalled."""
    base = env.get("XDG_DATA_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".local", "share"
    )
    return Path(base) / "ctxd" / "client"


def ctxd_command() -> list[str]:
    """The command that runs this ctxd (`<venv python> -I -m ctxd`), for a hook to start it.

    `-I`: the hook runs in the agent's project, and `-m` would otherwise import from there.
    """
    return [interpreter(), "-I", "-m", "ctxd"]


def _write_if_changed(path: Path, data: bytes) -> bool:
    try:
        if path.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    write_atomic(path, data, 0o600)
    return True


def install_client(env: Mapping[str, str] = os.environ) -> Path:
    """Copy this install's client into `client_dir(env)` (a private directory) and name this
    ctxd in its `ctxd-command` file; files already equal are left alone. Returns the directory.

    Raises `CtxdError` when the directory cannot be written.
    """
    directory = client_dir(env)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        written = False
        for module in CLIENT_MODULES:
            source = _module_source(module)
            written |= _write_if_changed(directory / source.name, source.read_bytes())
        for name in CLIENT_FILES:
            plugin = client_file_source(name)
            if plugin is not None:
                (directory / name).parent.mkdir(mode=0o700, exist_ok=True)
                written |= _write_if_changed(directory / name, plugin.read_bytes())
        command = "".join(f"{word}\n" for word in ctxd_command()).encode()
        _write_if_changed(directory / CTXD_COMMAND_FILE, command)
    except OSError as exc:
        raise CtxdError(f"cannot write the hook client into {directory}: {exc}") from exc
    if written:
        _compile(directory)
    return directory


def _compile(directory: Path) -> None:
    """Byte-compile the copies now, so that the first hook does not pay for it (the hook's
    interpreter is the base of this one: same version, same cache tag)."""
    import contextlib
    import py_compile

    for module in CLIENT_MODULES:
        with contextlib.suppress(OSError, py_compile.PyCompileError):  # the first hook will
            py_compile.compile(str(directory / f"{module}.py"), doraise=True)


def refresh_client(env: Mapping[str, str] = os.environ) -> bool:
    """`install_client`, if a copy was ever installed (never creates one: a ctxd run that is
    not `ctxd install` writes nothing into a home where ctxd was never installed). Returns
    whether there was a copy to refresh."""
    if not (client_dir(env) / f"{CLIENT_MODULE}.py").exists():
        return False
    install_client(env)
    return True


def real_interpreter(executable: str, prefix: str, version: tuple[int, int]) -> str:
    """The interpreter path to write into hooks, given `sys.executable`-like values.

    A pyenv (or asdf) shim is a shell script that re-resolves the version on every call, which
    costs tens of milliseconds and can pick another Python in another directory; it is replaced
    by the binary under `prefix`. Anything else, a venv's `bin/python` included, is kept as is:
    resolving a venv's symlink would lose the venv's site-packages.
    """
    path = Path(executable)
    if path.parent.name == "shims":
        major, minor = version
        for name in (f"python{major}.{minor}", f"python{major}", "python"):
            candidate = Path(prefix) / "bin" / name
            if candidate.exists():
                return str(candidate)
    return executable


def interpreter() -> str:
    """The real interpreter running ctxd now, venv and all (see `real_interpreter`): what runs
    `ctxd serve`."""
    executable = sys.executable or sys._base_executable  # type: ignore[attr-defined]
    if not executable:
        raise CtxdError("cannot tell which Python interpreter runs ctxd (sys.executable is empty)")
    return real_interpreter(
        os.path.abspath(executable), sys.base_prefix, (sys.version_info[0], sys.version_info[1])
    )


def base_interpreter() -> str:
    """The interpreter for hook commands: the base Python under this one's venv, if any, past
    any shim. It runs the stdlib-only client, and it stays put when the venv moves."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    if not base:
        raise CtxdError("cannot tell which Python interpreter runs ctxd (sys.executable is empty)")
    return real_interpreter(
        os.path.abspath(base), sys.base_prefix, (sys.version_info[0], sys.version_info[1])
    )


def build_command(python: str, client: Path | str, agent: str, event: str | None = None) -> str:
    """`<python> -S -I -c '<import the client from its dir; main()>' <agent> [event]`, quoted."""
    directory = str(Path(client).parent)
    module = Path(client).stem
    # A JSON string is a valid Python string literal, and its double quotes keep the shell
    # quoting around the whole snippet readable.
    code = f"import sys;sys.path[:0]=[{json.dumps(directory)}];import {module} as h;h.main()"
    parts = [python, "-S", "-I", "-c", code, agent]
    if event is not None:
        parts.append(event)
    return shlex.join(parts)


def hook_command(agent: str, event: str | None = None, env: Mapping[str, str] = os.environ) -> str:
    """The command ctxd installs for `agent` (and `event`, e.g. "statusline"): the base
    interpreter importing the client copied into `client_dir(env)` (`install_client`)."""
    return build_command(base_interpreter(), client_dir(env) / f"{CLIENT_MODULE}.py", agent, event)


def is_ctxd_command(command: object) -> bool:
    """Whether a hook command is one ctxd installed: it runs `ctxd_hook.py` or `ctxd-hook`.

    Matches on the client's file or script name only, so a command survives a move of the
    interpreter or of the virtualenv and is still found (and replaced) by the next install.
    """
    if not isinstance(command, str):
        return False
    if command.startswith("http://"):  # an HTTP hook's URL: the daemon's hook path
        return HOOK_URL_PATH in command
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        name = word.replace("\\", "/").rsplit("/", 1)[-1]
        if name in (f"{CLIENT_MODULE}.py", CLIENT_SCRIPT) or f"import {CLIENT_MODULE} " in word:
            return True
    return False


def wrap_command(command: str, foreign: str) -> str:
    """ctxd's statusline `command` running the user's own `foreign` one: the client hands the
    payload to both and prints only what `foreign` prints (see `ctxd_hook.wrapped`)."""
    return f"{command} {WRAP_FLAG} {shlex.quote(foreign)}"


def replacing_command(command: str, replaced: Mapping[str, object] | None) -> str:
    """ctxd's statusline `command`, carrying the user's statusline object it `replaced` (None:
    it replaced nothing)."""
    if replaced is None:
        return command
    text = json.dumps(replaced, separators=(",", ":"), ensure_ascii=False)
    return f"{command} {REPLACED_FLAG} {shlex.quote(text)}"


def _replaced(command: object) -> dict[str, object] | None:
    """The statusline object a command made by `replacing_command` carries; None for any other."""
    if not is_ctxd_command(command):
        return None
    assert isinstance(command, str)
    try:
        words = shlex.split(command)
        if len(words) >= 2 and words[-2] == REPLACED_FLAG:
            found = json.loads(words[-1])
            return found if isinstance(found, dict) else None
    except ValueError:  # json's errors are ValueErrors too
        pass
    return None


def user_statusline(current: object) -> dict[str, object] | None:
    """The user's own statusline object behind the settings' `current` one, exactly as it was:
    `current` itself when it is no ctxd command, the user's command that ctxd's client runs
    (`wrap_command`), or the one ctxd's line replaced (`replacing_command`); None when there is
    none (ctxd's plain line, or nothing set)."""
    if not isinstance(current, dict):
        return None
    command = current.get("command")
    foreign = unwrap_command(command)
    if foreign is not None:
        return {**current, "command": foreign}
    if is_ctxd_command(command):
        return _replaced(command)
    return dict(current)


def unwrap_command(command: object) -> str | None:
    """The user's own command that a ctxd command made by `wrap_command` runs, exactly as it
    was; None for any other command."""
    if not is_ctxd_command(command):
        return None
    assert isinstance(command, str)
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) >= 2 and words[-2] == WRAP_FLAG:
        return words[-1]
    return None
