// TLS for the connections of a Client and a Worker to dex (README.md, "TLS";
// docs/cli.md, "TLS"; the C++ SDK's src/sdk/tls_options.h with the same
// meaning and environment variables): the CA that signs the server's
// certificate, a client certificate for mutual TLS, and the name to check the
// server's certificate against. Every address of a node is dialled with the
// same credentials, so the search for the active process and failover work as
// in plaintext. The files are read when a channel is made: a rotated
// certificate is used by the next connection. The token is sent as call
// metadata either way (credentials.ts), so it works over plaintext and TLS.
import { X509Certificate, createPrivateKey } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import * as nodeTls from "node:tls";

import * as grpc from "@grpc/grpc-js";

import { DexError, tlsFailureHint } from "./errors";

/** The environment variables every dex client reads for what its options leave unset. */
export const TLS_ENV = "DEX_TLS";
export const TLS_CA_FILE_ENV = "DEX_TLS_CA_FILE";
export const TLS_CERT_FILE_ENV = "DEX_TLS_CERT_FILE";
export const TLS_KEY_FILE_ENV = "DEX_TLS_KEY_FILE";
export const TLS_SERVER_NAME_ENV = "DEX_TLS_SERVER_NAME";

/** A PEM file of certificates or a key is small; anything larger is not one. */
const PEM_FILE_BYTES_MAX = 1024 * 1024;

/** The TLS options of ClientOptions and WorkerOptions. */
export interface TlsOptions {
  /**
   * Connect with TLS. Default: $DEX_TLS (1/true/yes or 0/false/no), and on
   * when any option below (or its variable) is set. `false` turns TLS off
   * and the variables are not read.
   */
  tls?: boolean;
  /** PEM CAs that sign the server's certificate. Default $DEX_TLS_CA_FILE, else the system's CAs. */
  caFile?: string;
  /** PEM client certificate chain for mutual TLS, with keyFile. Default $DEX_TLS_CERT_FILE. */
  certFile?: string;
  /** The unencrypted PEM private key of certFile. Default $DEX_TLS_KEY_FILE. */
  keyFile?: string;
  /**
   * The name the server's certificate must hold (a DNS name or an IP
   * address) instead of each address's host; also sent as the TLS server
   * name and the HTTP/2 authority. Default $DEX_TLS_SERVER_NAME.
   */
  serverName?: string;
}

/** One setting and where it came from ("caFile" or "$DEX_TLS_CA_FILE"), for error messages. */
interface Setting {
  value: string;
  what: string;
}

/** TLS options after the environment was applied: TLS is on. */
export interface ResolvedTls {
  caFile?: Setting;
  certFile?: Setting;
  keyFile?: Setting;
  serverName?: Setting;
}

function parseYesNo(value: string): boolean {
  const lower = value.trim().toLowerCase();
  if (["1", "true", "yes"].includes(lower)) return true;
  if (["0", "false", "no"].includes(lower)) return false;
  throw new DexError("INVALID_ARGUMENT", `$${TLS_ENV} must be 1, true or yes, or 0, false or no, not '${value}'`);
}

/**
 * The TLS settings of `options` with each unset one taken from its
 * environment variable; undefined: plaintext. Throws a DexError
 * (INVALID_ARGUMENT) for a $DEX_TLS that is not a yes or no, a certFile
 * without keyFile (or the reverse), or `tls: false` with a file or name set.
 */
export function resolveTls(options: TlsOptions, env: NodeJS.ProcessEnv = process.env): ResolvedTls | undefined {
  const fields = [
    ["caFile", TLS_CA_FILE_ENV],
    ["certFile", TLS_CERT_FILE_ENV],
    ["keyFile", TLS_KEY_FILE_ENV],
    ["serverName", TLS_SERVER_NAME_ENV],
  ] as const;
  if (options.tls === false) {
    const set = fields.filter(([key]) => (options[key] ?? "") !== "").map(([key]) => key);
    if (set.length > 0) {
      throw new DexError("INVALID_ARGUMENT", `tls is false but ${set.join(", ")} ${set.length === 1 ? "is" : "are"} set`);
    }
    return undefined;
  }
  const resolved: ResolvedTls = {};
  for (const [key, envName] of fields) {
    const given = options[key];
    if (given !== undefined && given !== "") {
      resolved[key] = { value: given, what: key };
      continue;
    }
    const fromEnv = env[envName];
    if (fromEnv !== undefined && fromEnv !== "") resolved[key] = { value: fromEnv, what: `$${envName}` };
  }
  let enabled = options.tls === true;
  const envTls = env[TLS_ENV];
  if (!enabled && envTls !== undefined && envTls !== "") enabled = parseYesNo(envTls);
  if (!enabled && Object.keys(resolved).length === 0) return undefined;
  if ((resolved.certFile === undefined) !== (resolved.keyFile === undefined)) {
    const has = resolved.certFile ?? resolved.keyFile;
    const missing = resolved.certFile === undefined ? "certFile" : "keyFile";
    throw new DexError(
      "INVALID_ARGUMENT",
      `${has?.what} is set without ${missing}: a client certificate needs both certFile and keyFile`,
    );
  }
  const name = resolved.serverName;
  if (name !== undefined && !/^[A-Za-z0-9._:*-]+$/.test(name.value)) {
    throw new DexError("INVALID_ARGUMENT", `${name.what} '${name.value}' is not a DNS name or an IP address`);
  }
  return resolved;
}

function readPem(setting: Setting): Buffer {
  let data: Buffer;
  try {
    const st = statSync(setting.value);
    if (!st.isFile() || st.size > PEM_FILE_BYTES_MAX) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `${setting.what} '${setting.value}' is not a PEM file (a regular file of at most ${PEM_FILE_BYTES_MAX} bytes)`,
      );
    }
    data = readFileSync(setting.value);
  } catch (error) {
    if (error instanceof DexError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EACCES" ? "permission denied" : String(code ?? error);
    throw new DexError("INVALID_ARGUMENT", `${setting.what}: cannot read '${setting.value}' (${why})`);
  }
  return data;
}

/** The PEM files of one channel, read and checked. */
interface Material {
  ca: Buffer | null;
  cert: Buffer | null;
  key: Buffer | null;
}

/**
 * Reads and checks the files: each readable, the CA file and the certificate
 * PEM certificates, the certificate within its validity, the key unencrypted
 * and the certificate's. Throws a DexError (INVALID_ARGUMENT) naming the
 * option (or its variable) and the file.
 */
function loadMaterial(tls: ResolvedTls, now: Date = new Date()): Material {
  const material: Material = { ca: null, cert: null, key: null };
  if (tls.caFile !== undefined) {
    const ca = readPem(tls.caFile);
    try {
      new X509Certificate(ca);
    } catch {
      throw new DexError("INVALID_ARGUMENT", `${tls.caFile.what} '${tls.caFile.value}' holds no PEM certificate`);
    }
    material.ca = ca;
  }
  if (tls.certFile !== undefined && tls.keyFile !== undefined) {
    const cert = readPem(tls.certFile);
    const key = readPem(tls.keyFile);
    let x509: X509Certificate;
    try {
      x509 = new X509Certificate(cert);
    } catch {
      throw new DexError("INVALID_ARGUMENT", `${tls.certFile.what} '${tls.certFile.value}' holds no PEM certificate`);
    }
    if (now.getTime() > Date.parse(x509.validTo)) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `${tls.certFile.what} '${tls.certFile.value}': the client certificate expired on ${x509.validTo}`,
      );
    }
    if (now.getTime() < Date.parse(x509.validFrom)) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `${tls.certFile.what} '${tls.certFile.value}': the client certificate is not valid before ${x509.validFrom}`,
      );
    }
    let matches: boolean;
    try {
      matches = x509.checkPrivateKey(createPrivateKey(key));
    } catch {
      throw new DexError(
        "INVALID_ARGUMENT",
        `${tls.keyFile.what} '${tls.keyFile.value}' holds no unencrypted PEM private key`,
      );
    }
    if (!matches) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `${tls.keyFile.what} '${tls.keyFile.value}' is not the key of the certificate in ${tls.certFile.what} '${tls.certFile.value}'`,
      );
    }
    material.cert = cert;
    material.key = key;
  }
  return material;
}

/** What a channel is made with: its credentials and the channel options they need. */
export interface ChannelSecurity {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
}

/**
 * One Client's or Worker's channel security. With TLS, forChannel() reads the
 * files again each time (a rotated certificate is used by the next channel),
 * and changed() tells a Client that keeps its channels when to make new ones;
 * after one good read, files that cannot be used (a rotation half written)
 * keep the material read before.
 */
export class TlsConfig {
  readonly tls: ResolvedTls | undefined;
  private last: Material | undefined;
  /** The files' identities (inode, size, modification time) when forChannel last read them. */
  private stamps = "";
  private checkedAt = 0;
  /** The last diagnosis per address, and when it was made. */
  private readonly diagnoses = new Map<string, { at: number; why: string }>();

  constructor(options: TlsOptions, env: NodeJS.ProcessEnv = process.env) {
    this.tls = resolveTls(options, env);
    // The files are checked now, so that a bad one fails before any call.
    if (this.tls !== undefined) this.last = loadMaterial(this.tls);
  }

  get enabled(): boolean {
    return this.tls !== undefined;
  }

  /**
   * Whether a file changed since forChannel last read it: looked at at most
   * once a second. Always false without TLS.
   */
  changed(): boolean {
    if (this.tls === undefined) return false;
    const now = Date.now();
    if (now - this.checkedAt < RECHECK_MS) return false;
    this.checkedAt = now;
    return this.stampOfFiles() !== this.stamps;
  }

  private stampOfFiles(): string {
    const tls = this.tls;
    if (tls === undefined) return "";
    return [tls.caFile, tls.certFile, tls.keyFile]
      .map((setting) => {
        if (setting === undefined) return "-";
        try {
          const st = statSync(setting.value);
          return `${st.ino}:${st.size}:${st.mtimeMs}`;
        } catch {
          return "missing";
        }
      })
      .join(",");
  }

  forChannel(): ChannelSecurity {
    if (this.tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
    this.stamps = this.stampOfFiles();
    this.checkedAt = Date.now();
    let material: Material;
    try {
      material = loadMaterial(this.tls);
      this.last = material;
    } catch (error) {
      if (this.last === undefined) throw error;
      material = this.last;
    }
    const options: grpc.ChannelOptions = {};
    const name = this.tls.serverName?.value;
    if (name !== undefined) {
      options["grpc.ssl_target_name_override"] = name;
      options["grpc.default_authority"] = name;
    }
    return { credentials: grpc.credentials.createSsl(material.ca, material.key, material.cert), options };
  }

  /**
   * Why a connection to `address` that grpc-js reports only as "Failed to
   * connect" failed, found by making one with node's TLS and these options
   * (as the C++ SDK's diagnose_tls does): the server requires or refused the
   * client certificate (gRPC's server closes the connection right after the
   * handshake, with no alert), a handshake failure in OpenSSL's words, or,
   * over plaintext, that the server speaks TLS. "" when nothing answers or
   * nothing is wrong. At most one diagnosis per address every
   * DIAGNOSIS_INTERVAL_MS (`fresh` says whether this one is new); each takes
   * at most `timeoutMs`.
   */
  async diagnose(address: string, timeoutMs: number): Promise<{ why: string; fresh: boolean }> {
    const now = Date.now();
    const cached = this.diagnoses.get(address);
    const before = { why: cached?.why ?? "", fresh: false };
    if (cached !== undefined && now - cached.at < DIAGNOSIS_INTERVAL_MS) return before;
    // Too little time left to find anything: the next failure asks.
    if (timeoutMs < DIAGNOSIS_TIMEOUT_MIN_MS) return before;
    const bound = Math.min(timeoutMs, DIAGNOSIS_TIMEOUT_MS);
    // Stamped now, so that failures meanwhile do not start more of them.
    this.diagnoses.set(address, { at: now, why: before.why });
    const why = await this.probe(address, bound);
    if (why === undefined) {
      // No answer in time: a full wait counts as a diagnosis (nothing to
      // say); one cut short by the caller's deadline does not.
      if (bound < DIAGNOSIS_TIMEOUT_MS) {
        if (cached === undefined) this.diagnoses.delete(address);
        else this.diagnoses.set(address, cached);
        return before;
      }
      this.diagnoses.set(address, { at: now, why: "" });
      return { why: "", fresh: true };
    }
    this.diagnoses.set(address, { at: now, why });
    return { why, fresh: true };
  }

  /** The diagnosis of one connection; undefined when it took longer than `timeoutMs`. */
  private probe(address: string, timeoutMs: number): Promise<string | undefined> {
    const colon = address.lastIndexOf(":");
    const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
    const port = Number(address.slice(colon + 1));
    const tls = this.tls;
    const material = this.last;
    const expected = tls?.serverName?.value ?? host;
    const options: nodeTls.ConnectionOptions = { host, port, ALPNProtocols: ["h2"] };
    if (isIP(expected) === 0) options.servername = expected;
    if (tls === undefined) {
      options.rejectUnauthorized = false;
    } else {
      if (material?.ca) options.ca = material.ca;
      if (material?.cert && material.key) {
        options.cert = material.cert;
        options.key = material.key;
      }
      options.checkServerIdentity = (_name, cert) => nodeTls.checkServerIdentity(expected, cert);
    }
    return new Promise<string | undefined>((resolve) => {
      let settled = false;
      let secure = false;
      const socket = nodeTls.connect(options);
      const finish = (why: string | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.destroy();
        resolve(why);
      };
      const timer = setTimeout(() => finish(undefined), timeoutMs);
      const refusedClient = (detail: string): string =>
        tls?.certFile === undefined
          ? `TLS: the server requires a client certificate (${detail}): set certFile and keyFile ($${TLS_CERT_FILE_ENV}, $${TLS_KEY_FILE_ENV})`
          : `TLS: the server refused this client's certificate in ${tls.certFile.value} (${detail}): it is expired, or not signed by a CA the server trusts`;
      socket.once("secureConnect", () => {
        secure = true;
        if (tls === undefined) {
          finish(`TLS: the server at ${address} speaks TLS: connect with tls ($${TLS_ENV}=1), and caFile for a private CA`);
          return;
        }
        // TLS 1.3: a refused client certificate shows after the handshake.
        // gRPC's server then closes the connection, where one that accepts
        // answers the HTTP/2 preface with its SETTINGS.
        socket.write(HTTP2_PREFACE);
      });
      socket.once("data", () => finish(""));
      // Not once: a socket may emit more than one error, and one without a listener throws.
      socket.on("error", (error: NodeJS.ErrnoException) => {
        const message = error.message;
        if (tls === undefined) return finish("");
        if (/alert/i.test(message)) return finish(refusedClient(`TLS alert: ${message}`));
        if (secure) return finish(refusedClient(`it closed the connection right after the handshake: ${message}`));
        if (["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"].includes(error.code ?? "")) {
          return finish("");
        }
        const hint = tlsFailureHint(message);
        finish(hint !== undefined ? `${hint} (${message})` : `the TLS handshake failed: ${message}`);
      });
      socket.once("close", () => {
        if (tls !== undefined && secure) finish(refusedClient("it closed the connection right after the handshake"));
        else finish("");
      });
    });
  }
}

/** How often changed() looks at the files. */
const RECHECK_MS = 1_000;

/** A diagnosis per address at most this often. */
export const DIAGNOSIS_INTERVAL_MS = 30_000;
/** The longest one diagnosis takes. */
export const DIAGNOSIS_TIMEOUT_MS = 1_000;
/** With less time than this left, no diagnosis is tried. */
const DIAGNOSIS_TIMEOUT_MIN_MS = 100;

/** The client's HTTP/2 connection preface and an empty SETTINGS frame. */
const HTTP2_PREFACE = Buffer.concat([
  Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"),
  Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]),
]);

/**
 * Whether a failed connection with grpc-js's `details` is worth a diagnosis
 * (TlsConfig.diagnose):
 * grpc-js's "Failed to connect" says nothing of why, where a refused
 * connection or a recognised handshake failure already does.
 */
export function wantsDiagnosis(details: string, tlsOn: boolean): boolean {
  const lower = details.toLowerCase();
  if (tlsFailureHint(details) !== undefined) return false;
  if (["econnrefused", "ehostunreach", "enetunreach", "getaddrinfo", "dns resolution", "name resolution"].some((m) => lower.includes(m))) {
    return false;
  }
  if (lower.includes("failed to connect")) return true;
  // Over plaintext, a lost connection is a process going away, not TLS.
  return tlsOn && (lower.includes("connection dropped") || lower.includes("econnreset"));
}
