"""Certificates for the TLS tests, made at test time with the openssl command.

make_certs(dir) writes, all PEM:
  ca.pem / ca.key              CA "dex test CA"
  other-ca.pem / other-ca.key  an unrelated CA "other CA" (the wrong-CA cases)
  server.pem / server.key      signed by ca, SAN localhost and 127.0.0.1, serverAuth
  server2.pem / server2.key    the same names, another key and CN (a rotation)
  wrongname.pem / wrongname.key  signed by ca, SAN elsewhere.example only
  expired.pem / expired.key    signed by ca, SAN localhost/127.0.0.1, expired in 2020
  other-server.pem / .key      SAN localhost/127.0.0.1 but signed by other-ca
  client.pem / client.key      signed by ca, clientAuth, CN dex-client
  expired-client.pem / .key    signed by ca, clientAuth, expired in 2020
  other-client.pem / .key      clientAuth, signed by other-ca
and returns a dict name -> path.
"""
import os
import subprocess

SERVER_SAN = "DNS:localhost,IP:127.0.0.1"


def _openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"openssl {' '.join(args)} failed:\n{r.stderr}"


def _ca(d, name, cn):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "30", "-subj", f"/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _leaf(d, name, ca, cn, san, usage, start=None, end=None):
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
    ext = os.path.join(d, f"{name}.ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                f"extendedKeyUsage={usage}\n")
        if san:
            f.write(f"subjectAltName={san}\n")
    if start is None:
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-days", "30", "-extfile", ext, "-out", f"{name}.pem", cwd=d)
        return
    # A validity in the past needs `openssl ca` (x509 -req only counts days from now).
    db = os.path.join(d, f"{ca}-db")
    os.makedirs(os.path.join(db, "new"), exist_ok=True)
    for fname, content in (("index.txt", ""), ("serial", "1000\n")):
        path = os.path.join(db, fname)
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(content)
    cnf = os.path.join(d, f"{name}.cnf")
    with open(cnf, "w") as f:
        f.write(f"[ca]\ndefault_ca=c\n[c]\ndir={db}\ndatabase={db}/index.txt\nserial={db}/serial\n"
                f"new_certs_dir={db}/new\ndefault_md=sha256\npolicy=p\nunique_subject=no\n"
                "copy_extensions=none\n[p]\ncommonName=supplied\n")
    _openssl("ca", "-batch", "-config", cnf, "-in", f"{name}.csr", "-cert", f"{ca}.pem",
             "-keyfile", f"{ca}.key", "-startdate", start, "-enddate", end, "-extfile", ext,
             "-out", f"{name}.pem", "-notext", cwd=d)


def make_certs(d):
    d = str(d)
    os.makedirs(d, exist_ok=True)
    _ca(d, "ca", "dex test CA")
    _ca(d, "other-ca", "other CA")
    _leaf(d, "server", "ca", "dex-server", SERVER_SAN, "serverAuth")
    _leaf(d, "server2", "ca", "dex-server-rotated", SERVER_SAN, "serverAuth")
    _leaf(d, "wrongname", "ca", "elsewhere", "DNS:elsewhere.example", "serverAuth")
    _leaf(d, "expired", "ca", "dex-expired", SERVER_SAN, "serverAuth",
          start="20200101000000Z", end="20200201000000Z")
    _leaf(d, "other-server", "other-ca", "dex-other", SERVER_SAN, "serverAuth")
    _leaf(d, "client", "ca", "dex-client", None, "clientAuth")
    _leaf(d, "expired-client", "ca", "dex-expired-client", None, "clientAuth",
          start="20200101000000Z", end="20200201000000Z")
    _leaf(d, "other-client", "other-ca", "dex-other-client", None, "clientAuth")
    names = {}
    for f in os.listdir(d):
        if f.endswith(".pem") or f.endswith(".key"):
            names[f] = os.path.join(d, f)
    return names


if __name__ == "__main__":
    import sys
    print(make_certs(sys.argv[1]))
