#!/usr/bin/env python3
"""Fails if docs/spec-coverage.md names a test that does not exist in the sources.

A GoogleTest name `Suite.Test` must appear as TEST(Suite, Test) / TEST_F / TEST_P under tests/;
a pytest name `file.py::test` must be a `def test` in tests/**/file.py.
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parents[2]
table = (root / "docs" / "spec-coverage.md").read_text()
sources = {p: p.read_text() for p in (root / "tests").rglob("*") if p.suffix in (".cc", ".py")}

missing = []
rows = 0
for line in table.splitlines():
    if not re.match(r"^\| [A-Z]+\d+ \|", line):
        continue
    rows += 1
    cells = line.split("|")
    names = re.findall(r"`([^`]+)`", cells[-2])
    if not names:
        missing.append(f"{cells[1].strip()}: names no test")
    for name in names:
        if "::" in name:
            file, func = name.split("::")
            ok = any(p.name == file and re.search(rf"^def {re.escape(func)}\(", text, re.M)
                     for p, text in sources.items())
        else:
            suite, _, test = name.partition(".")
            pattern = rf"TEST(_F|_P)?\(\s*{re.escape(suite)}\s*,\s*{re.escape(test)}\s*\)"
            ok = any(re.search(pattern, text) for p, text in sources.items() if p.suffix == ".cc")
        if not ok:
            missing.append(f"{cells[1].strip()}: {name}")

if rows == 0:
    print("no rows found in docs/spec-coverage.md")
    sys.exit(1)
if missing:
    print("docs/spec-coverage.md names tests that do not exist:")
    print("\n".join("  " + m for m in missing))
    sys.exit(1)
print(f"docs/spec-coverage.md: {rows} rows, every named test exists")
