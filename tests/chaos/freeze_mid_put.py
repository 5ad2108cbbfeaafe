#!/usr/bin/env python3
"""freeze_mid_put: freezes the active process in the middle of a PUT to MinIO, again and again,
and measures how long the node serves nothing (issue 30).

    freeze_mid_put.py [--freezes N] [--seed S] [--out DIR] [--bin-dir DIR] [--stall log|lease|mixed]
                      [--minio-default-timeouts]

The chaos harness's processes (chaos.py: MinIO, two `dex-server-zd serve` of one node in
hot-standby mode with a 3 s lease, three chaos_worker Workers, chaos_client starting runs at
12/s), but between the serve processes and MinIO a byte relay (MidPutRelay) instead of the fault
proxy: the fault proxy reads a whole request before it forwards it, so MinIO never sees a
half-sent one. Each freeze arms the relay; the next log batch PUT (or lease PUT, --stall) it sees
goes to MinIO as its headers and then nothing (even freezes) or half its body (odd ones), and the
active process is SIGSTOPped right then, so MinIO holds that request open exactly as for a
process frozen mid-send. The freeze lasts until the standby has taken over (+ 1 s), and at least
the lease + 2 s; then SIGCONT and the relay sends the rest (the resumed process finds its lease
gone, exits 1 and is restarted as the new standby). The next freeze comes once a standby follows.

Per freeze it reports, from the SIGSTOP: when the standby reported itself active (metrics), the
first start the new active acknowledged (chaos_client's history) and the first flow completion
(the runs read back at the end: closeUnixMs), and whether the new active stopped (exited) before
the next freeze (the last one is given 14 s): what issue 30 saw, a new active that hit its 10 s log write limit behind MinIO's
hold of the frozen PUT's key. It fails (exit 1) if any gap to the first completion exceeds
lease + 3 s, a new active stopped, or an acknowledged start is not found at the end.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import chaos  # noqa: E402
import checker  # noqa: E402
from chaos import LEASE_S, LOG_PUT_KEY, LEASE_KEY, say  # noqa: E402

GAP_BOUND_S = LEASE_S + 3  # the takeover budget of the reference page: lease + 3 s


class MidPutRelay:
    """A loopback TCP relay to MinIO that forwards every byte as it comes (one upstream
    connection per client connection, so MinIO sees exactly what the process sends), reading the
    client's stream only to find where each request starts. arm() makes it stop the next PUT whose
    path matches after the headers and `fraction` of the body, call on_hold(), and send the rest
    only once release() is called."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.lock = threading.Lock()
        self.armed = None  # (path regex, fraction, on_hold) or None
        self.released = threading.Event()
        self.sockets = []
        self.closed = False
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)

    def start(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self.listener.getsockname()[1]

    def arm(self, path_regex, fraction, on_hold):
        with self.lock:
            self.released.clear()
            self.armed = (re.compile(path_regex), fraction, on_hold)

    def disarm(self):
        with self.lock:
            self.armed = None

    def release(self):
        self.released.set()

    # chaos.Run.cleanup() calls these on its proxy.
    def flush(self):
        pass

    def close(self):
        self.closed = True
        self.released.set()
        with self.lock:
            sockets = [self.listener] + self.sockets
        for s in sockets:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self):
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = [client, upstream, 2]  # the two sockets, and how many directions still run
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._down, args=(pair,), daemon=True).start()
            threading.Thread(target=self._up, args=(pair,), daemon=True).start()

    def _done(self, pair):
        """One direction of a connection ended: both sockets are shut down, and closed (and
        forgotten) once the other direction has ended too."""
        client, upstream = pair[0], pair[1]
        for s in (client, upstream):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            pair[2] -= 1
            if pair[2] > 0:
                return
            for s in (client, upstream):
                s.close()
                if s in self.sockets:
                    self.sockets.remove(s)

    def _down(self, pair):
        """MinIO's answers, byte for byte."""
        client, upstream = pair[0], pair[1]
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        self._done(pair)

    def _up(self, pair):
        """The process's requests: each request's head is read whole (it comes in one write) to
        see whether to stall it; everything else is forwarded as it arrives."""
        client, upstream = pair[0], pair[1]
        buffered = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffered:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffered += data
                end = buffered.index(b"\r\n\r\n") + 4
                head, buffered = buffered[:end], buffered[end:]
                lines = head.decode("latin-1").split("\r\n")
                method, target = lines[0].split(" ")[:2]
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                hold = None
                with self.lock:
                    if (self.armed and method == "PUT"
                            and self.armed[0].search(target.split("?", 1)[0])):
                        hold, self.armed = self.armed, None
                if hold is None:
                    upstream.sendall(head)
                    buffered = self._forward_body(client, upstream, buffered, length)
                    continue
                cut = int(length * hold[1])
                while len(buffered) < cut:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffered += data
                upstream.sendall(head + buffered[:cut])
                buffered = buffered[cut:]
                hold[2]({"method": method, "target": target, "length": length, "sent": cut})
                self.released.wait()
                if self.closed:
                    return
                buffered = self._forward_body(client, upstream, buffered, length - cut)
        except OSError:
            pass
        finally:
            self._done(pair)

    @staticmethod
    def _forward_body(client, upstream, buffered, remaining):
        """Forwards `remaining` body bytes (some maybe already buffered); returns what follows."""
        take = buffered[:remaining]
        if take:
            upstream.sendall(take)
        remaining -= len(take)
        buffered = buffered[len(take):]
        while remaining > 0:
            data = client.recv(min(65536, remaining))
            if not data:
                raise OSError("client closed mid-body")
            upstream.sendall(data)
            remaining -= len(data)
        return buffered


class FreezeRun(chaos.Run):
    """chaos.Run's processes with MidPutRelay in the fault proxy's place, and a freeze loop in
    the nemesis's."""

    def start_proxy(self):
        self.proxy = MidPutRelay(int(self.minio_endpoint.rsplit(":", 1)[1]))
        self.proxy_endpoint = f"http://127.0.0.1:{self.proxy.start()}"

    def wait_pair(self, timeout=90):
        """(active, following standby) once there are both, else (None, None) after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            active, standby = self.roles(wait=0)
            if active and standby and standby.is_following():
                return active, standby
            time.sleep(0.2)
        return None, None

    def freeze(self, i, stall):
        """One freeze mid-PUT; returns its record (times are wall-clock seconds)."""
        active, standby = self.wait_pair()
        if active is None:
            return {"i": i, "skipped": "no active process with a following standby in 90 s"}
        time.sleep(1.5)  # load flowing on the active process
        target = stall if stall != "mixed" else ("log" if i % 3 != 2 else "lease")
        fraction = 0.0 if i % 2 == 0 else 0.5
        held = threading.Event()
        rec = {"i": i, "frozen": active.name, "inc": active.inc, "standby": standby.name,
               "standby_inc": standby.inc, "standby_addr": standby.address, "stall": target,
               "fraction": fraction}
        proc = active.proc

        def on_hold(request):
            with self.lock:
                active.frozen = True
                proc.signal(signal.SIGSTOP)
            rec["t_stop"] = time.time()
            rec["request"] = request
            self.events.write(ev="stop", proc=active.name, inc=active.inc, mid_put=request)
            held.set()

        self.proxy.arm(LOG_PUT_KEY if target == "log" else LEASE_KEY, fraction, on_hold)
        if not held.wait(15):
            self.proxy.disarm()
            return {**rec, "skipped": "no PUT of that kind within 15 s"}
        t_stop = rec["t_stop"]
        deadline = t_stop + 60
        while time.time() < deadline:
            if standby.is_active():
                rec["t_active"] = time.time()
                break
            if standby.proc.p.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(max(0.0, max(t_stop + LEASE_S + 2, rec.get("t_active", 0) + 1) - time.time()))
        with self.lock:
            proc.signal(signal.SIGCONT)
            if active.proc is proc:
                active.frozen = False
        self.proxy.release()
        self.events.write(ev="cont", proc=active.name, inc=active.inc)
        rec["t_cont"] = time.time()
        return rec

    def execute_freezes(self, freezes, stall):
        say(f"seed {self.seed}; {freezes} freezes mid-PUT ({stall}); out {self.out}")
        self.setup()
        say("setup done: a active, b following, 3 workers connected")
        self.supervisor = threading.Thread(target=self.supervise, daemon=True)
        self.supervisor.start()
        self.start_client(3600 * 24)
        records = []
        for i in range(freezes):
            rec = self.freeze(i, stall)
            records.append(rec)
            if "skipped" in rec:
                say(f"freeze {i}: skipped: {rec['skipped']}")
            else:
                took = rec.get("t_active", float("nan")) - rec["t_stop"]
                say(f"freeze {i}: {rec['frozen']} stopped mid-PUT {rec['request']['target'][-40:]}"
                    f" after {rec['request']['sent']} of {rec['request']['length']} body bytes; "
                    f"{rec['standby']} active after {took:.2f} s")
        # Issue 30's new active stopped at its 10 s log write limit, about 10 s after the freeze:
        # the last one's must outlive that too.
        if records and "t_stop" in records[-1]:
            time.sleep(max(3.0, records[-1]["t_stop"] + 14 - time.time()))
        open(self.stop_file, "w").close()
        try:
            self.client.p.wait(timeout=120)
        except Exception:
            self.client.signal(signal.SIGKILL)
        history = checker.load_jsonl(os.path.join(self.out, "history.jsonl"))
        tried = {h["flow"] for h in history if h.get("op") == "start"}
        flows = self.read_back(tried, wait_s=240)
        return records, history, flows


def first_after(times, t):
    later = [x for x in times if x >= t]
    return min(later) - t if later else None


def summarize(records, history, flows, out):
    """Adds the gaps to each record; returns (summary text, failures)."""
    # A new active process stopped if it exited before the next freeze (which ends it on purpose).
    exits = [e for e in checker.load_jsonl(os.path.join(out, "events.jsonl"))
             if e.get("ev") == "exit"]
    stops = [r["t_stop"] for r in records if "t_stop" in r] + [float("inf")]
    for r in records:
        if "t_stop" not in r:
            continue
        until = min(t for t in stops if t > r["t_stop"])
        died = [e for e in exits if e["proc"] == r["standby"] and e["inc"] == r["standby_inc"]
                and e["t"] < until]
        r["new_active_stopped"] = bool(died)
        r["new_active_rc"] = died[0].get("rc") if died else None
    acks = []  # (answer time s, address) of every acknowledged start
    for h in history:
        if h.get("op") == "start" and h.get("ok"):
            acks.append((h["t1"] / 1000.0, h.get("addr")))
    closes = []
    for f in flows.values():
        d = f.get("description") or {}
        if d.get("status") == "FLOW_COMPLETED" and d.get("closeUnixMs"):
            closes.append(int(d["closeUnixMs"]) / 1000.0)
    acked = {h["flow"] for h in history if h.get("op") == "start" and h.get("ok")}
    lost = sorted(i for i in acked if i not in flows or flows[i].get("error")
                  or not flows[i].get("description"))
    failures = []
    done = [r for r in records if "skipped" not in r]
    for r in done:
        r["takeover_s"] = r["t_active"] - r["t_stop"] if "t_active" in r else None
        r["first_completion_s"] = first_after(closes, r["t_stop"])
        r["first_ack_s"] = first_after([t for t, a in acks if a == r["standby_addr"]],
                                       r["t_stop"])
        if r["first_completion_s"] is None or r["first_completion_s"] > GAP_BOUND_S:
            failures.append(f"freeze {r['i']}: first completion after "
                            f"{r['first_completion_s']} s (bound {GAP_BOUND_S:g} s)")
        if r["new_active_stopped"]:
            failures.append(f"freeze {r['i']}: the new active process stopped "
                            f"(exit {r['new_active_rc']})")
    if lost:
        failures.append(f"{len(lost)} acknowledged starts not found: {lost[:5]}")
    skipped = [r for r in records if "skipped" in r]
    if skipped:
        failures.append(f"{len(skipped)} freezes skipped: {skipped[0]['skipped']}")

    def stats(name):
        xs = sorted(r[name] for r in done if r.get(name) is not None)
        if not xs:
            return f"{name}: none"
        p90 = xs[min(len(xs) - 1, int(round(0.9 * (len(xs) - 1))))]
        return (f"{name}: max {xs[-1]:.2f} s, p50 {statistics.median(xs):.2f} s, p90 {p90:.2f} s,"
                f" min {xs[0]:.2f} s (n={len(xs)})")
    lines = [f"freezes mid-PUT: {len(done)} done, {len(skipped)} skipped; lease {LEASE_S:g} s, "
             f"bound {GAP_BOUND_S:g} s (lease + 3 s = {LEASE_S + 3:g} s)",
             stats("takeover_s"), stats("first_ack_s"), stats("first_completion_s"),
             f"new active stopped: {sum(1 for r in done if r['new_active_stopped'])}; "
             f"acknowledged starts {len(acked)}, not found {len(lost)}"]
    with open(os.path.join(out, "freezes.json"), "w") as f:
        json.dump(records, f, indent=1)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write("\n".join(lines + failures) + "\n")
    return "\n".join(lines), failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freezes", type=int, default=50)
    parser.add_argument("--stall", choices=["log", "lease", "mixed"], default="log",
                        help="which PUT the freeze stops in: a log batch (default), the lease "
                             "renewal, or two log batches then a lease renewal")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--bin-dir", default=os.path.join(chaos.ROOT, "build", "bin"))
    parser.add_argument("--rate", type=float, default=12.0, help="flow starts per second")
    parser.add_argument("--minio-default-timeouts", action="store_true",
                        help="start MinIO without chaos.MINIO_TIMEOUT_FLAGS (its 30 s defaults): "
                             "shows what the flags fix (issue 30); expect failures")
    parser.add_argument("--gap-bound", type=float, default=None,
                        help="seconds allowed from a freeze to the first completion (default: "
                             "lease + 3 s, the reference page's budget). The CTest smoke run "
                             "allows more, as it shares a loaded machine with other tests: it "
                             "is there to catch the 30 s stall, and the full run holds the "
                             "budget itself")
    args = parser.parse_args()
    global GAP_BOUND_S
    if args.gap_bound is not None:
        GAP_BOUND_S = args.gap_bound
    if args.minio_default_timeouts:
        chaos.MINIO_TIMEOUT_FLAGS = []
    # What chaos.Run and its clients read.
    args.short, args.minutes, args.fan_ratio = True, 0, 0.0
    args.id_reuse_policy = "allow-if-no-running"
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    if args.out is None:
        args.out = tempfile.mkdtemp(prefix=f"dex-freeze-mid-put-{args.seed}-")
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    if not os.path.exists(chaos.MINIO):
        print(f"freeze_mid_put: MinIO is not installed at {chaos.MINIO}: run "
              f"scripts/install-minio (or set DEX_MINIO_BIN) - RUN FAILED", flush=True)
        return 2
    run = FreezeRun(args)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    try:
        records, history, flows = run.execute_freezes(args.freezes, args.stall)
    except BaseException:
        say("the run failed:\n" + traceback.format_exc())
        run.cleanup()
        print(f"freeze_mid_put: seed {args.seed}: RUN FAILED (see {args.out}/logs)", flush=True)
        return 2
    run.cleanup()
    shutil.rmtree(os.path.join(args.out, "minio-data"), ignore_errors=True)
    text, failures = summarize(records, history, flows, args.out)
    print(text, flush=True)
    for f in failures:
        print("FAILURE " + f, flush=True)
    print(f"freeze_mid_put: {'FAILED' if failures else 'ok'} ({args.out}/summary.txt, "
          f"freezes.json)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
