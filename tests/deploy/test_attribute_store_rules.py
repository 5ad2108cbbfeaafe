"""The Attribute Store alert rules, deploy/prometheus/attribute-store-rules.yaml (issue 27): a
Prometheus rule file whose every expression selects metrics a real server exports once it
synced, grouped by store, each `for:` explained.

Against a real `dex-server-zd serve` (filesystem object store, DEX_BIN_DIR) with a throwaway
PostgreSQL store (tests/support/sql_servers.py), after the examples' OrderProcessing synced a
row: prometheus-cpp leaves a family without series out of the exposition, so the sync is what
makes the families appear.
"""
import pathlib
import re
import sys
import time
import urllib.request

import pytest
import yaml

from test_grafana import BIN_DIR, Proc, free_port, selected_names

ROOT = pathlib.Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "attribute-store-rules.yaml"
sys.path.insert(0, str(ROOT / "tests" / "support"))
import sql_servers  # noqa: E402


def rules():
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_each_rule_is_an_alert_on_dex_metrics_grouped_by_store_and_each_for_says_why():
    lines = RULES.read_text().splitlines()
    for r in rules():
        assert r["alert"].startswith("DexAttributeStore"), r
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
        names = selected_names(r["expr"])
        assert names and all(n.startswith("dexzd_attribute_sync_") for n in names), r["expr"]
        assert "by (store)" in r["expr"], f"{r['alert']} must keep the store label"
    fors = [i for i, line in enumerate(lines) if line.strip().startswith("for:")]
    assert len(fors) == sum(1 for r in rules() if "for" in r)
    for i in fors:
        assert lines[i - 1].strip().startswith("# Why `for`:") or \
            lines[i - 2].strip().startswith("# Why `for`:"), f"line {i + 1} needs a why"


@pytest.fixture
def exported(tmp_path):
    for name in ("dex-server-zd", "dex-flow-examples", "dexcli"):
        assert (BIN_DIR / name).exists(), f"{BIN_DIR / name} is missing: build first"
    pg = sql_servers.start_postgres()
    procs = []
    try:
        pg.sql('CREATE TABLE orders (id text PRIMARY KEY, "order-status" text, customer text)')
        api, metrics = free_port(), free_port()
        config = tmp_path / "serve.yaml"
        config.write_text(
            f"nodeId: rules\napi:\n  listen: 127.0.0.1:{api}\n"
            f"metrics:\n  listen: 127.0.0.1:{metrics}\n"
            f"objectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
            f"  durability: processCrashSafe\nlocalStore:\n  path: {tmp_path / 'local'}\n"
            f"attributeStore:\n  stores:\n    orders:\n      type: postgres\n"
            f"      dsn: {pg.dsn}\n      tableName: orders\n")
        server = Proc(BIN_DIR / "dex-server-zd", "serve", "--config", config)
        procs.append(server)
        server.wait_for_line("dex-server-zd serve ready", 60)
        address = f"127.0.0.1:{api}"
        worker = Proc(BIN_DIR / "dex-flow-examples", "worker", "--server", address)
        procs.append(worker)
        worker.wait_for_line("connected to", 30)
        # An Attribute the table has no column for ("items") is filtered: that series too.
        start = Proc(BIN_DIR / "dexcli", "--server", address, "flow", "start", "OrderProcessing",
                     "--flow-id", "o-1", "--input", "{}", "--attribute-store", "orders",
                     "--string", "customer=acme", "--int", "items=2")
        procs.append(start)
        assert start.wait_exit(30) == 0, "\n".join(start.lines)
        deadline = time.monotonic() + 30
        while "acme" not in pg.sql("SELECT customer FROM orders"):
            assert time.monotonic() < deadline, "the row never reached the table"
            time.sleep(0.2)
        text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics",
                                      timeout=5).read().decode()
    finally:
        for p in procs:
            p.stop()
        pg.stop()
    return text


def test_every_rule_selects_series_a_syncing_server_exports(exported):
    for r in rules():
        for name in selected_names(r["expr"]):
            assert re.search(rf'^{name}\{{store="orders"\}} ', exported, re.M), (
                f"{r['alert']}: no {name}{{store=\"orders\"}} on /metrics")
    assert re.search(r'^dexzd_attribute_sync_filtered_fields_total\{store="orders"\} [1-9]',
                     exported, re.M), "the items field has no column: counted"
