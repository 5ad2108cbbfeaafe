// GET /api/v1/process (docs/dex-web.md): what this server process says about itself, on any role. A
// standby answers it too (its FlowService and AdminService.Describe answer UNAVAILABLE), so it is
// how a standby's pages say who they are and who is active.
import { useEffect } from "react";
import { ApiError, isAbort } from "../../api/client";
import { getToken } from "../../api/credential";
import { useApi, type ApiState } from "../../useApi";

export type ProcessRole =
  | "active"
  | "taking-over"
  | "hot-standby"
  | "cold-standby"
  | "stepping-down"
  | "starting"
  | "stopping";

export interface ProcessStatus {
  processId: string;
  nodeId: string;
  role: ProcessRole | string;
  /** The role loop's phase (docs/node.md): acquiring, takeover-backoff, opening, active, ... */
  phase: string;
  /** Public calls reach the engine here. */
  serving: boolean;
  standbyMode: "hot" | "cold" | string;
  /** A hot standby's follower: following, bootstrapping, behind, restarting, failed. */
  standbyState: string | null;
  lagSeconds: number | null;
  /** The node epoch held (active) or last seen in the lease (a standby), decimal. */
  epoch: string | null;
  holderProcessId: string | null;
  holderIsThisProcess: boolean;
  /** The lease last seen was released by its holder. */
  leaseReleased: boolean;
  /** The active process: the last durable log slot. */
  logHead: string | null;
  /** A hot standby: the last log slot applied to its local store. */
  appliedSlot: string | null;
  notServingReason: string | null;
}

export async function getProcessStatus(signal?: AbortSignal): Promise<ProcessStatus> {
  const headers: Record<string, string> = {};
  const token = getToken();
  if (token !== "") headers.Authorization = `Bearer ${token}`;
  let resp: Response;
  try {
    resp = await fetch("/api/v1/process", { headers, signal });
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError("UNREACHABLE", `the dex-web server did not answer: ${String(e)}`, 0);
  }
  const text = await resp.text();
  if (!resp.ok) {
    let code = `HTTP ${resp.status}`;
    let message = text.trim() || resp.statusText;
    try {
      const body = JSON.parse(text) as { code?: string; message?: string };
      if (typeof body.message === "string") {
        code = body.code ?? code;
        message = body.message;
      }
    } catch {
      // not the gateway's JSON error body: show what came back
    }
    throw new ApiError(code, message, resp.status);
  }
  return JSON.parse(text) as ProcessStatus;
}

/** The process status, read again every `everyMs` (a standby's lag and state move; a takeover shows). */
export function useProcessStatus(everyMs = 2000): ApiState<ProcessStatus> {
  const state = useApi((signal) => getProcessStatus(signal), []);
  const { reload } = state;
  useEffect(() => {
    if (everyMs <= 0) return;
    const timer = setInterval(reload, everyMs);
    return () => clearInterval(timer);
  }, [reload, everyMs]);
  return state;
}

const roleLabels: Record<string, string> = {
  active: "active",
  "taking-over": "taking over",
  "hot-standby": "hot standby",
  "cold-standby": "cold standby",
  "stepping-down": "stepping down",
  starting: "starting",
  stopping: "stopping",
};

/** A role in words: "hot standby", "taking over", ... */
export function roleLabel(role: string): string {
  return roleLabels[role] ?? role;
}

/** Who is active, as far as this process knows: "p-1 at node epoch 3", or why it is not known. */
export function activeHolderText(p: ProcessStatus): string {
  if (p.holderProcessId === null || p.epoch === null) return "not known yet (the lease was not read)";
  const who = p.holderIsThisProcess ? `this process (${p.holderProcessId})` : p.holderProcessId;
  if (p.leaseReleased) return `none: ${who} released the lease at node epoch ${p.epoch}`;
  return `${who} at node epoch ${p.epoch}`;
}
