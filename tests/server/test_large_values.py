"""Large values as blobs (issue 15; docs/engine.md, "Large values") on MinIO: two `dex-server-zd
serve` processes in hot mode with values.blobThreshold 64KiB and values.maxSize 8MiB, and a
`dex-flow-examples worker` hosting AttrRpcDemo (examples/flows/attr_rpc_demo.cc).

- A run starts with a 5 MiB input; the RPC set-status writes a 2 MiB Attribute (its input is
  2 MiB too); the RPC describe answers it; a 1 MiB message on the Channel `done` completes the
  run with the message and the Attribute in its output. dexcli reads every value back equal
  (describe, Attributes, RPC outputs, history), and the Worker got them whole in its tasks.
- Each value is a blob under <prefix>/nodes/node-h/blobs/<flow scope>/<sha256>, and no log
  object holds a value: the log carries references.
- After a SIGKILL of the active process the hot standby takes over and reads the same values.
- A value over values.maxSize is refused with INVALID_ARGUMENT naming the limit, and starts
  nothing.
"""
import hashlib
import json
import re
import signal

import boto3
import pytest

from conftest import ACCESS, SECRET, dexcli, flow_worker
from test_hot_standby import LEASE_S, nodes  # noqa: F401  (the fixture)

VALUES = "values:\n  blobThreshold: 64KiB\n  maxSize: 8MiB\n"
NODE = "node-h"


def compact(value):
    """The JSON text dexcli sends for `value` (nlohmann's dump: no spaces)."""
    return json.dumps(value, separators=(",", ":"))


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def ok(r):
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def make(nodes, name):  # noqa: F811
    node = nodes(name)
    node.config.write_text(node.config.read_text() + VALUES)
    return node


class Bucket:
    """The node's objects in MinIO, under the store's prefix."""

    def __init__(self, store):
        self.prefix = re.search(r"prefix: (\S+)", store.yaml).group(1)
        endpoint = re.search(r"endpoint: (\S+)", store.yaml).group(1)
        self.s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS,
                               aws_secret_access_key=SECRET, region_name="us-east-1")

    def objects(self, under):
        """{key below the node's prefix: size} of every object under `under`."""
        out, token = {}, None
        root = f"{self.prefix}/nodes/{NODE}/"
        while True:
            args = {"Bucket": "dex", "Prefix": root + under}
            if token:
                args["ContinuationToken"] = token
            page = self.s3.list_objects_v2(**args)
            for o in page.get("Contents", []):
                out[o["Key"][len(root):]] = o["Size"]
            if not page.get("IsTruncated"):
                return out
            token = page["NextContinuationToken"]


def read_back(servers, flow_id, expected):
    """Reads every value of the run through dexcli and compares it with what was sent."""
    run = ok(dexcli(servers, "flow", "describe", flow_id, timeout="30s"))
    assert run["status"] == "COMPLETED", {k: v for k, v in run.items() if k != "input"}
    assert run["input"] == expected["input"]
    [out] = run["outputs"]
    assert out["output"] == {"done": expected["message"], "status": expected["status"],
                             "counts": {}}
    attrs = ok(dexcli(servers, "flow", "attributes", "get", flow_id))["attributes"]
    assert attrs == [{"key": "status", "type": "string", "value": expected["status"]}]
    events = ok(dexcli(servers, "flow", "history", flow_id))["events"]
    rpcs = [e for e in events if e["kind"] == "RPC_COMPLETED"]
    assert [e["output"] for e in rpcs] == [{"ok": True}, {"status": expected["status"]}]
    writes = [w for e in events for w in e.get("attributeWrites", [])]
    assert writes[-1]["value"] == expected["status"]
    published = [e for e in events if e["kind"] == "CHANNEL_PUBLISHED"]
    assert [m for e in published for m in e["publish"]["messages"]] == [expected["message"]]


@pytest.mark.parametrize("store", ["minio"], indirect=True)
def test_large_values_are_blobs_read_back_whole_through_a_takeover(nodes, procs, store,  # noqa: F811
                                                                   tmp_path):
    a = make(nodes, "a").start()
    assert a.wait_ready(60) == 1
    b = make(nodes, "b").start()
    b.wait_following()
    servers = [a.address, b.address]
    flow_worker(procs, servers)

    expected = {"input": {"payload": "i" * (5 << 20)},
                "status": "s" * (2 << 20),
                "message": {"m": "m" * (1 << 20)}}
    files = {}
    for name, value in (("input", expected["input"]), ("rpc", {"status": expected["status"]}),
                        ("message", expected["message"])):
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(value))

    ok(dexcli(servers, "flow", "start", "AttrRpcDemo", "--flow-id", "big", "--request-id", "big",
              "--input-file", str(files["input"]), timeout="30s"))
    # The start Step's WaitFor got the 5 MiB input and wrote status "started".
    for _ in range(300):
        attrs = ok(dexcli(servers, "flow", "attributes", "get", "big"))["attributes"]
        if attrs and attrs[0]["value"] == "started":
            break
    else:
        raise AssertionError(attrs)
    out = ok(dexcli(servers, "flow", "rpc", "big", "set-status", "--yes", "--input-file",
                    str(files["rpc"]), "--rpc-timeout", "30s", timeout="30s"))
    assert out["output"] == {"ok": True}, out
    out = ok(dexcli(servers, "flow", "rpc", "big", "describe", "--yes", "--rpc-timeout", "30s",
                    timeout="30s"))
    assert out["output"] == {"status": expected["status"]}
    ok(dexcli(servers, "flow", "publish", "big", "done", "--yes", "--input-file",
              str(files["message"]), timeout="30s"))
    ok(dexcli(servers, "flow", "wait", "big", "--expect-completed", "--wait-timeout", "60s",
              timeout="30s"))
    read_back(servers, "big", expected)

    # Each value is a blob of the Flow ID; the log holds none of them.
    bucket = Bucket(store)
    scope = sha("big")[:32]
    blobs = bucket.objects("blobs/")
    assert all(k.startswith(f"blobs/{scope}/") for k in blobs), blobs
    for text in (compact(expected["input"]), compact({"status": expected["status"]}),
                 expected["status"], compact(expected["message"])):
        key = f"blobs/{scope}/{sha(text)}"
        assert blobs.get(key) == len(text.encode()), (key, blobs)
    log = bucket.objects("log/")
    assert log and max(log.values()) < 64 << 10, log

    # The hot standby takes over after a SIGKILL and reads the same blobs.
    a.proc.signal(signal.SIGKILL)
    assert b.wait_ready(LEASE_S + 1 + 20) == 2
    read_back(servers, "big", expected)

    # Over values.maxSize: refused naming the limit; nothing starts.
    files["huge"] = tmp_path / "huge.json"
    files["huge"].write_text(json.dumps({"payload": "h" * (9 << 20)}))
    r = dexcli(servers, "flow", "start", "AttrRpcDemo", "--flow-id", "huge", "--input-file",
               str(files["huge"]), timeout="30s")
    assert r.returncode == 1, r.stdout
    error = json.loads(r.stderr)["error"]
    assert error["grpcCode"] == "INVALID_ARGUMENT", error
    assert "the limit is 8388608 bytes (8 MiB, the server's values.maxSize)" in error["message"]
    r = dexcli(servers, "flow", "describe", "huge")
    assert json.loads(r.stderr)["error"]["grpcCode"] == "NOT_FOUND", r.stderr
