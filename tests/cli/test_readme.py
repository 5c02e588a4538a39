"""The README is tested like code (after watchfiles' tests/test_docs.py): its config sample goes
through the config loader and names every key that exists, every command it shows has a `--help`
that knows its options, and CI runs exactly its test command."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ctxd.agents import AGENTS, spec
from ctxd.daemon.config import parse_settings
from ctxd.errors import ConfigError

if TYPE_CHECKING:
    from conftest import World

REPO = Path(__file__).parents[2]
README = (REPO / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def _config_sample() -> str:
    (sample,) = _blocks("toml")
    return sample


def _known(text: str) -> set[str]:
    """The names a config error lists after "known: "."""
    with pytest.raises(ConfigError) as caught:
        parse_settings(text)
    return set(str(caught.value).split("known: ", 1)[1].split(", "))


def test_the_config_sample_loads() -> None:
    sample = _config_sample()
    parse_settings(sample)
    # The keys shown commented out (they have no default) load too, once uncommented.
    uncommented = re.sub(r"^# (\w+ = )", r"\1", sample, flags=re.M)
    assert uncommented != sample
    # [handoff] remaining is the other spelling of at: one of the two.
    assert re.search(r"^remaining = ", uncommented, re.M)
    parse_settings(re.sub(r"^at = .*\n", "", uncommented, flags=re.M))


def test_the_config_sample_names_every_section_and_key() -> None:
    sample = re.sub(r"^# (\w+ = )", r"\1", _config_sample(), flags=re.M)
    sections = _known("[no_such_section]\n")
    shown = set(re.findall(r"^\[(\w+)[\].]", sample, re.M))
    assert shown == sections
    # [windows] takes any model id; [compaction] holds a table per agent, checked below.
    for section in sections - {"windows", "compaction"}:
        assert set(re.findall(r"^(\w+) =", _body(sample, section), re.M)) == _keys(section)
    for agent in AGENTS:
        keys = {key.name for key in spec(agent).config_keys}
        section = f"compaction.{agent}"
        shown_keys = set(re.findall(r"^(\w+) =", _body(sample, section), re.M))
        assert shown_keys == keys, section


def test_the_older_compaction_keys_are_named() -> None:
    aliases = [key.alias for agent in AGENTS for key in spec(agent).config_keys if key.alias]
    assert aliases
    assert all(f"`{alias}`" in README for alias in aliases), aliases


def _body(sample: str, section: str) -> str:
    """The lines of `[section]` in the sample ("" when it is not shown)."""
    _, found, rest = sample.partition(f"[{section}]")
    return rest.split("\n[", 1)[0] if found else ""


def _keys(section: str) -> set[str]:
    return _known(f"[{section}]\nno_such_key = 1\n")


def test_the_first_commands_use_a_venv_and_ci_runs_the_test_command_verbatim() -> None:
    install, tests = (block.strip() for block in _blocks("sh")[:2])
    assert install == (
        "python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/ctxd install claude"
    )
    assert tests.startswith("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && ")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci


def _table_commands() -> list[tuple[str, set[str]]]:
    rows = re.findall(r"^\| `ctxd ([a-z]+)([^`]*)` \|", README, re.M)
    assert len(rows) >= 9
    return [(verb, set(re.findall(r"--[a-z-]+", rest))) for verb, rest in rows]


@pytest.mark.parametrize(("verb", "options"), _table_commands(), ids=lambda v: str(v))
@pytest.mark.slow
def test_every_command_in_the_readme_has_help_for_its_options(verb: str, options: set[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxd", verb, "--help"], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    for option in options:
        assert re.search(rf"{option}\b.*\n?\s+\S", done.stdout), (option, done.stdout)


def test_the_command_table_names_every_option_each_verb_takes() -> None:
    """The other way round: an option `ctxd VERB --help` lists is in the verb's row (the rows
    had lost `install --transport` and `handoff --agent`)."""
    import argparse

    from ctxd.cli import build_parser

    for verb, shown in _table_commands():
        parser = build_parser(verb)
        (verbs,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        options = {
            option
            for action in verbs.choices[verb]._actions
            if action.help is not argparse.SUPPRESS
            for option in action.option_strings
            if option.startswith("--") and option != "--help"
        }
        assert options <= shown, (verb, sorted(options - shown))


def test_every_ctxd_command_in_the_code_blocks_parses() -> None:
    """Each `ctxd VERB ...` line of the sh blocks is a command the parser accepts."""
    from ctxd.cli import build_parser

    parser = build_parser()
    lines = [
        line.split("#", 1)[0].strip()
        for block in _blocks("sh")[2:]
        for line in block.splitlines()
        if line.startswith("ctxd ")
    ]
    assert len(lines) >= 5
    for line in lines:
        parser.parse_args(line.split()[1:])


def test_the_shown_status_fits_in_100_columns() -> None:
    shown = [block for block in _blocks("text") if "AGENT   SESSION" in block]
    assert shown and all(len(line) <= 100 for line in shown[0].splitlines())


def _path_without_node(tmp_path: Path, npm: str | None = None) -> str:
    """A PATH with every program of this machine's but Node's (`npm`: a script put there as
    npm instead)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    node = {"node", "nodejs", "npm", "npx", "corepack"}
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for program in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else ():
            link = bin_dir / program.name
            if program.name not in node and not link.exists():
                link.symlink_to(program)
    if npm is not None:
        (bin_dir / "npm").write_text(npm)
        (bin_dir / "npm").chmod(0o755)
    return str(bin_dir)


def _install_step() -> list[str]:
    """The README's test command's install step, as its words."""
    (_, tests) = (block.strip() for block in _blocks("sh")[:2])
    (step,) = (part.strip() for part in tests.split("&&") if "install-agents" in part)
    return step.split()


@pytest.mark.slow
def test_the_test_commands_install_step_goes_on_without_node(tmp_path: Path) -> None:
    env = {"PATH": _path_without_node(tmp_path), "HOME": str(tmp_path)}
    env["CTXD_E2E_CACHE"] = str(tmp_path / "cache")

    done = subprocess.run(_install_step(), cwd=REPO, env=env, capture_output=True, text=True)

    assert done.returncode == 0, done.stderr  # so `&& .venv/bin/python -m pytest` runs
    (line,) = done.stderr.splitlines()
    assert line.startswith("[install-agents] npm not found: ") and "will skip" in line, line
    required = subprocess.run(
        _install_step(), cwd=REPO, env={**env, "CTXD_E2E_REQUIRED": "1"}, capture_output=True
    )
    assert required.returncode == 1


@pytest.mark.slow
def test_an_install_that_can_run_and_fails_stops_the_command(tmp_path: Path) -> None:
    """With npm there, a failed download still fails the command (CI must see it), after
    saying what it was to download and how big, and which package failed."""
    npm = "#!/bin/sh\necho 'npm ERR! network unreachable'\nexit 1\n"
    env = {"PATH": _path_without_node(tmp_path, npm), "HOME": str(tmp_path)}
    env["CTXD_E2E_CACHE"] = str(tmp_path / "cache")

    done = subprocess.run(_install_step(), cwd=REPO, env=env, capture_output=True, text=True)

    assert done.returncode == 1
    plan = next(line for line in done.stderr.splitlines() if "to download:" in line)
    assert re.search(r"to download: \d+ package\(s\), about [1-9]\d* MB", plan), plan
    assert "@anthropic-ai/claude-code@" in plan
    assert re.search(r"\[1/\d+\] npm install \S+ \(\d+ MB\)", done.stderr), done.stderr
    assert "failed, see " in done.stderr and "npm ERR! network unreachable" in done.stderr


@pytest.mark.slow
def test_the_first_command_ends_without_blocking_on_a_fresh_home(world: World) -> None:
    """Its last step (`ctxd ...` after the install) returns at once in a HOME with nothing in
    it, having said what it did: it is no foreground daemon (the first hook starts that)."""
    (install, _) = (block.strip() for block in _blocks("sh")[:2])
    last = install.split("&&")[-1].split()
    assert last[0] == ".venv/bin/ctxd"

    done = world.cli(*last[1:], timeout=30)

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("registered ctxd's hooks in "), done.stdout
