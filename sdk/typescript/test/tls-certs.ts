// Certificates for the TLS tests, made at test time with the openssl command
// (the same recipes as tests/server/tls_certs.py). A missing openssl fails the
// test that asks for them; nothing is skipped.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";

const SERVER_SAN = "DNS:localhost,IP:127.0.0.1";

function openssl(dir: string, ...args: string[]): void {
  try {
    execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "pipe", "pipe"], timeout: 60_000 });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString("utf8") ?? String(error);
    throw new Error(`openssl ${args.join(" ")} failed: ${stderr}`);
  }
}

function ca(dir: string, name: string, cn: string): void {
  openssl(
    dir,
    ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
    ...["-keyout", `${name}.key`, "-out", `${name}.pem`, "-days", "30", "-subj", `/CN=${cn}`],
    ...["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
  );
}

/** A leaf signed by `issuer`; with `expired`, valid in January 2020 only. */
function leaf(dir: string, name: string, issuer: string, cn: string, san: string | undefined, usage: string, expired = false): void {
  openssl(
    dir,
    ...["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"],
    ...["-keyout", `${name}.key`, "-out", `${name}.csr`, "-subj", `/CN=${cn}`],
  );
  const ext = path.join(dir, `${name}.ext`);
  fs.writeFileSync(
    ext,
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=${usage}\n${
      san === undefined ? "" : `subjectAltName=${san}\n`
    }`,
  );
  if (!expired) {
    openssl(
      dir,
      ...["x509", "-req", "-in", `${name}.csr`, "-CA", `${issuer}.pem`, "-CAkey", `${issuer}.key`],
      ...["-CAcreateserial", "-days", "30", "-extfile", ext, "-out", `${name}.pem`],
    );
    return;
  }
  // A validity in the past needs `openssl ca` (x509 -req counts days from now).
  const db = path.join(dir, `${issuer}-db`);
  fs.mkdirSync(path.join(db, "new"), { recursive: true });
  if (!fs.existsSync(path.join(db, "index.txt"))) fs.writeFileSync(path.join(db, "index.txt"), "");
  if (!fs.existsSync(path.join(db, "serial"))) fs.writeFileSync(path.join(db, "serial"), "1000\n");
  const cnf = path.join(dir, `${name}.cnf`);
  fs.writeFileSync(
    cnf,
    `[ca]\ndefault_ca=c\n[c]\ndir=${db}\ndatabase=${db}/index.txt\nserial=${db}/serial\n` +
      `new_certs_dir=${db}/new\ndefault_md=sha256\npolicy=p\nunique_subject=no\ncopy_extensions=none\n[p]\ncommonName=supplied\n`,
  );
  openssl(
    dir,
    ...["ca", "-batch", "-config", cnf, "-in", `${name}.csr`, "-cert", `${issuer}.pem`, "-keyfile", `${issuer}.key`],
    ...["-startdate", "20200101000000Z", "-enddate", "20200201000000Z", "-extfile", ext, "-out", `${name}.pem`, "-notext"],
  );
}

/** Paths of what makeCerts wrote: `<name>.pem` and `<name>.key` for each. */
export interface Certs {
  dir: string;
  pem(name: string): string;
  key(name: string): string;
}

/**
 * Writes into `dir`: CAs "ca" and "other-ca"; servers "server" (SAN localhost
 * and 127.0.0.1), "localhost-only" (SAN localhost), "expired" (expired in
 * 2020), all signed by ca; clients "client" and "expired-client" signed by ca,
 * "other-client" signed by other-ca.
 */
export function makeCerts(dir: string): Certs {
  fs.mkdirSync(dir, { recursive: true });
  ca(dir, "ca", "dex ts test CA");
  ca(dir, "other-ca", "other CA");
  leaf(dir, "server", "ca", "dex-server", SERVER_SAN, "serverAuth");
  leaf(dir, "localhost-only", "ca", "dex-localhost", "DNS:localhost", "serverAuth");
  leaf(dir, "expired", "ca", "dex-expired", SERVER_SAN, "serverAuth", true);
  leaf(dir, "client", "ca", "dex-client", undefined, "clientAuth");
  leaf(dir, "expired-client", "ca", "dex-expired-client", undefined, "clientAuth", true);
  leaf(dir, "other-client", "other-ca", "dex-other-client", undefined, "clientAuth");
  return {
    dir,
    pem: (name) => path.join(dir, `${name}.pem`),
    key: (name) => path.join(dir, `${name}.key`),
  };
}
