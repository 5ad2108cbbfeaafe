// Calls the JSON gateway (docs/dex-web.md, "The JSON gateway"): POST /api/v1/<service>/<method>
// with the request in proto3 JSON; errors come back as {"code", "message"} with an HTTP status.
import { getToken } from "./credential";

export type Service = "dex.FlowService" | "dex.AdminService";

/** An error answer of the gateway: the gRPC code name and the server's own message. */
export class ApiError extends Error {
  readonly code: string;
  readonly httpStatus: number;
  constructor(code: string, message: string, httpStatus: number) {
    super(message);
    this.name = "ApiError";
    this.code = code;
    this.httpStatus = httpStatus;
  }
}

export function isUnavailable(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === "UNAVAILABLE";
}

export function isAbort(e: unknown): boolean {
  return e instanceof DOMException && e.name === "AbortError";
}

function headers(): Record<string, string> {
  const h: Record<string, string> = { "Content-Type": "application/json" };
  const token = getToken();
  if (token !== "") h.Authorization = `Bearer ${token}`;
  return h;
}

async function errorOf(resp: Response): Promise<ApiError> {
  const text = await resp.text();
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    if (typeof body.message === "string")
      return new ApiError(body.code ?? `HTTP ${resp.status}`, body.message, resp.status);
  } catch {
    // not the gateway's JSON error body: show what came back
  }
  return new ApiError(`HTTP ${resp.status}`, text.trim() || resp.statusText, resp.status);
}

export async function call<Resp>(
  service: Service,
  method: string,
  request: object,
  signal?: AbortSignal,
): Promise<Resp> {
  let resp: Response;
  try {
    resp = await fetch(`/api/v1/${service}/${method}`, {
      method: "POST",
      headers: headers(),
      body: JSON.stringify(request),
      signal,
    });
  } catch (e) {
    if (isAbort(e)) throw e;
    throw new ApiError("UNREACHABLE", `the dex-web server did not answer: ${String(e)}`, 0);
  }
  if (!resp.ok) throw await errorOf(resp);
  return (await resp.json()) as Resp;
}

export interface WebInfo {
  version: string;
  apiAddress: string;
  adminAuth: boolean;
}

export async function getWebInfo(signal?: AbortSignal): Promise<WebInfo> {
  const resp = await fetch("/api/v1/web", { signal });
  if (!resp.ok) throw await errorOf(resp);
  return (await resp.json()) as WebInfo;
}
