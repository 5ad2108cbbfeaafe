// The limits of dex Flows and the checks every builder applies to names,
// durations, counts and Step references before anything reaches the wire.
import { DexError } from "../errors";

// These limits repeat the server's C++ constants (src/flow/flow_rules.h, src/config/config.h;
// docs/flow-rules.md, "Limits"); tests/tools/check_limits.py (CTest check_limits) fails when
// one of them differs from its original, so change both together.
/** docs/api.md, "Flows": the server refuses more with INVALID_ARGUMENT. */
export const FLOW_LIMITS = {
  /**
   * Bytes of one input, output, Channel message, locals or Attribute value: the most any server
   * takes (its values.maxSize, default 64 MiB, is at most 512 MiB and refuses more itself with
   * INVALID_ARGUMENT naming the limit). Values over the server's blob threshold travel as blobs.
   */
  valueBytes: 512 * (1 << 20),
  /** Messages in one publish call or one task result. */
  messagesPerPublish: 1_000,
  /** Bytes of a name: Flow ID and type, Step type, Channel, instance key, condition ID, request ID. */
  nameBytes: 255,
  conditionsPerWait: 100,
  movementsPerDecision: 1_000,
  /** Lock keys of one method or RPC. */
  lockKeysPerMethod: 16,
  /** Attributes (and AttributeMaps) one Flow declares; RPCs one Flow declares. */
  attributesPerFlow: 1_000,
  rpcsPerFlow: 1_000,
  /** Indexed Attributes one Flow declares (src/flow/search_index.h, kIndexedAttributesMax). */
  indexedAttributesPerFlow: 64,
  /** Ten years of 365 days, the longest duration the server takes. */
  maxDurationMs: 10 * 365 * 24 * 3600 * 1000,
} as const;

export function invalid(message: string): DexError {
  return new DexError("INVALID_ARGUMENT", message);
}

/** Throws unless `name` is a valid dex name (1..255 bytes, no control characters). */
export function checkName(name: unknown, what: string): string {
  if (typeof name !== "string" || name === "") throw invalid(`${what} must be a non-empty string`);
  if (Buffer.byteLength(name, "utf8") > FLOW_LIMITS.nameBytes) {
    throw invalid(`${what} '${name.slice(0, 40)}...' is longer than ${FLOW_LIMITS.nameBytes} bytes`);
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) throw invalid(`${what} '${name}' contains a control character`);
  return name;
}

export function checkDuration(ms: unknown, what: string): number {
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) {
    throw invalid(`${what} must be a non-negative number of milliseconds, not ${String(ms)}`);
  }
  if (ms > FLOW_LIMITS.maxDurationMs) throw invalid(`${what} of ${ms} ms is longer than ten years`);
  return Math.round(ms);
}

export function checkCount(n: unknown, what: string): number {
  if (typeof n !== "number" || !Number.isInteger(n) || n < 0 || n > 0xffffffff) {
    throw invalid(`${what} must be a non-negative integer, not ${String(n)}`);
  }
  return n;
}

/** A Step type by name, or the Step itself. */
export type StepRef = string | { readonly type: string };

/** FLOW_LIMITS.valueBytes for messages: "512 MiB". */
export function valueLimitText(): string {
  return `${FLOW_LIMITS.valueBytes / (1 << 20)} MiB`;
}

export function stepTypeOf(ref: StepRef, what: string): string {
  if (typeof ref === "string") return checkName(ref, what);
  if (typeof ref === "object" && ref !== null && typeof ref.type === "string") return checkName(ref.type, what);
  throw invalid(`${what} must be a Step type name or a Step, not ${String(ref)}`);
}
