"""What an operator sees before anything starts (issue 13 item 8): `serve --check` refuses what
startup would refuse, without contacting the store, and prints a config that reads back with the
same settings; every binary answers `--version`.
"""
import os
import re
import subprocess

import pytest

from conftest import binary, run

CLEAN_ENV = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
SECRET = "secret-key-never-printed-7f3a"


def check(path, env=None):
    return subprocess.run([binary("dex-server-zd"), "serve", "--config", str(path), "--check"],
                          capture_output=True, text=True, timeout=60,
                          env=CLEAN_ENV if env is None else env)


def s3_config(tmp_path, bucket="dex-check", extra_store="", extra="", profile="default"):
    creds = tmp_path / "aws-credentials"
    creds.write_text(f"[default]\naws_access_key_id = AKIDCHECK\naws_secret_access_key = {SECRET}\n"
                     f"[prod]\naws_access_key_id = AKIDPROD\n")
    path = tmp_path / "serve.yaml"
    # The endpoint is a port nothing listens on: --check sends no request.
    path.write_text(f"nodeId: node-c\nobjectStore:\n  type: s3\n  bucket: {bucket}\n"
                    f"  endpoint: http://127.0.0.1:1\n  credentials:\n    file: {creds}\n"
                    f"    profile: {profile}\n"
                    f"{extra_store}localStore:\n  path: {tmp_path / 'local'}\n{extra}")
    return path


def test_check_output_is_a_config_that_checks_again_with_the_same_settings(tmp_path):
    token = tmp_path / "admin-token"
    token.write_text("check-admin-token\n")
    configs = {
        "s3": s3_config(tmp_path, extra="standby:\n  mode: hot\nmetrics:\n  listen: 127.0.0.1:9464\n"
                                        f"auth:\n  adminTokenFiles: [{token}]\n"),
        "fs": tmp_path / "fs.yaml",
    }
    configs["fs"].write_text(f"nodeId: node-f\nobjectStore:\n  type: filesystem\n  path: "
                             f"{tmp_path / 'objects'}\nlocalStore:\n  path: {tmp_path / 'l'}\n"
                             "admin:\n  enabled: false\n")
    for name, path in configs.items():
        first = check(path)
        assert first.returncode == 0, f"{name}: {first.stderr}"
        copy = tmp_path / f"{name}-effective.yaml"
        copy.write_text(first.stdout)
        second = check(copy)
        assert second.returncode == 0, f"{name}: {second.stderr}\n{first.stdout}"
        assert second.stdout == first.stdout
        for secret in (SECRET, "check-admin-token"):
            assert secret not in first.stdout + first.stderr
    # Nothing was created: --check starts nothing.
    assert not (tmp_path / "objects").exists() and not (tmp_path / "local").exists()


@pytest.mark.parametrize("bucket, why", [
    ("Dex_Bucket", "only lowercase letters, digits"),
    ("-dex", "begin and end with a letter or digit"),
    ("dex..bucket", "two adjacent periods"),
    ("192.168.1.10", "IP address"),
    ("xn--dex", "xn--"),
    ("ab", "3 to 63 characters"),
])
def test_check_refuses_a_bucket_name_that_s3_refuses(tmp_path, bucket, why):
    r = check(s3_config(tmp_path, bucket=bucket))
    assert r.returncode == 2, r.stdout
    assert "objectStore.bucket" in r.stderr and why in r.stderr, r.stderr
    assert r.stdout == ""


def test_check_refuses_missing_credentials_and_bad_store_settings_naming_the_key(tmp_path):
    # No credentials file and no AWS_* variables.
    path = tmp_path / "env.yaml"
    path.write_text("nodeId: n\nobjectStore:\n  type: s3\n  bucket: dex-check\n"
                    f"localStore:\n  path: {tmp_path / 'l'}\n")
    r = check(path)
    assert r.returncode == 2 and "objectStore.credentials" in r.stderr, r.stderr
    assert "AWS_ACCESS_KEY_ID" in r.stderr, r.stderr
    # The same config with the variables set passes.
    env = dict(CLEAN_ENV, AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY=SECRET)
    ok = check(path, env)
    assert ok.returncode == 0, ok.stderr
    assert SECRET not in ok.stdout + ok.stderr
    cases = [
        (dict(profile="missing"), "no [missing] profile"),
        (dict(profile="prod"), "lacks aws_access_key_id or aws_secret_access_key"),
        (dict(extra_store="  region: \"eu west\"\n"), "objectStore.region"),
    ]
    for args, needle in cases:
        r = check(s3_config(tmp_path, **args))
        assert r.returncode == 2 and needle in r.stderr, (args, r.stderr)
        assert SECRET not in r.stderr
    endpoint = tmp_path / "endpoint.yaml"
    endpoint.write_text(s3_config(tmp_path).read_text().replace("http://127.0.0.1:1", "ftp://x"))
    r = check(endpoint)
    assert r.returncode == 2 and "objectStore.endpoint" in r.stderr, r.stderr
    # A file where the local store's directory should be.
    (tmp_path / "a-file").write_text("x")
    local = tmp_path / "local.yaml"
    local.write_text(s3_config(tmp_path).read_text().replace(str(tmp_path / "local"),
                                                             str(tmp_path / "a-file")))
    r = check(local)
    assert r.returncode == 2 and "localStore.path" in r.stderr, r.stderr


# Every binary a user runs, and the harness tools that land beside them in bin/.
BINARIES = ["dex-server-zd", "dexcli", "dex-flow-examples", "log_append_bench", "dex_flows_bench",
            "objstore_cost_bench", "chaos_client", "chaos_worker", "dex-peers-worker"]


@pytest.mark.parametrize("name", BINARIES)
def test_every_binary_prints_its_version(name):
    r = run(binary(name), "--version")
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"{re.escape(name)} \d+\.\d+\.\d+ \((git [0-9a-f]{{7,40}}|no git revision)\)\n",
                        r.stdout), r.stdout
