"""TLS and mutual TLS on dex's listeners (docs/operations.md, "TLS"), with certificates made by
openssl at test time (tls_certs.py): the API with client certificates required, dexcli over TLS,
each failure's own error (no client certificate, a client certificate of another CA, a wrong CA,
a wrong name, an expired server or client certificate, a plaintext client), TLS 1.2 as the
minimum, a certificate rotated on disk used by the next connection without a restart (and a bad
file keeping the previous one), the startup errors of bad settings, and dex-web over HTTPS whose
JSON gateway reaches an API that requires client certificates."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest

from conftest import binary, free_port, run
from tls_certs import make_certs

READY = "dex-server-zd dev ready"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def write_config(path, api_tls=None, web_tls=None, web_listen=""):
    lines = []
    if api_tls:
        lines += ["api:", "  tls:"] + [f"    {k}: {v}" for k, v in api_tls.items()]
    lines += ["web:", f"  listen: \"{web_listen}\""]
    if web_tls:
        lines += ["  tls:"] + [f"    {k}: {v}" for k, v in web_tls.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def mtls(certs, **extra):
    d = {"certFile": certs["server.pem"], "keyFile": certs["server.key"],
         "clientCaFile": certs["ca.pem"]}
    d.update(extra)
    return d


def start_dev(procs, tmp_path, config, port=None):
    port = port or free_port()
    p = procs(binary("dex-server-zd"), "dev", "--data-dir", tmp_path / "data", "--listen",
              f"127.0.0.1:{port}", "--config", config)
    p.wait_for_line(READY, 60)
    return p, f"127.0.0.1:{port}"


def dexcli(address, *args, timeout="5s", env=None):
    full_env = dict(os.environ)
    for k in list(full_env):
        if k.startswith("DEX_TLS"):
            del full_env[k]
    full_env.update(env or {})
    r = subprocess.run([binary("dexcli"), "--server", address, "--timeout", timeout, *args],
                       capture_output=True, text=True, timeout=60, env=full_env)
    return r


def client_flags(certs, ca="ca.pem", cert="client"):
    flags = ["--ca-file", certs[ca]]
    if cert:
        flags += ["--cert-file", certs[f"{cert}.pem"], "--key-file", certs[f"{cert}.key"]]
    return flags


def error_of(r):
    """The message of a failed dexcli flow command (JSON on stderr) or its plain error."""
    for line in r.stderr.splitlines():
        if line.startswith("{"):
            return json.loads(line)["error"]["message"]
    return r.stderr


def test_mtls_api_serves_dexcli_with_a_client_certificate(procs, tmp_path, certs):
    config = write_config(tmp_path / "dev.yaml", api_tls=mtls(certs))
    dev, address = start_dev(procs, tmp_path, config)
    assert "client certificates required" in dev.wait_for_line("api.tls:", 5)
    r = dexcli(address, *client_flags(certs), "flow", "list")
    assert r.returncode == 0, r.stderr
    # The engine answers through TLS (no Worker declared the type).
    r = dexcli(address, *client_flags(certs), "flow", "start", "SignUp", "--flow-id", "ann",
               "--input", "{}")
    assert r.returncode == 1 and "was never declared by a Worker" in error_of(r), r.stderr
    r = dexcli(address, *client_flags(certs), "health")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SERVING", r.stderr
    # The same through the environment variables.
    env = {"DEX_TLS_CA_FILE": certs["ca.pem"], "DEX_TLS_CERT_FILE": certs["client.pem"],
           "DEX_TLS_KEY_FILE": certs["client.key"]}
    r = dexcli(address, "flow", "list", env=env)
    assert r.returncode == 0, r.stderr


def test_each_tls_failure_has_its_own_error(procs, tmp_path, certs):
    config = write_config(tmp_path / "dev.yaml", api_tls=mtls(certs))
    _, address = start_dev(procs, tmp_path, config)

    r = dexcli(address, *client_flags(certs, cert=None), "flow", "list")
    assert r.returncode == 1 and "the server requires a client certificate" in error_of(r), r.stderr

    r = dexcli(address, *client_flags(certs, cert="other-client"), "flow", "list")
    assert r.returncode == 1, r.stderr
    assert "the server refused this client's certificate" in error_of(r), r.stderr

    r = dexcli(address, *client_flags(certs, ca="other-ca.pem"), "flow", "list")
    assert r.returncode == 1, r.stderr
    assert "is not signed by a CA in --ca-file" in error_of(r), r.stderr
    # One error, dexcli's: not gRPC's own log line per connection attempt as well.
    assert "Handshake failed" not in r.stderr, r.stderr

    r = dexcli(address, *client_flags(certs), "--server-name", "elsewhere.example", "flow", "list")
    assert r.returncode == 1, r.stderr
    assert "is not for 'elsewhere.example' (it names DNS:localhost, IP:127.0.0.1)" in error_of(r)

    # localhost is a name the certificate holds: accepted by name too.
    r = dexcli(address.replace("127.0.0.1", "localhost"), *client_flags(certs), "flow", "list")
    assert r.returncode == 0, r.stderr

    r = dexcli(address, "flow", "list")
    assert r.returncode == 1 and "speaks TLS: connect with --tls" in error_of(r), r.stderr

    # An expired client certificate is refused before anything is sent.
    r = dexcli(address, *client_flags(certs, cert="expired-client"), "flow", "list")
    assert r.returncode == 2 and "the client certificate expired on" in r.stderr, r.stderr


def test_an_expired_server_certificate_is_named_by_the_client(tmp_path, certs):
    # dex refuses to serve an expired certificate (below), so an openssl server serves one.
    port = free_port()
    server = subprocess.Popen(
        ["openssl", "s_server", "-accept", f"127.0.0.1:{port}", "-cert", certs["expired.pem"],
         "-key", certs["expired.key"], "-quiet", "-alpn", "h2"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline, "openssl s_server did not start"
            time.sleep(0.1)
        r = dexcli(f"127.0.0.1:{port}", "--ca-file", certs["ca.pem"], "flow", "list")
        assert r.returncode == 1, r.stderr
        assert "the server's certificate /CN=dex-expired expired on Feb  1 00:00:00 2020" in \
            error_of(r), r.stderr
    finally:
        server.kill()
        server.wait(timeout=10)


def test_tls_1_1_is_refused_and_1_2_accepted(procs, tmp_path, certs):
    config = write_config(tmp_path / "dev.yaml",
                          api_tls={"certFile": certs["server.pem"], "keyFile": certs["server.key"]})
    _, address = start_dev(procs, tmp_path, config)
    for version, ok in (("-tls1_1", False), ("-tls1_2", True), ("-tls1_3", True)):
        # SECLEVEL=0: the client itself would not offer TLS 1.1 on Debian otherwise.
        r = subprocess.run(["openssl", "s_client", "-connect", address, version, "-CAfile",
                            certs["ca.pem"], "-alpn", "h2", "-cipher", "DEFAULT@SECLEVEL=0"],
                           input="", capture_output=True, text=True, errors="replace",
                           timeout=30)
        served = "no peer certificate available" not in r.stdout and \
            "Verify return code: 0 (ok)" in r.stdout
        assert served == ok, (version, r.stdout, r.stderr)
    # Server-side TLS only (no clientAuth): dexcli needs just the CA.
    r = dexcli(address, "--ca-file", certs["ca.pem"], "flow", "list")
    assert r.returncode == 0, r.stderr


def server_subject(address, certs):
    host, port = address.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=certs["ca.pem"])
    ctx.load_cert_chain(certs["client.pem"], certs["client.key"])
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


def test_a_certificate_rotated_on_disk_is_used_without_a_restart(procs, tmp_path, certs):
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(certs["server.pem"], live / "tls.crt")
    shutil.copy(certs["server.key"], live / "tls.key")
    # The API and dex-web serve the same files; each follows the rotation on its own.
    live_tls = mtls(certs, certFile=live / "tls.crt", keyFile=live / "tls.key")
    web = f"127.0.0.1:{free_port()}"
    config = write_config(tmp_path / "dev.yaml", api_tls=live_tls, web_tls=live_tls,
                          web_listen=web)
    dev, address = start_dev(procs, tmp_path, config)
    assert server_subject(address, certs) == "dex-server"
    assert server_subject(web, certs) == "dex-server"

    # A bad file (a key of another certificate) keeps the previous certificate, and says why.
    shutil.copy(certs["client.key"], live / "tls.key")
    dev.wait_for_line("keeps the previous certificate", 15)
    assert server_subject(address, certs) == "dex-server"
    r = dexcli(address, *client_flags(certs), "flow", "list")
    assert r.returncode == 0, r.stderr

    # The rotation: a new key and certificate, written one after the other.
    shutil.copy(certs["server2.key"], live / "tls.key")
    shutil.copy(certs["server2.pem"], live / "tls.crt")
    dev.wait_for_line("api.tls: reloaded the certificate (/CN=dex-server-rotated", 15)
    deadline = time.monotonic() + 15
    for listener in (address, web):
        while server_subject(listener, certs) != "dex-server-rotated":
            assert time.monotonic() < deadline, f"{listener} did not serve the rotated certificate"
            time.sleep(0.2)
    status, _ = https(f"https://{web}/api/v1/dex.FlowService/SearchFlows", certs, body="{}")
    assert status == 200
    r = dexcli(address, *client_flags(certs), "flow", "list")
    assert r.returncode == 0, r.stderr
    assert dev.p.poll() is None


@pytest.mark.parametrize("api_tls, expected", [
    ({"certFile": "{server.pem}"}, "api.tls: certFile and keyFile go together"),
    ({"certFile": "{server.pem}", "keyFile": "{server.key}", "clientAuth": "required"},
     "api.tls.clientAuth required needs api.tls.clientCaFile"),
    ({"certFile": "{server.pem}", "keyFile": "{server.key}", "clientAuth": "sometimes"},
     "api.tls.clientAuth must be none, optional or required"),
    ({"certFile": "{server.pem}", "keyFile": "{client.key}"},
     "api.tls.keyFile: '{client.key}' does not match the certificate in api.tls.certFile"),
    ({"certFile": "/nonexistent/cert.pem", "keyFile": "{server.key}"},
     "api.tls.certFile: '/nonexistent/cert.pem' does not exist"),
    ({"certFile": "{expired.pem}", "keyFile": "{expired.key}"},
     "api.tls.certFile: '{expired.pem}' holds a certificate that expired on"),
    ({"certFile": "{server.pem}", "keyFile": "{server.key}", "clientCaFile": "{server.key}"},
     "api.tls.clientCaFile: '{server.key}' holds no PEM certificate"),
])
def test_bad_tls_settings_fail_startup_naming_the_key_and_file(tmp_path, certs, api_tls,
                                                                expected):
    def fill(text):
        for name, path in certs.items():
            text = text.replace("{" + name + "}", path)
        return text
    api_tls = {k: fill(v) for k, v in api_tls.items()}
    config = write_config(tmp_path / "dev.yaml", api_tls=api_tls)
    r = run(binary("dex-server-zd"), "dev", "--data-dir", tmp_path / "data", "--listen",
            f"127.0.0.1:{free_port()}", "--config", config, timeout=60)
    assert r.returncode != 0
    assert fill(expected) in r.stdout + r.stderr, r.stdout + r.stderr


def https(url, certs, body=None, client=True):
    ctx = ssl.create_default_context(cafile=certs["ca.pem"])
    if client:
        ctx.load_cert_chain(certs["client.pem"], certs["client.key"])
    req = urllib.request.Request(url, data=None if body is None else body.encode(),
                                 method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_dex_web_over_https_reaches_an_mtls_api(procs, tmp_path, certs):
    web_port = free_port()
    config = write_config(tmp_path / "dev.yaml", api_tls=mtls(certs), web_tls=mtls(certs),
                          web_listen=f"127.0.0.1:{web_port}")
    dev, address = start_dev(procs, tmp_path, config)
    dev.wait_for_line(f"dex-web on https://127.0.0.1:{web_port}", 5)
    base = f"https://127.0.0.1:{web_port}"
    status, body = https(base + "/api/v1/web", certs)
    assert status == 200 and json.loads(body)["apiAddress"] == address, body
    # The gateway reaches the API, which requires client certificates of its callers.
    status, body = https(base + "/api/v1/dex.FlowService/SearchFlows", certs, body="{}")
    assert status == 200, body
    status, body = https(base + "/api/v1/dex.FlowService/StartFlow", certs,
                         body=json.dumps({"flowType": "SignUp", "flowId": "web-ann"}))
    assert status == 400 and "was never declared by a Worker" in body, body
    # Without a client certificate the HTTPS listener refuses the connection.
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        https(base + "/api/v1/web", certs, client=False)
    # Plain HTTP is not served on the HTTPS port.
    with pytest.raises(Exception):
        urllib.request.urlopen(f"http://127.0.0.1:{web_port}/api/v1/web", timeout=10).read()


def test_dev_on_loopback_stays_plaintext_and_warns_only_beyond(procs, tmp_path, certs):
    dev, address = start_dev(procs, tmp_path, write_config(tmp_path / "dev.yaml"))
    r = dexcli(address, "flow", "list")
    assert r.returncode == 0, r.stderr
    assert not any("without TLS" in line for line in dev.lines)
    dev.kill()
    port = free_port()
    p = procs(binary("dex-server-zd"), "dev", "--data-dir", tmp_path / "data2", "--listen",
              f"0.0.0.0:{port}", "--config", write_config(tmp_path / "dev2.yaml"))
    line = p.wait_for_line("without TLS", 60)
    assert f"api.listen 0.0.0.0:{port} is reachable beyond loopback without TLS" in line


def tls_node(procs, tmp_path, store, name, certs):
    """A hot `serve` process (test_hot_standby.HotNode) whose API requires client certificates."""
    from test_hot_standby import HotNode
    node = HotNode(procs, tmp_path, store, name)
    text = node.config.read_text()
    listen = f"api:\n  listen: 127.0.0.1:{node.api_port}\n"
    assert listen in text
    block = "".join(f"    {k}: {v}\n" for k, v in mtls(certs).items())
    node.config.write_text(text.replace(listen, listen + "  tls:\n" + block))
    return node


@pytest.mark.parametrize("store", ["filesystem"], indirect=True)
def test_workers_and_clients_follow_a_failover_over_mtls(procs, tmp_path, store, certs):
    active = tls_node(procs, tmp_path, store, "a", certs).start()
    active.wait_ready(60)
    standby = tls_node(procs, tmp_path, store, "b", certs).start()
    standby.wait_following()
    servers = [active.address, standby.address]
    tls_args = ["--ca-file", certs["ca.pem"], "--cert-file", certs["client.pem"], "--key-file",
                certs["client.key"]]
    server_args = [a for s in servers for a in ("--server", s)]
    w = procs(binary("dex-flow-examples"), "worker", *server_args, *tls_args)
    w.wait_for_line("connected to", 30)
    driver = procs(binary("dex-flow-examples"), "drive", "order", "--flow-id", "order-tls",
                   *server_args, *tls_args)
    driver.wait_for_line('"event":"started"', 30)
    active.proc.signal(signal.SIGKILL)
    standby.wait_ready(30)
    code = driver.wait_exit(180)
    lines = [json.loads(l) for l in driver.lines if l.startswith("{")]
    results = [l for l in lines if l.get("event") == "result"]
    assert code == 0 and results and results[-1]["status"] == "FLOW_COMPLETED", driver.output()
    # dexcli finds the new active process among both addresses over mTLS.
    r = subprocess.run([binary("dexcli"), *server_args, *tls_args, "flow", "describe",
                        "order-tls"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout)["flowId"] == "order-tls", r.stderr
    assert "COMPLETED" in json.loads(r.stdout)["status"], r.stdout


def start_tls_minio(tmp_path, certs):
    """MinIO serving HTTPS with the test CA's server certificate; returns (process, endpoint)."""
    from conftest import ACCESS, MINIO, SECRET
    if not os.path.exists(MINIO):
        pytest.fail(f"MinIO is not installed at {MINIO}: run scripts/install-minio", pytrace=False)
    certs_dir = tmp_path / "minio-certs"
    certs_dir.mkdir()
    shutil.copy(certs["server.pem"], certs_dir / "public.crt")
    shutil.copy(certs["server.key"], certs_dir / "private.key")
    port = free_port()
    env = dict(os.environ, MINIO_ROOT_USER=ACCESS, MINIO_ROOT_PASSWORD=SECRET,
               MINIO_BROWSER="off", MINIO_UPDATE="off")
    p = subprocess.Popen([MINIO, "server", str(tmp_path / "minio-data"), "--address",
                          f"127.0.0.1:{port}", "--console-address", f"127.0.0.1:{free_port()}",
                          "--certs-dir", str(certs_dir)],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import boto3
    endpoint = f"https://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ACCESS,
                      aws_secret_access_key=SECRET, region_name="us-east-1",
                      verify=certs["ca.pem"])
    deadline = time.monotonic() + 60
    while True:
        try:
            s3.create_bucket(Bucket="dex")
            return p, endpoint
        except Exception:
            if time.monotonic() > deadline or p.poll() is not None:
                p.kill()
                raise
            time.sleep(0.2)


def test_s3_over_https_with_a_private_ca(procs, tmp_path, certs):
    from conftest import ACCESS, SECRET, Proc
    minio, endpoint = start_tls_minio(tmp_path, certs)
    try:
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)

        def serve(name, ca_line):
            config = tmp_path / f"{name}.yaml"
            config.write_text(
                f"nodeId: s3tls\napi:\n  listen: 127.0.0.1:{free_port()}\n"
                f"objectStore:\n  type: s3\n  bucket: dex\n  prefix: {name}\n"
                f"  endpoint: {endpoint}\n{ca_line}"
                f"localStore:\n  path: {tmp_path / name}-local\n")
            p = Proc([binary("dex-server-zd"), "serve", "--config", str(config)], env=env)
            procs.register(p)
            return p, config

        # Without the CA, the store's certificate is refused, saying so.
        plain, _ = serve("no-ca", "")
        plain.wait_for_line("certificate", 60)
        plain.kill()
        # With objectStore.caFile, the node runs on it; --check reports the key.
        node, config = serve("with-ca", f"  caFile: {certs['ca.pem']}\n")
        node.wait_for_line("dex-server-zd serve ready", 60)
        r = subprocess.run([binary("dex-server-zd"), "serve", "--config", str(config), "--check"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0 and f"caFile: \"{certs['ca.pem']}\"" in r.stdout, r.stderr
        bad = tmp_path / "bad.yaml"
        bad.write_text(config.read_text().replace(certs["ca.pem"], certs["server.key"]))
        r = subprocess.run([binary("dex-server-zd"), "serve", "--config", str(bad), "--check"],
                           capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode != 0 and "objectStore.caFile: S3 CA file" in r.stdout + r.stderr, \
            r.stdout + r.stderr
    finally:
        minio.kill()
        minio.wait(timeout=10)


def test_the_health_listener_answers_probes_in_plaintext_and_serves_nothing_else(procs, tmp_path,
                                                                                 certs):
    health_port = free_port()
    config = write_config(tmp_path / "dev.yaml", api_tls=mtls(certs))
    text = config.read_text().replace("api:\n", f"api:\n  healthListen: 127.0.0.1:{health_port}\n")
    config.write_text(text)
    dev, address = start_dev(procs, tmp_path, config)
    dev.wait_for_line(f"gRPC health only, plaintext, on 127.0.0.1:{health_port}", 5)
    health = f"127.0.0.1:{health_port}"
    # A probe without TLS sees what a client over mTLS sees on the API.
    r = dexcli(health, "health")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "SERVING", r.stderr
    r = dexcli(address, *client_flags(certs), "health", "--service", "dex.FlowService")
    assert json.loads(r.stdout)["status"] == "SERVING", r.stderr
    r = dexcli(health, "health", "--service", "dex.FlowService")
    assert json.loads(r.stdout)["status"] == "SERVING", r.stderr
    # Nothing but health: the Flow API is not there.
    r = dexcli(health, "flow", "list")
    assert r.returncode == 1 and "UNIMPLEMENTED" in r.stderr, r.stderr


def test_the_api_stages_its_key_in_memory_and_clears_what_a_killed_process_left(procs, tmp_path,
                                                                               certs):
    # A directory a killed process left (its pid is gone) is removed by the next start.
    # /dev/shm (memory) where there is one, as the server picks.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"{shm}/dex-api-tls-{dead.pid}-abcdef"
    os.makedirs(stale, mode=0o700)
    (open(os.path.join(stale, "key.pem"), "w")).close()
    config = write_config(tmp_path / "dev.yaml", api_tls=mtls(certs))
    dev, address = start_dev(procs, tmp_path, config)
    assert not os.path.exists(stale)
    mine = [d for d in os.listdir(shm) if d.startswith(f"dex-api-tls-{dev.p.pid}-")]
    assert len(mine) == 1, os.listdir(shm)
    staged = os.path.join(shm, mine[0])
    assert os.stat(staged).st_mode & 0o777 == 0o700
    dev.signal(signal.SIGTERM)
    assert dev.wait_exit(60) == 0
    assert not os.path.exists(staged)


def test_metrics_over_https_with_client_certificates(procs, tmp_path, certs):
    from conftest import Proc
    metrics = f"127.0.0.1:{free_port()}"
    tls_block = "".join(f"    {k}: {v}\n" for k, v in mtls(certs).items())
    config = tmp_path / "serve.yaml"
    config.write_text(
        f"nodeId: mtls\napi:\n  listen: 127.0.0.1:{free_port()}\n"
        f"objectStore:\n  type: filesystem\n  path: {tmp_path / 'objects'}\n"
        f"localStore:\n  path: {tmp_path / 'local'}\n"
        f"metrics:\n  listen: {metrics}\n  tls:\n{tls_block}")
    node = Proc([binary("dex-server-zd"), "serve", "--config", str(config)])
    procs.register(node)
    node.wait_for_line(f"metrics on https://{metrics}/metrics", 30)
    node.wait_for_line("dex-server-zd serve ready", 60)
    status, body = https(f"https://{metrics}/metrics", certs)
    assert status == 200 and "dexzd_" in body, body[:500]
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        https(f"https://{metrics}/metrics", certs, client=False)
    # --check validates the block and prints it back.
    r = subprocess.run([binary("dex-server-zd"), "serve", "--config", str(config), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"certFile: \"{certs['server.pem']}\"" in r.stdout.split("metrics:")[1], r.stdout
