"""The native hook client: `clients/ctxd_hook.c`, compiled on the user's machine by `ctxd install`.

An agent runs a hook command on every tool call, and the Python client's cost is almost all the
interpreter's start-up; the same client in C costs a few times a bare `sh -c true`
(docs/benchmarks.md). It is built where it runs, so nothing binary ships and the README's two
commands stay the same: with a C compiler on PATH (`cc`, `gcc`, `clang`), `ctxd install`
compiles the copied source into the per-user client directory; without one, hooks keep the
stdlib Python client, and `ctxd doctor` says so and why (`client_choice`).

In that directory a build is `ctxd-hook-<hash of its source>`, compiled under a temporary name
and renamed in place, and `ctxd-hook` is a symlink to the build of the current source, swapped
atomically: hook commands name the link, so an upgrade never leaves an agent running a path that
is gone, and a hook already running keeps its old build's file. A build that failed is recorded
(`BUILD_FAILED`) so that later ctxd runs do not retry the same source with the same compiler.

`CTXD_HOOK_CLIENT` chooses: `python` keeps the Python client; `native` requires this one (an
install fails when it cannot be built; the e2e suites use it); unset takes the native one when
it can be built.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ctxd.errors import CtxdError

__all__ = [
    "CHOICE_ENV",
    "LINK",
    "SOURCE",
    "ClientChoice",
    "build",
    "client_choice",
    "current_build",
    "find_compiler",
    "source_path",
]

#: The source file, in `clients/` (a source tree) or beside the agents' packages (a wheel).
SOURCE = "ctxd_hook.c"
#: The name hook commands run: a symlink to the build of the current source.
LINK = "ctxd-hook"
#: Where a failed build is recorded: the source's hash, the compiler, and what it said.
BUILD_FAILED = "ctxd-hook.build-failed"
CHOICE_ENV = "CTXD_HOOK_CLIENT"
COMPILERS = ("cc", "gcc", "clang")
#: No -Werror here (the project's own builds use it): a new compiler's new warning must not
#: cost a user the native client.
FLAGS = ("-O2", "-Wall", "-Wextra")
#: Tried in turn: linked statically first, as a hook process then skips the dynamic loader
#: (about 0.2 ms of CPU a hook, an eighth of its cost: docs/benchmarks.md), else dynamically
#: where the C library has no static archive (macOS, a libc without libc.a).
LINKING: tuple[tuple[str, ...], ...] = (("-static",), ())
COMPILE_TIMEOUT = 60.0


@dataclass(frozen=True)
class ClientChoice:
    """Which client the hook commands run and why, for `ctxd doctor`; `path` is the native
    client's link when it is the one."""

    native: bool
    reason: str
    path: Path | None = None

    def describe(self) -> str:
        return f"{'native' if self.native else 'Python'} ({self.reason})"


def source_path() -> Path | None:
    """This install's `ctxd_hook.c`, or None when it is not shipped."""
    import importlib.util

    spec = importlib.util.find_spec("ctxd_wire")
    candidates = [Path(__file__).parent / SOURCE]
    if spec is not None and spec.origin:
        candidates.insert(0, Path(spec.origin).parent / SOURCE)
    return next((c for c in candidates if c.is_file()), None)


def _build_name(source: bytes) -> str:
    # The flags are part of what is built: a change of them builds again.
    recipe = source + repr((FLAGS, LINKING)).encode()
    return f"{LINK}-{hashlib.sha256(recipe).hexdigest()[:16]}"


def find_compiler(env: Mapping[str, str]) -> str | None:
    """The first C compiler on `env`'s PATH."""
    path = env.get("PATH", os.defpath)
    return next((found for cc in COMPILERS if (found := shutil.which(cc, path=path))), None)


def current_build(directory: Path) -> Path | None:
    """The link hooks run, if it names the build of the source copied into `directory`."""
    try:
        source = (directory / SOURCE).read_bytes()
        target = os.readlink(directory / LINK)
    except OSError:
        return None
    name = _build_name(source)
    if target != name or not os.access(directory / name, os.X_OK):
        return None
    return directory / LINK


def _failed_before(directory: Path, name: str, compiler: str) -> str | None:
    """What the compiler said when it last failed on this source, if it did."""
    try:
        head, _, said = (directory / BUILD_FAILED).read_text(errors="replace").partition("\n")
    except OSError:
        return None
    return said.strip() or "no message" if head == f"{name} {compiler}" else None


def build(directory: Path, env: Mapping[str, str]) -> ClientChoice:
    """Compile the source copied into `directory` unless its build is there already, and point
    the link at it. Returns the client hooks should run; never raises for a missing or failing
    compiler (the Python client is the fallback), except under `CTXD_HOOK_CLIENT=native`."""
    choice = _build(directory, env)
    if env.get(CHOICE_ENV) == "native" and not choice.native:
        raise CtxdError(
            f"{CHOICE_ENV}=native, but the native client cannot be used: {choice.reason}"
        )
    return choice


def _build(directory: Path, env: Mapping[str, str]) -> ClientChoice:
    assessed = _assess(directory, env)
    if isinstance(assessed, ClientChoice):
        return assessed
    compiler, name = assessed
    said = _compile(directory, name, compiler, env)
    if said is not None:
        return ClientChoice(False, f"{compiler} could not build {SOURCE}: {said}")
    _point_link(directory, name)
    link = directory / LINK
    return ClientChoice(True, f"{link}, compiled from {SOURCE} by {compiler}", link)


def _assess(directory: Path, env: Mapping[str, str]) -> ClientChoice | tuple[str, str]:
    """The client hooks run as things stand, or (compiler, build name) when a build is due."""
    if env.get(CHOICE_ENV) == "python":
        return ClientChoice(False, f"{CHOICE_ENV}=python")
    link = current_build(directory)
    if link is not None:
        return ClientChoice(True, f"{link}, compiled from {SOURCE}", link)
    compiler = find_compiler(env)
    if compiler is None:
        return ClientChoice(
            False,
            "no C compiler found (cc, gcc, clang): install gcc and run `ctxd install AGENT` "
            "again for a ~5x cheaper hook",
        )
    try:
        name = _build_name((directory / SOURCE).read_bytes())
    except OSError:
        return ClientChoice(
            False, f"not built yet: `ctxd install AGENT` compiles it with {compiler}"
        )
    said = _failed_before(directory, name, compiler)
    if said is not None:
        return ClientChoice(False, f"{compiler} could not build {SOURCE}: {said}")
    return compiler, name


def _compile(directory: Path, name: str, compiler: str, env: Mapping[str, str]) -> str | None:
    """Build `name` from the source in `directory`; None on success, else what went wrong (and
    it is recorded in BUILD_FAILED)."""
    temporary = directory / f".{name}.{os.getpid()}.tmp"
    try:
        for linking in LINKING:
            done = subprocess.run(
                [compiler, *FLAGS, *linking, "-o", str(temporary), SOURCE],
                cwd=directory,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=COMPILE_TIMEOUT,
                check=False,
            )
            if done.returncode == 0:
                break
        if done.returncode == 0:
            temporary.chmod(0o700)
            os.replace(temporary, directory / name)
            with contextlib.suppress(OSError):
                (directory / BUILD_FAILED).unlink()
            return None
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        said = next((line for line in lines if "error" in line), lines[0] if lines else "")
        said = said or f"exit {done.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        said = str(exc)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink()
    with contextlib.suppress(OSError):
        (directory / BUILD_FAILED).write_text(f"{name} {compiler}\n{said[:500]}\n")
    return said[:500]


def _point_link(directory: Path, name: str) -> None:
    """Swap the link to `name` atomically, then remove the builds it no longer names (a hook
    running one keeps its open file)."""
    temporary = directory / f".{LINK}.{os.getpid()}.lnk"
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    os.symlink(name, temporary)
    os.replace(temporary, directory / LINK)
    # What the link names now: another ctxd (another version) may have swapped it meanwhile.
    keep = {name, os.readlink(directory / LINK)}
    for old in directory.glob(f"{LINK}-*"):
        if old.name not in keep and len(old.name) == len(name):
            with contextlib.suppress(OSError):
                old.unlink()


def client_choice(directory: Path, env: Mapping[str, str]) -> ClientChoice:
    """Which client hook commands written now would run, and why (builds nothing)."""
    assessed = _assess(directory, env)
    if isinstance(assessed, ClientChoice):
        return assessed
    return ClientChoice(
        False, f"not built yet: `ctxd install AGENT` compiles it with {assessed[0]}"
    )
