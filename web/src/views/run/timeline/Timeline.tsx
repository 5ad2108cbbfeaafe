// The timeline: a row per Step execution, on one time axis from the run's start to its close (or
// now), a bar per WaitFor and Execute attempt colored by outcome (a retried method's failed
// attempts apart from its last), the wait between them (a Timer's wait hatched), the bar under
// way drawn to now. Hovering or focusing a bar (Tab) says its times and error; Enter selects its
// execution. A table shows the same as text.
import { useEffect, useMemo, useRef, useState } from "react";
import { Group, SegmentedControl, Text } from "@mantine/core";
import type { RunModel } from "../graph/runModel";
import { modelEnd } from "../graph/runModel";
import { outcomeFill, outcomeName } from "../graph/phaseColors";
import { formatDuration, formatTime } from "../../../format";
import { executionBars, type Bar } from "./bars";
import { TimelineTable } from "./TimelineTable";
import { TimelineLegend } from "./TimelineLegend";

const rowHeight = 20;
const labelWidth = 170;
const chartWidth = 1000; // the SVG's own units; it scales to the page's width
const viewHeight = 440;
const overscan = 10;

export function barText(b: Bar, runStart: number): string {
  const what = b.kind === "wait" ? b.label : `${b.label}: ${b.kind === "backoff" ? outcomeName.backoff : outcomeName[b.outcome as keyof typeof outcomeName] ?? b.outcome}`;
  const times = `${formatTime(b.start)} to ${b.open ? "now" : formatTime(b.end)} UTC (+${formatDuration(b.start - runStart)}, ${formatDuration(b.end - b.start)})`;
  return `${what}; ${times}${b.error ? `; error: ${b.error}` : ""}`;
}

function ticks(span: number): number[] {
  const steps = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 30000, 60000, 120000, 300000, 600000, 900000, 1800000, 3600000, 7200000, 21600000, 43200000, 86400000];
  const step = steps.find((s) => span / s <= 8) ?? span / 8;
  const out: number[] = [];
  for (let t = 0; t <= span; t += step) out.push(t);
  return out;
}

export function Timeline({
  model,
  selected,
  onSelect,
  now,
}: {
  model: RunModel;
  selected: string | undefined;
  onSelect: (id: string) => void;
  now: number;
}) {
  const [mode, setMode] = useState<"chart" | "table">("chart");
  const [tip, setTip] = useState<{ text: string; x: number; y: number } | undefined>();
  const start = model.runStart;
  const end = Math.max(modelEnd(model, now), start + 1);
  const span = end - start;
  const rows = useMemo(() => model.executions.map((x) => ({ x, bars: executionBars(x, now) })), [model, now]);
  const sx = (t: number) => ((t - start) / span) * chartWidth;
  // Only the rows in view (and a few around them) are drawn: a run of thousands stays fast.
  const [scrollTop, setScrollTop] = useState(0);
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - overscan);
  const last = Math.min(rows.length, Math.ceil((scrollTop + viewHeight) / rowHeight) + overscan);
  const shown = rows.slice(first, last);
  const height = shown.length * rowHeight;
  const scroller = useRef<HTMLDivElement>(null);

  // An execution selected in the graph scrolls its row into view.
  useEffect(() => {
    const el = scroller.current;
    if (!el || selected === undefined) return;
    const i = rows.findIndex((r) => r.x.id === selected);
    if (i < 0) return;
    const top = i * rowHeight;
    if (top < el.scrollTop || top + rowHeight > el.scrollTop + el.clientHeight)
      el.scrollTop = Math.max(0, top - el.clientHeight / 2);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [selected]);

  const show = (b: Bar, el: Element) => {
    const r = el.getBoundingClientRect();
    const box = el.closest("[data-timeline-box]")!.getBoundingClientRect();
    setTip({ text: barText(b, start), x: Math.min(r.left - box.left, box.width - 360), y: r.bottom - box.top + 4 });
  };

  return (
    <div>
      <Group justify="space-between" mb="xs">
        <SegmentedControl
          size="xs"
          value={mode}
          onChange={(v) => setMode(v as "chart" | "table")}
          data={[
            { label: "Chart", value: "chart" },
            { label: "Table", value: "table" },
          ]}
          aria-label="Show the timeline as"
        />
        <Text size="xs" c="dimmed">
          {formatTime(start)} UTC, {formatDuration(span)} in all
        </Text>
      </Group>
      {mode === "table" ? (
        <TimelineTable rows={rows} runStart={start} onSelect={onSelect} />
      ) : (
        <div data-timeline-box style={{ position: "relative" }} onMouseLeave={() => setTip(undefined)}>
          <div style={{ display: "flex", borderBottom: "1px solid var(--mantine-color-gray-4)" }}>
            <div style={{ width: labelWidth, flex: "none" }} />
            <div style={{ flex: 1, height: 18, position: "relative" }} aria-hidden>
              {ticks(span).map((t) => (
                <span
                  key={t}
                  style={{
                    position: "absolute",
                    left: `${(t / span) * 100}%`,
                    transform: t === 0 ? undefined : "translateX(-50%)",
                    fontSize: 11,
                    color: "#343a40",
                    whiteSpace: "nowrap",
                  }}
                >
                  +{formatDuration(t)}
                </span>
              ))}
            </div>
          </div>
          <div
            data-testid="timeline"
            data-ready="true"
            data-rows={rows.length}
            data-first={first}
            ref={scroller}
            style={{ maxHeight: viewHeight, overflowY: "auto" }}
            role="group"
            aria-label={`Timeline: ${rows.length} Step executions`}
            onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
          >
            <div style={{ height: rows.length * rowHeight, position: "relative" }}>
              <div style={{ position: "absolute", top: first * rowHeight, left: 0, right: 0, display: "flex" }}>
                <div style={{ width: labelWidth, flex: "none" }}>
                  {shown.map(({ x }) => (
                    <div
                      key={x.id}
                      style={{
                        height: rowHeight,
                        fontSize: 12,
                        lineHeight: `${rowHeight}px`,
                        fontFamily: "monospace",
                        whiteSpace: "nowrap",
                        overflow: "hidden",
                        textOverflow: "ellipsis",
                        fontWeight: x.id === selected ? 700 : 400,
                        background: x.id === selected ? "var(--mantine-color-yellow-1)" : undefined,
                      }}
                      title={x.id}
                    >
                      {x.id}
                    </div>
                  ))}
                </div>
                <svg
                  viewBox={`-4 0 ${chartWidth + 8} ${height}`}
                  preserveAspectRatio="none"
                  style={{ flex: 1, height, display: "block" }}
                >
                  <defs>
                    <pattern id="timeline-timer" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">
                      <rect width="6" height="6" fill="#fff3bf" />
                      <line x1="0" y1="0" x2="0" y2="6" stroke="#e67700" strokeWidth="3" />
                    </pattern>
                  </defs>
                  {ticks(span).map((t) => (
                    <line key={t} x1={sx(start + t)} x2={sx(start + t)} y1={0} y2={height} stroke="#e9ecef" vectorEffect="non-scaling-stroke" />
                  ))}
                  {shown.map(({ x, bars }, i) => (
                    <g key={x.id} data-testid="timeline-row" data-id={x.id} transform={`translate(0,${i * rowHeight})`}>
                      {x.id === selected && <rect x={-4} width={chartWidth + 8} height={rowHeight} fill="#fff9db" />}
                      {bars.map((b) => {
                        const x0 = sx(b.start);
                        const w = Math.max(sx(b.end) - x0, 1.5);
                        const isWait = b.kind === "wait";
                        const fill =
                          b.outcome === "timer" ? "url(#timeline-timer)" : b.outcome === "waiting" ? "#fff3bf" : outcomeFill[b.outcome];
                        return (
                          <rect
                            key={b.key}
                            className="dex-timeline-bar"
                            data-testid="timeline-bar"
                            data-kind={b.kind}
                            data-method={b.method}
                            data-outcome={b.outcome}
                            data-attempts={b.attempts}
                            data-retried={b.retried ? "true" : "false"}
                            x={x0}
                            y={isWait ? 7 : 3}
                            width={w}
                            height={isWait ? 6 : 14}
                            rx={1}
                            fill={fill}
                            stroke={b.kind === "backoff" ? "#c92a2a" : isWait ? "#a06d00" : "none"}
                            strokeDasharray={b.kind === "backoff" ? "3 2" : undefined}
                            vectorEffect="non-scaling-stroke"
                            tabIndex={0}
                            role="img"
                            aria-label={`${x.id}: ${barText(b, start)}`}
                            onMouseEnter={(e) => show(b, e.currentTarget)}
                            onFocus={(e) => show(b, e.currentTarget)}
                            onBlur={() => setTip(undefined)}
                            onClick={() => onSelect(x.id)}
                            onKeyDown={(e) => {
                              if (e.key === "Enter" || e.key === " ") {
                                e.preventDefault();
                                onSelect(x.id);
                              }
                            }}
                            style={{ cursor: "pointer" }}
                          />
                        );
                      })}
                    </g>
                  ))}
                </svg>
              </div>
            </div>
          </div>
          {tip && (
            <div
              role="tooltip"
              data-testid="timeline-tooltip"
              style={{
                position: "absolute",
                left: Math.max(0, tip.x),
                top: tip.y,
                maxWidth: 360,
                background: "#212529",
                color: "#fff",
                fontSize: 12,
                padding: "4px 8px",
                borderRadius: 4,
                pointerEvents: "none",
                zIndex: 5,
              }}
            >
              {tip.text}
            </div>
          )}
        </div>
      )}
      <TimelineLegend />
    </div>
  );
}
