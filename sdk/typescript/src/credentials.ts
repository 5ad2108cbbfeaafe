// The token a Client or Worker sends as "authorization: Bearer <token>"
// (docs/api.md, "Access"): given in the options, read from a token file, or
// taken from the environment (DEX_TOKEN, DEX_TOKEN_FILE), in that order. A
// file is looked at again at most once a second and read again when it
// changed, so a rotated token is sent without a restart.
import { readFileSync, statSync } from "node:fs";

import { DexError } from "./errors";

/** The environment variables every dex client reads when its options give no token. */
export const TOKEN_ENV = "DEX_TOKEN";
export const TOKEN_FILE_ENV = "DEX_TOKEN_FILE";

/** A token file is small (one token a line); anything larger is not one. */
const TOKEN_FILE_BYTES_MAX = 64 * 1024;
const RECHECK_MS = 1000;

/**
 * A token file's token: its first non-empty line without surrounding
 * whitespace. Throws a DexError (INVALID_ARGUMENT) naming the file when it
 * cannot be read or holds no token; never its content.
 */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    const st = statSync(path);
    if (!st.isFile() || st.size > TOKEN_FILE_BYTES_MAX) {
      throw new DexError("INVALID_ARGUMENT", `'${path}' is not a token file (a regular file of at most ${TOKEN_FILE_BYTES_MAX} bytes)`);
    }
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (error instanceof DexError) throw error;
    throw new DexError("INVALID_ARGUMENT", `cannot read token file '${path}'`);
  }
  for (const line of text.split("\n")) {
    const token = line.trim();
    if (token !== "") return token;
  }
  throw new DexError("INVALID_ARGUMENT", `token file '${path}' is empty`);
}

/** Where one client's token comes from; see the file's header. */
export class TokenSource {
  private token: string | undefined;
  private readonly file: string | undefined;
  private readonly what: string;
  private stamp = "";
  private checkedAt = 0;
  private readOnce = false;

  constructor(token: string | undefined, tokenFile: string | undefined, env: NodeJS.ProcessEnv = process.env) {
    this.what = "tokenFile";
    if (token !== undefined && token !== "") {
      this.token = token;
      return;
    }
    if (tokenFile !== undefined && tokenFile !== "") {
      this.file = tokenFile;
      return;
    }
    const fromEnv = env[TOKEN_ENV];
    if (fromEnv !== undefined && fromEnv !== "") {
      this.token = fromEnv;
      return;
    }
    const fileEnv = env[TOKEN_FILE_ENV];
    if (fileEnv !== undefined && fileEnv !== "") {
      this.file = fileEnv;
      this.what = `$${TOKEN_FILE_ENV}`;
    }
  }

  /**
   * The token to send (undefined: none). Throws a DexError (INVALID_ARGUMENT)
   * naming the file when it was never read successfully; after one good read,
   * an unreadable new version keeps the token read before.
   */
  get(): string | undefined {
    if (this.file === undefined) return this.token;
    const now = Date.now();
    if (this.readOnce && now - this.checkedAt < RECHECK_MS) return this.token;
    this.checkedAt = now;
    let stamp = "missing";
    try {
      const st = statSync(this.file);
      stamp = `${st.ino}:${st.size}:${st.mtimeMs}`;
    } catch {
      // read below reports it
    }
    if (this.readOnce && stamp === this.stamp) return this.token;
    try {
      this.token = readTokenFile(this.file);
    } catch (error) {
      if (!this.readOnce) {
        const details = error instanceof DexError ? error.details : String(error);
        throw new DexError("INVALID_ARGUMENT", `${this.what}: ${details}`);
      }
      return this.token; // mid-rotation: keep sending the token read before
    }
    this.stamp = stamp;
    this.readOnce = true;
    return this.token;
  }
}
