"""Metrics by Flow, Step and RPC type (issue 26; docs/metrics.md, "Flows, Steps and RPCs by type")
end to end: two `dex-server-zd serve` processes in hot mode on a filesystem object store, the
examples' Worker, and two example Flows driven to their close:

- the active process's /metrics shows the runs' starts and closes by `flow_type` and status, the
  WaitFor and Execute attempts by `step_type`, kind and outcome (OrderProcessing's Charge fails
  twice, then completes) with their duration and schedule-to-start histograms, and the RPC call
  by `rpc_name` (MoneyTransfer's `balance`) with its latency;
- the hot standby, which applies the same records while it follows, counts none of them: metrics
  count what the process did;
- `metrics.typeLabelsMax: 1`: the first Flow type keeps its series, the second counts under
  `other`.
"""
import re

import pytest

from test_flow_examples import drive, result_of, worker
from test_hot_standby import HotNode

LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text, name):
    """[(labels dict, value)] of the samples of `name` (exactly that name, no suffix)."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, value = line.rsplit(" ", 1)
            out.append((dict(LABEL.findall(head[len(name):])), float(value)))
    return out


def value(text, name, **labels):
    """The value of the one sample of `name` whose labels include `labels`; 0 if none."""
    found = [v for l, v in samples(text, name) if all(l.get(k) == w for k, w in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0


def run_examples(procs, servers):
    """OrderProcessing (Charge declined twice) and MoneyTransfer with its `balance` RPC and a
    compensated credit, one after the other, each to its close."""
    worker(procs, servers)
    for example, flow_id in (("order", "metrics-order"), ("transfer-compensate", "metrics-xfer")):
        result, _ = result_of(drive(procs, example, flow_id, servers), 120)
        assert result["closed"], result


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_the_active_counts_flows_steps_and_rpcs_by_type_and_the_standby_none(procs, tmp_path,
                                                                             store):
    active = HotNode(procs, tmp_path, store, "a").start()
    active.wait_ready(60)
    standby = HotNode(procs, tmp_path, store, "b").start()
    standby.wait_following()
    run_examples(procs, [active.address, standby.address])
    text = active.metrics_text()

    assert value(text, "dexzd_flow_starts_total", flow_type="OrderProcessing") == 1, text
    assert value(text, "dexzd_flow_starts_total", flow_type="MoneyTransfer") == 1, text
    assert value(text, "dexzd_flow_closes_total", flow_type="OrderProcessing",
                 status="completed") == 1, text
    assert sum(v for l, v in samples(text, "dexzd_flow_closes_total")
               if l["flow_type"] == "MoneyTransfer") == 1, text

    charge = dict(flow_type="OrderProcessing", step_type="Charge", kind="execute")
    assert value(text, "dexzd_step_attempts_total", outcome="failed", **charge) == 2, text
    assert value(text, "dexzd_step_attempts_total", outcome="completed", **charge) == 1, text
    assert value(text, "dexzd_step_attempt_seconds_count", **charge) == 3, text
    assert value(text, "dexzd_step_schedule_to_start_seconds_count", **charge) == 3, text
    # Ship waits (WaitFor) for the seller's approval or its reminder Timer.
    assert value(text, "dexzd_step_attempts_total", flow_type="OrderProcessing", step_type="Ship",
                 kind="wait_for", outcome="completed") >= 1, text
    # Every ended attempt has a duration observed (the ones its Worker was handed).
    for labels, count in samples(text, "dexzd_step_attempt_seconds_count"):
        ended = sum(v for l, v in samples(text, "dexzd_step_attempts_total")
                    if all(l[k] == labels[k] for k in ("flow_type", "step_type", "kind")))
        assert count == ended, (labels, count, ended)

    assert value(text, "dexzd_rpc_calls_total", flow_type="MoneyTransfer", rpc_name="balance",
                 outcome="completed") == 1, text
    assert value(text, "dexzd_rpc_seconds_count", flow_type="MoneyTransfer",
                 rpc_name="balance") == 1, text
    # An RPC's attempt is its call, not a Step attempt.
    assert not [l for l, _ in samples(text, "dexzd_step_attempts_total")
                if l["step_type"] == "balance"], text

    # The standby applied every one of those records, and counted none.
    following = standby.metrics_text()
    for family in ("dexzd_flow_starts_total", "dexzd_flow_closes_total",
                   "dexzd_step_attempts_total", "dexzd_rpc_calls_total",
                   "dexzd_step_attempt_seconds_count", "dexzd_rpc_seconds_count"):
        assert samples(following, family) == [], (family, following)


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_types_past_metrics_type_labels_max_count_under_other(procs, tmp_path, store):
    node = HotNode(procs, tmp_path, store, "a", mode="cold")
    node.config.write_text(node.config.read_text().replace("metrics:\n",
                                                           "metrics:\n  typeLabelsMax: 1\n"))
    node.start()
    node.wait_ready(60)
    run_examples(procs, [node.address])
    text = node.metrics_text()
    # OrderProcessing ran first and keeps its series; MoneyTransfer came second.
    assert value(text, "dexzd_flow_starts_total", flow_type="OrderProcessing") == 1, text
    assert value(text, "dexzd_flow_starts_total", flow_type="other") == 1, text
    assert value(text, "dexzd_flow_starts_total", flow_type="MoneyTransfer") == 0, text
    assert value(text, "dexzd_rpc_calls_total", flow_type="other", rpc_name="balance",
                 outcome="completed") == 1, text
    # One Step type of its own, the rest under `other`.
    step_types = {l["step_type"] for l, _ in samples(text, "dexzd_step_attempts_total")}
    assert len(step_types - {"other"}) == 1 and "other" in step_types, step_types
