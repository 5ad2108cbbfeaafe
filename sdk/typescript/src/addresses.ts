// Server address lists: a dex node runs as one active process plus standbys,
// each on its own address, and the Client and Worker are given all of them.
// The same rules as the C++ SDK (src/sdk/addresses.cc): every entry is checked
// before anything is sent, and the error names the bad one.
import { DexError } from "./errors";

const HOST_CHAR = /^[A-Za-z0-9._-]+$/;
const IPV6_CHAR = /^[0-9A-Fa-f:.]+$/;

function bad(address: string, why: string): DexError {
  return new DexError("INVALID_ARGUMENT", `invalid server address '${address}': ${why}`);
}

/**
 * Checks one address: "host:port", host a DNS name, an IPv4 address or an IPv6
 * address in brackets ("[::1]:8801"), port 1..65535. Throws a DexError
 * (INVALID_ARGUMENT) naming the address and what is wrong.
 */
export function validateServerAddress(address: string): void {
  if (address === "") throw bad(address, "use host:port, e.g. 127.0.0.1:8801");
  let host: string;
  let port: string;
  if (address.startsWith("[")) {
    const close = address.indexOf("]");
    if (close < 0 || close + 1 >= address.length || address[close + 1] !== ":") {
      throw bad(address, "use [IPv6 address]:port, e.g. [::1]:8801");
    }
    host = address.slice(1, close);
    port = address.slice(close + 2);
    if (!IPV6_CHAR.test(host)) throw bad(address, "the part in brackets must be an IPv6 address");
  } else {
    const colon = address.lastIndexOf(":");
    if (colon < 0) throw bad(address, "use host:port, e.g. 127.0.0.1:8801");
    host = address.slice(0, colon);
    port = address.slice(colon + 1);
    if (host === "") throw bad(address, "the host is missing; use host:port, e.g. 127.0.0.1:8801");
    if (host.includes(":")) throw bad(address, "put an IPv6 address in brackets, e.g. [::1]:8801");
    if (!HOST_CHAR.test(host)) {
      throw bad(address, "the host may hold only letters, digits, '.', '-' and '_'");
    }
  }
  const value = /^[0-9]+$/.test(port) ? Number(port) : NaN;
  if (!(value >= 1 && value <= 65535)) {
    throw bad(address, "the port must be a number from 1 to 65535");
  }
}

/** At least one address, each valid, none listed twice. Throws a DexError otherwise. */
export function validateServerAddresses(addresses: readonly string[]): void {
  if (addresses.length === 0) {
    throw new DexError(
      "INVALID_ARGUMENT",
      "no server address given; use host:port, e.g. 127.0.0.1:8801",
    );
  }
  const seen = new Set<string>();
  for (const address of addresses) {
    validateServerAddress(address);
    if (seen.has(address)) {
      throw new DexError(
        "INVALID_ARGUMENT",
        `server address '${address}' is listed twice in ${addresses.join(", ")}`,
      );
    }
    seen.add(address);
  }
}

/**
 * Splits "host1:8801,host2:8801" (spaces around an entry are ignored) and
 * validates it; an empty entry is refused with its position.
 */
export function parseServerAddresses(list: string): string[] {
  const entries = list.split(",").map((entry) => entry.trim());
  entries.forEach((entry, i) => {
    if (entry === "") {
      throw new DexError(
        "INVALID_ARGUMENT",
        `empty server address at position ${i + 1} of '${list}'; separate addresses with one comma`,
      );
    }
  });
  validateServerAddresses(entries);
  return entries;
}

/** The list from options that take `addresses` or a single `address`. */
export function effectiveAddresses(addresses: readonly string[] | undefined, address: string | undefined): string[] {
  if (addresses !== undefined && addresses.length > 0) return [...addresses];
  return [address ?? "127.0.0.1:8801"];
}
