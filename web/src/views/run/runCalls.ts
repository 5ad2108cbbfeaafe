// The Run view's reads: the whole history in parallel pages, and an early start of the page's
// three reads (DescribeFlow, GetFlowState, the history) when the app is opened on a run's URL,
// before React has rendered anything, so the answers are on their way while the app starts.
import { describeFlow, getFlowState, getHistoryEvents } from "../../api/calls";
import { call } from "../../api/client";
import type { Attribute, FlowDescription, FlowRef, GetFlowStateResponse, HistoryEvent } from "../../api/types";

/** The most events the page reads at once (the graph, the timeline and the list share them). */
export const maxEvents = 5000;
/**
 * The size of one history page: the server's most, 1,000 events (docs/api.md). A history's
 * sequence numbers have no gaps, so two pages are asked for at once, the second after where the
 * first will end (two of 1,000 answered sooner than four of 500 on this 2-vCPU machine: 617-722
 * against 756-842 ms for a history of 1,558 events, medians of 8-10 loads at a load of 6 per CPU).
 */
export const historyPageSize = 1000;
const parallelPages = 2;

export interface HistoryRead {
  events: HistoryEvent[];
  /** The server holds more events than were read (past `limit`). */
  more: boolean;
}

/**
 * The events after `held`'s last (from the first when it is empty), at most `limit` in all
 * (`held` included), read `parallel` pages at a time.
 */
export async function readHistory(
  flow: FlowRef,
  held: HistoryEvent[],
  limit: number,
  signal?: AbortSignal,
  parallel = parallelPages,
): Promise<HistoryRead> {
  const events = [...held];
  for (;;) {
    const room = limit - events.length;
    if (room <= 0) return { events, more: true };
    const last = events.length ? Number(events[events.length - 1].seq) : undefined;
    const n = Math.max(1, Math.min(parallel, Math.ceil(room / historyPageSize)));
    const pages = await Promise.all(
      Array.from({ length: n }, (_, i) => {
        const size = Math.min(historyPageSize, room - i * historyPageSize);
        const from = last === undefined ? i * historyPageSize - 1 : last + i * historyPageSize; // events after `from`
        return getHistoryEvents(
          from < 0
            ? { flow, afterSeq: "0", fromStart: true, pageSize: size }
            : { flow, afterSeq: String(from), fromStart: false, pageSize: size },
          signal,
        );
      }),
    );
    // Take the pages while each goes on where the one before ended; a page that ended early (the
    // server's answer budget) leaves the rest to the next round.
    let done = false;
    for (const p of pages) {
      if (p.events.length === 0) {
        done = !p.more;
        break;
      }
      const prev = events.length ? Number(events[events.length - 1].seq) : -1;
      if (Number(p.events[0].seq) !== prev + 1) break;
      events.push(...p.events);
      if (!p.more) {
        done = true;
        break;
      }
      if (p.events.length < historyPageSize) break;
    }
    if (done) return { events, more: false };
  }
}

// ------------------------------------------------------------------ the early start

interface Early {
  key: string;
  describe: Promise<FlowDescription>;
  state: Promise<GetFlowStateResponse>;
  history: Promise<HistoryRead>;
  taken: Set<string>;
}

let early: Early | undefined;
const runRoute = /^\/flows\/([^/]+)\/runs\/([^/]+)\/?$/;
const keyOf = (flowId: string, runId: string) => `${flowId}\u0000${runId}`;
const quiet = <T,>(p: Promise<T>) => {
  p.catch(() => undefined); // taken later, or never: an unused failure is not an unhandled one
  return p;
};

/** Starts the Run page's reads when the app opens on a run's URL (called once, at startup). */
export function startEarly(pathname: string): void {
  const m = runRoute.exec(pathname);
  if (!m) return;
  let flow: FlowRef;
  try {
    flow = { flowId: decodeURIComponent(m[1]), runId: decodeURIComponent(m[2]) };
  } catch {
    return; // not a run's URL the router would take either
  }
  if (!flow.flowId || !flow.runId) return;
  performance.mark("dex-run:start");
  early = {
    key: keyOf(flow.flowId, flow.runId),
    history: quiet(readHistory(flow, [], maxEvents)),
    describe: quiet(describeFlow(flow)),
    state: quiet(getFlowState(flow)),
    taken: new Set(),
  };
  // Not taken within 10 s (the page went elsewhere): let it go.
  setTimeout(() => (early = undefined), 10_000);
}

/** The early read of `what` for this run, once; undefined when there is none (read it now). */
export function takeEarly(what: "describe", flowId: string, runId: string): Promise<FlowDescription> | undefined;
export function takeEarly(what: "state", flowId: string, runId: string): Promise<GetFlowStateResponse> | undefined;
export function takeEarly(what: "history", flowId: string, runId: string): Promise<HistoryRead> | undefined;
export function takeEarly(what: "describe" | "state" | "history", flowId: string, runId: string): Promise<unknown> | undefined {
  if (!early || early.key !== keyOf(flowId, runId) || early.taken.has(what)) return undefined;
  early.taken.add(what);
  return early[what];
}

if (typeof window !== "undefined") startEarly(window.location.pathname);

// ------------------------------------------------------------------ values left out of GetFlowState

/**
 * GetAttributes for the given keys (an AttributeMap's key: every instance): a value GetFlowState
 * left out, its size past the answer's budget (docs/api.md).
 */
export const getAttributes = (req: { flow: FlowRef; keys: string[] }, signal?: AbortSignal) =>
  call<{ runId: string; attributes: Attribute[] }>("dex.FlowService", "GetAttributes", req, signal);
