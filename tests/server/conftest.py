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
        pytest.skip(f"MinIO is not installed at {MINIO}: run scripts/install-minio")
    data = tmp_path_factory.mktemp("minio")
    port = free_port()
    env = dict(os.environ, MINIO_ROOT_USER=ACCESS, MINIO_ROOT_PASSWORD=SECRET,
               MINIO_BROWSER="off", MINIO_UPDATE="off")
    p = subprocess.Popen([MINIO, "server", str(data / "d"), "--address", f"127.0.0.1:{port}",
                          "--console-address", f"127.0.0.1:{free_port()}"],
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
