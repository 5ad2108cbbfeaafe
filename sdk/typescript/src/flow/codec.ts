// Values on the wire: inputs, outputs and locals are JSON; a Channel's
// messages use its codec (JSON unless it was given another). Both travel as
// Payloads: bytes, empty for null.
import type { WirePayload } from "../proto";
import { FLOW_LIMITS, valueLimitText } from "./checks";
import { describeError, TaskError } from "./task-error";

/** JSON as it travels: anything JSON.stringify turns into text and JSON.parse back. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** How a Channel's messages become bytes and back. */
export interface Codec<T> {
  encode(value: T): Uint8Array;
  decode(data: Uint8Array): T;
}

const EMPTY = Buffer.alloc(0);

/** JSON text (UTF-8); null and undefined are the empty payload, which decodes to null. */
export const jsonCodec: Codec<unknown> = {
  encode(value: unknown): Uint8Array {
    if (value === undefined || value === null) return EMPTY;
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError(`a ${typeof value} is not JSON-serializable`);
    return Buffer.from(text, "utf8");
  },
  decode(data: Uint8Array): unknown {
    if (data.length === 0) return null;
    return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8")) as unknown;
  },
};

/** A value as a Payload, within FLOW_LIMITS.valueBytes (`what` names it in errors). */
export function toPayload(value: unknown, what: string, codec: Codec<unknown> = jsonCodec): WirePayload {
  let data: Uint8Array;
  try {
    data = codec.encode(value);
  } catch (error) {
    throw new TaskError(`${what} cannot be encoded: ${describeError(error)}`, { nonRetryable: true, cause: error });
  }
  if (data.length > FLOW_LIMITS.valueBytes) {
    throw new TaskError(
      `${what} is ${data.length} bytes encoded; the limit is ${FLOW_LIMITS.valueBytes} bytes (${valueLimitText()})`,
      { nonRetryable: true },
    );
  }
  return { data: Buffer.from(data.buffer, data.byteOffset, data.byteLength) };
}

/** A Payload as a value: JSON by default; empty is null. */
export function fromPayload(payload: WirePayload | null | undefined, codec: Codec<unknown> = jsonCodec): unknown {
  const data = payload?.data ?? EMPTY;
  return codec.decode(data);
}
