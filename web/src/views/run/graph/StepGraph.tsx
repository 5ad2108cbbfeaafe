// The Step graph: the run's executions as nodes (Step type and execution ID, colored by phase),
// an edge from the execution (or RPC) whose decision started one to it; loops and wide fan-outs
// collapse into one node with a count. Laid out by elkjs (layered, left to right), drawn in SVG;
// the wheel and the buttons zoom, dragging pans; a node (mouse, or Tab then Enter) selects its
// execution. A table shows the same as text.
import { useEffect, useMemo, useRef, useState } from "react";
import { Button, Group, SegmentedControl, Switch, Text } from "@mantine/core";
import type { RunModel } from "./runModel";
import { buildGraphView, type GraphNode } from "./graphView";
import { nodeHeight, nodeWidth, useElkLayout } from "./useElkLayout";
import { phaseFill, phaseStroke } from "./phaseColors";
import { GraphTable } from "./GraphTable";
import { GraphLegend } from "./GraphLegend";

const viewHeight = 420;

interface Transform {
  x: number;
  y: number;
  k: number;
}

function nodeAria(n: GraphNode): string {
  if (n.kind === "source") return `${n.label}: started the Steps its edges lead to`;
  if (n.kind === "group")
    return `${n.label}: ${n.members.length} executions of ${n.label.split(" ×")[0]}${n.loop ? ", a loop" : ""}, ${n.sublabel}, ${n.phase}`;
  return `${n.label} ${n.sublabel}, ${n.phase}`;
}

export function StepGraph({
  model,
  stateRead,
  selected,
  onSelect,
  onDrawn,
}: {
  model: RunModel;
  stateRead: boolean;
  selected: string | undefined;
  onSelect: (id: string | undefined, group?: string[]) => void;
  /** Told once the graph is drawn (or its layout failed). */
  onDrawn?: () => void;
}) {
  const [collapse, setCollapse] = useState(model.executions.length > 30);
  const [mode, setMode] = useState<"graph" | "table">("graph");
  const view = useMemo(() => buildGraphView(model, collapse), [model, collapse]);
  const { layout, error } = useElkLayout(view);
  const drawn = layout !== undefined || error !== undefined;
  useEffect(() => {
    if (drawn) onDrawn?.();
  }, [drawn, onDrawn]);
  // The page's figure (tests/web-ui/graph.test.mjs): the frame that first shows the laid-out graph
  // with the state's phases.
  const complete = layout !== undefined && stateRead;
  useEffect(() => {
    if (complete && performance.getEntriesByName("dex-run:drawn").length === 0)
      requestAnimationFrame(() => performance.mark("dex-run:drawn"));
  }, [complete]);
  const [t, setT] = useState<Transform>({ x: 0, y: 0, k: 1 });
  const boxRef = useRef<HTMLDivElement>(null);
  const [width, setWidth] = useState(1000);
  const fitted = useRef<unknown>(undefined);

  useEffect(() => {
    const el = boxRef.current;
    if (!el) return;
    const ro = new ResizeObserver(() => setWidth(el.clientWidth || 1000));
    ro.observe(el);
    setWidth(el.clientWidth || 1000);
    return () => ro.disconnect();
  }, [mode]);

  const fit = () => {
    if (!layout) return;
    const k = Math.min(1, (width - 16) / Math.max(1, layout.width), (viewHeight - 16) / Math.max(1, layout.height));
    const kk = Math.max(k, 0.2);
    setT({ x: 8, y: Math.max(8, (viewHeight - layout.height * kk) / 2), k: kk });
  };
  // A new layout fits the view once (a refresh of a live run keeps the user's pan and zoom).
  useEffect(() => {
    if (layout && fitted.current !== collapse) {
      fitted.current = collapse;
      fit();
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [layout]);

  // The wheel zooms around the pointer (a non-passive listener, so the page does not scroll).
  useEffect(() => {
    const el = boxRef.current;
    if (!el || mode !== "graph") return;
    const onWheel = (e: WheelEvent) => {
      e.preventDefault();
      const r = el.getBoundingClientRect();
      const px = e.clientX - r.left;
      const py = e.clientY - r.top;
      setT((cur) => {
        const k = Math.min(3, Math.max(0.1, cur.k * Math.exp(-e.deltaY * 0.0015)));
        return { k, x: px - ((px - cur.x) * k) / cur.k, y: py - ((py - cur.y) * k) / cur.k };
      });
    };
    el.addEventListener("wheel", onWheel, { passive: false });
    return () => el.removeEventListener("wheel", onWheel);
  }, [mode]);

  const drag = useRef<{ x: number; y: number; moved: boolean } | undefined>(undefined);
  const zoom = (f: number) =>
    setT((cur) => {
      const k = Math.min(3, Math.max(0.1, cur.k * f));
      const cx = width / 2;
      const cy = viewHeight / 2;
      return { k, x: cx - ((cx - cur.x) * k) / cur.k, y: cy - ((cy - cur.y) * k) / cur.k };
    });

  const selectedNode = selected ? view.nodeOf.get(selected) : undefined;
  const choose = (n: GraphNode) => {
    if (n.kind === "execution") onSelect(n.members[0]);
    else if (n.kind === "group") onSelect(n.members[0], n.members);
  };

  return (
    <div>
      <Group justify="space-between" mb="xs" wrap="wrap">
        <Group gap="xs">
          <SegmentedControl
            size="xs"
            value={mode}
            onChange={(v) => setMode(v as "graph" | "table")}
            data={[
              { label: "Graph", value: "graph" },
              { label: "Table", value: "table" },
            ]}
            aria-label="Show the Step graph as"
          />
          <Switch
            size="xs"
            label="Group loops and fan-outs"
            checked={collapse}
            onChange={(e) => setCollapse(e.currentTarget.checked)}
          />
        </Group>
        {mode === "graph" && (
          <Group gap={4}>
            <Button size="compact-xs" variant="default" onClick={() => zoom(1.25)} aria-label="Zoom in">
              +
            </Button>
            <Button size="compact-xs" variant="default" onClick={() => zoom(0.8)} aria-label="Zoom out">
              −
            </Button>
            <Button size="compact-xs" variant="default" onClick={fit}>
              Fit
            </Button>
          </Group>
        )}
      </Group>
      {error !== undefined && (
        <Text c="red.9" size="sm">
          The layout failed: {String(error)}
        </Text>
      )}
      {mode === "table" ? (
        <GraphTable model={model} view={view} onSelect={onSelect} />
      ) : (
        <div
          ref={boxRef}
          data-testid="step-graph"
          data-ready={layout ? "true" : "false"}
          data-state={stateRead ? "true" : "false"}
          data-nodes={view.nodes.length}
          data-edges={view.edges.length}
          style={{
            height: viewHeight,
            border: "1px solid var(--mantine-color-gray-4)",
            borderRadius: 4,
            overflow: "hidden",
            position: "relative",
            cursor: drag.current ? "grabbing" : "grab",
            touchAction: "none",
            background: "var(--mantine-color-gray-0)",
          }}
          onPointerDown={(e) => {
            if ((e.target as Element).closest("[data-testid=graph-node]")) return;
            drag.current = { x: e.clientX, y: e.clientY, moved: false };
            (e.currentTarget as HTMLDivElement).setPointerCapture(e.pointerId);
          }}
          onPointerMove={(e) => {
            const d = drag.current;
            if (!d) return;
            const dx = e.clientX - d.x;
            const dy = e.clientY - d.y;
            d.x = e.clientX;
            d.y = e.clientY;
            d.moved = true;
            setT((cur) => ({ ...cur, x: cur.x + dx, y: cur.y + dy }));
          }}
          onPointerUp={() => (drag.current = undefined)}
        >
          {layout && (
            <svg width="100%" height={viewHeight} role="group" aria-label={`Step graph: ${view.nodes.length} nodes, ${view.edges.length} edges`}>
              <defs>
                <marker id="graph-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
                  <path d="M 0 0 L 10 5 L 0 10 z" fill="#495057" />
                </marker>
              </defs>
              <g transform={`translate(${t.x},${t.y}) scale(${t.k})`}>
                {view.edges.map((e) => {
                  const pts = layout.routes.get(e.id);
                  if (!pts) return null;
                  return (
                    <polyline
                      key={e.id}
                      data-testid="graph-edge"
                      data-from={e.from}
                      data-to={e.to}
                      points={pts.map((p) => `${p.x},${p.y}`).join(" ")}
                      fill="none"
                      stroke="#495057"
                      strokeWidth={1.3}
                      markerEnd="url(#graph-arrow)"
                    />
                  );
                })}
                {view.nodes.map((n) => {
                  const b = layout.boxes.get(n.id);
                  if (!b) return null;
                  const isSel = n.id === selectedNode;
                  return (
                    <g
                      key={n.id}
                      data-testid="graph-node"
                      data-id={n.id}
                      data-kind={n.kind}
                      data-phase={n.phase}
                      data-count={n.members.length}
                      transform={`translate(${b.x},${b.y})`}
                      tabIndex={n.kind === "source" ? -1 : 0}
                      role={n.kind === "source" ? "img" : "button"}
                      aria-label={nodeAria(n)}
                      aria-pressed={n.kind === "source" ? undefined : isSel}
                      style={{ cursor: n.kind === "source" ? "default" : "pointer", outline: "none" }}
                      onClick={() => choose(n)}
                      onKeyDown={(e) => {
                        if (e.key === "Enter" || e.key === " ") {
                          e.preventDefault();
                          choose(n);
                        }
                      }}
                      className="dex-graph-node"
                    >
                      {n.kind === "group" && (
                        <rect x={5} y={5} width={nodeWidth} height={nodeHeight} rx={6} fill={phaseFill[n.phase]} stroke={phaseStroke[n.phase]} />
                      )}
                      <rect
                        width={nodeWidth}
                        height={nodeHeight}
                        rx={n.kind === "source" ? 23 : 6}
                        fill={phaseFill[n.phase]}
                        stroke={isSel ? "#000" : phaseStroke[n.phase]}
                        strokeWidth={isSel ? 3 : 1.5}
                        strokeDasharray={n.kind === "source" ? "5 3" : undefined}
                      />
                      <text x={10} y={19} fontSize={13} fontWeight={600} fill="#212529">
                        {n.loop ? "↻ " : ""}
                        {n.label.length > 22 ? `${n.label.slice(0, 21)}…` : n.label}
                      </text>
                      <text x={10} y={36} fontSize={11} fill="#343a40" fontFamily="monospace">
                        {n.sublabel.length > 26 ? `${n.sublabel.slice(0, 25)}…` : n.sublabel}
                      </text>
                      <title>{nodeAria(n)}</title>
                    </g>
                  );
                })}
              </g>
            </svg>
          )}
        </div>
      )}
      <GraphLegend />
    </div>
  );
}
