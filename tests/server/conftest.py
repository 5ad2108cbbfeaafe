"""Helpers for end-to-end tests: start real dex processes, read their output, stop them.

Every wait is bounded in time; every process a test starts is killed when the test ends.
"""
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time

import pytest

BIN_DIR = os.environ.get("DEX_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin"))
MINIO = os.environ.get("DEX_MINIO_BIN") or os.path.expanduser("~/.cache/dex/bin/minio")
ACCESS, SECRET = "dexminio", "dexminio-secret-key"


def binary(name):
    path = os.path.join(BIN_DIR, name)
    assert os.path.exists(path), f"{path} is missing: build first (DEX_BIN_DIR={BIN_DIR})"
    return path


class Proc:
    """A running process whose combined output is collected line by line."""

    def __init__(self, args, env=None):
        self.args = args
        self.p = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []
        self._q = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.p.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def wait_for_line(self, needle, timeout):
        """Returns the first output line containing `needle`, or fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        for line in self.lines:
            if needle in line:
                return line
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=min(0.2, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if needle in line:
                return line
        raise AssertionError(f"no line with {needle!r} within {timeout}s; output:\n" + self.output())

    def wait_exit(self, timeout):
        rc = self.p.wait(timeout=timeout)
        self.drain()
        return rc

    def drain(self):
        while True:
            try:
                line = self._q.get(timeout=0.5)
            except queue.Empty:
                return
            if line is None:
                return
            self.lines.append(line)

    def output(self):
        return "\n".join(self.lines)

    def signal(self, sig):
        self.p.send_signal(sig)

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=10)


@pytest.fixture
def procs():
    started = []

    def start(*args):
        proc = Proc([str(a) for a in args])
        started.append(proc)
        return proc

    start.register = started.append  # for processes started with Proc(...) directly
    yield start
    for proc in started:
        proc.kill()


def run(*args, timeout=30):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def inspect(what, data_dir):
    r = run(binary("dexcli"), "inspect", what, "--data-dir", data_dir)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def minio(tmp_path_factory):
    """A real MinIO on a free loopback port with bucket "dex"; yields its endpoint URL.

    MinIO comes from scripts/install-minio (cached in ~/.cache/dex/bin); one per test module,
    with a fresh data directory, stopped afterwards.
    """
    if not os.path.exists(MINIO):
        # A failure, never a skip: a broken install must not leave these tests unrun.
        pytest.fail(f"MinIO is not installed at {MINIO}: run scripts/install-minio "
                    f"(or set DEX_MINIO_BIN)", pytrace=False)
    data = tmp_path_factory.mktemp("minio")
    port = free_port()
    env = dict(os.environ, MINIO_ROOT_USER=ACCESS, MINIO_ROOT_PASSWORD=SECRET,
               MINIO_BROWSER="off", MINIO_UPDATE="off")
    # MinIO holds a conditional PUT of a key behind a stalled PUT of that key (a frozen process's
    # half-sent request) until that connection has been silent for the idle timeout, 30 s by
    # default: past the 10 s log write limit of the process taking over (issue 30).
    # docs/operations.md, "MinIO".
    p = subprocess.Popen([MINIO, "server", str(data / "d"), "--address", f"127.0.0.1:{port}",
                          "--console-address", f"127.0.0.1:{free_port()}",
                          "--idle-timeout", "2s", "--read-header-timeout", "2s"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import boto3
    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id=ACCESS,
                      aws_secret_access_key=SECRET, region_name="us-east-1")
    deadline = time.monotonic() + 60
    while True:
        try:
            s3.create_bucket(Bucket="dex")
            break
        except Exception:
            if time.monotonic() > deadline or p.poll() is not None:
                p.kill()
                raise
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}"
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()


# ---------------------------------------------------------------------------------------------
# The object store that the `serve` processes of one node share, for tests that run the same
# scenario on both backends: pick it per test with
#   @pytest.mark.parametrize("store", ["filesystem", "minio"], indirect=True)
# MinIO is started (or its absence fails the test) only for the "minio" case.

STORES = ("filesystem", "minio")


class Store:
    """The `objectStore` section of a serve config, and the environment its processes need."""

    def __init__(self, kind, objects_dir, endpoint=None):
        self.kind = kind
        if kind == "filesystem":
            # processCrashSafe: no fsync (a killed process loses nothing; the host does not crash).
            self.yaml = (f"objectStore:\n  type: filesystem\n  path: {objects_dir}\n"
                         f"  durability: processCrashSafe\n")
            self.env = None
        elif kind == "minio":
            prefix = f"p-{os.getpid()}-{time.monotonic_ns()}"
            self.yaml = (f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {prefix}\n"
                         f"  endpoint: {endpoint}\n")
            self.env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        else:
            raise AssertionError(f"unknown object store {kind!r}: one of {STORES}")

    def __repr__(self):
        return self.kind


@pytest.fixture
def store(request, tmp_path):
    kind = getattr(request, "param", None)
    assert kind in STORES, ("say which object store the test runs on: "
                            '@pytest.mark.parametrize("store", [...], indirect=True)')
    endpoint = request.getfixturevalue("minio") if kind == "minio" else None
    return Store(kind, tmp_path / "objects", endpoint)


def log_time(line):
    """The wall-clock time (seconds since the epoch) of a server log line
    ("2026-12-01T14:51:19.123 info ..."), comparable across the processes of one host."""
    import datetime
    stamp = line.split(" ", 1)[0]
    return datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def object_store_requests(metrics_text):
    """dexzd_object_store_requests_total summed by operation (get, put, remove, list) over
    every outcome, from a /metrics page. Fails if the page has no such series at all."""
    import re
    counts, seen = {}, False
    for line in metrics_text.splitlines():
        m = re.match(r"dexzd_object_store_requests_total\{([^}]*)\} (\S+)$", line)
        if not m:
            continue
        seen = True
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        op = labels["operation"]
        counts[op] = counts.get(op, 0) + float(m.group(2))
    assert seen, "no dexzd_object_store_requests_total series on /metrics:\n" + metrics_text
    return counts


# ---------------------------------------------------------------------------------------------
# dex Flows: `dex-flow-examples worker` (examples/flows/) hosts the Flows that the tests start
# and read with `dexcli flow ...`. The HA tests run E2EThreeSteps, E2ESlowStep,
# E2ESlowStepNoRetry and E2EIdle; examples/flows/pipelines.cc says what each Step does and its
# retry policy and timeouts. `servers` is one address, a comma-separated list or a list.

def server_list(servers):
    return servers if isinstance(servers, str) else ",".join(servers)


def flow_worker(procs, servers, *flags, connected=True):
    """A `dex-flow-examples worker` given `servers`; by default waits until it connected (its
    hello declared the Flows durably, so that starts of their types are accepted)."""
    w = procs(binary("dex-flow-examples"), "worker", "--server", server_list(servers), *flags)
    if connected:
        w.wait_for_line("connected to", 30)
    return w


def dexcli(servers, *args, timeout="10s", wait=60):
    """One dexcli call; `timeout` is its --timeout (how long each call looks for the active
    process), `wait` the bound on the whole process."""
    return run(binary("dexcli"), "--server", server_list(servers), "--timeout", timeout, *args,
               timeout=wait)


def start_flow(servers, flow_type, flow_id, flow_input="{}", timeout="10s"):
    """`dexcli flow start`; the request ID (the flow ID) makes a repeat after an unknown outcome
    answer the run the first one started."""
    return dexcli(servers, "flow", "start", flow_type, "--flow-id", flow_id, "--request-id",
                  flow_id, "--input", flow_input, timeout=timeout)


def flow_json(servers, *args, timeout="10s"):
    """The JSON output of one `dexcli flow ...` call, or None when it failed."""
    r = dexcli(servers, "flow", *args, timeout=timeout)
    return json.loads(r.stdout) if r.returncode == 0 else None


def parallel(fn, items, threads=8):
    """{item: fn(item)} computed by a few threads (each call is a dexcli process)."""
    from concurrent.futures import ThreadPoolExecutor
    items = list(items)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return dict(zip(items, pool.map(fn, items)))


def histories(servers, ids):
    """{flow ID: its history events (`dexcli flow history`), or None where the call failed (no
    such flow, or no active process answered)}, one call per flow, a few at a time."""
    def one(flow_id):
        h = flow_json(servers, "history", flow_id)
        return None if h is None else h["events"]
    return parallel(one, ids)


def closed_flows(servers, ids, timeout=180):
    """Reads each flow's history until it closed and returns {flow ID: {"status": the status it
    closed with (RUNNING if still open at the deadline), "events": its history}}; a flow never
    found is absent. One `dexcli flow history` per flow and round: each is a process, so the
    history, which holds the status, attempts and output, is all that is asked for."""
    deadline = time.monotonic() + timeout
    flows, todo = {}, list(ids)
    while todo:
        for flow_id, events in histories(servers, todo).items():
            if events:
                closed = events[-1] if events[-1]["kind"] == "FLOW_CLOSED" else {}
                flows[flow_id] = {"status": closed.get("status", "RUNNING"), "events": events}
        todo = [i for i in todo if flows.get(i, {}).get("status", "RUNNING") == "RUNNING"]
        if not todo or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return flows


def output_of(flow):
    """The output a closed_flows() flow completed with (its last Step's GracefulComplete)."""
    done = [e for e in flow["events"] if e["kind"] == "EXECUTE_COMPLETED"]
    return done[-1].get("decision", {}).get("gracefulComplete") if done else None


def completions(flow):
    """[(step execution ID, attempt)] of a flow's EXECUTE_COMPLETED history events, in order."""
    return [(e["stepExecutionId"], e["attempt"]) for e in flow["events"]
            if e["kind"] == "EXECUTE_COMPLETED"]
