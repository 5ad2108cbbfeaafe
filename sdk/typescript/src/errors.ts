// Errors of the SDK: DexError for everything the server (or the search for
// it) answers, and how a gRPC failure becomes one. (A Step fails an attempt
// on purpose with flow/task-error.ts's TaskError.)
import { status as GrpcStatus } from "@grpc/grpc-js";

/** The gRPC status code names, as dex's docs and dexcli write them. */
export type DexErrorCode =
  | "OK"
  | "CANCELLED"
  | "UNKNOWN"
  | "INVALID_ARGUMENT"
  | "DEADLINE_EXCEEDED"
  | "NOT_FOUND"
  | "ALREADY_EXISTS"
  | "PERMISSION_DENIED"
  | "RESOURCE_EXHAUSTED"
  | "FAILED_PRECONDITION"
  | "ABORTED"
  | "OUT_OF_RANGE"
  | "UNIMPLEMENTED"
  | "INTERNAL"
  | "UNAVAILABLE"
  | "DATA_LOSS"
  | "UNAUTHENTICATED";

const CODE_NAMES: readonly DexErrorCode[] = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
];

/** "NOT_FOUND" for 5, ...; "UNKNOWN" for a number gRPC does not define. */
export function grpcCodeName(code: number): DexErrorCode {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

export interface DexErrorOptions {
  /** The address whose answer this is, when one address gave it. */
  address?: string;
  cause?: unknown;
}

/**
 * A call that failed. `message` is "<CODE>: <what happened>", e.g.
 * "NOT_FOUND: no flow with ID f-1" or "UNAVAILABLE: the server is not
 * reachable at 127.0.0.1:8801 (...)", so that it can be printed as it is.
 * `code` is the gRPC code name, `details` the text after it (the server's own
 * message where the server answered).
 */
export class DexError extends Error {
  readonly code: DexErrorCode;
  readonly details: string;
  readonly address: string | undefined;

  constructor(code: DexErrorCode, details: string, options: DexErrorOptions = {}) {
    super(`${code}: ${details}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "DexError";
    this.code = code;
    this.details = details;
    this.address = options.address;
  }

  /** The numeric gRPC status code. */
  get grpcCode(): number {
    const index = CODE_NAMES.indexOf(this.code);
    return index < 0 ? GrpcStatus.UNKNOWN : index;
  }

  /**
   * True for answers that a retry may change: the server was not reachable or
   * not the active process (UNAVAILABLE), the deadline passed, or it was busy.
   */
  get transient(): boolean {
    return (
      this.code === "UNAVAILABLE" ||
      this.code === "DEADLINE_EXCEEDED" ||
      this.code === "RESOURCE_EXHAUSTED" ||
      this.code === "ABORTED"
    );
  }
}

/** gRPC's own words for a connection that could not be made or was lost. */
const CONNECTION_FAILURE_MARKERS = [
  "no connection established",
  "failed to connect",
  "connection refused",
  "econnrefused",
  "econnreset",
  "connection dropped",
  "connection reset",
  "socket closed",
  "dns resolution failed",
  "name resolution",
  "getaddrinfo",
  "connect failed",
  "ehostunreach",
  "enetunreach",
  "no route to host",
  "network is unreachable",
  "call cancelled because the channel",
  // grpc-js reports a connection that the server's death reset as INTERNAL
  // with these words: the client made them, not the server.
  "triggered by internal client error",
  "session closed with error code",
];

/**
 * True when an UNAVAILABLE message is gRPC's own words for a connection that
 * could not be made or was lost, as opposed to a process that answered
 * UNAVAILABLE (a standby, a process starting up or shutting down).
 */
export function isConnectionFailure(details: string): boolean {
  const lower = details.toLowerCase();
  return lower === "" || CONNECTION_FAILURE_MARKERS.some((marker) => lower.includes(marker));
}

/** grpc-js's words for an HTTP/2 stream it reset itself because the connection broke. */
export function isClientSideConnectionLoss(details: string): boolean {
  const lower = details.toLowerCase();
  return lower.includes("triggered by internal client error") || lower.includes("session closed with error code");
}

/**
 * What a TLS handshake failure that grpc-js reports (the handshake's reason
 * inside an UNAVAILABLE's details) means for the caller, with the option to
 * look at; undefined when `details` is not one.
 */
export function tlsFailureHint(details: string): string | undefined {
  const lower = details.toLowerCase();
  const has = (...markers: string[]): boolean => markers.some((m) => lower.includes(m));
  if (has("alert certificate required")) {
    return "TLS: the server requires a client certificate (set certFile and keyFile)";
  }
  if (has("alert certificate expired")) return "TLS: the server refused this client's certificate: it has expired";
  if (has("alert unknown ca", "alert bad certificate", "alert certificate unknown", "alert handshake failure")) {
    return "TLS: the server refused this client's certificate (is it signed by a CA the server trusts?)";
  }
  if (has("certificate has expired")) return "TLS: the server's certificate has expired";
  if (has("certificate is not yet valid")) return "TLS: the server's certificate is not valid yet";
  if (
    has(
      "unable to verify the first certificate",
      "unable to get local issuer certificate",
      "unable to get issuer certificate",
      "self-signed certificate",
      "self signed certificate",
      "certificate signature failure",
    )
  ) {
    return "TLS: the server's certificate is not signed by the CA in caFile (or, without caFile, by a CA the system trusts)";
  }
  if (has("does not match certificate's altnames", "err_tls_cert_altname_invalid")) {
    return "TLS: the server's certificate is not for the name dialled (set serverName to a name it holds, or dial that name)";
  }
  if (has("wrong version number", "packet length too long", "http request", "unknown protocol")) {
    return "TLS: the server does not speak TLS (connect without tls)";
  }
  return undefined;
}

/** "250ms", "10s", "2m", "1m30s" like dex's durations. */
export function formatDuration(ms: number): string {
  const whole = Math.max(0, Math.round(ms));
  if (whole < 1000) return `${whole}ms`;
  if (whole % 1000 !== 0) return `${whole / 1000}s`;
  const seconds = whole / 1000;
  if (seconds < 60) return `${seconds}s`;
  if (seconds % 60 === 0) return `${seconds / 60}m`;
  return `${Math.floor(seconds / 60)}m${seconds % 60}s`;
}

/** A failed gRPC call as a DexError naming the address when it was not reachable. */
export function errorFromGrpc(
  error: { code?: number; details?: string; message?: string },
  address: string,
  timeoutMs: number,
): DexError {
  const raw = error.details ?? error.message ?? "";
  let code = grpcCodeName(error.code ?? GrpcStatus.UNKNOWN);
  // A connection lost under the call, which grpc-js may report as INTERNAL
  // (an RST_STREAM it made itself), is UNAVAILABLE: the server did not answer.
  if (code === "INTERNAL" && isClientSideConnectionLoss(raw)) code = "UNAVAILABLE";
  let details: string;
  const tlsHint = code === "UNAVAILABLE" ? tlsFailureHint(raw) : undefined;
  if (tlsHint !== undefined) {
    details = `the TLS handshake with ${address} failed: ${tlsHint} (${raw})`;
  } else if (code === "UNAVAILABLE") {
    details = isConnectionFailure(raw)
      ? `the server is not reachable at ${address} (${raw === "" ? "no connection" : raw})`
      : `the server at ${address} is not serving: ${raw}`;
  } else if (code === "DEADLINE_EXCEEDED") {
    details = `no answer from ${address} within ${formatDuration(timeoutMs)} (${raw})`;
  } else {
    details = raw === "" ? "(no message)" : raw;
  }
  return new DexError(code, details, { address, cause: error });
}
