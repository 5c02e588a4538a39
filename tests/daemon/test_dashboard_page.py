"""The dashboard's own script, run in node over a minimal page, fed the `/api/v1/status` document a
real status room makes: what it draws of every row, a row whose figures could not be computed
included. (tests/daemon/test_http_dashboard.py drives the whole page in Chromium where one is
installed; this runs wherever node is.)"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from dashboard_rows import ended_broken_and_live

from ctxd.daemon.centre import Centre

if TYPE_CHECKING:
    from conftest import World

PAGE = Path(__file__).parents[2] / "ctxd" / "daemon" / "dashboard.html"

#: Just enough of a DOM for the page's script: elements with children, attributes and text;
#: `fetch` answers with the document on stdin; then every card's text and attributes, as JSON.
HARNESS = """\
const vm = require("node:vm")
const fs = require("node:fs")
class Node {
  constructor(tag) {
    Object.assign(this, { tag, children: [], attrs: {}, style: {}, own: "", className: "" })
  }
  append(...c) { this.children.push(...c) }
  replaceChildren(...c) { this.children = c }
  setAttribute(k, v) { this.attrs[k] = String(v) }
  get textContent() { return this.own + this.children.map((c) => c.textContent).join("") }
  set textContent(v) { this.own = String(v); this.children = [] }
  all() { return [this, ...this.children.flatMap((c) => c.all())] }
}
const ids = { meta: new Node("span"), sessions: new Node("main") }
const text = (t) => Object.assign(new Node("#text"), { own: String(t) })
const document = {
  getElementById: (id) => ids[id], createElement: (t) => new Node(t),
  createElementNS: (_, t) => new Node(t), createTextNode: text,
}
const body = fs.readFileSync(0, "utf8")
const fetch = async () => ({ ok: true, json: async () => JSON.parse(body) })
let ticks = 0
const setTimeout = () => { ticks++ }
const script = fs.readFileSync(process.argv[1], "utf8").match(/<script>([\\s\\S]*)<\\/script>/)[1]
vm.runInNewContext(script, { document, Node, fetch, setTimeout, Math, Object, JSON, Date, String })
const done = () => {
  if (!ticks) return global.setTimeout(done, 5)
  const cards = ids.sessions.children.map((card) => ({
    text: card.textContent,
    attrs: card.all().map((n) => Object.values(n.attrs).join(" ") + " " + n.className).join(" "),
    error: card.all().filter((n) => n.className === "error").map((n) => n.textContent),
  }))
  process.stdout.write(JSON.stringify({ meta: ids.meta.textContent, cards }))
}
done()
"""


def draw(doc: dict[str, Any]) -> dict[str, Any]:
    """What the page draws of an `/api/v1/status` document."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    done = subprocess.run(
        [node, "-e", HARNESS, str(PAGE)],
        input=json.dumps(doc),
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done
    drawn: dict[str, Any] = json.loads(done.stdout)
    return drawn


def test_a_row_that_cannot_be_computed_is_drawn_with_its_error_and_no_undefined(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    centre = Centre.open(world.env, {"claude": world.claude_projects}, monotonic=lambda: 0.0)
    broken, fine = world.claude(), world.claude()
    for t in (broken, fine):
        t.assistant(100_000)
        centre.answers.handle_hook("claude", None, json.dumps(t.payload("PostToolUse")).encode())
    grounds = centre.answers.grounds

    def failing_for_one(state: Any) -> Any:
        if state.key == str(broken.path):
            raise AttributeError("a state restored wrong")
        return grounds(state)

    monkeypatch.setattr(centre.answers, "grounds", failing_for_one)
    status = centre.status.document()
    drawn = draw({"status": status, "history": {}})

    assert "2 sessions" in drawn["meta"]
    cards = {re.sub(r"\s+", " ", c["text"]): c for c in drawn["cards"]}
    for text, card in cards.items():
        assert not re.search(r"undefined|NaN|null", text + card["attrs"]), text
    errors = [c["error"] for c in drawn["cards"] if c["error"]]
    assert errors == [["cannot compute this session's figures: AttributeError"]]
    assert sum("compactions 0" in text for text in cards) == 2
    # What is not known is a dash, not a zero: the broken row has no window.
    assert sum("context – / –" in text for text in cards) == 1


def test_an_error_row_is_drawn_as_an_error_and_an_ended_one_says_why_in_words(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = ended_broken_and_live(world, monkeypatch)
    centre, broken, live = rows.centre, rows.broken, rows.live
    drawn = draw({"status": centre.status.document(), "history": {}})

    assert drawn["meta"].startswith("3 sessions (1 error, 1 ended)"), drawn["meta"]
    # The most urgent first: the row that cannot be computed, the live one, the ended one.
    order = [c["text"] for c in drawn["cards"]]
    assert [broken.session_id in order[0], live.session_id in order[1]] == [True, True]
    failed, _, over = drawn["cards"]
    assert "card failed" in failed["attrs"] and "sev failed" in failed["attrs"]
    assert "error" in failed["text"] and "ok" not in failed["text"].lower().split()
    assert "chart" not in failed["attrs"]  # no figures, so no chart drawn as if there were
    assert "ended" in over["attrs"] and "ended at " in over["text"]
    assert ": the user quit" in over["text"] and "prompt_input_exit" not in over["text"]
