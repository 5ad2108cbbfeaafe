#!/usr/bin/env python3
"""chaos: a seeded fault-injection run against real dex processes on loopback (issue 7).

    chaos.py [--short | --minutes N] [--seed S] [--out DIR] [--bin-dir DIR]

Starts MinIO, the fault-injecting proxy (tests/tools/faultproxy.py, in this process, recording
every request it sees), two `dex-server-zd serve` processes of one node in hot-standby mode
(lease 3 s), three chaos_worker Workers hosting the chaos dex Flow (and chaos-child, the
SubFlow that its Fan Step waits on) and chaos_client (four lanes starting runs with known Flow
IDs, some with a Fan, publishing to their Channel, invoking their RPC "add", setting their
Attributes and reading them back, their SubFlow children included). A
nemesis drawn from the seed then injects faults for the scenario's length: SIGKILL and restart
of the active or the standby, SIGSTOP/SIGCONT shorter and longer than the lease, step downs
with and without a standby, Worker kills, and object-store faults through the proxy (latency,
503 SlowDown, stalls past the cutoffs, connection resets, writes whose answer is dropped after
they landed). Then it heals everything, waits for every acknowledged run to close, reads the
final state (every Flow's description, history events and Attributes through the API, the lease and the
raw log straight from MinIO) and runs checker.py over the run directory. It prints the seed and
the schedule first and the checker's summary line last, and exits 1 on any violation (77 when MinIO
is not installed). README.md here explains the checks and how to replay a seed.

Every wait is bounded; every process started is killed at the end whatever happens (and, through
PR_SET_PDEATHSIG, when this process dies).
"""
import argparse
import ctypes
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "tools"))
sys.path.insert(0, HERE)
import faultproxy  # noqa: E402
import checker  # noqa: E402
import wire  # noqa: E402

ACCESS, SECRET = "dexminio", "dexminio-secret-key"
NODE = "chaos"
LEASE_S = 3.0
STEP_DOWN_HOLD_OFF_S = 3.0
MINIO = os.environ.get("DEX_MINIO_BIN") or os.path.expanduser("~/.cache/dex/bin/minio")
# MinIO holds a conditional PUT of a key behind a stalled PUT of that key (a frozen process's
# half-sent request) until that connection has been silent for the idle timeout, 30 s by default:
# past the new active process's 10 s log write limit (issue 30). docs/operations.md, "MinIO".
MINIO_TIMEOUT_FLAGS = ["--idle-timeout", "2s", "--read-header-timeout", "2s"]
LEASE_KEY = rf"/nodes/{NODE}/lease$"
LOG_PUT_KEY = rf"/nodes/{NODE}/log/\d+$"
LOG_KEY = rf"/nodes/{NODE}/log"

T0 = time.time()


def say(text):
    print(f"[chaos {time.time() - T0:7.1f}s] {text}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG = 1: the child is SIGKILLed when this process dies, however it dies.
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)


class Proc:
    """A child process whose output goes to a log file."""

    def __init__(self, args, log_path, env=None):
        self.args = [str(a) for a in args]
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.p = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                  preexec_fn=_die_with_parent)
        self.pid = self.p.pid
        self.started = time.time()

    def alive(self):
        return self.p.poll() is None

    def signal(self, sig):
        if self.alive():
            try:
                self.p.send_signal(sig)
            except ProcessLookupError:
                pass

    def text(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def wait_for(self, pattern, timeout):
        """The first match of `pattern` in the output, or None after `timeout` or an exit."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = rx.search(self.text())
            if m:
                return m
            if not self.alive():
                return rx.search(self.text())
            time.sleep(0.1)
        return None

    def stop(self, grace=5.0):
        """SIGCONT (a stopped process cannot exit), SIGTERM, then SIGKILL after `grace`."""
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            self.signal(signal.SIGKILL)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.log.close()


class EventLog:
    """JSON lines with a wall-clock time: what the harness did to processes, and the nemesis."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, **fields):
        fields.setdefault("t", time.time())
        with self.lock:
            self.f.write(json.dumps(fields) + "\n")


class RecordingProxy(faultproxy.FaultProxy):
    """faultproxy.FaultProxy that also writes every request to a JSON-lines file, with the
    lease record of every lease PUT and the header of every log batch PUT decoded from the
    request body: the checker's view of what reached object storage, and when."""

    def __init__(self, listen, upstream, seed, path):
        super().__init__(listen, upstream, seed)
        self.out = open(path, "a", buffering=1 << 16)
        self.out_lock = threading.Lock()

    def _record(self, req, cls, action, rule, upstream_status, status, t):
        super()._record(req, cls, action, rule, upstream_status, status, t)
        e = {"t": t, "t_end": time.time(), "m": req.method, "c": cls, "a": action,
             "u": upstream_status, "s": status}
        if rule is not None:
            e["rule"] = rule.id
            if rule.fault == "delay":
                e["delay"] = rule.seconds
        if cls == "log":
            e["slot"] = int(req.target.split("?", 1)[0].rsplit("/", 1)[1])
        if req.method == "PUT" and req.body:
            try:
                if cls == "lease":
                    e["lease"] = wire.decode_lease(req.body)
                elif cls == "log":
                    e["batch"] = wire.decode_batch_header(req.body)
            except Exception as ex:  # a torn body is the proxy's problem, not the checker's
                e["decode_error"] = str(ex)
        if cls == "other":
            e["target"] = req.target[:200]
        with self.out_lock:
            self.out.write(json.dumps(e) + "\n")

    def flush(self):
        with self.out_lock:
            self.out.flush()


def metrics(port, timeout=0.5):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout).read()
    out = {}
    for line in text.decode().splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


class ServeNode:
    """One `dex-server-zd serve` process name ('a' or 'b'): fixed ports and local store across
    restarts, as a pod keeps its address and volume."""

    def __init__(self, run, name):
        self.run, self.name = run, name
        self.api_port, self.metrics_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.api_port}"
        self.config = os.path.join(run.out, f"{name}.yaml")
        with open(self.config, "w") as f:
            f.write(run.serve_config(self.api_port, self.metrics_port,
                                     os.path.join(run.out, "local", name), run.proxy_endpoint))
        self.proc = None
        self.inc = 0
        self.down_until = 0.0  # the supervisor restarts it only after this time
        self.frozen = False

    def start(self):
        self.inc += 1
        log = os.path.join(self.run.out, "logs", f"{self.name}.{self.inc}.log")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        self.proc = Proc([self.run.bin("dex-server-zd"), "serve", "--config", self.config], log,
                         env=env)
        self.frozen = False
        self.run.events.write(ev="start", proc=self.name, inc=self.inc, pid=self.proc.pid,
                              addr=self.address, log=os.path.relpath(log, self.run.out))
        return self

    def alive(self):
        return self.proc is not None and self.proc.alive()

    def is_active(self):
        if not self.alive() or self.frozen:
            return False
        try:
            return metrics(self.metrics_port).get("dexzd_active") == 1
        except OSError:
            return False

    def is_following(self):
        if not self.alive() or self.frozen:
            return False
        try:
            return metrics(self.metrics_port).get('dexzd_hot_standby_state{state="following"}') == 1
        except OSError:
            return False


class Worker:
    def __init__(self, run, index):
        self.run, self.index = run, index
        self.proc = None
        self.inc = 0
        self.down_until = 0.0

    def start(self):
        self.inc += 1
        wid = f"w{self.index}.{self.inc}"
        r = self.run
        self.proc = Proc([r.bin("chaos_worker"), "--servers", r.servers(), "--worker-id", wid,
                          "--history", os.path.join(r.out, "workers", f"{wid}.jsonl"),
                          "--concurrency", "8", "--seed", str(r.seed)],
                         os.path.join(r.out, "logs", f"worker-{wid}.log"))
        r.events.write(ev="start", proc=f"w{self.index}", inc=self.inc, pid=self.proc.pid, wid=wid)
        return self

    def alive(self):
        return self.proc is not None and self.proc.alive()


# ------------------------------------------------------------------------------------ nemesis

# Every fault kind the nemesis draws from; the schedule deals them from a shuffled deck, so every
# kind comes up once in each round of len(KINDS) faults.
KINDS = ["kill-active", "kill-standby", "pause-active-short", "pause-active-long",
         "pause-standby-short", "pause-standby-long", "step-down", "step-down-alone",
         "kill-worker", "store-latency", "store-slowdown", "store-stall", "store-reset",
         "store-drop-response"]


def make_schedule(seed, seconds, gap=(2.0, 9.0)):
    """The faults of a run: (offset in seconds, kind, parameters), a pure function of the seed."""
    rng = random.Random(seed)
    schedule, deck, t = [], [], rng.uniform(3, 6)
    while t < seconds:
        if not deck:
            deck = list(KINDS)
            rng.shuffle(deck)
        kind = deck.pop()
        p = {}
        if kind in ("kill-active", "kill-standby"):
            p["restart_after"] = round(rng.uniform(0.3, 3.0), 2)
        elif kind.endswith("-short"):
            p["seconds"] = round(rng.uniform(0.3, LEASE_S * 0.6), 2)
        elif kind.endswith("-long"):
            p["seconds"] = round(rng.uniform(LEASE_S + 0.5, LEASE_S * 3), 2)
        elif kind == "kill-worker":
            p["worker"] = rng.randrange(3)
            p["restart_after"] = round(rng.uniform(0.3, 3.0), 2)
        elif kind == "store-latency":
            p["rule"] = {"fault": "delay", "seconds": round(rng.uniform(0.05, 0.5), 3),
                         "probability": round(rng.uniform(0.3, 1.0), 2),
                         "for_seconds": round(rng.uniform(3, 10), 1)}
        elif kind == "store-slowdown":
            rule = {"fault": "status", "status": 503, "code": "SlowDown",
                    "probability": round(rng.uniform(0.3, 1.0), 2),
                    "for_seconds": round(rng.uniform(1, 5), 1)}
            target = rng.choice(["any", "lease", "log-put", "reads"])
            rule.update({"lease": {"key": LEASE_KEY}, "log-put": {"method": "PUT", "key": LOG_PUT_KEY},
                         "reads": {"method": "GET"}, "any": {}}[target])
            p["rule"] = rule
        elif kind == "store-stall":
            target = rng.choice(["lease-put", "log-put", "log-put", "reads", "log-past-limit"])
            if target == "log-past-limit":
                # Every log write hangs past the 10 s log write limit: the active stops (exit 1),
                # and so may a standby whose EpochStart meets the same hang.
                p["rule"] = {"fault": "stall", "seconds": 12, "method": "PUT", "key": LOG_PUT_KEY,
                             "for_seconds": 11}
            else:
                p["rule"] = {"fault": "stall", "seconds": round(rng.uniform(1.5, 8.0), 1),
                             "count": rng.randint(1, 3),
                             **{"lease-put": {"method": "PUT", "key": LEASE_KEY},
                                "log-put": {"method": "PUT", "key": LOG_PUT_KEY},
                                "reads": {"method": "GET", "key": LOG_KEY}}[target]}
            p["target"] = target
        elif kind == "store-reset":
            p["rule"] = {"fault": "reset", "probability": round(rng.uniform(0.1, 0.5), 2),
                         "for_seconds": round(rng.uniform(1, 4), 1)}
        elif kind == "store-drop-response":
            target = rng.choice(["lease", "log", "log"])
            p["rule"] = {"fault": "drop_response", "method": "PUT", "count": rng.randint(1, 2),
                         "key": LEASE_KEY if target == "lease" else LOG_PUT_KEY}
        schedule.append((round(t, 2), kind, p))
        t += rng.uniform(*gap)
    return schedule


class Run:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.out = os.path.abspath(args.out)
        self.bin_dir = os.path.abspath(args.bin_dir)
        self.prefix = f"chaos-{self.seed}-{int(time.time())}"
        self.supervisor = None
        self.nodes, self.workers = [], []
        self.client = None
        self.minio = None
        self.proxy = None
        self.stop_nemesis = threading.Event()
        self.stop_supervisor = threading.Event()
        self.lock = threading.Lock()
        self.faults = {}  # kind -> count of faults injected
        self.skipped = {}

    def bin(self, name):
        path = os.path.join(self.bin_dir, name)
        if not os.path.exists(path):
            raise SystemExit(f"chaos: {path} is missing: build it first (--bin-dir)")
        return path

    def servers(self):
        return ",".join(n.address for n in self.nodes)

    def serve_config(self, api_port, metrics_port, local, endpoint):
        return (f"nodeId: {NODE}\napi:\n  listen: 127.0.0.1:{api_port}\n"
                f"metrics:\n  listen: 127.0.0.1:{metrics_port}\n"
                f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {self.prefix}\n"
                f"  endpoint: {endpoint}\n"
                f"localStore:\n  path: {local}\n"
                f"lease:\n  duration: {LEASE_S:g}s\n"
                f"standby:\n  mode: hot\n  stepDownHoldOff: {STEP_DOWN_HOLD_OFF_S:g}s\n"
                f"lifecycle:\n  attemptDrainTimeout: 2s\n"
                # No snapshots, so the log is never collected and the checker sees all of it.
                f"snapshots:\n  interval: 0\n  everyRecords: 0\n")

    # -------------------------------------------------------------------------- setup

    def start_minio(self):
        port = free_port()
        data = os.path.join(self.out, "minio-data")
        env = dict(os.environ, MINIO_ROOT_USER=ACCESS, MINIO_ROOT_PASSWORD=SECRET,
                   MINIO_BROWSER="off", MINIO_UPDATE="off")
        self.minio = Proc([MINIO, "server", data, "--address", f"127.0.0.1:{port}",
                           "--console-address", f"127.0.0.1:{free_port()}",
                           *MINIO_TIMEOUT_FLAGS],
                          os.path.join(self.out, "logs", "minio.log"), env=env)
        self.minio_endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if wire.create_bucket(self.minio_endpoint, "dex", ACCESS, SECRET):
                break
            if time.monotonic() > deadline or not self.minio.alive():
                raise RuntimeError("MinIO did not start:\n" + self.minio.text()[-2000:])
            time.sleep(0.2)

    def start_proxy(self):
        self.proxy = RecordingProxy("127.0.0.1:0", self.minio_endpoint.removeprefix("http://"),
                                    self.seed, os.path.join(self.out, "proxy-events.jsonl"))
        port = self.proxy.start()
        self.proxy_endpoint = f"http://127.0.0.1:{port}"

    def dexcli(self, *args, timeout=60, servers=None):
        return subprocess.run([self.bin("dexcli"), "--server", servers or self.servers(), *args],
                              capture_output=True, text=True, timeout=timeout)

    def setup(self):
        for d in ("logs", "workers", "local", "final"):
            os.makedirs(os.path.join(self.out, d), exist_ok=True)
        self.events = EventLog(os.path.join(self.out, "events.jsonl"))
        self.start_minio()
        self.start_proxy()
        self.nodes = [ServeNode(self, "a"), ServeNode(self, "b")]
        # The checker reads the log straight from MinIO, not through the faults.
        with open(os.path.join(self.out, "inspect.yaml"), "w") as f:
            f.write(self.serve_config(0, 0, os.path.join(self.out, "local", "inspect"),
                                      self.minio_endpoint).replace(
                "metrics:\n  listen: 127.0.0.1:0\n", ""))
        a, b = self.nodes
        a.start()
        if not a.proc.wait_for(r"dex-server-zd serve ready", 60):
            raise RuntimeError("a never became active:\n" + a.proc.text()[-3000:])
        b.start()
        deadline = time.monotonic() + 60
        while not b.is_following():
            if time.monotonic() > deadline:
                raise RuntimeError("b never followed:\n" + b.proc.text()[-3000:])
            time.sleep(0.2)
        self.workers = [Worker(self, i).start() for i in range(3)]
        for w in self.workers:
            if not w.proc.wait_for(r"connected to", 30):
                raise RuntimeError(f"worker {w.index} never connected:\n" + w.proc.text()[-2000:])

    def start_client(self, seconds):
        self.stop_file = os.path.join(self.out, "stop-clients")
        self.client = Proc([self.bin("chaos_client"), "--servers", self.servers(),
                            "--history", os.path.join(self.out, "history.jsonl"),
                            "--prefix", f"s{self.seed}", "--lanes", "4",
                            "--rate", str(self.args.rate), "--timeout", "10s", "--tries", "3",
                            "--rounds", "3", "--id-reuse-policy", self.args.id_reuse_policy,
                            "--fan-ratio", str(self.args.fan_ratio),
                            "--duration", str(seconds), "--stop-file", self.stop_file,
                            "--seed", str(self.seed)],
                           os.path.join(self.out, "logs", "client.log"))

    # -------------------------------------------------------------------------- supervisor

    def supervise(self):
        """Restarts serve processes and Workers that exited (crashed, killed, or stopped after
        losing the lease), once their down_until has passed, as Kubernetes would."""
        while not self.stop_supervisor.wait(0.2):
            now = time.time()
            with self.lock:
                for n in self.nodes:
                    if n.proc is not None and not n.proc.alive() and not getattr(n.proc, "reported", False):
                        n.proc.reported = True
                        self.events.write(ev="exit", proc=n.name, inc=n.inc, rc=n.proc.p.returncode)
                        if n.proc.p.returncode not in (0, -signal.SIGKILL, -signal.SIGTERM):
                            say(f"{n.name}.{n.inc} exited with {n.proc.p.returncode}")
                    if not n.alive() and now >= n.down_until:
                        n.start()
                for w in self.workers:
                    if w.proc is not None and not w.proc.alive() and not getattr(w.proc, "reported", False):
                        w.proc.reported = True
                        self.events.write(ev="exit", proc=f"w{w.index}", inc=w.inc,
                                          rc=w.proc.p.returncode)
                    if not w.alive() and now >= w.down_until:
                        w.start()

    # -------------------------------------------------------------------------- nemesis

    def roles(self, wait=3.0):
        """(active, standby) nodes, waiting up to `wait` s for an active one; either may be None."""
        deadline = time.monotonic() + wait
        while True:
            active = next((n for n in self.nodes if n.is_active()), None)
            if active or time.monotonic() > deadline or self.stop_nemesis.is_set():
                break
            time.sleep(0.1)
        standby = next((n for n in self.nodes if n is not active and n.alive() and not n.frozen),
                       None)
        return active, standby

    def count(self, kind, applied=True, **details):
        with self.lock:
            (self.faults if applied else self.skipped)[kind] = \
                (self.faults if applied else self.skipped).get(kind, 0) + 1
        self.events.write(ev="fault" if applied else "fault-skipped", kind=kind, **details)

    def kill(self, node, restart_after):
        with self.lock:
            node.down_until = time.time() + restart_after
            node.proc.signal(signal.SIGKILL)
            node.frozen = False
        self.events.write(ev="kill", proc=node.name, inc=node.inc)

    def pause(self, node, seconds):
        proc = node.proc
        with self.lock:
            node.frozen = True
            proc.signal(signal.SIGSTOP)
        self.events.write(ev="stop", proc=node.name, inc=node.inc, seconds=seconds)
        self.stop_nemesis.wait(seconds)
        with self.lock:
            proc.signal(signal.SIGCONT)
            if node.proc is proc:
                node.frozen = False
        self.events.write(ev="cont", proc=node.name, inc=node.inc)

    def step_down(self, active, kind):
        r = self.dexcli("admin", "step-down", "--yes", "--timeout", "40s", servers=active.address,
                        timeout=60)
        self.events.write(ev="step-down-answer", kind=kind, proc=active.name, rc=r.returncode,
                          out=r.stdout.strip()[-500:], err=r.stderr.strip()[-500:])

    def inject(self, kind, p):
        if kind.startswith("store-"):
            ids = self.proxy_rules([p["rule"]])
            self.count(kind, rule=p["rule"], ids=ids)
            return
        if kind == "kill-worker":
            w = self.workers[p["worker"]]
            if not w.alive():
                return self.count(kind, applied=False, why="worker not running")
            with self.lock:
                w.down_until = time.time() + p["restart_after"]
                w.proc.signal(signal.SIGKILL)
            self.count(kind, worker=w.index, inc=w.inc)
            return
        active, standby = self.roles()
        if kind in ("kill-active", "pause-active-short", "pause-active-long", "step-down",
                    "step-down-alone"):
            target = active
        else:
            target = standby
        if target is None:
            return self.count(kind, applied=False, why="no such process now")
        if kind.startswith("kill-"):
            self.count(kind, proc=target.name, inc=target.inc)
            self.kill(target, p["restart_after"])
        elif kind.startswith("pause-"):
            self.count(kind, proc=target.name, inc=target.inc, seconds=p["seconds"])
            self.pause(target, p["seconds"])
        elif kind == "step-down":
            if standby is None or not standby.is_following():
                return self.count(kind, applied=False, why="no hot standby now")
            self.count(kind, proc=target.name, inc=target.inc)
            self.step_down(target, kind)
        elif kind == "step-down-alone":
            # Take the standby away (SIGTERM: a graceful stop) and keep it away until the
            # stepped-down process has taken the lease back after its hold-off.
            if standby is not None:
                with self.lock:
                    standby.down_until = time.time() + 3600
                    standby.proc.signal(signal.SIGCONT)
                    standby.proc.signal(signal.SIGTERM)
                    standby.frozen = False
                deadline = time.monotonic() + 15
                while standby.alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
                if standby.alive():
                    standby.proc.signal(signal.SIGKILL)
            self.count(kind, proc=target.name, inc=target.inc)
            self.step_down(target, kind)
            if standby is not None:
                with self.lock:
                    standby.down_until = time.time() + 0.5

    def proxy_rules(self, rules):
        with self.proxy.lock:
            now = time.monotonic()
            made = []
            for spec in rules:
                made.append(faultproxy.Rule(self.proxy.next_rule_id + len(made), spec, now))
            self.proxy.next_rule_id += len(made)
            # Expired rules are dropped so that the list stays short over a long run.
            self.proxy.rules = [r for r in self.proxy.rules if r.active(now)] + made
            return [r.id for r in made]

    def nemesis(self, schedule, start):
        threads = []
        for offset, kind, p in schedule:
            if self.stop_nemesis.wait(max(0.0, start + offset - time.time())):
                break
            say(f"fault {kind} {json.dumps(p)}")

            def go(kind=kind, p=p):
                try:
                    self.inject(kind, p)
                except Exception:
                    self.events.write(ev="nemesis-error", kind=kind, error=traceback.format_exc())
                    say(f"nemesis error in {kind}:\n{traceback.format_exc()}")
            t = threading.Thread(target=go, daemon=True)
            t.start()
            threads.append(t)
        return threads

    # -------------------------------------------------------------------------- heal and final

    def heal(self):
        self.stop_nemesis.set()
        with self.proxy.lock:
            self.proxy.rules = []
        with self.lock:
            for n in self.nodes:
                if n.proc is not None:
                    n.proc.signal(signal.SIGCONT)
                n.frozen = False
                n.down_until = 0
            for w in self.workers:
                w.down_until = 0
        self.events.write(ev="heal")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            active, standby = self.roles(wait=0)
            if active and standby and standby.is_following():
                return True
            time.sleep(0.5)
        say("heal: no active process with a following standby within 90 s")
        return False

    def read_back(self, flow_ids, wait_s):
        """Every Flow ID's description and history through the API (chaos_client --readback),
        after waiting up to `wait_s` for the runs to close: final/flows.json."""
        ids = os.path.join(self.out, "final", "flow-ids.txt")
        with open(ids, "w") as f:
            f.write("".join(i + "\n" for i in sorted(flow_ids)))
        out = os.path.join(self.out, "final", "flows.json")
        r = subprocess.run([self.bin("chaos_client"), "--servers", self.servers(), "--timeout",
                            "20s", "--readback", ids, "--out", out, "--wait", str(wait_s)],
                           capture_output=True, text=True, timeout=wait_s + 600)
        if r.returncode != 0:
            raise RuntimeError(f"chaos_client --readback failed: {r.stdout}{r.stderr}")
        say(r.stdout.strip())
        with open(out) as f:
            return json.load(f)

    def final_state(self):
        final = os.path.join(self.out, "final")
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        cfg = os.path.join(self.out, "inspect.yaml")
        for what, extra in (("lease", []), ("log", ["--raw", "--records", "--limit", "100000000"])):
            r = subprocess.run([self.bin("dexcli"), "inspect", what, "--config", cfg, *extra],
                               capture_output=True, text=True, timeout=1200, env=env)
            if r.returncode != 0:
                raise RuntimeError(f"inspect {what} failed: {r.stderr}")
            with open(os.path.join(final, f"{what}.json"), "w") as f:
                f.write(r.stdout)
        r = self.dexcli("--timeout", "10s", "admin", "describe")
        with open(os.path.join(final, "describe.json"), "w") as f:
            f.write(r.stdout if r.returncode == 0 else json.dumps({"error": r.stderr}))

    def cleanup(self):
        self.stop_nemesis.set()
        self.stop_supervisor.set()
        if self.supervisor is not None:
            self.supervisor.join(timeout=10)
        procs = [self.client] + [w.proc for w in self.workers] + [n.proc for n in self.nodes]
        for p in procs + [self.minio]:
            if p is None:
                continue
            try:
                p.stop(grace=5.0)
            except Exception:
                traceback.print_exc()
        if self.proxy is not None:
            self.proxy.flush()
            self.proxy.close()

    # -------------------------------------------------------------------------- the run

    def execute(self, nemesis_seconds):
        schedule = make_schedule(self.seed, nemesis_seconds)
        say(f"seed {self.seed}; {nemesis_seconds:.0f} s of faults; out {self.out}")
        say(f"replay: {sys.executable} {os.path.relpath(__file__)} --seed {self.seed} "
            + ("--short" if self.args.short else f"--minutes {self.args.minutes:g}"))
        print("schedule (offset s, kind, parameters):", flush=True)
        for offset, kind, p in schedule:
            print(f"  {offset:8.2f}  {kind:20s} {json.dumps(p)}", flush=True)
        with open(os.path.join(self.out, "schedule.json"), "w") as f:
            json.dump({"seed": self.seed, "nemesis_seconds": nemesis_seconds,
                       "schedule": schedule}, f, indent=1)
        self.setup()
        say("setup done: a active, b following, 3 workers connected")
        self.supervisor = threading.Thread(target=self.supervise, daemon=True)
        self.supervisor.start()
        self.start_client(nemesis_seconds + 600)
        start = time.time()
        self.events.write(ev="nemesis-start")
        threads = self.nemesis(schedule, start)
        remaining = start + nemesis_seconds - time.time()
        if remaining > 0:
            time.sleep(remaining)
        say("nemesis over: healing")
        healed = self.heal()
        for t in threads:
            t.join(timeout=60)
        # A few seconds of load on the healed node, then the clients stop.
        time.sleep(3)
        open(self.stop_file, "w").close()
        try:
            self.client.p.wait(timeout=120)
        except subprocess.TimeoutExpired:
            say("the client did not stop within 120 s; killing it")
            self.client.signal(signal.SIGKILL)
        self.events.write(ev="clients-stopped")
        history = checker.load_jsonl(os.path.join(self.out, "history.jsonl"))
        acknowledged = checker.acknowledged_flows(os.path.join(self.out, "history.jsonl"))
        tried = {h["flow"] for h in history if h.get("op") == "start"}
        say(f"clients stopped: {len(acknowledged)} flows acknowledged; waiting for them to end")
        self.read_back(tried, wait_s=240)
        self.final_state()
        self.events.write(ev="end")
        meta = {"seed": self.seed, "node": NODE, "lease_s": LEASE_S, "prefix": self.prefix,
                "nemesis_seconds": nemesis_seconds, "healed": healed,
                "faults": self.faults, "skipped": self.skipped,
                "nodes": {n.name: {"address": n.address} for n in self.nodes},
                "flow_type": "chaos (chaos_worker.cc)", "fan_ratio": self.args.fan_ratio}
        with open(os.path.join(self.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="about 90 s of faults (CI)")
    parser.add_argument("--minutes", type=float, default=5.0, help="minutes of faults (default 5)")
    parser.add_argument("--seed", type=int, default=None, help="default: random, printed")
    parser.add_argument("--out", default=None, help="run directory (default: a new temp dir)")
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--rate", type=float, default=12.0, help="flow starts per second")
    parser.add_argument("--id-reuse-policy", default="allow-if-no-running",
                        choices=["disallow", "allow-if-no-running"],
                        help="the starts' ID reuse policy (default: the server's default)")
    parser.add_argument("--fan-ratio", type=float, default=0.36,
                        help="share of runs whose Fan Step waits on SubFlows (2 in 3 AllOf)")
    parser.add_argument("--keep", action="store_true", help="keep MinIO's data (default: deleted)")
    parser.add_argument("--self-test-checker", action="store_true",
                        help="after a clean check, break the run's data in the ways real bugs "
                             "would and fail unless the checker reports each (checker.py)")
    parser.add_argument("--expect-violations", action="store_true",
                        help="for a deliberately broken build (scripts/chaos --broken): exit 0 "
                             "only if the checker reports violations")
    args = parser.parse_args()
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.out is None:
        import tempfile
        args.out = tempfile.mkdtemp(prefix=f"dex-chaos-{args.seed}-")
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    if not os.path.exists(MINIO):
        # A failure, never a skip: CTest must not stay green with the scenario unrun.
        print(f"chaos: MinIO is not installed at {MINIO}: run scripts/install-minio "
              f"(or set DEX_MINIO_BIN) - RUN FAILED", flush=True)
        return 2
    nemesis_seconds = 75.0 if args.short else args.minutes * 60
    run = Run(args)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    try:
        run.execute(nemesis_seconds)
    except BaseException:
        say("the run failed before the check:\n" + traceback.format_exc())
        run.cleanup()
        print(f"chaos: seed {args.seed}: RUN FAILED (see {args.out}/logs)", flush=True)
        return 2
    run.cleanup()
    if not args.keep:
        shutil.rmtree(os.path.join(args.out, "minio-data"), ignore_errors=True)
    result = checker.check(args.out)
    checker.report(result, args.out)
    if args.expect_violations:
        if result["violations"]:
            print(f"chaos: the checker caught the broken build ({result['violations']} violations)")
            return 0
        print("chaos: the broken build went unnoticed: no violations")
        return 1
    if result["violations"]:
        return 1
    if args.self_test_checker:
        failures = checker.self_test(args.out)
        for f in failures:
            print("CHECKER SELF-TEST FAILURE " + f, flush=True)
        if failures:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
