// Lays out a GraphView with elkjs (layered, left to right) in a Web Worker, so a large graph
// never blocks the page; answers the nodes' boxes and the edges' routes.
import { useEffect, useState } from "react";
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

let elk: InstanceType<typeof ELK> | undefined;
const elkOf = () => (elk ??= new ELK({ workerUrl: elkWorkerUrl }));

/** Starts the layout engine's Worker (it loads its 1.6 MB script) before the first layout. */
export function preloadElk() {
  elkOf();
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

export function useElkLayout(view: GraphView | undefined): { layout: Layout | undefined; error: unknown } {
  const [layout, setLayout] = useState<Layout>();
  const [error, setError] = useState<unknown>();
  useEffect(() => {
    if (!view) return;
    let stale = false;
    const graph: ElkNode = {
      id: "root",
      layoutOptions,
      children: view.nodes.map((n) => ({ id: n.id, width: nodeWidth, height: nodeHeight })),
      edges: view.edges.map((e): ElkExtendedEdge => ({ id: e.id, sources: [e.from], targets: [e.to] })),
    };
    elkOf()
      .layout(graph)
      .then((g) => {
        if (stale) return;
        const boxes = new Map<string, { x: number; y: number }>();
        for (const c of g.children ?? []) boxes.set(c.id, { x: c.x ?? 0, y: c.y ?? 0 });
        const routes = new Map<string, { x: number; y: number }[]>();
        for (const e of g.edges ?? []) {
          const s = e.sections?.[0];
          if (s) routes.set(e.id, [s.startPoint, ...(s.bendPoints ?? []), s.endPoint]);
        }
        setLayout({ view, width: g.width ?? 0, height: g.height ?? 0, boxes, routes });
        setError(undefined);
      })
      .catch((e) => !stale && setError(e));
    return () => {
      stale = true;
    };
  }, [view]);
  return { layout: layout?.view === view ? layout : undefined, error };
}
