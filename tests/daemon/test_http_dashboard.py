"""The dashboard in a real headless Chromium (the distribution's package), driven over the
DevTools protocol on a pipe (`--remote-debugging-pipe`: no port, no extra library): it loads with
no console error, shows the sessions the daemon tracks, and follows a transcript append within
a second; after a restart it still draws each session's history, with its levels and forecast.
`CTXD_DASHBOARD_SCREENSHOT=PATH` saves that last page's screenshot there: docs/dashboard.png is
made by `CTXD_DASHBOARD_SCREENSHOT=docs/dashboard.png .venv/bin/python -m pytest
tests/daemon/test_http_dashboard.py -k restart`."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from dashboard_rows import ended_broken_and_live
from loopback import free_port

from ctxd.daemon.history import HISTORY_FILE, HISTORY_TICK
from ctxd.daemon.http import HttpServer
from ctxd.daemon.listeners import open_http_listener

if TYPE_CHECKING:
    from conftest import World


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Headless Chromium, one page, over the DevTools protocol on fds 3 (in) and 4 (out)."""

    def __init__(self, binary: str, profile: Path) -> None:
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        args = [
            "--headless=new",
            "--no-sandbox",  # root in a container; the page is our own
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile}",
            "about:blank",
        ]

        # Chromium reads commands from its fd 3 and writes answers to its fd 4 (moved out of
        # the way first: either pipe end may itself be 3 or 4).
        def pipes_on_3_and_4() -> None:
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [binary, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=pipes_on_3_and_4,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 20) -> Any:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for reply in self._read(deadline):
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
                self.events.append(reply)
        raise TimeoutError(method)

    def _read(self, deadline: float) -> list[dict[str, Any]]:
        import select

        ready, _, _ = select.select(
            [self._from_chrome], [], [], max(0, deadline - time.monotonic())
        )
        if not ready:
            return []
        chunk = os.read(self._from_chrome, 1 << 20)
        if not chunk:
            raise RuntimeError("Chromium closed the pipe")
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        return [json.loads(m) for m in messages if m]

    def open_page(self, width: int = 1280, height: int = 720) -> None:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def go(self, url: str) -> None:
        self.send("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float, interval: float = 0.02) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(interval)
        return None

    def console_errors(self) -> list[dict[str, Any]]:
        self.evaluate("1")  # collect what arrived meanwhile
        errors = []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            level = params.get("entry", {}).get("level")
            if (
                method == "Runtime.exceptionThrown"
                or (method == "Runtime.consoleAPICalled" and params.get("type") == "error")
                or (method == "Log.entryAdded" and level == "error")
            ):
                errors.append(params)
        return errors

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.send("Browser.close", timeout=5)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        pytest.skip("Chromium not installed (apt-get install chromium)")
    b = Browser(binary, tmp_path / "profile")
    try:
        b.open_page()
    except TimeoutError:
        # Seen only late in a full run on a busy machine: Chromium hangs in its first page.
        # A second browser, with a fresh profile, is what a person would try; the test's own
        # waits are unchanged.
        b.close()
        b = Browser(binary, tmp_path / "profile-again")
        b.open_page()
    try:
        yield b
    finally:
        b.close()


def test_the_dashboard_shows_the_sessions_and_follows_an_append(
    world: World, browser: Browser
) -> None:
    port = free_port()
    world.write_config(f'[thresholds]\nbasis = "window"\n[http]\nenabled = true\nport = {port}\n')
    world.start()
    sessions = [world.claude(), world.claude(), world.claude()]
    for t, tokens in zip(sessions, (180_000, 655_000, 770_000), strict=True):
        t.model = "claude-opus-5-5"
        for step in range(4):
            t.assistant(tokens - (3 - step) * 40_000)
            world.hook_out("claude", t.payload("PostToolUse"))
    world.wait_for(lambda: len(world.status()["sessions"]) == 3 or None, 5, "three sessions")
    # One session's context over a few seconds, through a compaction, for its chart (the
    # daemon samples every session's figure once a second).
    charted = world.claude()
    charted.model = "claude-opus-5-5"
    for point in (400_000, 650_000, "compact", 120_000, 380_000, 520_000):
        if point == "compact":
            charted.compact_boundary(60_000, 660_000)
        else:
            charted.assistant(int(point))
        time.sleep(HISTORY_TICK + 0.15)
    sessions.append(charted)

    browser.go(f"http://127.0.0.1:{port}/")
    shown = browser.wait(
        "document.querySelectorAll('[data-session]').length === 4 && "
        "[...document.querySelectorAll('[data-session]')].map(e => e.dataset.session)",
        10,
    )
    assert shown and sorted(shown) == sorted(t.session_id for t in sessions)
    chart = f"document.querySelector(\"[data-session='{charted.session_id}'] svg.chart\")"
    points = browser.evaluate(f"{chart}.querySelector('polyline').getAttribute('points')")
    assert len(points.split()) >= 5, points
    assert browser.evaluate(f"{chart}.querySelectorAll('[data-compaction]').length") == 1
    texts = browser.evaluate("document.body.innerText")
    assert "critical" in texts.lower() and "warning" in texts.lower()
    assert "770,000" in texts and "655,000" in texts

    # An append to a transcript, with no hook: the watcher sees it, the page within a second.
    quiet = sessions[0]
    quiet.assistant(300_000)
    appended = time.monotonic()
    selector = f"[data-session='{quiet.session_id}'] .tokens"
    seen = browser.wait(
        f"document.querySelector(\"{selector}\")?.textContent === '300,000'", 3, 0.01
    )
    lag = time.monotonic() - appended
    assert seen, browser.evaluate("document.body.innerText")
    print(f"dashboard followed the append in {lag * 1000:.0f} ms")
    assert lag < 1.0, lag

    errors = browser.console_errors()
    assert errors == [], errors


STATUSLINE = Path(__file__).parents[1] / "data" / "payloads" / "statusline" / "claude-2.1.332.jsonl"


def test_the_dashboard_shows_the_idle_compaction_time_and_the_token_limit_passed(
    world: World, browser: Browser
) -> None:
    port = free_port()
    world.write_config(
        f"[thresholds]\nwarning_tokens = 250000\n[http]\nenabled = true\nport = {port}\n"
    )
    world.start()
    idle, plain = world.claude(), world.claude()
    for t, tokens in ((idle, 300_000), (plain, 120_000)):
        t.model = "claude-opus-5-5"
        t.assistant(tokens)
        world.hook_out("claude", t.payload("PostToolUse"))
    # Claude Code's statusline says its 1-hour cache is warm: idle, it is compacted at 54 min.
    expires = int(time.time()) + 3600
    doc = json.loads(STATUSLINE.read_text().splitlines()[2])
    doc.update(session_id=idle.session_id, transcript_path=str(idle.path), cwd=str(world.work))
    usage = doc["context_window"]["current_usage"]
    usage.update(input_tokens=300_000, cache_creation_input_tokens=0, cache_read_input_tokens=0)
    doc["prompt_cache"].update(ttl="1h", expires_at=expires, warm=True)
    world.hook("claude", json.dumps(doc).encode(), "statusline")
    row = world.wait_for(
        lambda: (r := world.row(idle)) and r.get("idle_compaction_at") and r, 5, "idle time"
    )
    assert row["limit_passed"] == "warning_tokens"

    browser.go(f"http://127.0.0.1:{port}/")
    card = f"document.querySelector(\"[data-session='{idle.session_id}']\")"
    shown = browser.wait(f"{card}?.querySelector('.idle-compaction')?.textContent", 10)
    # The viewer's local clock time of the moment the status gives.
    expected = browser.evaluate(
        f"new Date({row['idle_compaction_at']} * 1000).toLocaleTimeString([], "
        "{hour: '2-digit', minute: '2-digit', hourCycle: 'h23'})"
    )
    assert shown == expected and re.fullmatch(r"\d\d:\d\d", shown), shown
    limit = browser.evaluate(f"{card}.querySelector('.limit-passed').textContent")
    assert limit == "250,000"
    assert "past warning_tokens" in browser.evaluate(f"{card}.innerText")
    other = f"document.querySelector(\"[data-session='{plain.session_id}']\")"
    assert (
        browser.evaluate(f"{other}.querySelectorAll('.idle-compaction, .limit-passed').length") == 0
    )
    errors = browser.console_errors()
    assert errors == [], errors


def test_the_dashboard_marks_a_guessed_window_and_says_why(world: World, browser: Browser) -> None:
    port = free_port()
    world.write_config(f"[http]\nenabled = true\nport = {port}\n")
    world.start()
    guessed, known = world.claude(), world.claude()
    for t, model in ((guessed, "acme-mystery-7"), (known, "claude-opus-5-5[1m]")):
        t.model = model
        t.assistant(30_000)
        world.hook_out("claude", t.payload("PostToolUse"))
    row = world.wait_for(lambda: world.row(guessed), 5, "the session")
    assert (row["window"], row["window_source"]) == (1_000_000, "default")

    browser.go(f"http://127.0.0.1:{port}/")
    card = f"document.querySelector(\"[data-session='{guessed.session_id}']\")"
    shown = browser.wait(f"{card}?.querySelector('.window.guessed')?.textContent", 10)
    assert shown == "~1M (guessed)", shown
    why = browser.evaluate(f"{card}.querySelector('.window.guessed').title")
    assert why == "guessed: no source for model acme-mystery-7; [windows] in ctxd's config sets it"
    other = f"document.querySelector(\"[data-session='{known.session_id}']\")"
    assert browser.wait(f"{other}?.querySelector('.window')?.textContent", 10) == "1M"
    assert browser.evaluate(f"{other}.querySelectorAll('.guessed').length") == 0
    errors = browser.console_errors()
    assert errors == [], errors


def api(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status", timeout=10) as answer:
        doc: dict[str, Any] = json.loads(answer.read())
    return doc


def test_after_a_restart_the_dashboard_draws_the_history_levels_forecast_and_endings(
    world: World, browser: Browser
) -> None:
    port = free_port()
    world.write_config(f"[http]\nenabled = true\nport = {port}\n")
    world.start()
    # One session's calls through real hooks, a second apart (the daemon samples every session
    # once a second), through a compaction.
    charted = world.claude()
    for point in (150_000, 260_000, "compact", 200_000, 330_000, 450_000, 570_000, 680_000):
        if point == "compact":
            charted.compact_boundary(60_000, 660_000)
        else:
            charted.assistant(int(point))
            world.hook_out("claude", charted.payload("PostToolUse"))
        time.sleep(HISTORY_TICK + 0.15)
    urgent, quiet, ended = world.claude(), world.claude(), world.claude()
    for t, tokens in ((urgent, 800_000), (quiet, 90_000), (ended, 300_000)):
        t.assistant(tokens)
        world.hook_out("claude", t.payload("PostToolUse"))
    world.hook_out("claude", ended.payload("SessionEnd", reason="prompt_input_exit"))
    world.wait_for(lambda: ((r := world.row(ended)) and r["ended_at"]) or None, 5, "the end")
    # Past 70 % used, the end of a turn asks for a handoff note; ctxd drafts it.
    world.hook_out("claude", charted.payload("Stop"))
    asked = world.wait_for(lambda: (r := world.row(charted)) and r["handoff_draft"], 5)
    before = world.wait_for(
        lambda: (len(h := api(port)["history"].get(str(charted.path), [])) >= 8 and h) or None,
        5,
        "the charted session's history",
    )
    # Each call a point, and the compaction's own (its summary's size) between them.
    assert [(p[1] // 1000, p[2]) for p in before] == [
        (150, 0),
        (260, 0),
        (60, 1),
        (200, 1),
        (330, 1),
        (450, 1),
        (570, 1),
        (680, 1),
    ]

    assert world.stop() == 0
    kept = world.state_file.parent / HISTORY_FILE
    assert kept.stat().st_mode & 0o777 == 0o600
    restarted_at = time.time()
    world.start()
    # One more call after the restart: the series goes on from where it was.
    charted.assistant(700_000)
    world.hook_out("claude", charted.payload("PostToolUse"))
    row = world.wait_for(lambda: (r := world.row(charted)) and r["tokens"] == 700_000 and r, 5)
    # The draft asked for before the restart is still named.
    assert row["handoff_asked"] and row["handoff_draft"] == asked
    assert row["severity"] == "warning" and row["forecast"]["calls_to_compaction"]

    browser.go(f"http://127.0.0.1:{port}/")
    card = f"document.querySelector(\"[data-session='{charted.session_id}']\")"
    drawn = browser.wait(f"{card}?.querySelector('svg.chart')?.dataset.points >= 9", 10)
    assert drawn, browser.evaluate("document.body.innerText")
    points = browser.evaluate(
        f"{card}.querySelector('polyline.context').getAttribute('points').split(' ').length"
    )
    assert points >= len(before) + 1
    # The points from before the restart are those the daemon answers now, oldest first.
    history = api(port)["history"][str(charted.path)]
    assert history[: len(before)] == before and history[0][0] < restarted_at - 5
    # The levels where the row says they start, the compaction marked and named, the forecast.
    for level in ("warning", "critical"):
        line = browser.evaluate(f"{card}.querySelector('line.level.{level}')?.dataset.tokens")
        assert line == str(row["levels"][f"{level}_at"]), (level, line)
    assert browser.evaluate(f"{card}.querySelector('.compaction-label')?.textContent") == (
        "compaction 1"
    )
    assert browser.evaluate(f"{card}.querySelector('.forecast-line')?.dataset.calls") == str(
        row["forecast"]["calls_to_compaction"]
    )
    text = browser.evaluate(f"{card}.innerText")
    calls = row["forecast"]["calls_to_compaction"]
    assert f"compaction in ~{calls} call" in text and "tokens a call" in text, text
    legend = browser.evaluate(f"{card}.querySelector('.legend').innerText")
    for entry in ("context", "window", "compaction point", "warning (35 % left", "critical (25"):
        assert entry in legend, legend
    assert "(ctxd's model table)" in text, text
    draft = browser.evaluate(f"{card}.querySelector('.handoff-draft')?.textContent")
    assert draft == row["handoff_draft"] and Path(draft).is_file(), draft
    assert "handoff asked: draft at" in text, text
    # The most urgent first, the ended last, its reason in words.
    order = browser.evaluate(
        "[...document.querySelectorAll('[data-session]')].map(e => e.dataset.session)"
    )
    assert order == [urgent.session_id, charted.session_id, quiet.session_id, ended.session_id]
    ending = f"document.querySelector(\"[data-session='{ended.session_id}']\")"
    assert browser.evaluate(f"{ending}.querySelector('.sev').textContent") == "ended"
    assert ": the user quit" in browser.evaluate(f"{ending}.innerText")
    page = browser.evaluate("document.body.innerText")
    assert "prompt_input_exit" not in page and "undefined" not in page and "NaN" not in page
    errors = browser.console_errors()
    assert errors == [], errors
    shot = os.environ.get("CTXD_DASHBOARD_SCREENSHOT")
    if shot:  # tall enough for the four cards
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 1010, "deviceScaleFactor": 1, "mobile": False},
        )
        time.sleep(0.6)
        browser.screenshot(Path(shot))


@contextlib.contextmanager
def serving_status(status: Callable[[], bytes]) -> Iterator[int]:
    """A real HttpServer on a loopback port, in a thread, answering `status()` as the
    daemon's status handler; its port."""
    port = free_port()
    stop = threading.Event()
    listening = threading.Event()

    async def serve() -> None:
        stopping = anyio.Event()
        server = HttpServer(lambda request: b"", lambda request: status(), port=port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, open_http_listener(port), stopping)
            listening.set()
            while not stop.is_set():
                await anyio.sleep(0.05)
            stopping.set()

    thread = threading.Thread(target=anyio.run, args=(serve,), daemon=True)
    thread.start()
    try:
        assert listening.wait(10)
        yield port
    finally:
        stop.set()
        thread.join(10)


def test_the_dashboard_draws_a_row_that_cannot_be_computed_as_an_error(
    world: World, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = ended_broken_and_live(world, monkeypatch)
    centre, ended, broken, live = rows.centre, rows.ended, rows.broken, rows.live
    with serving_status(centre.status.encoded) as port:
        browser.go(f"http://127.0.0.1:{port}/")
        order = browser.wait(
            "document.querySelectorAll('[data-session]').length === 3 && "
            "[...document.querySelectorAll('[data-session]')].map(e => e.dataset.session)",
            10,
        )
        card = f"document.querySelector(\"[data-session='{broken.session_id}']\")"
        assert order == [broken.session_id, live.session_id, ended.session_id]
        assert browser.evaluate(f"{card}.className") == "card failed"
        assert browser.evaluate(f"{card}.querySelector('.sev').textContent") == "error"
        assert browser.evaluate(f"{card}.querySelector('.error').textContent") == (
            "cannot compute this session's figures: AttributeError"
        )
        # No bar, no chart, no figure drawn as if it were one.
        assert browser.evaluate(f"{card}.querySelectorAll('svg, .bar').length") == 0
        text = browser.evaluate("document.body.innerText")
        assert not re.search(r"undefined|NaN|null|prompt_input_exit", text), text
        assert "the user quit" in text
        errors = browser.console_errors()
        assert errors == [], errors
