// Reads what the Step graph and the timeline draw: the run's history, every page (at most
// `maxEvents`), with the Run page's own GetFlowState answer (the phases now, the parents, the last
// failures). A history's sequence numbers have no gaps, so its pages are read four at a time
// (400 events each): a long history loads in about the time of one page (the server compresses
// each answer, and a page of 1,000 events costs it several times what 400 do). When `state`
// changes (the Run page reads it again as new events arrive), the events after the last one held
// are read, at most once a second.
import { useEffect, useMemo, useRef, useState } from "react";
import { getHistoryEvents } from "../../../api/calls";
import { isAbort } from "../../../api/client";
import type { FlowRef, GetFlowStateResponse, HistoryEvent } from "../../../api/types";
import { buildRunModel, type RunModel } from "./runModel";

export const maxEvents = 5000;
const pageSize = 400;
const minIntervalMs = 1000;

/** The events after `held`'s last (all of them when it is empty), up to the cap; `more`: past the cap. */
async function readHistory(
  flow: FlowRef,
  held: HistoryEvent[],
  parallel: number,
  signal: AbortSignal,
): Promise<{ events: HistoryEvent[]; more: boolean }> {
  const events = [...held];
  for (;;) {
    const room = maxEvents - events.length;
    if (room <= 0) return { events, more: true };
    const last = events.length ? Number(events[events.length - 1].seq) : undefined;
    const n = Math.max(1, Math.min(parallel, Math.ceil(room / pageSize)));
    const pages = await Promise.all(
      Array.from({ length: n }, (_, i) => {
        const size = Math.min(pageSize, room - i * pageSize);
        if (size <= 0) return Promise.resolve({ runId: "", events: [] as HistoryEvent[], more: true });
        const from = last === undefined ? i * pageSize - 1 : last + i * pageSize; // events after `from`
        return getHistoryEvents(
          from < 0 ? { flow, afterSeq: "0", fromStart: true, pageSize: size } : { flow, afterSeq: String(from), fromStart: false, pageSize: size },
          signal,
        );
      }),
    );
    // Take the pages while each goes on where the one before ended.
    let done = false;
    for (const p of pages) {
      if (p.events.length === 0) {
        done = !p.more;
        break;
      }
      const prev = events.length ? Number(events[events.length - 1].seq) : -1;
      if (Number(p.events[0].seq) !== prev + 1) break; // not where expected: read on from here
      events.push(...p.events);
      if (!p.more) {
        done = true;
        break;
      }
      if (p.events.length < pageSize) break;
    }
    if (done) return { events, more: false };
  }
}

export interface RunModelState {
  model: RunModel | undefined;
  error: unknown;
}

export function useRunModel(flowId: string, runId: string, state: GetFlowStateResponse | undefined): RunModelState {
  const [events, setEvents] = useState<HistoryEvent[]>();
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState<unknown>();
  const eventsRef = useRef<HistoryEvent[]>([]);
  const lastRead = useRef(0);
  const [tick, setTick] = useState(0);

  // A new state answer asks for the events since, no sooner than a second after the last read.
  useEffect(() => {
    if (events === undefined) return;
    const wait = Math.max(0, lastRead.current + minIntervalMs - Date.now());
    const t = setTimeout(() => setTick((n) => n + 1), wait);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [state]);

  useEffect(() => {
    const ctl = new AbortController();
    lastRead.current = Date.now();
    const held = eventsRef.current;
    readHistory({ flowId, runId }, held, held.length ? 1 : 4, ctl.signal)
      .then((r) => {
        if (ctl.signal.aborted) return;
        eventsRef.current = r.events;
        if (r.events.length !== held.length || tick === 0) setEvents(r.events);
        setTruncated(r.more);
        setError(undefined);
      })
      .catch((e) => {
        if (isAbort(e) || ctl.signal.aborted) return;
        setError(e);
      });
    return () => ctl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [flowId, runId, tick]);

  const model = useMemo(
    () => (events !== undefined ? buildRunModel(events, state, truncated) : undefined),
    [events, state, truncated],
  );
  return { model, error };
}
