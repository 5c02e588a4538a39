"""What the CLI's help says of each installer is what the installer does."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxd import agents
from ctxd.agents.spec import InstallRequest

URL = "http://127.0.0.1:20001/hook/agent"


@pytest.mark.parametrize("name", agents.AGENTS)
def test_http_hooks_says_whether_install_posts_them(name: str, tmp_path: Path) -> None:
    spec = agents.spec(name)
    request = InstallRequest(
        path=tmp_path / "settings.json", command=lambda event: "/bin/ctxd-hook", http_url=URL
    )
    new, _ = spec.installer.install({}, request)
    assert (URL in str(new.get("hooks"))) is spec.installer.http_hooks


def test_the_install_help_names_the_agents_each_option_applies_to(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ctxd.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["install", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in agents.AGENTS:
        spec = agents.spec(name)
        assert name in text
        assert (spec.title in text) is (spec.installer.http_hooks or spec.statusline is not None)
