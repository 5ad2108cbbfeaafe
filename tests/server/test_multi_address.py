"""dexcli and the `dex-flow-examples worker` given every address of a node: an active `dex-server-zd serve`
and a cold standby on the same filesystem object store (each with its own local store and API
port). The standby answers UNAVAILABLE; the programs find the active process whatever the order,
and follow it when the standby takes over.
"""
import json
import re
import signal
import time

from conftest import Proc, binary, flow_worker, free_port, log_time, run, start_flow

LEASE_S = 3


class ServeProc:
    def __init__(self, procs, tmp_path, name):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.config = tmp_path / f"{name}.yaml"
        self.config.write_text(
            f"nodeId: node-m\napi:\n  listen: {self.address}\n"
            f"objectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
            f"  durability: processCrashSafe\n"
            f"localStore:\n  path: {tmp_path / name}-local\nlease:\n  duration: {LEASE_S}s\n")
        self.procs, self.proc = procs, None

    def start(self):
        self.proc = Proc([binary("dex-server-zd"), "serve", "--config", str(self.config)])
        self.procs.register(self.proc)
        self.proc.wait_for_line("API on", 30)
        return self

    def wait_ready(self, timeout):
        line = self.proc.wait_for_line("dex-server-zd serve ready", timeout)
        return int(re.search(r"epoch (\d+)", line).group(1))


def cli(servers, *args, timeout="10s"):
    return run(binary("dexcli"), "--server", servers, "--timeout", timeout, *args)


def start_flows(servers, ids):
    for i in ids:
        r = start_flow(servers, "ThreeSteps", i, '{"n":1}')
        assert r.returncode == 0, r.stderr


def wait_completed(servers, ids, timeout=60):
    deadline = time.monotonic() + timeout
    for i in ids:
        r = cli(servers, "flow", "wait", i, "--wait-timeout", f"{max(1, int(deadline - time.monotonic()))}s")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["status"] == "COMPLETED", r.stdout


def test_dexcli_and_the_worker_find_the_active_process_and_follow_a_takeover(procs, tmp_path):
    a = ServeProc(procs, tmp_path, "a").start()
    a.wait_ready(60)
    b = ServeProc(procs, tmp_path, "b").start()  # cold standby: waits for the lease

    # The standby alone refuses; given both, in either order, dexcli reaches the active one.
    r = cli(b.address, "admin", "describe", timeout="1s")
    assert r.returncode == 1 and "is not serving" in r.stderr, r.stderr
    for servers in (f"{b.address},{a.address}", f"{a.address},{b.address}"):
        r = cli(servers, "flow", "describe", "nobody")  # the active process answers NOT_FOUND
        assert r.returncode == 1 and '"grpcCode":"NOT_FOUND"' in r.stderr, r.stderr
    r = run(binary("dexcli"), "--server", b.address, "--server", a.address, "admin", "describe")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["nodeId"] == "node-m"

    # One Worker given both, the standby first: it declares the example Flows and serves.
    servers = f"{b.address},{a.address}"
    worker = flow_worker(procs, servers, "--concurrency", "8", "--work-time", "100ms",
                         connected=False)
    worker.wait_for_line(f"connected to {a.address}", 30)
    first = [f"m-{i:02d}" for i in range(10)]
    start_flows(servers, first)
    wait_completed(servers, first)

    # Handback: the active process stops gracefully while flows run; the standby takes over
    # and the worker, and dexcli, follow it.
    second = [f"n-{i:02d}" for i in range(10)]
    start_flows(servers, second)
    a.proc.signal(signal.SIGTERM)
    t_stop = time.monotonic()
    assert a.proc.wait_exit(30) == 0, a.proc.output()
    b.wait_ready(30)
    ready_s = time.monotonic() - t_stop
    # Spec (Lease): the graceful shutdown releases the lease, so the replacement starts at once:
    # the cold standby reads a held lease every LEASE_S/4 and takes it at its next read.
    released = log_time(a.proc.wait_for_line("released the lease", 1))
    acquired = log_time(b.proc.wait_for_line("acquired the lease", 1))
    assert acquired - released <= LEASE_S / 4 + 0.3, f"release to lease taken {acquired - released:.3f}s"
    worker.wait_for_line(f"connected to {b.address}", 30)
    moved_s = time.monotonic() - t_stop
    wait_completed(servers, second)
    third = [f"o-{i:02d}" for i in range(5)]
    start_flows(servers, third)  # the old address is gone: refused, then the new active one
    wait_completed(servers, third)
    print(f"\n[multi-address] after SIGTERM to the old active process: lease taken "
          f"{acquired - released:.3f}s after the release, the new one ready in "
          f"{ready_s:.2f}s, the worker connected to it in {moved_s:.2f}s")

    # The old active process comes back as the standby: nothing changes for the clients.
    a.start()
    r = cli(f"{a.address},{b.address}", "flow", "describe", third[0])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "COMPLETED"


def test_dexcli_with_no_active_process_names_every_address(procs, tmp_path):
    a = ServeProc(procs, tmp_path, "a").start()
    a.wait_ready(60)
    b = ServeProc(procs, tmp_path, "b").start()
    dead = f"127.0.0.1:{free_port()}"
    # The standby and an address where nothing listens, without the active process.
    t0 = time.monotonic()
    r = cli(f"{b.address},{dead}", "flow", "describe", "m-00", timeout="1s")
    took = time.monotonic() - t0
    assert r.returncode == 1, r.stdout + r.stderr
    assert "no active dex process at any of 2 addresses (kept trying for 1s)" in r.stderr, r.stderr
    assert f"the server at {b.address} is not serving" in r.stderr, r.stderr
    assert f"the server is not reachable at {dead}" in r.stderr, r.stderr
    assert took < 5, took

    r = cli(f"{b.address},,{dead}", "flow", "describe", "m-00")
    assert r.returncode == 2, r.stderr
    assert "empty server address at position 2" in r.stderr, r.stderr
