#!/usr/bin/env python3
"""Fails unless every row of docs/model-coverage.md names tests, and every named test exists.

A row is a table line that starts with an ID (`| AT3 |`); its last cell lists the tests, each in
backquotes:
  component.Suite.Test          GoogleTest: TEST(Suite, Test) (or TEST_F) in a .cc under
                                tests/<component>/ (the CTest name of the case)
  path/test_file.py::test_name  pytest: `def test_name(` in that file (path from the repository root)
  path/file.test.ts::title      node:test: a test(), it() or describe() of that title in that file
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "model-coverage.md"

ROW = re.compile(r"^\| ([A-Z]+\d+) \|")
GTEST_NAME = re.compile(r"^(\w+)\.(\w+)\.(\w+)$")
# The first argument of test("...", ...), in any of the three quotes; a template literal with
# ${...} cannot be named.
TS_TITLE = re.compile(r"\b(?:test|it|describe)\(\s*([\"'`])((?:\\.|(?!\1).)*)\1", re.S)
TS_ESCAPES = {"n": "\n", "t": "\t"}

_cache = {}


def read(path):
    if path not in _cache:
        _cache[path] = path.read_text(encoding="utf-8") if path.is_file() else None
    return _cache[path]


def gtest_cases(component):
    """The TEST(Suite, Name) pairs of tests/<component>/**/*.cc."""
    key = ("gtest", component)
    if key not in _cache:
        cases = set()
        folder = ROOT / "tests" / component
        if folder.is_dir():
            for path in folder.rglob("*.cc"):
                for m in re.finditer(r"\bTEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", read(path)):
                    cases.add((m.group(1), m.group(2)))
        _cache[key] = cases
    return _cache[key]


def ts_titles(text):
    titles = set()
    for m in TS_TITLE.finditer(text):
        raw = m.group(2)
        if m.group(1) == "`" and "${" in raw:
            continue
        titles.add(re.sub(r"\\(.)", lambda e: TS_ESCAPES.get(e.group(1), e.group(1)), raw))
    return titles


def problem(name):
    """Why `name` names no existing test, or None."""
    if "::" in name:
        file, _, test = name.partition("::")
        text = read(ROOT / file)
        if text is None:
            return f"no file {file}"
        if file.endswith(".py"):
            if not re.search(rf"^def {re.escape(test)}\(", text, re.M):
                return f"no def {test}( in {file}"
            return None
        if file.endswith(".ts"):
            if test not in ts_titles(text):
                return f"no test titled '{test}' in {file}"
            return None
        return f"{file} is neither a .py nor a .ts test file"
    m = GTEST_NAME.match(name)
    if not m:
        return "not component.Suite.Test, file.py::test or file.test.ts::title"
    component, suite, test = m.groups()
    if not (ROOT / "tests" / component).is_dir():
        return f"no folder tests/{component}"
    if (suite, test) not in gtest_cases(component):
        return f"no TEST({suite}, {test}) under tests/{component}/"
    return None


def main():
    if not DOC.is_file():
        print(f"{DOC} is missing")
        return 1
    problems = []
    ids = set()
    rows = names = 0
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        m = ROW.match(line)
        if not m:
            continue
        rows += 1
        row_id = m.group(1)
        where = f"line {number} ({row_id})"
        if row_id in ids:
            problems.append(f"{where}: the ID is used twice")
        ids.add(row_id)
        cells = line.rstrip().split("|")
        if len(cells) < 4 or cells[-1].strip():
            problems.append(f"{where}: not a table row that ends in '|'")
            continue
        tests = re.findall(r"`([^`]+)`", cells[-2])
        if not tests:
            problems.append(f"{where}: names no test")
        for name in tests:
            names += 1
            why = problem(name)
            if why:
                problems.append(f"{where}: `{name}`: {why}")
    if rows == 0:
        print(f"no rows found in {DOC.relative_to(ROOT)}")
        return 1
    if problems:
        print(f"{DOC.relative_to(ROOT)}:")
        print("\n".join("  " + p for p in problems))
        return 1
    print(f"{DOC.relative_to(ROOT)}: {rows} rows, {names} tests named, every one exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
