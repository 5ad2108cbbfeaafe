"""The wait after a crash (spec: Lease): "After a crash, a SIGKILL, or the loss of a Kubernetes
node, the replacement waits until the old lease expires, plus 1 second. That wait is at most
lease.duration plus 1 second."

`dex-server-zd serve` on a filesystem object store with a 3 s lease: an active process and a
standby. The test watches the lease object's file and SIGKILLs the active right after a renewal
write lands, the worst case: the standby counts expiry only from when it first saw that version
(docs/lease.md §3, §3a). Several kills per mode: a process takes over, a fresh standby starts, and
the new active is killed in turn.

Takeover is when the standby sends its lease write: the time stamp of its "lease of node cw
expired" line (the decision), plus the jitter its "is available; taking it in N ms (hot standby)"
line states in hot mode. It must come at most duration + 1 s + 100 ms after the kill, plus
LOG_ALLOWANCE_S for the log call and the time stamps' truncation to the millisecond. The
"acquired the lease" line comes after the write and its answer; on the filesystem store that is
two fsyncs, which take up to hundreds of ms on a disk shared with builds, so it gets the looser
WRITE_ALLOWANCE_S.

Each standby also logs "lease held by ..." once per holder, not at every renewal (docs/lease.md §8).
"""
import datetime
import os
import re
import signal
import time

from conftest import Proc, binary

LEASE_S = 3
# The spec's bound plus the 100 ms for seeing a renewal late.
BOUND_S = LEASE_S + 1 + 0.1
# The log call and millisecond truncation of the decision line's time stamp.
LOG_ALLOWANCE_S = 0.01
# The takeover write and its answer (two fsyncs on the filesystem store) before "acquired".
WRITE_ALLOWANCE_S = 0.5
KILLS_PER_MODE = 4
NODE = "cw"
EXPIRED = re.compile(r"^(\S+) info lease of node cw expired: held by process (\S+) ")
JITTER = re.compile(r"^(\S+) info lease of node cw is available; taking it in (\d+) ms \(hot standby\)")
ACQUIRED = re.compile(r"^(\S+) info acquired the lease for node cw at epoch (\d+)")


def log_time(line):
    """The wall-clock time (seconds since the epoch) of a log line: spdlog writes local time."""
    return datetime.datetime.strptime(line.split(" ", 1)[0], "%Y-%m-%dT%H:%M:%S.%f").timestamp()


def start(tmp_path, objects, name, mode):
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"nodeId: {NODE}\napi:\n  listen: 127.0.0.1:0\n"
        f"objectStore:\n  type: filesystem\n  path: {objects}\n"
        f"localStore:\n  path: {tmp_path / name}-local\nlease:\n  duration: {LEASE_S}s\n"
        f"standby:\n  mode: {mode}\n")
    return Proc([binary("dex-server-zd"), "serve", "--config", str(config)])


def lease_version(path):
    """Identifies the lease object's current version on the filesystem store."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def kill_right_after_a_renewal(proc, lease_path, timeout=10):
    """SIGKILLs `proc` as soon as the lease file changes; returns the wall-clock time of the kill."""
    before = lease_version(lease_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if lease_version(lease_path) != before:
            t = time.time()
            proc.p.send_signal(signal.SIGKILL)
            proc.p.wait(timeout=10)
            return t
        time.sleep(0.001)
    raise AssertionError(f"the lease file did not change within {timeout}s:\n" + proc.output())


def measure_crash_waits(procs, tmp_path, mode):
    objects = tmp_path / "objects"
    lease_path = objects / "nodes" / NODE / "lease"
    active = start(tmp_path, objects, f"{mode}-0", mode)
    procs.register(active)
    active.wait_for_line("dex-server-zd serve ready", 30)
    waits, acquired, waiting_lines = [], [], []
    for i in range(1, KILLS_PER_MODE + 1):
        standby = start(tmp_path, objects, f"{mode}-{i}", mode)
        procs.register(standby)
        standby.wait_for_line("lease held by", 30)
        if mode == "hot":
            standby.wait_for_line("bootstrapping -> following", 30)  # hot: 0-50 ms takeover jitter
        # A few renewals (every second): the standby has seen versions change, and so
        # knows when the next one is due.
        time.sleep(3.5)
        killed_at = kill_right_after_a_renewal(active, lease_path)
        line = standby.wait_for_line("acquired the lease for node", BOUND_S + 10)
        m = ACQUIRED.match(line)
        assert m, line
        assert int(m.group(2)) == i + 1, line
        acquired.append(log_time(line) - killed_at)
        expired = [EXPIRED.match(l) for l in standby.lines if EXPIRED.match(l)]
        assert len(expired) == 1, standby.output()
        decided = log_time(expired[0].group(0))
        if mode == "hot":
            jitter = [JITTER.match(l) for l in standby.lines if JITTER.match(l)]
            assert len(jitter) == 1, standby.output()  # hot: not laggingTakeoverDelay
            decided += int(jitter[0].group(2)) / 1000
        waits.append(decided - killed_at)
        if waits[-1] > BOUND_S + LOG_ALLOWANCE_S:
            print(f"kill at {datetime.datetime.fromtimestamp(killed_at).isoformat()}; standby:\n"
                  + "\n".join(standby.lines[-12:]))
        # Checked by check(): it waited for one holder through several of its renewals.
        waiting_lines.append([l for l in standby.lines if "lease held by" in l])
        standby.wait_for_line("dex-server-zd serve ready", 30)
        active = standby
    return waits, acquired, waiting_lines


def check(measured, mode):
    waits, acquired, waiting_lines = measured
    print(f"{mode} standby: takeover write - kill = " + ", ".join(f"{w:.3f}s" for w in waits)
          + "; acquired - kill = " + ", ".join(f"{w:.3f}s" for w in acquired))
    # Never early: the kill came at most a few ms after the write landed, and the standby
    # counts duration + 1 s from its first sight of that write.
    assert min(waits) >= LEASE_S + 1 - 0.05, waits
    assert max(waits) <= BOUND_S + LOG_ALLOWANCE_S, (
        f"{mode} standby waited {max(waits):.3f}s after a SIGKILL right after a renewal; the bound "
        f"is {BOUND_S}s + {LOG_ALLOWANCE_S}s: {waits}")
    assert max(acquired) <= BOUND_S + WRITE_ALLOWANCE_S, acquired
    # Once per holder, not at every renewal.
    for lines in waiting_lines:
        assert len(lines) == 1, "\n".join(lines)


def test_hot_standby_takes_over_within_duration_plus_one_second_after_a_sigkill(procs, tmp_path):
    check(measure_crash_waits(procs, tmp_path, "hot"), "hot")


def test_cold_standby_takes_over_within_duration_plus_one_second_after_a_sigkill(procs, tmp_path):
    check(measure_crash_waits(procs, tmp_path, "cold"), "cold")
