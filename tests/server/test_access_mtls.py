"""Client certificate identities mapped to roles (auth.certificateRoles; docs/api.md, "Access"):
a dev server with mutual TLS, certificates made at test time (tls_certs.py). The client
certificate's subject CN gives its caller the viewer role without any token; a token adds its own
role; a certificate the server did not verify gives nothing.
"""
import json
import os
import subprocess

import pytest

from conftest import binary, free_port
from tls_certs import make_certs

READY = "dex-server-zd dev ready"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def dexcli(address, certs, *args, token_file=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEX_TLS") and
           k not in ("DEX_TOKEN", "DEX_TOKEN_FILE")}
    flags = ["--ca-file", certs["ca.pem"], "--cert-file", certs["client.pem"], "--key-file",
             certs["client.key"]]
    if token_file is not None:
        flags += ["--token-file", str(token_file)]
    return subprocess.run([binary("dexcli"), "--server", address, "--timeout", "5s", *flags, *args],
                          capture_output=True, text=True, timeout=60, env=env)


def start(procs, tmp_path, certs, client_ca, extra=""):
    token = tmp_path / "client-token"
    token.write_text("mtls-client-token\n")
    config = tmp_path / "dev.yaml"
    config.write_text(
        "api:\n  tls:\n"
        f"    certFile: {certs['server.pem']}\n    keyFile: {certs['server.key']}\n"
        f"    clientCaFile: {certs[client_ca]}\n    clientAuth: optional\n"
        "web:\n  listen: \"\"\n"
        "auth:\n  certificateRoles:\n    dex-client: viewer\n"
        f"  tokens:\n    client:\n      files: [{token}]\n{extra}")
    port = free_port()
    p = procs(binary("dex-server-zd"), "dev", "--data-dir", tmp_path / "data", "--listen",
              f"127.0.0.1:{port}", "--config", config)
    p.wait_for_line(READY, 60)
    return p, f"127.0.0.1:{port}", token


def test_a_verified_client_certificate_holds_its_mapped_role(procs, tmp_path, certs):
    dev, address, token = start(procs, tmp_path, certs, "ca.pem")
    # The certificate (CN dex-client) is a viewer: it reads without a token ...
    r = dexcli(address, certs, "flow", "list")
    assert r.returncode == 0, r.stderr
    # ... and cannot start a Flow or describe the node.
    r = dexcli(address, certs, "flow", "start", "SignUp", "--flow-id", "ann", "--input", "{}")
    assert r.returncode == 1 and "PERMISSION_DENIED" in r.stderr, r.stderr
    assert "this caller holds viewer" in r.stderr, r.stderr
    r = dexcli(address, certs, "admin", "describe")
    assert r.returncode == 1 and "PERMISSION_DENIED" in r.stderr, r.stderr
    # With the client's token as well, the start passes access (no Worker declared the type).
    r = dexcli(address, certs, "flow", "start", "SignUp", "--flow-id", "ann", "--input", "{}",
               token_file=token)
    assert "PERMISSION_DENIED" not in r.stderr and "UNAUTHENTICATED" not in r.stderr, r.stderr
    assert "mtls-client-token" not in dev.output()


def test_a_certificate_the_server_did_not_verify_gives_no_role(procs, tmp_path, certs):
    # The server trusts only other-ca for client certificates: dex-client's (signed by ca) is not
    # verified. With clientAuth optional the handshake may go on without it, or fail; either
    # way the caller holds no role from it.
    dev, address, _ = start(procs, tmp_path, certs, "other-ca.pem")
    r = dexcli(address, certs, "flow", "list")
    assert r.returncode != 0, r.stdout
    assert "UNAUTHENTICATED" in r.stderr or "certificate" in r.stderr, r.stderr
