"""`ctxd install kimi`: ctxd's hooks in config.toml, the user's text kept byte for byte, and
uninstall giving it back; the status line command's payload."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from ctxd import agents
from ctxd.agents.hookcmd import install_client, unwrap_command
from ctxd.agents.kimi.install import EVENTS
from ctxd.cli.install import apply_plan, plan_install, plan_uninstall, settings_path
from ctxd.errors import InvalidInput, SettingsFileError

USER = """# my Kimi
default_model = "k2"   # comment kept

[models.k2]
provider = "moonshot"
model = "kimi-k2.6"
max_context_size = 262144

[[hooks]]
event = "Stop"
command = "notify-send done"
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"HOME": str(home), "PATH": os.environ.get("PATH", "")}


def test_install_appends_a_block_and_uninstall_gives_the_text_back(env: dict[str, str]) -> None:
    path = settings_path("kimi", env)
    path.parent.mkdir(parents=True)
    path.write_text(USER)
    plan = plan_install("kimi", env=env)
    assert plan.after.startswith(USER)
    apply_plan(plan)
    doc = tomllib.loads(path.read_text())
    assert doc["default_model"] == "k2"
    hooks = doc["hooks"]
    assert hooks[0] == {"event": "Stop", "command": "notify-send done"}
    assert [h["event"] for h in hooks[1:]] == list(EVENTS)
    assert all(re.search(r"ctxd[-_]hook", h["command"]) and h["timeout"] == 10 for h in hooks[1:])
    assert not plan_install("kimi", env=env).changed  # idempotent

    apply_plan(plan_uninstall("kimi", env=env))
    assert path.read_text() == USER


def test_a_new_file_gets_the_block_alone_and_uninstall_leaves_a_comment(
    env: dict[str, str],
) -> None:
    plan = plan_install("kimi", env=env)
    assert plan.after.startswith("# >>> ctxd hooks")
    assert len(tomllib.loads(plan.after)["hooks"]) == len(EVENTS)
    apply_plan(plan)
    apply_plan(plan_uninstall("kimi", env=env))
    assert tomllib.loads(settings_path("kimi", env).read_text()) == {}


@pytest.mark.parametrize(
    "user", ["a = 1", "a = 1\n\n\n", "# only a comment\n", "\n\n# after blank lines\n"]
)
def test_uninstall_gives_back_the_users_text_byte_for_byte(user: str, env: dict[str, str]) -> None:
    path = settings_path("kimi", env)
    path.parent.mkdir(parents=True)
    path.write_text(user)
    apply_plan(plan_install("kimi", env=env))
    apply_plan(plan_install("kimi", env=env))  # twice: still one block
    assert path.read_text().count("# >>> ctxd hooks") == 1
    apply_plan(plan_uninstall("kimi", env=env))
    assert path.read_text() == user


@pytest.mark.parametrize(
    "text",
    [
        "hooks = []\n",  # an inline array: [[hooks]] after it would not parse
        "hooks = 3\n",
        "[hooks]\nx = 1\n",
    ],
)
def test_a_config_whose_hooks_are_not_tables_is_refused_untouched(
    text: str, env: dict[str, str]
) -> None:
    path = settings_path("kimi", env)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(SettingsFileError):
        plan_install("kimi", env=env)
    assert path.read_text() == text


def test_doctor_says_which_events_ctxds_hooks_miss(env: dict[str, str]) -> None:
    doc = tomllib.loads(plan_install("kimi", env=env).after)
    assert agents.spec("kimi").installer.checks(doc) == []
    doc["hooks"] = doc["hooks"][:2]
    (check,) = agents.spec("kimi").installer.checks(doc)
    assert not check.ok and "Stop" in check.detail


@pytest.mark.parametrize(
    ("tui", "ok", "skipped", "says"),
    [
        (None, True, True, "does not exist"),
        (
            "[status_line]\ncommand = 'python3 -S -I ctxd_hook.py kimi statusline'\n",
            True,
            False,
            "runs ctxd's",
        ),
        ("[status_line]\ncommand = 'my-line'\n", True, True, "user's own"),
        ("[theme]\nname = 'dark'\n", True, True, "no status line"),
        ("[status_line\n", False, False, "cannot be read"),
    ],
)
def test_doctor_reads_the_status_line_from_tui_toml(
    tmp_path: Path, tui: str | None, ok: bool, skipped: bool, says: str
) -> None:
    if tui is not None:
        (tmp_path / "tui.toml").write_text(tui)
    (check,) = agents.spec("kimi").installer.placed_checks({}, tmp_path / "config.toml")
    assert (check.ok, check.skipped) == (ok, skipped)
    assert says in check.detail


def test_the_status_lines_payload_gives_the_window_and_the_model() -> None:
    # The shape of 2.1.0's statusLinePayload (its UI alone runs the command).
    payload = (
        b'{"model":"Kimi K2.6","cwd":"/w","gitBranch":null,"permissionMode":"default",'
        b'"planMode":false,"contextUsage":0.25,"contextTokens":50040,"maxContextTokens":200000,'
        b'"sessionId":"session_1","version":"2.1.0"}'
    )
    statusline = agents.spec("kimi").statusline
    assert statusline is not None
    report = statusline.parse(payload)
    assert (report.session_id, report.window, report.model_name, report.agent_version) == (
        "session_1",
        200_000,
        "Kimi K2.6",
        "2.1.0",
    )
    assert report.tokens is None  # the wire file's exact figures stand


TUI_USER = """# my Kimi UI
[theme]
name = "dark"

[status_line]
items = ["model", "cwd"]
"""


def test_the_status_line_goes_into_the_users_table_and_comes_out_again(
    env: dict[str, str],
) -> None:
    tui = settings_path("kimi", env).parent / "tui.toml"
    tui.parent.mkdir(parents=True)
    tui.write_text(TUI_USER)
    plan = plan_install("kimi", env=env)
    (companion,) = plan.also
    assert companion.path == tui and companion.changed
    apply_plan(plan)
    doc = tomllib.loads(tui.read_text())
    assert doc["theme"] == {"name": "dark"}
    assert doc["status_line"]["items"] == ["model", "cwd"]
    assert doc["status_line"]["command"].endswith(" kimi statusline")
    assert not plan_install("kimi", env=env).changes  # idempotent, both files
    apply_plan(plan_uninstall("kimi", env=env))
    assert tui.read_text() == TUI_USER


@pytest.mark.parametrize(
    "user",
    [
        "[status_line]\ncommand = 'my-line --x \"#1\"'  # mine\nitems = ['model']\n",
        "# ui\n[status_line]\n  command = \"my-line\"\n\n[theme]\nname = 'dark'",
    ],
)
def test_a_status_line_of_the_users_own_is_wrapped_and_given_back(
    user: str, env: dict[str, str]
) -> None:
    tui = settings_path("kimi", env).parent / "tui.toml"
    tui.parent.mkdir(parents=True)
    tui.write_text(user)
    foreign = tomllib.loads(user)["status_line"]["command"]
    plan = plan_install("kimi", env=env)
    (companion,) = plan.also
    assert companion.changed
    assert any("your own status line command still draws" in n for n in companion.notes)
    apply_plan(plan)
    command = tomllib.loads(tui.read_text())["status_line"]["command"]
    assert unwrap_command(command) == foreign
    assert not plan_install("kimi", env=env).changes
    apply_plan(plan_uninstall("kimi", env=env))
    assert tui.read_text() == user


def test_the_wrapped_line_is_the_users_own(env: dict[str, str], tmp_path: Path) -> None:
    # The installed command, as Kimi runs it (`sh -c`), with no daemon: the user's line as is.
    tui = settings_path("kimi", env).parent / "tui.toml"
    tui.parent.mkdir(parents=True)
    tui.write_text("[status_line]\ncommand = 'cat >/dev/null; echo my line'\n")
    apply_plan(plan_install("kimi", env=env))
    install_client(env)  # as `ctxd install` does
    command = tomllib.loads(tui.read_text())["status_line"]["command"]
    run_env = {**env, "CTXD_SOCKET": str(tmp_path / "none.sock"), "CTXD_NO_SPAWN": "1"}
    done = subprocess.run(
        ["sh", "-c", command], input=b"{}", capture_output=True, env=run_env, timeout=30
    )
    assert (done.returncode, done.stdout) == (0, b"my line\n")


def test_without_a_tui_toml_ctxd_writes_its_block(env: dict[str, str]) -> None:
    plan = plan_install("kimi", env=env)
    (companion,) = plan.also
    assert companion.before is None
    assert tomllib.loads(companion.after)["status_line"]["command"].endswith(" statusline")
    assert "tui.toml" in plan.diff()


PAYLOADS = Path(__file__).parents[2] / "data" / "payloads" / "kimi" / "2.1.0" / "interactive"


def test_kimis_real_status_line_payloads() -> None:
    # Captured from 2.1.0's UI in tmux (docs/e2e.md): before the first message, and after it.
    before, after = (PAYLOADS / "statusline.jsonl").read_bytes().splitlines()
    statusline = agents.spec("kimi").statusline
    assert statusline is not None
    with pytest.raises(InvalidInput, match="session_id"):
        statusline.parse(before)  # no session yet: nothing to report
    report = statusline.parse(after)
    assert report.session_id == "session_86d316d5-0285-491f-9bd6-61bca63e3aa4"
    assert (report.window, report.model_name, report.agent_version) == (
        200_000,
        "kimi-mock-model",
        "2.1.0",
    )
