"""`ctxd install copilot`: ctxd's hooks in Copilot CLI's flat per-event lists, the user's own
hooks and statusLine kept, reversible."""

from __future__ import annotations

import copy

import pytest

from ctxd.agents.copilot import install
from ctxd.errors import SettingsFileError

HOOK = "/usr/bin/python3 -S -I -c 'import ctxd_hook as h;h.main()' copilot"
LINE = f"{HOOK} statusline"


def command(event: str | None) -> str:
    return f"{HOOK} {event}"


def test_install_on_an_empty_file() -> None:
    out, notes = install.install({}, command, LINE, statusline=False)
    assert list(out["hooks"]) == list(install.EVENTS)
    for event in install.EVENTS:
        assert out["hooks"][event] == [
            {"type": "command", "bash": command(event), "timeoutSec": install.TIMEOUT_S}
        ]
    assert out["statusLine"] == {"type": "command", "command": LINE}
    assert any("statusLine" in n for n in notes)


def test_a_failed_tool_call_has_a_hook_too() -> None:
    """postToolUse fires only after a call that succeeded: without postToolUseFailure a failed
    call would reach ctxd not at all."""
    out, _ = install.install({}, command, LINE, statusline=False)
    assert out["hooks"]["postToolUseFailure"] == [
        {"type": "command", "bash": command("postToolUseFailure"), "timeoutSec": install.TIMEOUT_S}
    ]
    back, _ = install.uninstall(out)
    assert "hooks" not in back


def test_install_is_idempotent_and_keeps_the_users_hooks() -> None:
    mine = {"type": "command", "bash": "./audit.sh", "timeoutSec": 5}
    doc = {"hooks": {"postToolUse": [mine], "preToolUse": [mine]}, "statusLine": {"command": "me"}}
    before = copy.deepcopy(doc)
    once, notes = install.install(doc, command, LINE, statusline=False)
    twice, _ = install.install(once, command, LINE, statusline=False)
    assert once == twice and doc == before
    assert once["hooks"]["postToolUse"][0] == mine and len(once["hooks"]["postToolUse"]) == 2
    assert once["hooks"]["preToolUse"] == [mine]
    # the user's own line still draws, run by ctxd's client, which sees the payload too
    assert once["statusLine"] == {"command": f"{LINE} --wrap me"}
    assert any("your own `me` still draws the line" in n for n in notes)
    back, _ = install.uninstall(once)
    assert back == before


def test_a_wrapped_statusline_keeps_its_other_settings_and_can_be_replaced() -> None:
    doc = {"statusLine": {"type": "command", "command": "~/bin/line 'a b'", "padding": 1}}
    out, _ = install.install(doc, command, LINE, statusline=False)
    assert out["statusLine"]["padding"] == 1
    again, notes = install.install(out, command, f"{HOOK} statusline2", statusline=False)
    assert (
        again["statusLine"]["command"]
        == f"{HOOK} statusline2 --wrap '~/bin/line '\"'\"'a b'\"'\"''"
    )
    assert notes == tuple(n for n in notes if "still draws" not in n)
    assert install.uninstall(again)[0] == doc
    replaced, _ = install.install(out, command, LINE, statusline=True)
    assert replaced["statusLine"]["command"].startswith(f"{LINE} --replaced ")
    assert install.uninstall(replaced)[0] == doc  # the user's own line back, exactly
    check = next(c for c in install.checks(out) if c.name == "copilot statusline")
    assert "your own `~/bin/line 'a b'`, run by ctxd's client" in check.detail


def test_statusline_replaced_on_request_and_removed_on_uninstall() -> None:
    out, _ = install.install({"statusLine": {"command": "me"}}, command, LINE, statusline=True)
    assert out["statusLine"]["command"] == LINE + """ --replaced '{"command":"me"}'"""
    back, _ = install.uninstall(out)
    assert back == {"statusLine": {"command": "me"}}  # the one it replaced, and no hooks


def test_an_old_ctxd_hook_on_another_event_goes() -> None:
    doc = {"hooks": {"notification": [{"type": "command", "bash": command("notification")}]}}
    out, _ = install.install(doc, command, LINE, statusline=False)
    assert "notification" not in out["hooks"]


def test_a_malformed_hooks_section_is_refused() -> None:
    with pytest.raises(SettingsFileError):
        install.install({"hooks": []}, command, LINE, statusline=False)
    with pytest.raises(SettingsFileError):
        install.install({"hooks": {"postToolUse": {}}}, command, LINE, statusline=False)


def test_disabled_hooks_are_noted_and_checked() -> None:
    _, notes = install.install({"disableAllHooks": True}, command, LINE, statusline=False)
    assert any("disableAllHooks" in n for n in notes)
    checks = install.checks({"disableAllHooks": True})
    assert not checks[0].ok
    ok = install.checks(install.install({}, command, LINE, statusline=False)[0])
    assert all(c.ok for c in ok) and "ctxd's line" in ok[1].detail
