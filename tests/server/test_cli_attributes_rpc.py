"""`dexcli flow attributes get|set`, `flow rpc` and `flow inspect` against a real
`dex-server-zd dev` and the `dex-flow-examples worker`, on the example Flow type AttrRpcDemo:
an Attribute `status` (string), an AttributeMap `counts` (int64), RPCs `describe` (answers
{"status": <status>}) and `set-status` (input {"status": s}: writes it, answers {"ok": true});
its start Step writes status "started" and waits on the Channel `done`.

- typed writes (strings, int64 map instances, deletes) and reads, in JSON and as a table;
- RPCs read and write the Attributes; a repeat with the same request ID answers the first's
  output without running the handler again;
- the history names Attribute writes and RPCs, `flow inspect` shows the run in one document,
  and `inspect log` names the new records;
- errors: an undeclared key, a wrong type or an undeclared RPC is INVALID_ARGUMENT (exit 1,
  JSON on stderr) and writes nothing; a bad flag or a missing --yes exits 2 and sends nothing;
  a failing handler is FAILED_PRECONDITION with its message (set-status refuses a status that
  is not a string); an RPC or a write to a closed run is FAILED_PRECONDITION; reads still work
  after the close.
"""
import subprocess
import time

import pytest

from conftest import binary, inspect
from test_dexcli_flow import Dev, cli, error_of, ok_json
from test_flow_examples import worker


@pytest.fixture
def dev(procs, tmp_path):
    return Dev(procs, tmp_path)


def attributes(dev, flow_id, *args):
    return ok_json(cli(dev, "flow", "attributes", "get", flow_id, *args))["attributes"]


def start_demo(dev, procs, flow_id):
    """Starts a run with a Worker hosting AttrRpcDemo; returns once its start Step wrote status."""
    worker(procs, [dev.address])
    run_id = ok_json(cli(dev, "flow", "start", "AttrRpcDemo", "--flow-id", flow_id))["runId"]
    deadline = time.monotonic() + 30
    while True:
        if attributes(dev, flow_id) == [{"key": "status", "type": "string", "value": "started"}]:
            return run_id
        assert time.monotonic() < deadline, cli(dev, "flow", "inspect", flow_id).stdout
        time.sleep(0.1)


def rpc(dev, flow_id, name, *args):
    return ok_json(cli(dev, "flow", "rpc", flow_id, name, "--yes", *args))


def test_attributes_and_rpcs_read_and_write_a_run(dev, procs):
    run_id = start_demo(dev, procs, "a1")
    got = ok_json(cli(dev, "flow", "attributes", "get", "a1"))
    assert got["flowId"] == "a1" and got["runId"] == run_id and got["status"] == "RUNNING", got

    written = ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "status=paused",
                          "--int", "counts[eu]=3", "--int64", "counts[us]=-5"))
    assert len(written.pop("requestId")) == 32, written  # a fresh ID per call
    assert written == {"flowId": "a1", "written": [
        {"key": "counts", "instanceKey": "eu", "type": "int64", "value": 3},
        {"key": "counts", "instanceKey": "us", "type": "int64", "value": -5},
        {"key": "status", "type": "string", "value": "paused"}]}, written
    assert attributes(dev, "a1") == written["written"]  # in key order
    assert attributes(dev, "a1", "--key", "counts") == written["written"][:2]

    # A repeat with the same request ID (a retry whose first answer was lost)
    # changes nothing: it does not put "held" back over a later write.
    first = ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "status=held",
                        "--request-id", "set-1"))
    assert first["requestId"] == "set-1", first
    ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "status=resumed"))
    again = ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "status=held",
                        "--request-id", "set-1"))
    assert again["requestId"] == "set-1", again
    assert attributes(dev, "a1", "--key", "status") == [
        {"key": "status", "type": "string", "value": "resumed"}]
    ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "status=paused"))

    table = cli(dev, "flow", "attributes", "get", "a1", "--output", "table")
    assert table.returncode == 0, table.stderr
    assert "KEY" in table.stdout and "paused" in table.stdout and "us" in table.stdout, table.stdout

    # RPCs see and change the Attributes.
    out = rpc(dev, "a1", "describe")
    assert out["runId"] == run_id and out["rpc"] == "describe" and out["requestId"], out
    assert out["output"] == {"status": "paused"}, out
    out = rpc(dev, "a1", "set-status", "--input", '{"status": "shipping"}', "--request-id", "q-1",
              "--rpc-timeout", "20s")
    assert out["output"] == {"ok": True} and out["requestId"] == "q-1", out
    assert rpc(dev, "a1", "describe")["output"] == {"status": "shipping"}

    # A repeat of a committed RPC answers its output again without running the handler: the
    # status written in between stays.
    ok_json(cli(dev, "flow", "attributes", "set", "a1", "--yes", "--string", "status=held",
                "--delete", "counts[us]"))
    again = rpc(dev, "a1", "set-status", "--input", '{"status": "shipping"}', "--request-id", "q-1")
    assert again["output"] == {"ok": True}, again
    assert attributes(dev, "a1") == [
        {"key": "counts", "instanceKey": "eu", "type": "int64", "value": 3},
        {"key": "status", "type": "string", "value": "held"}]

    # The history names the writes and the RPCs.
    history = ok_json(cli(dev, "flow", "history", "a1"))["events"]
    sets = [e for e in history if e["kind"] == "ATTRIBUTES_SET"]
    # The first set, "held" (set-1; its repeat is not an event), "resumed", "paused", the last.
    assert len(sets) == 5, history
    assert {"key": "counts", "instanceKey": "us", "deleted": True} in sets[4]["attributeWrites"]
    rpcs = [e for e in history if e["kind"] == "RPC_COMPLETED"]
    assert [e["rpcName"] for e in rpcs] == ["describe", "set-status", "describe"], rpcs
    assert rpcs[1]["attributeWrites"] == [{"key": "status", "type": "string",
                                           "value": "shipping"}], rpcs[1]

    # One document for the run.
    doc = ok_json(cli(dev, "flow", "inspect", "a1"))
    assert doc["flowId"] == "a1" and doc["runId"] == run_id, doc
    assert doc["flow"]["status"] == "RUNNING" and doc["flow"]["flowType"] == "AttrRpcDemo", doc
    assert doc["attributes"] == attributes(dev, "a1"), doc
    assert doc["state"]["active"] and doc["state"]["workers"], doc["state"]
    assert "flow" not in doc["state"], doc["state"]
    assert doc["history"] == ok_json(cli(dev, "flow", "history", "a1"))["events"]
    table = cli(dev, "flow", "inspect", "a1", "--output", "table")
    assert table.returncode == 0, table.stderr
    for text in ("AttrRpcDemo", "Attributes:", "held", "RPC_COMPLETED", "rpc set-status"):
        assert text in table.stdout, (text, table.stdout)

    # The log names the new records.
    kinds = {k for b in inspect("log", dev.data)["batches"] for k in b["kinds"]}
    assert {"flow.setAttributes", "flow.invokeRpc"} <= kinds, kinds


def test_refusals_are_json_and_change_nothing(dev, procs):
    run_id = start_demo(dev, procs, "a2")
    before = attributes(dev, "a2")

    # The server's refusals: exit 1, the gRPC code, the key or RPC named.
    for args, named in [
        (["attributes", "set", "a2", "--yes", "--string", "nope=1"], "nope"),
        (["attributes", "set", "a2", "--yes", "--int", "status=5"], "status"),
        # Any JSON value passes dexcli; the server refuses one for a string Attribute.
        (["attributes", "set", "a2", "--yes", "--json", "status=[1]"], "status"),
        (["attributes", "set", "a2", "--yes", "--int", "counts[eu]=1", "--string", "extra=x"],
         "extra"),
        (["rpc", "a2", "no-such-rpc", "--yes"], "no-such-rpc"),
    ]:
        e = error_of(cli(dev, "flow", *args), 1)
        assert e["kind"] == "request" and e["grpcCode"] == "INVALID_ARGUMENT", (args, e)
        assert named in e["message"], (args, e)
        assert e["operation"] == ("flow rpc" if args[0] == "rpc" else "flow attributes set"), e
    e = error_of(cli(dev, "flow", "attributes", "get", "nobody"), 1)
    assert e["grpcCode"] == "NOT_FOUND", e

    # dexcli's own refusals: exit 2, the bad flag named, nothing sent.
    for args, message in [
        (["attributes", "set", "a2", "status=x"], "add --yes"),
        (["rpc", "a2", "describe"], "add --yes"),
        (["attributes", "set", "a2", "--yes", "--int", "counts[eu]=three"], "--int counts[eu]=three"),
        (["attributes", "set", "a2", "--yes", "--datetime", "status=soon"], "--datetime status=soon"),
        (["attributes", "set", "a2", "--yes", "--json", "status=[1,]"], "--json status=[1,]"),
        (["attributes", "set", "a2", "--yes"], "nothing to write"),
        (["rpc", "a2", "describe", "--yes", "--input", "{nope"], "not valid JSON"),
        (["rpc", "a2", "describe", "--yes", "--rpc-timeout", "2m"], "at most 60s"),
        (["attributes"], "needs one of these commands: get, set"),
    ]:
        e = error_of(cli(dev, "flow", *args), 2)
        assert e["kind"] == "usage" and message in e["message"], (args, e)
    assert attributes(dev, "a2") == before  # neither the refused nor the unsent writes landed
    history = ok_json(cli(dev, "flow", "history", "a2"))["events"]
    assert not [e for e in history if e["kind"] in ("ATTRIBUTES_SET", "RPC_COMPLETED",
                                                     "RPC_FAILED")], history

    # A handler that fails: FAILED_PRECONDITION with its message; the server does not retry it.
    e = error_of(cli(dev, "flow", "rpc", "a2", "set-status", "--yes", "--input", '{"status": 5}'),
                 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION" and "set-status takes" in e["message"], e
    assert attributes(dev, "a2") == before
    failed = [e for e in ok_json(cli(dev, "flow", "history", "a2"))["events"]
              if e["kind"] == "RPC_FAILED"]
    assert len(failed) == 1 and failed[0]["rpcName"] == "set-status", failed

    # A closed run takes no RPC and no write, and still answers reads.
    ok_json(cli(dev, "flow", "stop", "a2", "--run-id", run_id, "--yes"))
    assert ok_json(cli(dev, "flow", "wait", "a2", "--wait-timeout", "30s"))["status"] == "CANCELED"
    e = error_of(cli(dev, "flow", "rpc", "a2", "describe", "--yes"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION", e
    assert "a2" in e["message"] or run_id in e["message"], e
    e = error_of(cli(dev, "flow", "attributes", "set", "a2", "--yes", "status=late"), 1)
    assert e["grpcCode"] == "FAILED_PRECONDITION", e
    got = ok_json(cli(dev, "flow", "attributes", "get", "a2"))
    assert got["status"] == "CANCELED" and got["attributes"] == before, got
    doc = ok_json(cli(dev, "flow", "inspect", "a2"))
    assert doc["flow"]["status"] == "CANCELED" and doc["history"][-1]["kind"] == "FLOW_CLOSED", doc


def test_help_names_the_commands_and_the_log_records():
    for args, texts in [
        (["flow", "--help"], ["attributes", "rpc", "inspect"]),
        (["flow", "attributes", "set", "--help"],
         ["--string", "--int", "--double", "--bool", "--datetime", "--json", "--bytes-base64",
          "--delete", "--instance", "--yes"]),
        (["flow", "rpc", "--help"], ["--input", "--input-file", "--rpc-timeout", "--request-id",
                                     "--yes"]),
        (["flow", "inspect", "--help"], ["--run-id", "--output"]),
        (["inspect", "log", "--help"], ["flow.setAttributes", "flow.invokeRpc"]),
    ]:
        r = subprocess.run([str(binary("dexcli")), *args], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0, r.stderr
        for text in texts:
            assert text in r.stdout, (args, text)
