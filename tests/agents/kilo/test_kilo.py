"""Kilo CLI as the OpenCode family declares it: its rule (OpenCode's, lowered by
`compaction.threshold_percent`, as Kilo 7.7.7's bundle computes it and
tests/e2e/test_kilo_limits_e2e.py checks against the real CLI), its files, its database and how
it is told from OpenCode's, and its installer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxd.agents import spec, store_owner
from ctxd.agents.kilo import FAMILY
from ctxd.agents.opencode_family import config, store
from ctxd.agents.spec import InstallRequest

KILO = spec("kilo")
OPENCODE = spec("opencode")
TRANSCRIPTS = Path(__file__).parents[2] / "data" / "transcripts"


def read(doc: dict[str, Any]) -> dict[str, str]:
    return KILO.read_settings(json.dumps(doc).encode())


def mock(compaction: dict[str, Any] | None = None, **limit: int) -> dict[str, Any]:
    doc: dict[str, Any] = {"provider": {"mock": {"models": {"mock-model": {"limit": limit}}}}}
    return {**doc, "compaction": compaction} if compaction is not None else doc


# (kilo.json, window) -> Kilo's point; OpenCode's on the same config
@pytest.mark.parametrize(
    ("doc", "window", "kilo", "opencode"),
    [
        (mock(context=200_000), 200_000, 168_000, 168_000),
        # floor(context × percent / 100) when it is lower than the usable context
        (mock({"threshold_percent": 50}, context=200_000), 200_000, 100_000, 168_000),
        # in floating point, as Kilo computes it: 200,000 × 0.333 is just under 66,600
        (mock({"threshold_percent": 33.3}, context=200_000), 200_000, 66_599, 168_000),
        (mock({"threshold_percent": 90}, context=200_000), 200_000, 168_000, 168_000),
        # the model's context limit, not the window ctxd measures against
        (mock({"threshold_percent": 50}, context=200_000), 1_000_000, 100_000, 968_000),
        # no context limit known: ctxd's window stands for it
        (mock({"threshold_percent": 50}), 1_000_000, 500_000, 968_000),
        # an input limit: below it by the reserve, or lower by the percentage of the context
        (
            mock({"threshold_percent": 50}, context=400_000, input=272_000),
            400_000,
            200_000,
            252_000,
        ),
        # not a number, or compaction off: as OpenCode
        (mock({"threshold_percent": "50"}, context=200_000), 200_000, 168_000, 168_000),
        (mock({"threshold_percent": None}, context=200_000), 200_000, 168_000, 168_000),
        (mock({"threshold_percent": 50, "auto": False}, context=200_000), 200_000, None, None),
    ],
)
def test_threshold_percent_lowers_kilos_point_and_not_opencodes(
    doc: dict[str, Any], window: int, kilo: int | None, opencode: int | None
) -> None:
    settings = read(doc)
    assert KILO.compaction(window, "mock-model", {}, settings) == kilo
    assert OPENCODE.compaction(window, "mock-model", {}, settings) == opencode


def test_kilos_config_files_are_opencodes_under_kilos_names() -> None:
    env = {"HOME": "/h", "KILO_CONFIG": "/etc/k.json", "OPENCODE_CONFIG": "/etc/oc.json"}
    files = [str(f) for f in config.config_files(FAMILY, env, "/r/a", "/r")]
    names = ("kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc")
    # the order Kilo 7.7.7 logs it loading them in
    assert files[:5] == ["/h/.config/kilo/config.json", *(f"/h/.config/kilo/{n}" for n in names)]
    assert "/etc/k.json" in files and "/etc/oc.json" not in files
    assert files.index("/r/kilo.json") < files.index("/r/a/kilo.json")
    for dot in (".kilo", ".kilocode", ".opencode"):
        assert f"/r/a/{dot}/kilo.json" in files and f"/h/{dot}/opencode.jsonc" in files
    # KILO_DISABLE_PROJECT_CONFIG leaves the project's out
    quiet = config.config_files(FAMILY, {**env, "KILO_DISABLE_PROJECT_CONFIG": "1"}, "/r/a", "/r")
    assert not any(str(f).startswith("/r/") for f in quiet)


def test_kilos_database_and_how_it_is_told_from_opencodes() -> None:
    assert store.database_path(FAMILY, {"HOME": "/h"}) == Path("/h/.local/share/kilo/kilo.db")
    assert store.database_path(FAMILY, {"HOME": "/h", "KILO_DB": "kilo-dev.db"}) == Path(
        "/h/.local/share/kilo/kilo-dev.db"
    )
    assert store.database_path(FAMILY, {"XDG_DATA_HOME": "/d", "KILO_DB": "/x.db"}) == Path("/x.db")
    assert store_owner(str(TRANSCRIPTS / "kilo-7.7.7" / "kilo.compact.db")) == "kilo"
    assert store_owner(str(TRANSCRIPTS / "opencode-1.18.33" / "opencode.db")) == "opencode"


def test_an_export_is_told_by_the_version_that_wrote_it() -> None:
    info = {"id": "ses_1", "projectID": "global", "directory": "/w"}
    for version, owner in (("7.7.7", "kilo"), ("1.18.33", "opencode")):
        doc = {"info": {**info, "version": version}, "messages": []}
        assert KILO.files.recognises(doc) is (owner == "kilo")
        assert OPENCODE.files.recognises(doc) is (owner == "opencode")


def test_install_adds_kilos_plugin_alone_and_uninstall_takes_back_exactly_that(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kilo.json"
    request = InstallRequest(path=path, command=lambda event: "", client_dir=tmp_path / "client")
    theirs = "file:///somewhere/opencode/ctxd.js"  # OpenCode's, from a shared config folder
    doc = {"model": "x/y", "plugin": ["their-plugin", theirs], "compaction": {"auto": True}}
    installed, _ = KILO.installer.install(doc, request)
    ours = (tmp_path / "client" / "kilo" / "ctxd.js").as_uri()
    assert installed == {**doc, "plugin": ["their-plugin", theirs, ours]}
    assert KILO.installer.install(installed, request)[0] == installed  # once
    assert KILO.installer.uninstall(installed, request)[0] == doc
    assert KILO.installer.settings_path({"HOME": "/h"}) == Path("/h/.config/kilo/kilo.json")
    [check] = KILO.installer.checks(installed)
    assert (check.name, check.ok) == ("kilo plugin", False)  # no such file
