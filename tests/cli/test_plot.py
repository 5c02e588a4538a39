"""`ctxd replay --plot FILE.svg` on a real transcript: the context over the turns, the warning,
critical and compaction levels, each compaction marked; and the plot the README shows is what
the command draws today."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).parents[2]
SAMPLE = REPO / "tests/data/transcripts/claude-code-2.1.332/transcript.compact.jsonl"
DOCS_PLOT = REPO / "docs" / "replay-claude-code-compact.svg"
SVG = "{http://www.w3.org/2000/svg}"


def _replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxd", "replay", *args], capture_output=True, text=True, cwd=REPO
    )


def test_plot_of_a_real_transcript(tmp_path: Path) -> None:
    out = tmp_path / "plot.svg"
    result = _replay("--plot", str(out), str(SAMPLE))
    assert result.returncode == 0, result.stderr
    assert f"plot written to {out}" in result.stderr
    root = ET.fromstring(out.read_text())
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert {"window", "compaction point", "warning (35 % left)", "critical (25 % left)"} <= set(
        texts
    )
    assert [t for t in texts if t.startswith("compaction ") and t[-1].isdigit()] == [
        "compaction 1",
        "compaction 2",
    ]
    rows = len(result.stdout.splitlines()) - 2  # header and final line
    dots = list(root.iter(f"{SVG}circle"))
    assert len(dots) == rows == 9
    tips = [str(c.findtext(f"{SVG}title")) for c in dots]
    assert tips[5] == "turn 6: 875,000 tokens, critical" and tips[6].startswith("turn 6: 2,723")
    # The turn axis names each turn once, though turn 6 has two rows (before and after its
    # compaction).
    axis_y = max(float(t.get("y") or 0) for t in root.iter(f"{SVG}text") if t.text == "1")
    turns = [str(t.text) for t in root.iter(f"{SVG}text") if float(t.get("y") or 0) == axis_y]
    assert turns == sorted(set(turns), key=int), turns


def test_the_plot_in_docs_is_what_ctxd_draws_today(tmp_path: Path) -> None:
    out = tmp_path / DOCS_PLOT.name
    assert _replay("--plot", str(out), str(SAMPLE)).returncode == 0
    assert out.read_text() == DOCS_PLOT.read_text(), (
        "regenerate it: ctxd replay --plot docs/replay-claude-code-compact.svg "
        "tests/data/transcripts/claude-code-2.1.332/transcript.compact.jsonl"
    )


def test_plot_wants_an_svg_name(tmp_path: Path) -> None:
    result = _replay("--plot", str(tmp_path / "plot.png"), str(SAMPLE))
    assert result.returncode == 2 and "name the file *.svg" in result.stderr
    assert not (tmp_path / "plot.png").exists()
