"""`dex-server-zd dev` as a user runs it: lease, dev.lock, takeover, release, exit status.

Each test names the rule of the spec's Lease section that it checks.
"""
import json
import os
import shutil
import signal
import time

from conftest import binary, inspect, run

READY = "dex-server-zd dev ready"


def start_dev(procs, data_dir, *extra):
    # Port 0: every test server gets a free port; the ready line names it.
    return procs(binary("dex-server-zd"), "dev", "--data-dir", data_dir, "--listen", "127.0.0.1:0", *extra)


def write_config(tmp_path, text, name="dev.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_graceful_release_lets_a_restart_start_at_once(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data)
    a.wait_for_line(READY, 60)
    lease = inspect("lease", data)
    assert lease["nodeEpoch"] == "1" and lease["released"] is False
    a.signal(signal.SIGTERM)
    assert a.wait_exit(30) == 0, a.output()
    lease = inspect("lease", data)
    assert lease["released"] is True and lease["nodeEpoch"] == "1"
    # A released lease is taken at once, with a raised epoch.
    t0 = time.monotonic()
    b = start_dev(procs, data)
    b.wait_for_line(READY, 30)
    assert time.monotonic() - t0 < 10
    assert inspect("lease", data)["nodeEpoch"] == "2"


def test_dev_lock_refuses_a_second_process_on_the_same_directory(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data)
    a.wait_for_line(READY, 60)
    b = start_dev(procs, data)
    assert b.wait_exit(30) != 0
    assert "dev.lock" in b.output(), b.output()
    # The first process is untouched and still holds the lease.
    assert a.p.poll() is None
    assert inspect("lease", data)["nodeEpoch"] == "1"


def test_restart_after_sigkill_takes_over_at_once_with_raised_epoch(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data)  # default dev lease: 30 s
    a.wait_for_line(READY, 60)
    holder_a = inspect("lease", data)["holderProcessId"]
    a.signal(signal.SIGKILL)
    a.wait_exit(10)
    t0 = time.monotonic()
    b = start_dev(procs, data)
    b.wait_for_line(READY, 30)
    # The dev lock proves the holder stopped: no wait for the 30 s lease to expire.
    assert time.monotonic() - t0 < 10
    lease = inspect("lease", data)
    assert lease["nodeEpoch"] == "2"
    assert lease["holderProcessId"] != holder_a
    # The new holder fenced the log with an epoch-start batch of epoch 2.
    log = inspect("log", data)
    assert [b["epoch"] for b in log["batches"] if "epochStart" in b["kinds"]] == ["1", "2"]


def test_lease_lost_to_another_holder_stops_the_process_with_status_1(procs, tmp_path):
    config = write_config(tmp_path, "lease:\n  duration: 3s\n")
    data = tmp_path / "data"
    other = tmp_path / "other"
    # Make a lease record of another process, then put it in place of ours.
    o = start_dev(procs, other, "--config", config)
    o.wait_for_line(READY, 60)
    o.signal(signal.SIGKILL)
    o.wait_exit(10)
    a = start_dev(procs, data, "--config", config)
    a.wait_for_line(READY, 60)
    lease_file = os.path.join(data, "objects", "nodes", "dev", "lease")
    shutil.copyfile(os.path.join(other, "objects", "nodes", "dev", "lease"), lease_file + ".swap")
    os.replace(lease_file + ".swap", lease_file)
    # The next renewal (at 1 s) finds another holder and stops the node at once.
    assert a.wait_exit(20) == 1, a.output()
    assert "lost" in a.output().lower()


def test_relaxed_mode_refuses_to_start_after_an_abrupt_exit(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data, "--durability", "relaxed")
    a.wait_for_line(READY, 60)
    a.signal(signal.SIGKILL)
    a.wait_exit(10)
    b = start_dev(procs, data, "--durability", "relaxed")
    assert b.wait_exit(30) != 0
    assert "delete" in b.output().lower() and str(data) in b.output(), b.output()


def test_relaxed_mode_clean_exit_allows_restart(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data, "--durability", "relaxed")
    a.wait_for_line(READY, 60)
    a.signal(signal.SIGINT)
    assert a.wait_exit(30) == 0, a.output()
    b = start_dev(procs, data, "--durability", "relaxed")
    b.wait_for_line(READY, 30)


def test_bad_flags_and_config_are_refused_and_change_nothing(tmp_path):
    data = tmp_path / "data"
    r = run(binary("dex-server-zd"), "dev", "--data-dir", data, "--durability", "fast")
    assert r.returncode != 0 and "fast" in (r.stderr + r.stdout)
    assert not data.exists()
    config = write_config(tmp_path, "lease:\n  durration: 5s\n")
    r = run(binary("dex-server-zd"), "dev", "--data-dir", data, "--config", config)
    assert r.returncode != 0 and "lease.durration" in r.stderr
    assert not data.exists()
    r = run(binary("dex-server-zd"), "dev", "--data-dir", data, "--config", tmp_path / "missing.yaml")
    assert r.returncode != 0 and "missing.yaml" in r.stderr
    assert not data.exists()


def test_help_explains_the_dev_flags():
    r = run(binary("dex-server-zd"), "dev", "--help")
    assert r.returncode == 0
    for flag in ("--data-dir", "--durability", "--config", "strict", "processCrashSafe"):
        assert flag in r.stdout, flag


def test_fail_if_held_does_not_block_a_restart_after_a_crash(procs, tmp_path):
    # failIfHeld fails startup while another process holds the lease. In dev, a held lease on a
    # directory whose dev.lock this process holds belongs to a stopped process, so it is taken
    # over at once instead (the failIfHeld refusal itself: LeaseMachine tests).
    config = write_config(tmp_path, "lease:\n  failIfHeld: true\n")
    data = tmp_path / "data"
    a = start_dev(procs, data, "--config", config)
    a.wait_for_line(READY, 60)
    a.signal(signal.SIGKILL)
    a.wait_exit(10)
    b = start_dev(procs, data, "--config", config)
    b.wait_for_line(READY, 30)
    assert inspect("lease", data)["nodeEpoch"] == "2"


def test_permanent_storage_error_stops_the_process_with_status_1(procs, tmp_path):
    config = write_config(tmp_path, "lease:\n  duration: 3s\n")
    data = tmp_path / "data"
    a = start_dev(procs, data, "--config", config)
    a.wait_for_line(READY, 60)
    # A directory where the lease object should be: every read or write of it is refused
    # permanently, so the next renewal (at 1 s) stops the node at once.
    lease_file = os.path.join(data, "objects", "nodes", "dev", "lease")
    os.remove(lease_file)
    os.makedirs(os.path.join(lease_file, "blocker"))
    t0 = time.monotonic()
    assert a.wait_exit(20) == 1, a.output()
    assert time.monotonic() - t0 < 10
    assert "permanent" in a.output().lower(), a.output()


def test_corrupt_lease_object_is_refused_with_a_clear_error(procs, tmp_path):
    data = tmp_path / "data"
    a = start_dev(procs, data)
    a.wait_for_line(READY, 60)
    a.signal(signal.SIGTERM)
    assert a.wait_exit(30) == 0
    lease_file = os.path.join(data, "objects", "nodes", "dev", "lease")
    with open(lease_file, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    b = start_dev(procs, data)
    assert b.wait_exit(30) == 1
    assert "corrupt" in b.output().lower() and "lease" in b.output(), b.output()


def test_local_subcommand_runs_a_configured_node(procs, tmp_path):
    data = tmp_path / "node-data"
    config = write_config(tmp_path, f"nodeId: node-l\nlocal:\n  dataDir: {data}\n"
                                    "  durabilityMode: processCrashSafe\napi:\n  listen: 127.0.0.1:0\n",
                          name="local.yaml")
    a = procs(binary("dex-server-zd"), "local", "--config", config)
    line = a.wait_for_line("dex-server-zd local ready", 60)
    assert "node node-l epoch 1" in line and "processCrashSafe" in line and "lease 30s" in line, line
    assert inspect_node("lease", data, "node-l")["nodeEpoch"] == "1"
    a.signal(signal.SIGKILL)
    a.wait_exit(10)
    b = procs(binary("dex-server-zd"), "local", "--config", config)
    b.wait_for_line("dex-server-zd local ready", 30)  # the same lock and takeover as dev
    assert inspect_node("lease", data, "node-l")["nodeEpoch"] == "2"
    bad = write_config(tmp_path, "nodeId: node-l\n", name="bad.yaml")
    r = run(binary("dex-server-zd"), "local", "--config", bad)
    assert r.returncode == 2 and "local.dataDir" in r.stderr


def inspect_node(what, data_dir, node_id):
    r = run(binary("dexcli"), "inspect", what, "--data-dir", data_dir, "--node-id", node_id)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def port_of(ready_line):
    return ready_line.split(" listening on ", 1)[1].split()[0].rsplit(":", 1)[1]


def admin_describe(port, *extra):
    return run(binary("dexcli"), "--server", f"127.0.0.1:{port}", "--timeout", "10s", "admin",
               "describe", *extra)


ADMIN_WARNING = "AdminService is reachable beyond loopback"


def test_dev_with_an_admin_token_refuses_admin_calls_without_it(procs, tmp_path):
    # Issue 13 item 5: dev accepts the same auth.* keys as serve.
    token = tmp_path / "admin-token"
    token.write_text("dev-admin-token-1\n")
    wrong = tmp_path / "wrong-token"
    wrong.write_text("not-the-token\n")
    config = write_config(tmp_path, f"auth:\n  adminTokenFiles: [{token}]\n")
    a = start_dev(procs, tmp_path / "data", "--config", config)
    port = port_of(a.wait_for_line(READY, 60))
    r = admin_describe(port)
    assert r.returncode == 1, r.stdout
    assert "UNAUTHENTICATED" in r.stderr and "--credential-file" in r.stderr, r.stderr
    r = admin_describe(port, "--credential-file", wrong)
    assert r.returncode == 1 and "UNAUTHENTICATED" in r.stderr, r.stderr
    r = admin_describe(port, "--credential-file", token)
    assert r.returncode == 0, r.stderr
    described = json.loads(r.stdout)
    assert described["nodeId"] == "dev" and described["nodeEpoch"] == "1", described
    # The token is never logged.
    assert "dev-admin-token-1" not in a.output()


def test_dev_with_admin_disabled_answers_unimplemented(procs, tmp_path):
    config = write_config(tmp_path, "admin:\n  enabled: false\n")
    a = start_dev(procs, tmp_path / "data", "--config", config)
    port = port_of(a.wait_for_line(READY, 60))
    r = admin_describe(port)
    assert r.returncode == 1 and "UNIMPLEMENTED" in r.stderr, r.stderr
    # The rest of the API still serves: the Flow API answers (no such flow).
    r = run(binary("dexcli"), "--server", f"127.0.0.1:{port}", "flow", "describe", "none")
    assert r.returncode == 1 and '"grpcCode":"NOT_FOUND"' in r.stderr, r.stderr


def test_local_beyond_loopback_without_a_credential_logs_a_warning(procs, tmp_path):
    def start_local(name, listen, extra=""):
        config = write_config(tmp_path, f"nodeId: {name}\nlocal:\n  dataDir: {tmp_path / name}\n"
                                        f"api:\n  listen: {listen}\n{extra}", name=f"{name}.yaml")
        p = procs(binary("dex-server-zd"), "local", "--config", config)
        return p, p.wait_for_line("dex-server-zd local ready", 60)

    # 0.0.0.0 reaches beyond loopback: warned, naming the address and the keys that fix it.
    a, line = start_local("open", "0.0.0.0:0")
    warning = next((l for l in a.lines if ADMIN_WARNING in l), None)
    assert warning is not None, a.output()
    assert "0.0.0.0:0" in warning and "auth.adminTokenFiles" in warning, warning
    # Still answers (on loopback too) without a credential: it is a warning, not a refusal.
    assert admin_describe(port_of(line)).returncode == 0
    # Loopback only, or a credential, or AdminService off: no warning.
    token = tmp_path / "admin-token"
    token.write_text("local-admin-token\n")
    for name, listen, extra in [("loopback", "127.0.0.1:0", ""),
                                ("token", "0.0.0.0:0", f"auth:\n  adminTokenFiles: [{token}]\n"),
                                ("off", "0.0.0.0:0", "admin:\n  enabled: false\n")]:
        p, _ = start_local(name, listen, extra)
        assert not any(ADMIN_WARNING in l for l in p.lines), (name, p.output())
