"""Takeover failures (spec: Hot standby, Takeover), with `serve` on a filesystem object store:

- "If a takeover fails before the standby holds the lease, the standby keeps following the log.
  It tries again after a backoff from 1 to 30 seconds."
- "A failure after it holds the lease releases the lease and exits the process with status 1."
  Both for a process that starts on a free lease and for a hot standby that took the lease from
  an active process: the lease shows released and a next process takes it at once.
"""
import json
import re
import signal
import time

import pytest

from conftest import Proc, binary, free_port, inspect, run
from test_hot_standby import HotNode


def write_config(tmp_path, name, objects, local, mode="hot"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"nodeId: dev\napi:\n  listen: 127.0.0.1:{free_port()}\n"
        f"objectStore:\n  type: filesystem\n  path: {objects}\n"
        f"localStore:\n  path: {local}\nlease:\n  duration: 3s\nstandby:\n  mode: {mode}\n")
    return path


def serve(procs, config):
    p = Proc([binary("dex-server-zd"), "serve", "--config", str(config)])
    procs.register(p)
    return p


def test_a_takeover_that_fails_before_holding_the_lease_backs_off_and_keeps_following(procs, tmp_path):
    data = tmp_path / "data"
    objects = data / "objects"
    lease = objects / "nodes" / "dev" / "lease"
    lease.parent.mkdir(parents=True)
    lease.write_bytes(b"not a lease record")  # reading it fails: the takeover cannot happen
    p = serve(procs, write_config(tmp_path, "a", objects, tmp_path / "local"))
    first = p.wait_for_line("takeover failed before holding the lease", 30)
    assert "still following the log, trying again in 1 s" in first, first
    second = p.wait_for_line("trying again in 2 s", 10)
    assert "Corruption" in second, second
    # Meanwhile it follows the (empty) log: the follower reached its end.
    p.wait_for_line("bootstrapping -> following", 10)
    # Once the problem is gone, the next attempt takes the lease.
    lease.unlink()
    p.wait_for_line("dex-server-zd serve ready", 30)
    assert inspect("lease", data)["nodeEpoch"] == "1"


def test_a_failure_after_holding_the_lease_releases_it_and_exits_1(procs, tmp_path):
    data = tmp_path / "data"
    objects = data / "objects"
    # The local store path is a regular file: the engine cannot open it.
    bad_local = tmp_path / "local-is-a-file"
    bad_local.write_text("x")
    p = serve(procs, write_config(tmp_path, "a", objects, bad_local, mode="cold"))
    assert p.wait_exit(60) == 1, p.output()
    assert "cannot open the engine" in p.output()
    lease = inspect("lease", data)
    assert lease["released"] is True and lease["nodeEpoch"] == "1", lease
    # A released lease is taken at once by the next process.
    good = serve(procs, write_config(tmp_path, "b", objects, tmp_path / "local-b", mode="cold"))
    t0 = time.monotonic()
    line = good.wait_for_line("dex-server-zd serve ready", 30)
    assert time.monotonic() - t0 < 3, "the released lease must be taken at once"
    assert re.search(r"epoch 2 ", line), line


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_a_hot_standby_that_fails_after_taking_the_lease_releases_it_and_exits_1(procs, tmp_path, store):
    def node(name, mode="hot"):
        return HotNode(procs, tmp_path, store, name, mode)

    a = node("a").start()
    assert a.wait_ready(60) == 1
    b = node("b").start()
    b.wait_following()
    # Take b's local store away under its follower: the follower keeps its open files (and stays
    # hot), but once b holds the lease its engine cannot reopen the path, a regular file now.
    local = tmp_path / "b-local"
    local.rename(tmp_path / "b-local.moved")
    local.write_text("not a local store")
    time.sleep(0.5)
    assert b.health("dex.HotStandby") == "SERVING", "b must still be a hot standby"
    a.proc.signal(signal.SIGTERM)
    assert a.proc.wait_exit(30) == 0, a.proc.output()
    assert b.proc.wait_exit(30) == 1, b.proc.output()
    # It took the lease as a hot standby (no laggingTakeoverDelay), then failed.
    assert "(hot standby)" in b.proc.wait_for_line("is available; taking it", 1), b.proc.output()
    assert "cannot open the engine" in b.proc.output(), b.proc.output()
    assert "dex-server-zd serve ready" not in b.proc.output()
    r = run(binary("dexcli"), "inspect", "lease", "--config", b.config)
    assert r.returncode == 0, r.stderr
    lease = json.loads(r.stdout)
    # b took the lease (epoch 2) and released it before exiting.
    assert lease["nodeEpoch"] == "2" and lease["released"] is True, lease
    # A released lease is taken at once: a next process serves well before the LEASE_S + 1 s
    # that an unreleased one would make it wait.
    c = node("c", mode="cold")
    t0 = time.monotonic()
    c.start()
    assert c.wait_ready(30) == 3
    took = time.monotonic() - t0
    assert "waiting for it to expire" not in c.proc.output(), c.proc.output()
    assert took < 3, f"the released lease must be taken at once ({took:.2f}s)"
