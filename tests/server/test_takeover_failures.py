"""Takeover failures (spec: Hot standby, Takeover), with `serve` on a filesystem object store:

- "If a takeover fails before the standby holds the lease, the standby keeps following the log.
  It tries again after a backoff from 1 to 30 seconds."
- "A failure after it holds the lease releases the lease and exits the process with status 1."
"""
import os
import re
import time

from conftest import Proc, binary, free_port, inspect


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
