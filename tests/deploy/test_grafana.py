"""The Grafana dashboard deploy/grafana/dex-server-zd.json (issue 26) is importable and every query
names a metric the server exports.

The dashboard is checked for what an import needs (a title and uid, panels with unique ids on the
24-column grid, a datasource and unique refIds on every target, the `datasource` and `flow_type`
variables). Every target's PromQL expression is parsed down to the metric names it selects
(strings, label matchers, ranges, `by (...)`-style label lists and function names removed; the
`_bucket`/`_sum`/`_count` of a histogram taken as the histogram's name), and each name is looked up
in the exposition of a real server: `dex-server-zd serve` (filesystem object store, DEX_BIN_DIR, set
by CTest, else build/bin) with the examples' Worker, after OrderProcessing and MoneyTransfer (with
its `balance` RPC) ran to their close. prometheus-cpp leaves a family without series out of the
exposition, so the run is what makes the by-type families appear: a name that only exists in the
sources, or one the run does not reach, fails here.
"""
import json
import os
import pathlib
import queue
import re
import socket
import subprocess
import threading
import time
import urllib.request

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "dex-server-zd.json"
BIN_DIR = pathlib.Path(os.environ.get("DEX_BIN_DIR", ROOT / "build" / "bin"))
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# PromQL words that are neither functions (followed by "(") nor metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
            "and", "or", "unless", "inf", "nan"}
# The families of issue 26, which the dashboard must show.
BY_TYPE = {"dexzd_flow_starts_total", "dexzd_flow_closes_total", "dexzd_step_attempts_total",
           "dexzd_step_attempt_seconds", "dexzd_step_schedule_to_start_seconds",
           "dexzd_rpc_calls_total", "dexzd_rpc_seconds"}


def dashboard():
    return json.loads(DASHBOARD.read_text())


def targets():
    """(panel title, target) of every query panel."""
    return [(p["title"], t) for p in dashboard()["panels"] if p["type"] != "row"
            for t in p["targets"]]


def selected_names(expr):
    """The metric names a PromQL expression selects, as written (suffixes kept)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    e = re.sub(r"\{[^}]*\}", " ", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)  # ranges
    # Label lists: by (...), without (...), on (...), ignoring (...), group_left/right (...).
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = []
    # A word not glued to a number ("5m", "1e3" are durations and numbers).
    for m in re.finditer(r"(?<![A-Za-z0-9_:.])[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        if word.lower() in KEYWORDS or e[m.end():].lstrip().startswith("("):
            continue  # a keyword or a function
        names.append(word)
    return names


def family_of(name, types):
    """`name` as the family that exports it: a histogram's series name taken to the histogram."""
    for suffix in HISTOGRAM_SUFFIXES:
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name


# ------------------------------------------------------------------- the parser itself

def test_the_parser_finds_metrics_not_functions_labels_or_variables():
    assert selected_names(
        'histogram_quantile(0.99, sum by (le, step_type) (rate(dexzd_step_attempt_seconds_bucket'
        '{flow_type=~"$flow_type", kind!="rpc"}[$__rate_interval])))') == [
            "dexzd_step_attempt_seconds_bucket"]
    assert selected_names("sum(a_total) / ignoring(x) group_left(y) b offset 5m") == [
        "a_total", "b"]
    assert selected_names('max(dexzd_hot_standby_lag_seconds) > bool 5') == [
        "dexzd_hot_standby_lag_seconds"]
    types = {"h": "histogram", "c_count": "counter"}
    assert family_of("h_bucket", types) == "h" and family_of("h_count", types) == "h"
    assert family_of("c_count", types) == "c_count", "a counter named _count stays itself"


# ------------------------------------------------------------------- the dashboard's shape

def test_the_dashboard_is_importable():
    d = dashboard()
    assert d["title"] and d["uid"] and d["schemaVersion"] >= 30
    variables = {v["name"]: v for v in d["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert "dexzd_flow_starts_total" in variables["flow_type"]["definition"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    for p in d["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${datasource}", p["title"]
        assert p["targets"], p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}", p["title"]
            assert t["expr"].count("(") == t["expr"].count(")"), (p["title"], t["expr"])


def test_every_query_names_a_metric_and_the_by_type_families_are_all_shown():
    used = set()
    for title, t in targets():
        names = selected_names(t["expr"])
        assert names, f"{title}: {t['expr']} selects no metric"
        for n in names:
            assert n.startswith("dexzd_"), f"{title}: {n} is not a dex-server-zd metric"
            used.add(n)
    shown = {family_of(n, {f: "histogram" for f in BY_TYPE}) for n in used}
    assert BY_TYPE <= shown, BY_TYPE - shown


# ------------------------------------------------------------------- against a real server

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A process whose output is read line by line; killed by stop()."""

    def __init__(self, *args):
        self.p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines, self._q = [], queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for_line(self, needle, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no {needle!r} within {timeout}s:\n" + "\n".join(self.lines))

    def wait_exit(self, timeout):
        code = self.p.wait(timeout=timeout)
        while (line := self._q.get(timeout=5)) is not None:
            self.lines.append(line)
        return code

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=10)


@pytest.fixture
def exported(tmp_path):
    """{family: type} of a real server's /metrics after two example Flows ran."""
    for name in ("dex-server-zd", "dex-flow-examples"):
        assert (BIN_DIR / name).exists(), f"{BIN_DIR / name} is missing: build first"
    api, metrics = free_port(), free_port()
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"nodeId: grafana\napi:\n  listen: 127.0.0.1:{api}\n"
        f"metrics:\n  listen: 127.0.0.1:{metrics}\n"
        f"objectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
        f"  durability: processCrashSafe\nlocalStore:\n  path: {tmp_path / 'local'}\n")
    procs = []
    try:
        server = Proc(BIN_DIR / "dex-server-zd", "serve", "--config", config)
        procs.append(server)
        server.wait_for_line("dex-server-zd serve ready", 60)
        address = f"127.0.0.1:{api}"
        worker = Proc(BIN_DIR / "dex-flow-examples", "worker", "--server", address)
        procs.append(worker)
        worker.wait_for_line("connected to", 30)
        for example in ("order", "transfer-compensate"):
            driver = Proc(BIN_DIR / "dex-flow-examples", "drive", example, "--flow-id",
                          f"grafana-{example}", "--server", address)
            procs.append(driver)
            assert driver.wait_exit(120) == 0, "\n".join(driver.lines)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics",
                                      timeout=5).read().decode()
    finally:
        for p in procs:
            p.stop()
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def test_every_query_names_a_metric_the_server_exports(exported):
    assert BY_TYPE <= set(exported), BY_TYPE - set(exported)
    for title, t in targets():
        for name in selected_names(t["expr"]):
            family = family_of(name, exported)
            assert family in exported, f"{title}: {name} is not on /metrics ({t['expr']})"
            if name != family:
                continue  # a histogram's _bucket/_sum/_count
            assert exported[family] != "histogram", (
                f"{title}: the histogram {family} is queried without _bucket/_sum/_count")
        if "_bucket" in t["expr"]:
            assert "histogram_quantile(" in t["expr"] and " le" in t["expr"].replace("(", " "), (
                f"{title}: buckets without histogram_quantile by le: {t['expr']}")
