"""What an operator sees on a standby (issue 13, item 7): its UNAVAILABLE says that it is a
standby, hot or cold, and names the active holder's process ID and epoch; `dexzd_node_epoch` on a
standby reports the epoch it last saw. Two `serve` processes on a filesystem object store.
"""
import re
import time
import urllib.request

from conftest import binary, free_port, run
from test_graceful_shutdown import Serve


def metric(port, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics:\n{text}")


def holder_of(proc):
    line = proc.wait_for_line("ready: node", 5)
    return re.search(r"holder (\S+)", line).group(1)


def test_a_standby_says_what_it_is_and_who_is_active(procs, tmp_path):
    for mode in ("hot", "cold"):
        d = tmp_path / mode
        d.mkdir()
        a = Serve(procs, d, "a", "30s")
        metrics_port = free_port()
        b = Serve(procs, d, "b", "30s")
        b.config.write_text(b.config.read_text().replace("mode: hot", f"mode: {mode}") +
                            f"metrics:\n  listen: 127.0.0.1:{metrics_port}\n")
        a.start()
        assert a.wait_ready(60) == 1
        b.start()
        b.proc.wait_for_line("acquiring the lease", 30)
        holder = holder_of(a.proc)
        refusal = None
        # The standby learns the holder at its first read of the lease (within a poll).
        for _ in range(50):
            r = run(binary("dexcli"), "--server", b.address, "--timeout", "3s", "flow",
                    "describe", "any")
            refusal = r.stderr
            if holder in r.stderr:
                break
            time.sleep(0.1)
        assert "UNAVAILABLE" in refusal, refusal
        assert f"{mode} standby" in refusal, refusal
        assert holder in refusal and "epoch 1" in refusal, refusal
        assert "starting up" not in refusal
        assert metric(metrics_port, "dexzd_node_epoch") == 1
        a.proc.kill()
        b.proc.kill()
