// Where the server has credentials configured (GET /api/v1/web "adminAuth"), dex-web asks for a
// token before an action that changes a run (a client or admin token; docs/api.md "Access"), and
// checks it with the server first (AdminService.Describe answers UNAUTHENTICATED to a token it
// does not know), so that a mistyped token is refused in the modal instead of being kept for the
// tab.
import { ApiError, getWebInfo } from "../../../api/client";

let adminAuth: Promise<boolean> | undefined;

/** Whether the server asks admin calls for a credential; read once per page load. */
export function serverWantsAdminToken(): Promise<boolean> {
  adminAuth ??= getWebInfo()
    .then((w) => w.adminAuth)
    .catch(() => {
      adminAuth = undefined; // not known: ask again next time, and do not ask the user meanwhile
      return false;
    });
  return adminAuth;
}

/**
 * Checks `token` with the server. Resolves when it is accepted, or when this process cannot say
 * (a standby answers UNAVAILABLE: the action itself will then be refused with the server's text);
 * throws the gateway's error when the server refused it.
 */
export async function checkAdminToken(token: string): Promise<void> {
  let resp: Response;
  try {
    resp = await fetch("/api/v1/dex.AdminService/Describe", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
      body: "{}",
    });
  } catch (e) {
    throw new ApiError("UNREACHABLE", `the dex-web server did not answer: ${String(e)}`, 0);
  }
  if (resp.ok) return;
  let code = `HTTP ${resp.status}`;
  let message = resp.statusText;
  try {
    const body = (await resp.json()) as { code?: string; message?: string };
    code = body.code ?? code;
    message = body.message ?? message;
  } catch {
    // not the gateway's JSON error body
  }
  // PERMISSION_DENIED: the server knows the token, but its role is not admin (a client token,
  // docs/api.md "Access"); the action itself then answers for its own role.
  if (code === "UNAVAILABLE" || code === "FAILED_PRECONDITION" || code === "PERMISSION_DENIED") return;
  throw new ApiError(code, `the admin token was not accepted: ${message}`, resp.status);
}
