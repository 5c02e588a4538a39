"""The Prometheus recipe ctxd ships (contrib/prometheus, contrib/grafana), with the real
`prometheus` and `promtool`: the rules pass `promtool check` and their unit tests; and the
README's "Many machines" commands, run as written on the shipped configs: an agent-mode
Prometheus scrapes a real daemon and remote-writes to a central one, which then holds each
session's tokens as `ctxd status --json` gives them, fires the critical alert, and answers every
panel query of the Grafana dashboard."""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
from loopback import free_port

if TYPE_CHECKING:
    from conftest import World

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "contrib" / "prometheus"
DASHBOARD = REPO / "contrib" / "grafana" / "ctxd.json"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="needs prometheus and promtool (Debian: apt-get install prometheus; .ci/run does)",
)

ALERTS = {
    "CtxdSessionCritical",
    "CtxdCompactionNear",
    "CtxdIdleCompactionSoon",
    "CtxdWatchingPastInotifyLimit",
    "CtxdDown",
    "CtxdMachineSilent",
    "CtxdAbsent",
}

T = TypeVar("T")


def promtool(*args: str, cwd: Path = RULES) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run(
        [PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


def alert_names(text: str) -> set[str]:
    return set(re.findall(r"(?:alert|alertname): (\w+)", text))


# ---------------------------------------------------------------------- the rules alone


def test_rules_are_valid_and_are_the_alerts_promised() -> None:
    done = promtool("check", "rules", "ctxd-rules.yml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout
    assert alert_names((RULES / "ctxd-rules.yml").read_text()) == ALERTS


def test_every_alert_has_unit_tests_that_pass() -> None:
    """`promtool test rules` compares the firing alerts, labels and annotations exactly; each
    alert is named in the tests (firing for some series, silent for the others)."""
    tests = RULES / "ctxd-rules.test.yml"
    assert alert_names(tests.read_text()) == ALERTS
    done = promtool("test", "rules", tests.name)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_unit_tests_catch_a_wrong_threshold(tmp_path: Path) -> None:
    """The unit tests are not vacuous: the rules with the compaction margin moved fail them."""
    for path in RULES.glob("*.yml"):
        shutil.copy(path, tmp_path)
    rules = tmp_path / "ctxd-rules.yml"
    text = rules.read_text()
    assert text.count("ctxd_tokens_to_compaction < 20000") == 1
    rules.write_text(
        text.replace("ctxd_tokens_to_compaction < 20000", "ctxd_tokens_to_compaction < 10000")
    )
    done = promtool("test", "rules", "ctxd-rules.test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "CtxdCompactionNear" in done.stdout + done.stderr


@pytest.mark.parametrize("config", ["agent.yml", "central.yml", "local.yml"])
def test_configs_are_valid(config: str) -> None:
    agent_mode = ["--agent"] if config == "agent.yml" else []  # no rules allowed there
    done = promtool("check", "config", *agent_mode, config)
    assert done.returncode == 0, done.stdout + done.stderr


# ---------------------------------------------------------------------- the fleet, for real


def poll(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.2)


def readme_commands() -> dict[str, list[str]]:
    """The `prometheus` command lines of the README's "Many machines" block, by role."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Many machines", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None, "no sh block in the README's Many machines section"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    commands = {}
    for line in lines:
        words = shlex.split(line, comments=True)
        if "prometheus" in words:
            agent_mode = any(w.startswith("--enable-feature=agent") for w in words)
            role = "agent" if agent_mode else "central"
            commands[role] = words
    assert set(commands) == {"agent", "central"}, lines
    return commands


def with_flags(words: list[str], flags: dict[str, str]) -> list[str]:
    """The README's command with each `--flag=value` of `flags` set instead of the README's:
    the ports and directories this test owns."""
    assert PROMETHEUS is not None
    out = [PROMETHEUS]
    for word in words[words.index("prometheus") + 1 :]:
        if word.split("=", 1)[0] not in flags:
            out.append(word)
    return out + [f"{name}={value}" for name, value in flags.items()]


def edit(path: Path, changes: dict[str, str]) -> None:
    """What the README tells the user to edit, each once."""
    text = path.read_text()
    for old, new in changes.items():
        assert text.count(old) == 1, (path.name, old)
        text = text.replace(old, new)
    path.write_text(text)


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read())

    def query(self, expr: str) -> list[dict[str, Any]]:
        doc = self.get("/api/v1/query", query=expr)
        assert doc["status"] == "success", (expr, doc)
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.base + "/-/ready", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


@contextmanager
def running(
    command: list[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        yield proc
    except BaseException:
        print(f"--- {log.name} (exit {proc.poll()}):\n{log.read_text(errors='replace')[-4000:]}")
        raise
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every panel target, Grafana's variables as "All" selects them."""
    doc = json.loads(DASHBOARD.read_text())
    variables = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}
    for var in doc["templating"]["list"]:
        if var["type"] == "query":
            variables[var["name"]] = var["allValue"]
    out = []
    for panel in doc["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name in sorted(variables, key=len, reverse=True):
                expr = expr.replace("${" + name + "}", variables[name])
                expr = expr.replace("$" + name, variables[name])
            assert "$" not in expr, (panel["title"], expr)
            out.append((panel["title"], expr))
    return out


def test_agent_remote_writes_a_real_daemon_to_a_central_prometheus(
    world: World, tmp_path: Path
) -> None:
    ctxd_port, agent_port, central_port = free_port(), free_port(), free_port()
    world.write_config(
        f'[thresholds]\nbasis = "window"\n[http]\nenabled = true\nport = {ctxd_port}\n'
    )
    world.start()
    critical, compacted = world.claude(), world.claude()
    critical.assistant(955_000)  # critical, and 12k tokens from Claude Code's compaction
    assert world.hook_out("claude", critical.payload("PostToolUse")) is not None  # a warning
    compacted.assistant(660_000)
    world.hook_out("claude", compacted.payload("PostToolUse"))
    compacted.compact_boundary(post_tokens=30_000, pre_tokens=660_000)
    compacted.assistant(40_000)
    world.hook_out("claude", compacted.payload("PostToolUse"))
    row = world.wait_row(compacted, lambda r: r["compactions"] == 1 and r["tokens"] == 40_000)
    assert row["severity"] == "ok"

    # The shipped configs, with what the README says to edit: ctxd's port, the central's URL;
    # and, to keep the test short, 1 s intervals instead of 15 s.
    config = tmp_path / "prometheus"
    shutil.copytree(RULES, config)
    edit(
        config / "agent.yml",
        {
            '"127.0.0.1:20000"': f'"127.0.0.1:{ctxd_port}"',
            "http://prometheus.example:9090/api/v1/write": (
                f"http://127.0.0.1:{central_port}/api/v1/write"
            ),
            "scrape_interval: 15s": "scrape_interval: 1s",
        },
    )
    edit(config / "central.yml", {"evaluation_interval: 15s": "evaluation_interval: 1s"})
    commands = readme_commands()
    env = {"PATH": "/usr/bin:/bin", "HOSTNAME": "box-1", "HOME": str(tmp_path)}
    central_cmd = with_flags(
        commands["central"],
        {
            "--config.file": str(config / "central.yml"),
            "--storage.tsdb.path": str(tmp_path / "central-data"),
            "--web.listen-address": f"127.0.0.1:{central_port}",
        },
    )
    agent_cmd = with_flags(
        commands["agent"],
        {
            "--config.file": str(config / "agent.yml"),
            "--storage.agent.path": str(tmp_path / "agent-data"),
            "--web.listen-address": f"127.0.0.1:{agent_port}",
        },
    )
    central, agent = Prometheus(central_port), Prometheus(agent_port)
    with (
        running(central_cmd, env, tmp_path / "central.log"),
        running(agent_cmd, env, tmp_path / "agent.log"),
    ):
        poll(central.ready, 20, "the central Prometheus")
        poll(agent.ready, 20, "the agent")

        # Each live session's tokens on the central, from this machine, as ctxd status says.
        doc = json.loads(world.cli("status", "--json").stdout)
        expected = {r["session_id"]: r["tokens"] for r in doc["sessions"] if not r["ended_at"]}
        assert set(expected) == {critical.session_id, compacted.session_id}

        def tokens() -> dict[str, float] | None:
            found = central.query('ctxd_context_tokens{job="ctxd", host="box-1"}')
            got = {s["metric"]["session"]: float(s["value"][1]) for s in found}
            return got if len(got) == len(expected) else None

        assert poll(tokens, 25, "the sessions' tokens on the central") == expected
        (severity,) = central.query(f'ctxd_severity{{session="{critical.session_id}"}}')
        assert severity["value"][1] == "2"

        # The central's rules fire on the remote-written series, labelled by machine: the
        # session past 20k tokens to compaction, the critical one (the same), and no other.
        near = world.row(critical)
        assert near is not None and near["tokens_to_compaction"] < 20_000, near

        def firing() -> dict[str, dict[str, str]] | None:
            alerts = central.get("/api/v1/alerts")["data"]["alerts"]
            hot = {a["labels"]["alertname"]: a["labels"] for a in alerts if a["state"] == "firing"}
            return hot if len(hot) >= 2 else None

        alerts = poll(firing, 15, "alerts firing on the central")
        assert set(alerts) == {"CtxdSessionCritical", "CtxdCompactionNear"}
        for labels in alerts.values():
            assert labels["host"] == "box-1"
            assert labels["session"] == critical.session_id
            assert labels["agent"] == "claude"

        # Every panel of the dashboard answers there, on metrics ctxd serves.
        served = set(re.findall(r"^# HELP (\w+) ", world.cli("metrics").stdout, re.M))
        queries = dashboard_queries()
        assert len(queries) >= 10
        for title, expr in queries:
            assert set(re.findall(r"\bctxd_\w+", expr)) <= served, (title, expr)

        def answered() -> bool:
            # rate() needs two samples in its window: a few scrapes after the first
            return all(central.query(e) for _, e in queries)

        with contextlib.suppress(AssertionError):
            poll(answered, 10, "every panel's data")
        missing = [(title, expr) for title, expr in queries if not central.query(expr)]
        assert not missing, missing

        # ctxd stops: the central sees `up` at 0 (what CtxdDown waits on), and the sessions'
        # series end at once (staleness markers, remote-written too) instead of lingering.
        world.stop()

        def down() -> bool:
            up = central.query('up{job="ctxd", host="box-1"}')
            return bool(up and up[0]["value"][1] == "0")

        poll(down, 10, "up == 0 on the central")
        assert central.query('ctxd_context_tokens{host="box-1"}') == []


def test_rules_name_only_metrics_ctxd_serves(world: World) -> None:
    """A metric renamed in ctxd would silence an alert: every ctxd_ name in the rules and the
    dashboard is one `ctxd metrics` prints (each gauge's HELP is printed even with no session)."""
    world.start()
    served = set(re.findall(r"^# HELP (\w+) ", world.cli("metrics").stdout, re.M))
    used = set(re.findall(r"\bctxd_\w+", (RULES / "ctxd-rules.yml").read_text()))
    used |= set(re.findall(r"\bctxd_\w+", DASHBOARD.read_text()))
    assert used and used <= served, used - served
