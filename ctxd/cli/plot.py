"""`ctxd replay --plot FILE.svg`: a session's context over its turns, as a hand-written SVG.

One picture instead of a long table: the context after each turn, the window, the point where the
agent compacts, the warning and critical levels (from the thresholds, on their basis), and each
compaction marked. Pure: rows in, SVG text out (no plotting library, nothing to install).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ctxd.cli.replay import Row
from ctxd.core.settings import Thresholds

__all__ = ["svg"]

WIDTH, HEIGHT = 960, 420
LEFT, RIGHT, TOP, BOTTOM = 84, 200, 48, 52
COLOURS = {
    "context": "#1f6feb",
    "window": "#6e7781",
    "compaction_at": "#8250df",
    "warning": "#bf8700",
    "critical": "#cf222e",
    "compaction": "#57606a",
}


def _short(tokens: float) -> str:
    if tokens >= 1_000_000:
        return f"{tokens / 1_000_000:g}M"
    if tokens >= 1_000:
        return f"{tokens / 1_000:g}k"
    return f"{tokens:g}"


def _nice_step(top: float) -> float:
    """A round step giving 4 to 10 ticks up to `top`."""
    step = 1.0
    while top / step > 10:
        for factor in (2, 2.5, 2):
            step *= factor
            if top / step <= 10:
                break
    return step


def _levels(row: Row, thresholds: Thresholds) -> tuple[float, float]:
    """The token counts at which the warning and the critical level start, for this row."""
    fig = row.figures
    base = fig.compaction_at if thresholds.basis == "compaction" else fig.window.size
    return (
        base * (1 - thresholds.warning / 100),
        base * (1 - thresholds.critical / 100),
    )


def _compaction_marks(xs: Sequence[float]) -> list[str]:
    """A dashed vertical line at each x, labelled inside the plot and staggered so that close
    compactions stay readable."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    out: list[str] = []
    for marked, mark_x in enumerate(xs):
        out.append(
            f'<line x1="{mark_x:.1f}" x2="{mark_x:.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
            f'stroke="{COLOURS["compaction"]}" stroke-dasharray="2 3"/>'
        )
        right = mark_x > LEFT + plot_w * 0.75
        label_x = mark_x + (-4 if right else 4)
        label_y = TOP + plot_h - 8 - 14 * (marked % 3)
        anchor = "end" if right else "start"
        out.append(
            f'<text x="{label_x:.1f}" y="{label_y}" text-anchor="{anchor}" '
            f'fill="{COLOURS["compaction"]}">compaction {marked + 1}</text>'
        )
    return out


def _legend(entries: Sequence[tuple[str, str, str]]) -> list[str]:
    """The legend right of the plot: a line (dashed when `dash`) and its label per
    (colour key, label, dash) entry."""
    lx = LEFT + (WIDTH - LEFT - RIGHT) + 20
    out: list[str] = []
    for k, (key, label, dash) in enumerate(entries):
        ly = TOP + 14 + 22 * k
        style = f' stroke-dasharray="{dash}"' if dash else ""
        out.append(
            f'<line x1="{lx}" x2="{lx + 24}" y1="{ly - 4}" y2="{ly - 4}" '
            f'stroke="{COLOURS[key]}" stroke-width="2"{style}/>'
        )
        out.append(f'<text x="{lx + 30}" y="{ly}">{escape(label)}</text>')
    return out


def svg(rows: Sequence[Row], thresholds: Thresholds, title: str) -> str:
    """The SVG document for `rows` (at least one)."""
    if not rows:
        raise ValueError("nothing to plot")
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    top = max(max(r.figures.window.size, r.figures.tokens or 0) for r in rows)
    step = _nice_step(top)
    y_max = step * -(-top // step)
    n = len(rows)

    def x(i: float) -> float:
        return LEFT + (plot_w * (i + 0.5) / n)

    def y(tokens: float) -> float:
        return TOP + plot_h * (1 - tokens / y_max)

    def steps(values: Sequence[float]) -> str:
        """A step line holding each row's value across its slot."""
        points: list[str] = []
        for i, value in enumerate(values):
            points.append(f"{LEFT + plot_w * i / n:.1f},{y(value):.1f}")
            points.append(f"{LEFT + plot_w * (i + 1) / n:.1f},{y(value):.1f}")
        return " ".join(points)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="system-ui, sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{LEFT}" y="24" font-size="15" font-weight="600">{escape(title)}</text>',
    ]
    # Grid and the token axis.
    tick = 0.0
    while tick <= y_max:
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y(tick):.1f}" y2="{y(tick):.1f}" '
            'stroke="#eaeef2"/>'
        )
        out.append(
            f'<text x="{LEFT - 8}" y="{y(tick) + 4:.1f}" text-anchor="end" fill="#57606a">'
            f"{_short(tick)}</text>"
        )
        tick += step
    out.append(
        f'<text x="18" y="{TOP + plot_h / 2:.0f}" fill="#57606a" '
        f'transform="rotate(-90 18 {TOP + plot_h / 2:.0f})" text-anchor="middle">'
        "context tokens</text>"
    )
    # The turn axis: a label every few rows, each turn once (a compaction is a row of the turn
    # it happened in: its mark below names it).
    every = max(1, n // 12)
    labelled: set[int] = set()
    for i, row in enumerate(rows):
        if (i % every == 0 or i == n - 1) and row.turn not in labelled:
            labelled.add(row.turn)
            out.append(
                f'<text x="{x(i):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle" '
                f'fill="#57606a">{row.turn}</text>'
            )
    out.append(
        f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle" '
        'fill="#57606a">turn</text>'
    )
    # Compactions: a vertical mark where the context dropped.
    out.extend(_compaction_marks([x(i) for i, row in enumerate(rows) if row.compaction]))
    # The levels, as step lines (the window and the point can change along the session).
    levels = [_levels(r, thresholds) for r in rows]
    lines: list[tuple[str, list[float], str, str]] = [
        ("window", [r.figures.window.size for r in rows], "6 4", "window"),
        ("compaction_at", [r.figures.compaction_at for r in rows], "8 3", "compaction point"),
        ("warning", [w for w, _ in levels], "4 3", f"warning ({thresholds.warning:g} % left)"),
        ("critical", [c for _, c in levels], "4 3", f"critical ({thresholds.critical:g} % left)"),
    ]
    for key, values, dash, _ in lines:
        out.append(
            f'<polyline points="{steps(values)}" fill="none" stroke="{COLOURS[key]}" '
            f'stroke-width="1.5" stroke-dasharray="{dash}"/>'
        )
    # The context itself.
    known = [(i, r.figures.tokens) for i, r in enumerate(rows) if r.figures.tokens is not None]
    path = " ".join(f"{x(i):.1f},{y(t):.1f}" for i, t in known)
    out.append(
        f'<polyline points="{path}" fill="none" stroke="{COLOURS["context"]}" stroke-width="2"/>'
    )
    for i, t in known:
        severity = rows[i].figures.severity.label
        fill = COLOURS.get(severity, COLOURS["context"])
        out.append(
            f'<circle cx="{x(i):.1f}" cy="{y(t):.1f}" r="3.5" fill="{fill}">'
            f"<title>turn {rows[i].turn}: {t:,} tokens, {severity}</title></circle>"
        )
    out.extend(
        _legend(
            [("context", "context (dot: severity)", "")]
            + [(key, label, dash) for key, _, dash, label in lines]
        )
    )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#d0d7de"/>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
