"""Access (docs/api.md, "Access"; issue 31): a dev server with a token file per role, driven by
dexcli and `dex-flow-examples worker` as users run them. A Worker without the worker role cannot
connect, a viewer reads but cannot change a Flow, step down needs admin, a token file rotated on
disk is used without a restart, and no token ever appears in a process's output.
"""
import json
import os
import subprocess
import time

from conftest import Proc, binary, run
from test_dev_server import port_of, start_dev, write_config, READY

ROLES = ("viewer", "client", "worker", "admin")


def tokens_config(tmp_path):
    files = {}
    for role in ROLES:
        f = tmp_path / f"{role}-token"
        f.write_text(f"{role}-secret-{os.getpid()}\n")
        files[role] = f
    lines = ["auth:", "  tokens:"]
    for role in ROLES:
        lines += [f"    {role}:", f"      files: [{files[role]}]"]
    return files, write_config(tmp_path, "\n".join(lines) + "\n")


def flow_worker(procs, port, token_file=None):
    """`dex-flow-examples worker`, its token from $DEX_TOKEN_FILE when given (the SDK reads it)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEX_TOKEN", "DEX_TOKEN_FILE")}
    if token_file:
        env["DEX_TOKEN_FILE"] = str(token_file)
    p = Proc([str(binary("dex-flow-examples")), "worker", "--server", f"127.0.0.1:{port}"], env=env)
    procs.register(p)
    return p


def dexcli(port, *args, token_file=None):
    extra = ["--token-file", str(token_file)] if token_file else []
    return run(binary("dexcli"), "--server", f"127.0.0.1:{port}", "--timeout", "10s", *extra,
               *args)


def grpc_code(r):
    """The gRPC code of a failed flow command (JSON on stderr) or admin command (text)."""
    for code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        if code in r.stderr:
            return code
    return None


def test_each_role_reaches_what_it_may_and_a_rotated_token_needs_no_restart(procs, tmp_path):
    files, config = tokens_config(tmp_path)
    a = start_dev(procs, tmp_path / "data", "--config", config)
    port = port_of(a.wait_for_line(READY, 60))
    secrets = [f.read_text().strip() for f in files.values()]

    # A Worker without a credential is refused, and says why; with the client's token too.
    bare = flow_worker(procs, port)
    bare.wait_for_line("refused this Worker's credential", 30)
    assert "UNAUTHENTICATED" in bare.output(), bare.output()
    wrong = flow_worker(procs, port, files["client"])
    wrong.wait_for_line("refused this Worker's credential", 30)
    assert "PERMISSION_DENIED" in wrong.output() and "needs the worker role" in wrong.output()
    # With the worker's token (from $DEX_TOKEN_FILE) it connects.
    worker = flow_worker(procs, port, files["worker"])
    worker.wait_for_line("connected to", 30)

    # No credential: refused, naming the header.
    r = dexcli(port, "flow", "list")
    assert r.returncode == 1 and grpc_code(r) == "UNAUTHENTICATED", r.stderr
    assert "authorization: Bearer <token>" in r.stderr, r.stderr
    # The client starts and drives a Flow.
    r = dexcli(port, "flow", "start", "SignUp", "--flow-id", "ann", "--input",
               '{"email":"ann@example.com","code":"c-7"}', token_file=files["client"])
    assert r.returncode == 0, r.stderr
    run_id = json.loads(r.stdout)["runId"]
    # The viewer reads it, and cannot change it.
    r = dexcli(port, "flow", "describe", "ann", token_file=files["viewer"])
    assert r.returncode == 0, r.stderr
    r = dexcli(port, "flow", "list", token_file=files["viewer"])
    assert r.returncode == 0, r.stderr
    for args in (["flow", "publish", "ann", "verify", "--message", '{"code":"c-7"}', "--yes"],
                 ["flow", "stop", "ann", "--run-id", run_id, "--yes"],
                 ["flow", "start", "SignUp", "--flow-id", "bob", "--input", "{}"]):
        r = dexcli(port, *args, token_file=files["viewer"])
        assert r.returncode != 0 and grpc_code(r) == "PERMISSION_DENIED", (args, r.stderr)
        assert "holds viewer" in r.stderr, r.stderr
    # The worker's token cannot read Flows.
    r = dexcli(port, "flow", "describe", "ann", token_file=files["worker"])
    assert grpc_code(r) == "PERMISSION_DENIED", r.stderr
    # Admin: the client cannot describe the node or step it down; the admin can, and admin
    # describe says what is configured per role, never a secret.
    r = dexcli(port, "admin", "describe", token_file=files["client"])
    assert r.returncode == 1 and grpc_code(r) == "PERMISSION_DENIED", r.stderr
    r = dexcli(port, "admin", "step-down", "--yes", "--expected-node-id", "dev",
               "--expected-node-epoch", "1", token_file=files["viewer"])
    assert r.returncode != 0 and grpc_code(r) == "PERMISSION_DENIED", r.stderr
    r = dexcli(port, "admin", "describe", token_file=files["admin"])
    assert r.returncode == 0, r.stderr
    access = json.loads(r.stdout)["access"]
    assert access["mode"] == "every-call", access
    by_role = {x["role"]: x for x in access["roles"]}
    for role in ROLES:
        assert by_role[role]["tokenFiles"] == [str(files[role])], by_role
        assert by_role[role]["tokensAccepted"] == 1, by_role
    # The admin also drives Flows (admin implies client).
    r = dexcli(port, "flow", "publish", "ann", "verify", "--message", '{"code":"c-7"}', "--yes",
               token_file=files["admin"])
    assert r.returncode == 0, r.stderr

    # Rotation: the client's token file replaced on disk; the server reads it again within
    # seconds, without a restart.
    old = files["client"].read_text()
    new_file = tmp_path / "client-token.next"
    new_file.write_text("rotated-client-secret\n")
    os.rename(new_file, files["client"])
    old_file = tmp_path / "old-client-token"
    old_file.write_text(old)
    deadline = time.monotonic() + 20
    while True:
        r = dexcli(port, "flow", "list", token_file=files["client"])
        if r.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert r.returncode == 0, r.stderr
    r = dexcli(port, "flow", "list", token_file=old_file)
    assert grpc_code(r) == "UNAUTHENTICATED", r.stderr
    # The server logged the rotation by path, never a token.
    line = a.wait_for_line("auth.tokens.client.files: '" + str(files["client"]) + "' changed", 10)
    assert "1 client token(s) now accepted" in line, line
    out = a.output()
    for secret in secrets + ["rotated-client-secret"]:
        assert secret not in out
        for p in (bare, wrong, worker):
            assert secret not in p.output()


def test_a_bad_token_file_stops_startup_naming_key_and_file(procs, tmp_path):
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    config = write_config(tmp_path, f"auth:\n  tokens:\n    worker:\n      files: [{empty}]\n")
    a = start_dev(procs, tmp_path / "data", "--config", config)
    assert a.wait_exit(30) != 0
    assert f"auth.tokens.worker.files: '{empty}' is empty" in a.output(), a.output()
    config = write_config(tmp_path, "auth:\n  tokens:\n    operator:\n      files: [/x]\n",
                          name="unknown-role.yaml")
    b = start_dev(procs, tmp_path / "data2", "--config", config)
    assert b.wait_exit(30) != 0
    assert "unknown role 'operator'" in b.output(), b.output()


def test_serve_check_reports_each_role_without_secrets(tmp_path):
    files = {}
    for role in ("client", "worker"):
        files[role] = tmp_path / f"{role}-token"
        files[role].write_text(f"{role}-check-secret\n")
    config = write_config(tmp_path, (
        f"nodeId: n1\nobjectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
        f"localStore:\n  path: {tmp_path / 'local'}\nauth:\n  tokens:\n"
        f"    client:\n      files: [{files['client']}]\n"
        f"    worker:\n      files: [{files['worker']}]\n      sha256: [{'a' * 64}]\n"), name="serve.yaml")
    r = run(binary("dex-server-zd"), "serve", "--config", str(config), "--check")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# access: every call needs a credential" in r.stdout, r.stdout
    assert f"client: 1 token file(s) ({files['client']})" in r.stdout, r.stdout
    assert "worker: 1 token file(s)" in r.stdout and "1 digest(s)" in r.stdout, r.stdout
    assert "check-secret" not in r.stdout + r.stderr and "a" * 64 not in r.stdout


def test_dex_web_forwards_the_browsers_token_and_a_viewer_reads_but_cannot_act(procs, tmp_path):
    import urllib.error
    import urllib.request
    from conftest import free_port

    files, config = tokens_config(tmp_path)
    web_port = free_port()
    a = start_dev(procs, tmp_path / "data", "--config", config, "--web-listen",
                  f"127.0.0.1:{web_port}")
    port = port_of(a.wait_for_line(READY, 60))
    r = dexcli(port, "flow", "start", "SignUp", "--flow-id", "web-ann", "--input",
               '{"email":"ann@example.com","code":"c-7"}', token_file=files["client"])
    # No Worker declared SignUp on this server: the start is refused, but not for access.
    assert grpc_code(r) is None, r.stderr

    def call(method, body, role=None):
        headers = {"Content-Type": "application/json"}
        if role is not None:
            headers["Authorization"] = "Bearer " + files[role].read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{web_port}/api/v1/{method}",
                                     data=json.dumps(body).encode(), method="POST",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                return res.status, json.loads(res.read().decode() or "{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read().decode() or "{}")

    status, body = call("dex.FlowService/SearchFlows", {"query": ""})
    assert body.get("code") == "UNAUTHENTICATED", (status, body)
    status, body = call("dex.FlowService/SearchFlows", {"query": ""}, "viewer")
    assert status == 200, (status, body)
    status, body = call("dex.FlowService/StopFlow", {"flowId": "web-ann"}, "viewer")
    assert body.get("code") == "PERMISSION_DENIED" and "holds viewer" in body.get("message", ""), \
        (status, body)
    status, body = call("dex.AdminService/Describe", {}, "viewer")
    assert body.get("code") == "PERMISSION_DENIED", (status, body)
    status, body = call("dex.AdminService/Describe", {}, "admin")
    assert status == 200 and body["accessMode"] == "every-call", (status, body)
    # dex-web asks for a token before an action.
    req = urllib.request.Request(f"http://127.0.0.1:{web_port}/api/v1/web")
    with urllib.request.urlopen(req, timeout=10) as res:
        assert json.loads(res.read().decode())["adminAuth"] is True


def test_dexcli_refuses_an_unusable_token_file_before_sending_anything(tmp_path):
    empty = tmp_path / "empty-token"
    empty.write_text("\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DEX_TOKEN", "DEX_TOKEN_FILE")}
    cases = [
        (["--token-file", str(empty)], {}, f"--token-file: token file '{empty}' is empty"),
        ([], {"DEX_TOKEN_FILE": str(tmp_path / "missing")},
         f"$DEX_TOKEN_FILE: cannot read token file '{tmp_path / 'missing'}'"),
        (["--token", "t", "--token-file", str(empty)], {}, "give --token or --token-file, not both"),
    ]
    for flags, extra_env, message in cases:
        r = subprocess.run([str(binary("dexcli")), "--server", "127.0.0.1:1", *flags, "flow",
                            "list"], capture_output=True, text=True, timeout=30,
                           env=dict(env, **extra_env))
        assert r.returncode == 2 and message in r.stderr, (flags, r.stderr)
