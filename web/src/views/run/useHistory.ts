// A run's history for the Run view, read once and shared by the history list, the Step graph and
// the timeline: the whole history (at most `maxEvents`, in parallel pages; started before the app
// rendered when it opened on this run's URL), later events past that cap on request, and while the
// run runs a WaitForHistoryEvent long poll that appends each new event as it is written.
import { useCallback, useEffect, useRef, useState } from "react";
import { useDocumentVisibility } from "@mantine/hooks";
import { waitForHistoryEvent } from "../../api/calls";
import { isAbort } from "../../api/client";
import type { HistoryEvent } from "../../api/types";
import { maxEvents, readHistory, takeEarly } from "./runCalls";

const morePerRead = 1000;
const pollTimeoutMs = "30000";
const retryDelayMs = 2000;

export type LiveState = "off" | "live" | "retrying";

export interface History {
  events: HistoryEvent[];
  /** The first read answered (`events` is the history as far as it was read). */
  loaded: boolean;
  /** The server holds events after the last one read (past the cap): `loadMore` reads them. */
  more: boolean;
  loading: boolean;
  error: unknown;
  live: LiveState;
  loadMore: () => void;
}

function append(events: HistoryEvent[], add: HistoryEvent[]): HistoryEvent[] {
  const last = events.length ? Number(events[events.length - 1].seq) : -1;
  const fresh = add.filter((e) => Number(e.seq) > last);
  return fresh.length ? [...events, ...fresh] : events;
}

const hasClose = (events: HistoryEvent[]) => events.some((e) => e.kind === "FLOW_CLOSED");

/** Where the next read starts: after the last event held, or (none yet) from the first, seq 0. */
function after(events: HistoryEvent[]): { afterSeq: string; fromStart: boolean } {
  return events.length
    ? { afterSeq: events[events.length - 1].seq, fromStart: false }
    : { afterSeq: "0", fromStart: true };
}

/**
 * `follow`: poll for new events (the run is RUNNING). `onNew` is told when the poll appended
 * events, so the view can read the run's summary and state again.
 */
export function useHistory(flowId: string, runId: string, follow: boolean, onNew: () => void): History {
  const [events, setEvents] = useState<HistoryEvent[]>([]);
  const [loaded, setLoaded] = useState(false);
  const [more, setMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>();
  const [live, setLive] = useState<LiveState>("off");
  const eventsRef = useRef(events);
  eventsRef.current = events;
  const onNewRef = useRef(onNew);
  onNewRef.current = onNew;
  // Once the run was seen RUNNING, follow it until its FLOW_CLOSED event is read: a summary that
  // already says the run closed must not stop the poll before the last events arrive.
  const [following, setFollowing] = useState(false);
  const [closedSeen, setClosedSeen] = useState(false);
  useEffect(() => {
    if (follow) setFollowing(true);
  }, [follow]);

  useEffect(() => {
    const ctl = new AbortController();
    setEvents([]);
    setLoaded(false);
    setMore(false);
    setLoading(true);
    setError(undefined);
    setClosedSeen(false);
    const flow = { flowId, runId };
    (takeEarly("history", flowId, runId) ?? readHistory(flow, [], maxEvents, ctl.signal))
      .then((r) => {
        if (ctl.signal.aborted) return;
        performance.mark("dex-run:history");
        eventsRef.current = r.events;
        setEvents(r.events);
        if (hasClose(r.events)) setClosedSeen(true);
        setMore(r.more);
        setLoaded(true);
        setLoading(false);
      })
      .catch((e) => {
        if (isAbort(e) || ctl.signal.aborted) return;
        setError(e);
        setLoading(false);
      });
    return () => ctl.abort();
  }, [flowId, runId]);

  const loadMore = useCallback(() => {
    const cur = eventsRef.current;
    setLoading(true);
    readHistory({ flowId, runId }, cur, cur.length + morePerRead, undefined, 2)
      .then((r) => {
        const next = append(eventsRef.current, r.events.slice(cur.length));
        eventsRef.current = next;
        setEvents(next);
        if (hasClose(r.events)) setClosedSeen(true);
        setMore(r.more);
        setLoaded(true);
        setError(undefined);
      })
      .catch((e) => setError(e))
      .finally(() => setLoading(false));
  }, [flowId, runId]);

  // A hidden tab stops polling and catches up when shown again: a browser opens at most 6
  // connections to one host, and every open live page would otherwise hold one.
  const visible = useDocumentVisibility() === "visible";
  const canFollow = following && visible && loaded && !loading && !more && error === undefined && !closedSeen;
  useEffect(() => {
    if (!canFollow) {
      setLive("off");
      return;
    }
    const ctl = new AbortController();
    const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));
    (async () => {
      setLive("live");
      while (!ctl.signal.aborted) {
        try {
          const r = await waitForHistoryEvent(
            { flow: { flowId, runId }, ...after(eventsRef.current), timeoutMs: pollTimeoutMs },
            ctl.signal,
          );
          setLive("live");
          if (r.events.length) {
            const next = append(eventsRef.current, r.events);
            eventsRef.current = next;
            setEvents(next);
            onNewRef.current();
            if (hasClose(r.events)) {
              setClosedSeen(true);
              return;
            }
          }
        } catch (e) {
          if (isAbort(e) || ctl.signal.aborted) return;
          setLive("retrying");
          await sleep(retryDelayMs);
        }
      }
    })();
    return () => ctl.abort();
  }, [canFollow, flowId, runId]);

  return { events, loaded, more, loading, error, live, loadMore };
}
