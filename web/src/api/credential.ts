// The admin credential the user typed in the header's credential box: kept in sessionStorage (this
// tab only, gone when it closes) and sent with every API call as `Authorization: Bearer <token>`.
const storageKey = "dex-web.token";
const listeners = new Set<() => void>();

export function getToken(): string {
  try {
    return sessionStorage.getItem(storageKey) ?? "";
  } catch {
    return "";
  }
}

export function setToken(token: string): void {
  if (token === "") sessionStorage.removeItem(storageKey);
  else sessionStorage.setItem(storageKey, token);
  listeners.forEach((l) => l());
}

export function onTokenChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
