"""An unreachable object store is visible at once (issue 13, item 8): "`serve` with an unreachable
or refusing object store logs nothing for 30 s: warn on every failed attempt with the endpoint and
the error, with backoff." (docs/lease.md §3, §8)

`dex-server-zd serve` is pointed at an S3 endpoint on a loopback port where nothing listens: every
lease read is refused. It must warn within a few seconds, naming the store's endpoint and the
error, once per failed attempt, with a growing backoff (not hammering the store).
"""
import os
import re
import time

from conftest import Proc, binary, free_port

WARNING = re.compile(r" warning lease of node ne in (s3://\S+ at \S+): read of the lease "
                     r"nodes/ne/lease failed: (.*); retrying in (\d+) ms$")


def test_serve_warns_about_every_failed_lease_read_naming_the_endpoint(procs, tmp_path):
    port = free_port()  # bound, then closed: connections are refused
    endpoint = f"http://127.0.0.1:{port}"
    config = tmp_path / "a.yaml"
    config.write_text(
        f"nodeId: ne\napi:\n  listen: 127.0.0.1:0\n"
        f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: p\n  endpoint: {endpoint}\n"
        f"localStore:\n  path: {tmp_path / 'local'}\nlease:\n  duration: 3s\n")
    env = dict(os.environ, AWS_ACCESS_KEY_ID="test-access", AWS_SECRET_ACCESS_KEY="test-secret")
    p = Proc([binary("dex-server-zd"), "serve", "--config", str(config)], env=env)
    procs.register(p)
    t0 = time.monotonic()
    first = p.wait_for_line(" warning lease of node ne in ", 5)
    assert time.monotonic() - t0 < 5
    # Let a few more attempts fail, then read what was logged.
    time.sleep(3)
    p.kill()
    p.drain()
    warnings = [WARNING.search(l) for l in p.lines if " warning lease of node ne in " in l]
    assert all(warnings), "\n".join(p.lines)
    assert first in p.lines
    for m in warnings:
        assert endpoint in m.group(1), m.group(0)
        assert "Transient" in m.group(2) and "Couldn't connect to server" in m.group(2), m.group(0)
    # Every attempt is warned: 100 ms doubling to 1 s gives about 6 in 3-4 s, not hundreds.
    assert 4 <= len(warnings) <= 12, "\n".join(m.group(0) for m in warnings)
    backoffs = [int(m.group(3)) for m in warnings]
    assert max(backoffs) <= 1000 and max(backoffs) >= 400, backoffs
    # Nothing acquired, and the secret key is never logged.
    assert "acquired the lease" not in p.output()
    assert "test-secret" not in p.output()
