// Internal: finding the active process of a node among its addresses without
// waiting on one that does not answer (src/sdk/readiness.h in the C++ SDK). A
// frozen process (SIGSTOP, a stalled host) still has its listening socket:
// TCP connects succeed but nothing answers, so every wait on an address is
// bounded. The gRPC health service answers SERVING for "" (the process) and
// for the services of Workers and clients only on the active process.
import * as grpc from "@grpc/grpc-js";

import { channelOptions } from "./proto";
import type { ChannelSecurity } from "./tls";

/** How long a readiness probe waits for an answer. */
export const READINESS_PROBE_TIMEOUT_MS = 1_000;

/**
 * "serving": the active process; "notServing": answered NOT_SERVING (a
 * standby); "answered": answered with an error (no health service): alive;
 * "unreachable": the connection failed at once; "noAnswer": nothing in time
 * (frozen, partitioned, or not known yet).
 */
export type Readiness = "serving" | "notServing" | "answered" | "unreachable" | "noAnswer";

// grpc.health.v1 by hand: HealthCheckRequest { string service = 1; },
// HealthCheckResponse { ServingStatus status = 1; } with SERVING = 1.
function encodeRequest(service: string): Buffer {
  const text = Buffer.from(service, "utf8");
  if (text.length === 0) return Buffer.alloc(0);
  const length: number[] = [];
  let n = text.length;
  while (n >= 0x80) {
    length.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  length.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...length]), text]);
}

function decodeStatus(buffer: Buffer): number {
  let status = 0;
  let i = 0;
  const varint = (): number => {
    let value = 0;
    let shift = 0;
    while (i < buffer.length) {
      const byte = buffer[i++] as number;
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) break;
      shift += 7;
    }
    return value;
  };
  while (i < buffer.length) {
    const key = varint();
    const wire = key & 7;
    if (key >>> 3 === 1 && wire === 0) status = varint();
    else if (wire === 0) varint();
    else if (wire === 2) i += varint();
    else if (wire === 5) i += 4;
    else if (wire === 1) i += 8;
    else break;
  }
  return status;
}

const SERVING = 1;

/** One health check on `client`'s channel, settled by `deadline` (ms since epoch) at the latest. */
export function checkReadiness(
  client: grpc.Client,
  service: string,
  deadline: number,
  calls?: grpc.ClientUnaryCall[],
): Promise<Readiness> {
  return new Promise<Readiness>((resolve) => {
    const call = client.makeUnaryRequest<Buffer, number>(
      "/grpc.health.v1.Health/Check",
      (b: Buffer) => b,
      decodeStatus,
      encodeRequest(service),
      new grpc.Metadata(),
      { deadline },
      (error, status) => {
        if (error === null || error === undefined) {
          resolve(status === SERVING ? "serving" : "notServing");
        } else if (error.code === grpc.status.DEADLINE_EXCEEDED || error.code === grpc.status.CANCELLED) {
          resolve("noAnswer");
        } else if (error.code === grpc.status.UNAVAILABLE) {
          resolve("unreachable");
        } else {
          resolve("answered");
        }
      },
    );
    calls?.push(call);
  });
}

/**
 * Asks every address's gRPC health about `service` at once, over fresh
 * channels. Resolves as soon as one answers SERVING (the others may then still
 * be "noAnswer"), when all have answered, or after `timeoutMs`.
 */
export async function probeReadiness(
  addresses: readonly string[],
  service: string,
  timeoutMs: number = READINESS_PROBE_TIMEOUT_MS,
  security: ChannelSecurity = { credentials: grpc.credentials.createInsecure(), options: {} },
): Promise<Readiness[]> {
  const deadline = Date.now() + timeoutMs;
  const results: Readiness[] = addresses.map(() => "noAnswer");
  const clients = addresses.map(
    (address) => new grpc.Client(address, security.credentials, { ...channelOptions(100, 1_000), ...security.options }),
  );
  const calls: grpc.ClientUnaryCall[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve) => {
      let answered = 0;
      timer = setTimeout(resolve, timeoutMs);
      clients.forEach((client, i) => {
        void checkReadiness(client, service, deadline, calls).then((r) => {
          results[i] = r;
          if (r === "serving" || ++answered === clients.length) resolve();
        });
      });
    });
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    for (const call of calls) call.cancel();
    for (const client of clients) client.close();
  }
  return [...results];
}

/**
 * The order in which to try the addresses after a probe, each group in the
 * rotation that starts at `first`: SERVING, then answered otherwise, then
 * unreachable (they fail at once). Those that did not answer come last, and
 * only when no address answered at all; otherwise they are skipped this round.
 */
export function searchOrder(readiness: readonly Readiness[], first: number): number[] {
  const n = readiness.length;
  const groups: Record<Readiness, number[]> = {
    serving: [],
    notServing: [],
    answered: [],
    unreachable: [],
    noAnswer: [],
  };
  for (let k = 0; k < n; k++) {
    const i = (first + k) % n;
    groups[readiness[i] as Readiness].push(i);
  }
  const answered = [...groups.notServing, ...groups.answered].sort(
    (a, b) => ((a - first + n) % n) - ((b - first + n) % n),
  );
  const order = [...groups.serving, ...answered, ...groups.unreachable];
  if (groups.serving.length === 0 && answered.length === 0) order.push(...groups.noAnswer);
  return order;
}
