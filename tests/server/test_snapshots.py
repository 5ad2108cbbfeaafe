"""Snapshots as a user meets them: a node whose local store is deleted while it is stopped
restores its newest snapshot from object storage, replays the log after it, and loses nothing.

Real `dex-server-zd dev`, real `dex-flow-examples worker` running E2EThreeSteps dex Flows; snapshots are made frequent through the
override file (snapshots.everyRecords) so that a short run takes several.
"""
import os
import re
import shutil
import signal

from conftest import closed_flows, flow_worker, histories
from test_recovery import Node, check_recovery_rules, start_e2e, wait_all_ended

SNAPSHOT = re.compile(r"snapshot of node dev at log slot (\d+)")
FLOWS = 120


def DevNode(procs, data, config):
    """A dev node whose override file sets the snapshot triggers."""
    return Node(procs, data, "strict", "--config", config)


def manifests(data):
    path = os.path.join(data, "objects", "nodes", "dev", "snapshots", "manifests")
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def test_deleted_local_store_is_restored_from_the_newest_snapshot_and_loses_nothing(procs, tmp_path):
    data = tmp_path / "data"
    config = tmp_path / "dev.yaml"
    config.write_text("snapshots:\n  everyRecords: 100\n  interval: 0\n  keep: 2\n")
    node = DevNode(procs, data, config)
    assert node.start() == 1
    worker = flow_worker(procs, node.address, "--concurrency", "16", "--work-time", "5ms")
    ids = [f"snap-{i}" for i in range(FLOWS)]
    for flow_id in ids:
        r = start_e2e(node.address, flow_id)
        assert r.returncode == 0, r.stderr
    before = wait_all_ended(node, set(ids), timeout=120)
    assert check_recovery_rules(before, set(ids), server_died=False) == []
    # Several snapshots were taken on the record-count trigger, and only `keep` remain.
    node.server.wait_for_line("snapshot of node dev at log slot", 30)
    node.server.drain()
    taken = [int(m.group(1)) for m in (SNAPSHOT.search(l) for l in node.server.lines) if m]
    assert len(taken) >= 2, node.server.output()
    assert taken == sorted(taken)
    assert 1 <= len(manifests(data)) <= 2

    worker.kill()
    node.server.signal(signal.SIGTERM)
    assert node.server.wait_exit(30) == 0, node.server.output()
    newest = int(manifests(data)[-1])

    # The operator deletes the local store of the stopped node.
    shutil.rmtree(data / "local")
    assert node.start() == 2
    restored = node.server.wait_for_line("info local store", 10)
    assert f"restored the snapshot at log slot {newest}" in restored, restored
    assert "is missing" in restored
    after = closed_flows(node.address, ids, timeout=30)
    assert set(after) == set(ids)
    for flow_id in ids:
        assert after[flow_id]["status"] == "COMPLETED", after[flow_id]
        # Same history (each Step's completion, its attempt, times and output) as before the
        # restart: nothing replayed twice or lost.
        assert after[flow_id] == before[flow_id], flow_id

    # The restored node keeps working.
    assert start_e2e(node.address, "new").returncode == 0
    flow_worker(procs, node.address, "--work-time", "5ms")
    new = wait_all_ended(node, {"new"}, timeout=60)
    assert check_recovery_rules(new, {"new"}, server_died=False) == []


def test_a_corrupt_local_store_is_moved_aside_and_restored(procs, tmp_path):
    data = tmp_path / "data"
    config = tmp_path / "dev.yaml"
    config.write_text("snapshots:\n  everyRecords: 20\n")
    node = DevNode(procs, data, config)
    node.start()
    flow_worker(procs, node.address).kill()  # declares E2EThreeSteps; its flows then wait
    ids = [f"c-{i}" for i in range(30)]
    for flow_id in ids:
        assert start_e2e(node.address, flow_id).returncode == 0
    node.server.wait_for_line("snapshot of node dev at log slot", 30)
    node.server.signal(signal.SIGTERM)
    assert node.server.wait_exit(30) == 0
    (data / "local" / "CURRENT").write_text("MANIFEST-999999")  # a torn RocksDB store

    node.start()
    line = node.server.wait_for_line("info local store", 10)
    assert "is corrupt" in line and "restored the snapshot" in line, line
    assert (data / "local.corrupt" / "CURRENT").exists()
    restored = histories(node.address, ids)  # each found, started, still waiting for a Worker
    assert all(events and [e["kind"] for e in events] == ["FLOW_STARTED"]
               for events in restored.values()), restored
