// Lays out a GraphView with elkjs (layered, left to right) in a Web Worker, so a large graph
// never blocks the page; answers the nodes' boxes and the edges' routes. No React here: the app's
// first chunk (main.tsx) loads this module to start the Worker before the app's code arrives.
//
// The Worker's script is large (1.6 MB) and its layout code cold the first time: the Worker is
// started as soon as the app knows it shows a run (at startup on a run's URL, else when the Run
// page mounts) and lays out a small graph at once, so that the run's own layout, asked for when
// its history arrives, finds the script loaded and its code compiled. A graph whose nodes and
// edges are those already laid out (the model drawn again with a new state: other phases) keeps
// its layout.
import ELK, { type ElkExtendedEdge, type ElkNode } from "elkjs/lib/elk-api.js";
import elkWorkerUrl from "elkjs/lib/elk-worker.min.js?url";
import type { GraphView } from "./graphView";

export const nodeWidth = 170;
export const nodeHeight = 46;

export interface Layout {
  view: GraphView;
  width: number;
  height: number;
  boxes: Map<string, { x: number; y: number }>;
  routes: Map<string, { x: number; y: number }[]>;
}

const layoutOptions = {
  "elk.algorithm": "layered",
  "elk.direction": "RIGHT",
  "elk.edgeRouting": "POLYLINE",
  "elk.layered.spacing.nodeNodeBetweenLayers": "48",
  "elk.spacing.nodeNode": "18",
  "elk.layered.nodePlacement.strategy": "BRANDES_KOEPF",
  "elk.padding": "[top=12,left=12,bottom=12,right=12]",
};

function elkGraph(nodes: string[], edges: { id: string; from: string; to: string }[]): ElkNode {
  return {
    id: "root",
    layoutOptions,
    children: nodes.map((id) => ({ id, width: nodeWidth, height: nodeHeight })),
    edges: edges.map((e): ElkExtendedEdge => ({ id: e.id, sources: [e.from], targets: [e.to] })),
  };
}

let elk: InstanceType<typeof ELK> | undefined;
// The Worker is a small script that keeps the messages it gets and then loads elkjs' Worker script
// (which answers them): a browser hands a new Worker the messages sent before its script ran only
// once the page's main thread is free again, and elkjs' script takes long enough to run that the
// page is by then busy drawing; this one runs at once. Only the layered algorithm is registered
// (elkjs registers nine by default, each at the Worker's start).
const loader = (script: string) => `"use strict";
const early = [];
self.onmessage = (e) => early.push(e);
setTimeout(() => {
  importScripts(${JSON.stringify(script)});
  const dispatch = self.onmessage; // elkjs' own
  for (const e of early.splice(0)) dispatch(e);
});
`;

function startWorker(): Worker {
  const script = new URL(elkWorkerUrl, window.location.href).href;
  try {
    return new Worker(URL.createObjectURL(new Blob([loader(script)], { type: "text/javascript" })));
  } catch {
    return new Worker(script); // a page that may not start a Worker from a blob: elkjs' script itself
  }
}

const elkOf = () => (elk ??= new ELK({ workerFactory: startWorker, algorithms: ["layered"] }));

/** Starts the layout engine's Worker and warms its layout code with a small graph (once). */
export function preloadElk() {
  if (elk) return;
  const e = elkOf();
  // A start, a fan-out, a chain and a join: the paths a run's graph takes through the layout code.
  const ids = ["s", "a", "b", "c", "d", "e", "f"];
  const edges = [
    ["s", "a"],
    ["s", "b"],
    ["s", "c"],
    ["a", "d"],
    ["b", "d"],
    ["d", "e"],
    ["e", "f"],
    ["c", "f"],
  ].map(([from, to]) => ({ id: `${from}-${to}`, from, to }));
  performance.mark("dex-run:elk-start");
  e.layout(elkGraph(ids, edges)).then(
    () => performance.mark("dex-run:elk-warm"),
    () => undefined,
  );
}

// At startup on a run's URL: before React renders the page.
if (typeof window !== "undefined" && /^\/flows\/[^/]+\/runs\/[^/]+\/?$/.test(window.location.pathname)) preloadElk();

/** What the layout depends on: the nodes' IDs and the edges (their sizes are fixed). */
export function shapeOf(view: GraphView): string {
  return `${view.nodes.map((n) => n.id).join("\u0001")}\u0002${view.edges.map((e) => `${e.id}\u0001${e.from}\u0001${e.to}`).join("\u0001")}`;
}

export interface Laid {
  shape: string;
  width: number;
  height: number;
  boxes: Map<string, { x: number; y: number }>;
  routes: Map<string, { x: number; y: number }[]>;
}

// The layouts asked for, by shape (the last few): asked for as soon as a view is computed, in the
// render that computes it, not after React has drawn the page around it.
const asked = new Map<string, Promise<Laid>>();

export function layoutOf(view: GraphView, shape: string): Promise<Laid> {
  let p = asked.get(shape);
  if (p) return p;
  performance.mark("dex-run:layout-asked");
  p = elkOf()
    .layout(elkGraph(view.nodes.map((n) => n.id), view.edges))
    .then((g) => {
      performance.mark("dex-run:layout");
      const boxes = new Map<string, { x: number; y: number }>();
      for (const c of g.children ?? []) boxes.set(c.id, { x: c.x ?? 0, y: c.y ?? 0 });
      const routes = new Map<string, { x: number; y: number }[]>();
      for (const e of g.edges ?? []) {
        const s = e.sections?.[0];
        if (s) routes.set(e.id, [s.startPoint, ...(s.bendPoints ?? []), s.endPoint]);
      }
      return { shape, width: g.width ?? 0, height: g.height ?? 0, boxes, routes };
    });
  p.catch(() => asked.delete(shape)); // a failed layout is asked for again next time
  asked.set(shape, p);
  while (asked.size > 4) asked.delete(asked.keys().next().value!);
  return p;
}
