"""Run retention and blob collection (issue 15; docs/flow-rules.md, "Retention"; docs/engine.md,
"Large values") on MinIO: a `dex-server-zd serve` process with flows.retention 3s,
values.blobThreshold 1KiB, values.blobCollectInterval 1s and values.blobMinAge 0, and a
`dex-flow-examples worker`.

- A `Square` run with a 64 KiB input completes; its input is a blob under the Flow ID's scope.
  Three seconds after it closed the run is gone (`dexcli flow describe` answers NOT_FOUND, and so
  does its history), and the next collection deletes its blob.
- An `E2EIdle` run with another 64 KiB input keeps running meanwhile: its blob survives every
  collection and its input reads back whole. Woken with a 64 KiB message it completes with that
  message as its output; after its retention it is gone too, with both its blobs, and the node
  keeps no blob at all.
"""
import hashlib
import json
import time

import pytest

from conftest import dexcli, flow_worker
from test_hot_standby import nodes  # noqa: F401  (the fixture)
from test_large_values import Bucket, compact, ok, sha

SETTINGS = ("values:\n  blobThreshold: 1KiB\n  blobCollectInterval: 1s\n  blobMinAge: 0\n"
            "flows:\n  retention: 3s\n")


def blob_key(flow_id, value):
    return f"blobs/{sha(flow_id)[:32]}/{hashlib.sha256(compact(value).encode()).hexdigest()}"


def grpc_code(r):
    assert r.returncode != 0, r.stdout[-2000:]
    return json.loads(r.stderr)["error"]["grpcCode"]


def eventually(check, seconds, what):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds}s: {what}")


@pytest.mark.parametrize("store", ["minio"], indirect=True)
def test_runs_expire_after_their_retention_and_their_blobs_are_collected(nodes, procs, store,  # noqa: F811
                                                                        tmp_path):
    a = nodes("a")
    a.config.write_text(a.config.read_text() + SETTINGS)
    a.start()
    assert a.wait_ready(60) == 1
    servers = [a.address]
    flow_worker(procs, servers)
    bucket = Bucket(store)

    square_in = {"n": 7, "pad": "s" * (64 << 10)}
    idle_in = {"pad": "i" * (64 << 10)}
    wake = {"m": "w" * (64 << 10)}
    files = {}
    for name, value in (("square", square_in), ("idle", idle_in), ("wake", wake)):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(value))

    ok(dexcli(servers, "flow", "start", "E2EIdle", "--flow-id", "idle", "--input-file",
              str(files["idle"]), timeout="30s"))
    ok(dexcli(servers, "flow", "start", "Square", "--flow-id", "sq", "--input-file",
              str(files["square"]), timeout="30s"))
    done = ok(dexcli(servers, "flow", "wait", "sq", "--expect-completed", "--wait-timeout", "30s",
                     timeout="30s"))
    closed = ok(dexcli(servers, "flow", "describe", "sq"))
    assert closed["status"] == "COMPLETED", done
    assert int(closed["expireUnixMs"]) == int(closed["closeUnixMs"]) + 3000, closed
    blobs = bucket.objects("blobs/")
    assert blob_key("sq", square_in) in blobs, blobs
    assert blob_key("idle", idle_in) in blobs, blobs

    # The closed run goes after its retention; its blob with the next collection.
    eventually(lambda: dexcli(servers, "flow", "describe", "sq").returncode != 0, 20,
               "sq deleted")
    assert grpc_code(dexcli(servers, "flow", "describe", "sq")) == "NOT_FOUND"
    assert grpc_code(dexcli(servers, "flow", "history", "sq")) == "NOT_FOUND"
    eventually(lambda: blob_key("sq", square_in) not in bucket.objects("blobs/"), 20,
               "the blob of sq collected")
    time.sleep(2.5)  # two more collections: the running run's blob stays
    assert blob_key("idle", idle_in) in bucket.objects("blobs/")
    idle = ok(dexcli(servers, "flow", "describe", "idle", timeout="30s"))
    assert idle["status"] == "RUNNING" and idle["input"] == idle_in
    assert int(idle.get("expireUnixMs", 0)) == 0

    ok(dexcli(servers, "flow", "publish", "idle", "wake", "--yes", "--input-file",
              str(files["wake"]), timeout="30s"))
    ok(dexcli(servers, "flow", "wait", "idle", "--expect-completed", "--wait-timeout", "30s",
              timeout="30s"))
    [out] = ok(dexcli(servers, "flow", "describe", "idle", timeout="30s"))["outputs"]
    assert out["output"] == wake
    assert blob_key("idle", wake) in bucket.objects("blobs/")
    eventually(lambda: dexcli(servers, "flow", "describe", "idle").returncode != 0, 20,
               "idle deleted")
    eventually(lambda: not bucket.objects("blobs/"), 20, "every blob collected")
    # The Flow ID is free again: a new run starts under it.
    ok(dexcli(servers, "flow", "start", "Square", "--flow-id", "sq", "--input", '{"n": 2}'))
    ok(dexcli(servers, "flow", "wait", "sq", "--expect-completed", "--wait-timeout", "30s",
              timeout="30s"))
