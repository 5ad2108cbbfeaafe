// The Step graph's nodes and edges from a RunModel: one node per execution, an edge from the
// execution (or RPC, or the timeout handler) whose decision started it to the new one. With
// `collapse`, a loop's run of executions of one type (each started by the one before) keeps its
// first and last and shows those between as one node with their count, and many executions of
// one type started together that started nothing (a fan-out) show as one node with their count,
// so that a run of a few hundred executions stays readable.
import type { Execution, Phase, RunModel } from "./runModel";

export interface GraphNode {
  id: string;
  kind: "execution" | "group" | "source";
  label: string; // the Step type (a group: with its count), or the RPC's name
  sublabel: string; // the execution's ID, or the first and last IDs of a group
  phase: Phase | "source";
  members: string[]; // execution IDs (one for an execution, none for a source)
  loop: boolean; // a group of a loop (each started by the one before)
}

export interface GraphEdge {
  id: string;
  from: string;
  to: string;
}

export interface GraphView {
  nodes: GraphNode[];
  edges: GraphEdge[];
  /** The node that shows an execution. */
  nodeOf: Map<string, string>;
}

const chainMin = 4; // a loop of this many executions or more keeps its first and last, and groups the rest
const fanMin = 5; // this many leaves of one type from one parent show as one node

const phaseRank: Phase[] = ["failed", "running", "waiting", "canceled", "done"];

/** A group's phase: the most telling of its members' (a failure, then one under way, ...). */
function groupPhase(xs: Execution[]): Phase {
  for (const p of phaseRank) if (xs.some((x) => x.phase === p)) return p;
  return "done";
}

export function sourceLabel(parent: string): string {
  return parent === "timeout" ? "timeout handler" : parent === "?" ? "started by ?" : parent;
}

export function buildGraphView(m: RunModel, collapse: boolean): GraphView {
  const nodes: GraphNode[] = [];
  const edges: GraphEdge[] = [];
  const nodeOf = new Map<string, string>();
  const kids = (id: string) => m.children.get(id) ?? [];
  const exec = (id: string) => m.byId.get(id)!;

  const single = (x: Execution): GraphNode => ({
    id: x.id,
    kind: "execution",
    label: x.type,
    sublabel: x.id,
    phase: x.phase,
    members: [x.id],
    loop: false,
  });
  const group = (xs: Execution[], loop: boolean): GraphNode => ({
    id: `group:${xs[0].id}`,
    kind: "group",
    label: `${xs[0].type} ×${xs.length}`,
    sublabel: `${xs[0].id} … ${xs[xs.length - 1].id}`,
    phase: groupPhase(xs),
    members: xs.map((x) => x.id),
    loop,
  });
  const add = (n: GraphNode) => {
    nodes.push(n);
    for (const id of n.members) nodeOf.set(id, n.id);
  };

  // Sources: the RPCs, the timeout handler, and "?" (started by something the history leaves out).
  for (const parent of m.children.keys()) {
    if (parent === "" || m.byId.has(parent)) continue;
    add({ id: `source:${parent}`, kind: "source", label: sourceLabel(parent), sublabel: parent.startsWith("rpc:") ? "RPC" : "", phase: "source", members: [], loop: false });
  }

  const visited = new Set<string>();
  const edge = (from: string, to: string) => edges.push({ id: `${from}->${to}`, from, to });

  // Walks from each root: an execution's children, with the loops and fan-outs grouped.
  const walk = (x: Execution, fromNode: string | undefined) => {
    if (visited.has(x.id)) return;
    // A loop: x, then its one child of its own type, and so on.
    let chain: Execution[] = [x];
    if (collapse) {
      let cur = x;
      for (;;) {
        const ks = kids(cur.id);
        if (ks.length !== 1) break;
        const next = exec(ks[0]);
        if (next.type !== x.type) break;
        chain.push(next);
        cur = next;
      }
    }
    if (chain.length < chainMin) chain = [x];
    let last: GraphNode;
    for (const y of chain) visited.add(y.id);
    if (chain.length === 1) {
      last = single(x);
      add(last);
      if (fromNode) edge(fromNode, last.id);
    } else {
      const first = single(chain[0]);
      const middle = group(chain.slice(1, -1), true);
      last = single(chain[chain.length - 1]);
      add(first);
      add(middle);
      add(last);
      if (fromNode) edge(fromNode, first.id);
      edge(first.id, middle.id);
      edge(middle.id, last.id);
    }
    walkChildren(chain[chain.length - 1].id, last.id);
  };
  const walkChildren = (parent: string, fromNode: string | undefined) => {
    const ks = kids(parent).map(exec);
    if (collapse) {
      // Leaves of one type, many of them: one node.
      const leavesByType = new Map<string, Execution[]>();
      for (const k of ks) {
        if (kids(k.id).length) continue;
        const l = leavesByType.get(k.type);
        if (l) l.push(k);
        else leavesByType.set(k.type, [k]);
      }
      for (const leaves of leavesByType.values()) {
        if (leaves.length < fanMin) continue;
        const g = group(leaves, false);
        for (const k of leaves) visited.add(k.id);
        add(g);
        if (fromNode) edge(fromNode, g.id);
      }
    }
    for (const k of ks) walk(k, fromNode);
  };

  walkChildren("", undefined);
  for (const parent of m.children.keys()) {
    if (parent === "" || m.byId.has(parent)) continue;
    walkChildren(parent, `source:${parent}`);
  }
  // Anything not reached (a parent the history does not show): its own root.
  for (const x of m.executions) if (!visited.has(x.id)) walk(x, undefined);
  return { nodes, edges, nodeOf };
}
