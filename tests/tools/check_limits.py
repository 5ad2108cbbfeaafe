#!/usr/bin/env python3
"""The limits the TypeScript SDK repeats equal the server's C++ constants.

The SDK checks names, counts, durations and sizes before they reach the wire, so it repeats
numbers whose originals are C++ constants of the server. LIMITS below is the one table of those
pairs: each row names a TypeScript constant (a top-level `const`, or a member of an object
constant as `OBJECT.member`) and the C++ `constexpr` it repeats, and how the two must compare.

Both values are read from the source text and evaluated as integer expressions of digits,
parentheses, `*`, `+`, `-` and `<<` only (digit separators and integer suffixes are dropped);
nothing is ever passed to eval. The script prints every pair and exits 1 when a pair differs or
when a constant cannot be found, is ambiguous or is not such an expression, naming both places:
a renamed constant fails here instead of being skipped.

    tests/tools/check_limits.py [--root REPOSITORY]

CTest runs it as `check_limits` (label `limits`).
"""

import argparse
import os
import re
import sys

CHECKS_TS = "sdk/typescript/src/flow/checks.ts"
WORKER_TS = "sdk/typescript/src/worker.ts"
CLIENT_TS = "sdk/typescript/src/client.ts"
FLOW_RULES_H = "src/flow/limits.h"
CONFIG_H = "src/config/config.h"
FLOW_DISPATCH_CC = "src/engine/flow_dispatch.cc"
FLOW_RPC_CC = "src/engine/rpc_invoker.cc"
FLOW_ENGINE_CC = "src/engine/flow_waits.cc"

# (TypeScript file, TypeScript name, relation, C++ file, C++ constant).
# relation "==": the TypeScript value equals the C++ one; "<": it stays below it.
LIMITS = [
    (CHECKS_TS, "FLOW_LIMITS.valueBytes", "==", CONFIG_H, "kValueMaxSizeBytesMax"),
    (CHECKS_TS, "FLOW_LIMITS.messagesPerPublish", "==", FLOW_RULES_H, "kPublishMessagesMax"),
    (CHECKS_TS, "FLOW_LIMITS.nameBytes", "==", FLOW_RULES_H, "kNameBytesMax"),
    (CHECKS_TS, "FLOW_LIMITS.conditionsPerWait", "==", FLOW_RULES_H, "kConditionsMax"),
    (CHECKS_TS, "FLOW_LIMITS.movementsPerDecision", "==", FLOW_RULES_H, "kMovementsMax"),
    (CHECKS_TS, "FLOW_LIMITS.lockKeysPerMethod", "==", FLOW_RULES_H, "kLockKeysMax"),
    (CHECKS_TS, "FLOW_LIMITS.attributesPerFlow", "==", FLOW_RULES_H, "kAttributeKeysMax"),
    (CHECKS_TS, "FLOW_LIMITS.rpcsPerFlow", "==", FLOW_RULES_H, "kRpcTypesMax"),
    (CHECKS_TS, "FLOW_LIMITS.maxDurationMs", "==", FLOW_RULES_H, "kDurationMsMax"),
    (CHECKS_TS, "FLOW_LIMITS.indexedAttributesPerFlow", "==", "src/flow/search_index.h",
     "kIndexedAttributesMax"),
    ("sdk/typescript/src/search.ts", "SEARCH_PAGE_SIZE_MAX", "==", "src/search/search.h", "kPageSizeMax"),
    ("sdk/typescript/src/search.ts", "SEARCH_PAGE_SIZE_DEFAULT", "==", "src/search/search.h",
     "kPageSizeDefault"),
    (WORKER_TS, "FLOW_TYPES_PER_HELLO_MAX", "==", FLOW_DISPATCH_CC, "kDeclarationsPerHelloMax"),
    (CLIENT_TS, "RPC_DEFAULT_TIMEOUT_MS", "==", FLOW_RPC_CC, "kRpcTimeoutDefaultMs"),
    (CLIENT_TS, "RPC_MAX_TIMEOUT_MS", "==", FLOW_RPC_CC, "kRpcTimeoutMaxMs"),
    # InvokeRpc's timeout is stored in the RPC's record, which the engine checks again.
    (CLIENT_TS, "RPC_MAX_TIMEOUT_MS", "==", FLOW_RULES_H, "kRpcTimeoutMsMax"),
    # A wait piece above the server's maximum would be cut short by the server.
    (CLIENT_TS, "FLOW_WAIT_PIECE_MS", "<", FLOW_ENGINE_CC, "kWaitMaxMs"),
]

RELATIONS = {"==": lambda a, b: a == b, "<": lambda a, b: a < b}


class LimitError(Exception):
    pass


# --- integer expressions -----------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)|(<<|[()*+-]))")


def evaluate(text):
    """The value of an integer expression of digits, ( ) * + - and <<, C precedence."""
    # Digit separators (C++ 1'000, TypeScript 1_000), then integer suffixes (10LL, 512u, 16ull).
    cleaned = re.sub(r"(?<=[0-9a-fA-F])['_](?=[0-9a-fA-F])", "", text.strip())
    suffix = r"(?:[uU](?:ll|LL|[lLzZ])?|(?:ll|LL|[lLzZ])[uU]?)"
    cleaned = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)" + suffix + r"\b", r"\1", cleaned)
    tokens = []
    pos = 0
    while pos < len(cleaned):
        m = _TOKEN.match(cleaned, pos)
        if not m or m.end() == pos:
            if cleaned[pos:].strip() == "":
                break
            raise LimitError(f"'{text.strip()}' is not a simple integer expression"
                             f" (at '{cleaned[pos:].strip()}')")
        tokens.append(("num", int(m.group(1), 0)) if m.group(1) else ("op", m.group(2)))
        pos = m.end()
    if not tokens:
        raise LimitError("the value is empty")

    index = 0

    def peek():
        return tokens[index] if index < len(tokens) else None

    def take():
        nonlocal index
        index += 1
        return tokens[index - 1]

    def shift():  # additive ( << additive )*
        value = additive()
        while peek() == ("op", "<<"):
            take()
            value <<= additive()
        return value

    def additive():
        value = multiplicative()
        while peek() in (("op", "+"), ("op", "-")):
            op = take()[1]
            right = multiplicative()
            value = value + right if op == "+" else value - right
        return value

    def multiplicative():
        value = unary()
        while peek() == ("op", "*"):
            take()
            value *= unary()
        return value

    def unary():
        token = peek()
        if token == ("op", "-"):
            take()
            return -unary()
        if token == ("op", "("):
            take()
            value = shift()
            if peek() != ("op", ")"):
                raise LimitError(f"'{text.strip()}': unbalanced parentheses")
            take()
            return value
        if token is not None and token[0] == "num":
            return take()[1]
        raise LimitError(f"'{text.strip()}' is not a simple integer expression")

    value = shift()
    if index != len(tokens):
        raise LimitError(f"'{text.strip()}' is not a simple integer expression")
    return value


# --- sources -----------------------------------------------------------------------------------


def strip_comments(source):
    """The source without // and /* */ comments (string literals holding them are not expected)."""
    source = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), source, flags=re.S)
    return re.sub(r"//[^\n]*", "", source)


def read(root, path):
    try:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            return strip_comments(f.read())
    except OSError as e:
        raise LimitError(f"cannot read the file: {e.strerror}")


def only_match(matches, what):
    if not matches:
        raise LimitError(f"{what} not found")
    if len(matches) > 1:
        raise LimitError(f"{what} is defined {len(matches)} times")
    return matches[0]


def cpp_value(root, path, name):
    source = read(root, path)
    # `constexpr <type words> name = value;` or `... name{value};`
    pattern = (r"\bconstexpr\s+[\w:]+(?:\s+[\w:]+)*?\s+" + re.escape(name)
               + r"\s*(?:=\s*([^;{]+)|\{([^;}]*)\})\s*;")
    m = only_match(list(re.finditer(pattern, source)), f"constexpr {name}")
    return evaluate(m.group(1) if m.group(1) is not None else m.group(2))


def ts_value(root, path, name):
    source = read(root, path)
    if "." in name:
        obj, member = name.split(".", 1)
        opening = r"\bconst\s+" + re.escape(obj) + r"\b[^=]*=\s*\{"
        start = only_match(list(re.finditer(opening, source)), f"const {obj}")
        depth, pos = 1, start.end()
        while depth and pos < len(source):
            depth += {"{": 1, "}": -1}.get(source[pos], 0)
            pos += 1
        if depth:
            raise LimitError(f"const {obj}: its object never closes")
        body = source[start.end():pos - 1]
        entry = r"(?:^|[,{\s])" + re.escape(member) + r"\s*:\s*([^,}]+)"
        m = only_match(list(re.finditer(entry, body)), name)
        return evaluate(m.group(1))
    definition = r"\bconst\s+" + re.escape(name) + r"\s*(?::\s*\w+\s*)?=\s*([^;]+);"
    m = only_match(list(re.finditer(definition, source)), f"const {name}")
    return evaluate(m.group(1))


def value(reader, root, path, name):
    try:
        return reader(root, path, name), None
    except LimitError as e:
        return None, f"{path}: {name}: {e}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.join(here, "..", ".."),
                        help="the repository (default: two folders above this script)")
    args = parser.parse_args(argv)
    root = os.path.normpath(args.root)

    failures = 0
    for ts_path, ts_name, relation, cpp_path, cpp_name in LIMITS:
        ts, ts_error = value(ts_value, root, ts_path, ts_name)
        cpp, cpp_error = value(cpp_value, root, cpp_path, cpp_name)
        left = f"{ts_name} = {ts if ts is not None else '?'} ({ts_path})"
        right = f"{cpp_name} = {cpp if cpp is not None else '?'} ({cpp_path})"
        if ts_error or cpp_error:
            failures += 1
            print(f"FAIL  {left} {relation} {right}")
            for error in (ts_error, cpp_error):
                if error:
                    print(f"      {error}")
        elif not RELATIONS[relation](ts, cpp):
            failures += 1
            print(f"FAIL  {left} {relation} {right}")
            must = "equal to" if relation == "==" else "below"
            print(f"      {ts_path} {ts_name} must be {must} {cpp_path} {cpp_name}:"
                  " change them together")
        else:
            print(f"ok    {left} {relation} {right}")
    if failures:
        print(f"check_limits: {failures} of {len(LIMITS)} pairs fail", file=sys.stderr)
        return 1
    print(f"check_limits: {len(LIMITS)} pairs agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
