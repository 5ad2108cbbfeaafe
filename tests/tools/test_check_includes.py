"""scripts/check-includes against tiny fake trees: a clean tree passes; a file cycle, a folder
cycle, an upward and a peer include fail and are named; a Layers table that misses a folder of
src/, names an unknown one, or is absent is refused with a clear message; the baseline accepts
the listed violations only and reports the fixed ones.

The script runs as a process through its CLI, as CTest runs it on the real tree.
"""
import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check-includes")

DOC = """\
# Architecture

Some text.

## Layers

| layer | folders | may include |
| --- | --- | --- |
| 3 top | `app` | everything below |
| 2 middle | `engine`, `client` | `base` and the generated headers |
| 1 base | `base` | the generated headers |
| 0 proto | `dex` (generated) | nothing |

## Next section

| 7 not a layer | `nope` | this table is outside the section |
"""


def make_tree(tmp_path, files, doc=DOC):
    for rel, text in files.items():
        path = tmp_path / "src" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (tmp_path / "architecture.md").write_text(doc)
    return tmp_path


def run(tree, *extra):
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--src", str(tree / "src"), "--doc", str(tree / "architecture.md"),
         *extra],
        capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


CLEAN = {
    "base/status.h": '#include <string>\n#include "dex/api.pb.h"\n',
    "base/status.cc": '#include "base/status.h"\n',
    "engine/engine.h": '#include "base/status.h"\n#include <vector>\n',
    "engine/engine.cc": '#include "engine/engine.h"\n#include "dex/api.pb.h"\n',
    "client/client.h": '#include "base/status.h"\n',
    "app/main.cc": ('#include "engine/engine.h"\n#include "client/client.h"\n'
                    '#include "version_info.h"\n'),
}


def test_clean_tree_passes(tmp_path):
    code, out = run(make_tree(tmp_path, CLEAN))
    assert code == 0, out
    assert "check-includes: OK: 6 files" in out
    assert "4 folders in 4 layers" in out
    assert "violation" not in out


def test_file_cycle_fails_naming_the_chain(tmp_path):
    files = dict(CLEAN)
    files["engine/a.h"] = '#include "engine/b.h"\n'
    files["engine/b.h"] = '#include "engine/c.h"\n'
    files["engine/c.h"] = '#pragma once\n#include "engine/a.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 1, out
    assert "include cycle: src/engine/a.h -> src/engine/b.h -> src/engine/c.h -> src/engine/a.h" \
        in out
    assert "1 violation(s)" in out


def test_include_beside_the_file_is_resolved(tmp_path):
    files = dict(CLEAN)
    files["engine/a.h"] = '#include "b.h"\n'
    files["engine/b.h"] = '#include "engine/a.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 1, out
    assert "include cycle: src/engine/a.h -> src/engine/b.h -> src/engine/a.h" in out


def test_upward_include_fails_naming_file_and_line(tmp_path):
    files = dict(CLEAN)
    files["base/status.cc"] = '#include "base/status.h"\n\n#include "engine/engine.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 1, out
    assert ('src/base/status.cc:3: upward include base -> engine ("engine/engine.h"; '
            "layer 1 base -> layer 2 middle)") in out


def test_peer_include_fails(tmp_path):
    files = dict(CLEAN)
    files["client/client.cc"] = '#include "client/client.h"\n#include "engine/engine.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 1, out
    assert "src/client/client.cc:2: peer include client -> engine" in out
    assert "peers in layer 2 middle may not include each other" in out


def test_folder_cycle_fails(tmp_path):
    files = dict(CLEAN)
    files["client/client.cc"] = '#include "engine/engine.h"\n'
    files["engine/engine.cc"] = '#include "client/client.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 1, out
    assert "folder cycle: client -> engine -> client" in out


def test_missing_folder_in_doc_is_refused(tmp_path):
    files = dict(CLEAN)
    files["metrics/metrics.h"] = '#include "base/status.h"\n'
    code, out = run(make_tree(tmp_path, files))
    assert code == 2, out
    assert "src/ has folder 'metrics' that the Layers table" in out
    assert "does not place in a layer" in out


def test_unknown_folder_in_doc_is_refused(tmp_path):
    doc = DOC.replace("`engine`, `client`", "`engine`, `client`, `ghost`")
    code, out = run(make_tree(tmp_path, CLEAN, doc))
    assert code == 2, out
    assert "names 'ghost' but src/ has no such folder" in out


def test_missing_layers_section_is_refused(tmp_path):
    doc = DOC.replace("## Layers", "## Strata")
    code, out = run(make_tree(tmp_path, CLEAN, doc))
    assert code == 2, out
    assert 'has no section headed "Layers"' in out


def test_missing_doc_is_refused(tmp_path):
    tree = make_tree(tmp_path, CLEAN)
    (tree / "architecture.md").unlink()
    code, out = run(tree)
    assert code == 2, out
    assert "cannot read the layer doc" in out


def test_baseline_accepts_known_fails_new_and_reports_fixed(tmp_path):
    files = dict(CLEAN)
    files["client/client.cc"] = '#include "engine/engine.h"\n'
    tree = make_tree(tmp_path, files)
    key = "layer: src/client/client.cc -> engine/engine.h (client -> engine)"
    baseline = tree / "baseline.txt"

    baseline.write_text(f"# known\n{key}\n")
    code, out = run(tree, "--allow-known", str(baseline))
    assert code == 0, out
    assert "OK (1 known violation(s) in the baseline)" in out

    # A new violation fails, printing the key to fix (not to add).
    files["base/status.cc"] = '#include "app/app.h"\n'
    files["app/app.h"] = ""
    tree = make_tree(tmp_path, files)
    code, out = run(tree, "--allow-known", str(baseline))
    assert code == 1, out
    assert "src/base/status.cc:1: upward include base -> app" in out
    assert "new violation; key: layer: src/base/status.cc -> app/app.h (base -> app)" in out
    assert key not in out

    # A listed violation that no longer occurs fails too: the baseline can only shrink.
    files["base/status.cc"] = '#include "base/status.h"\n'
    files["client/client.cc"] = '#include "client/client.h"\n'
    tree = make_tree(tmp_path, files)
    code, out = run(tree, "--allow-known", str(baseline))
    assert code == 1, out
    assert f"fixed: remove from the baseline {baseline}: {key}" in out


def test_components_option_finds_cycles_through_a_cc(tmp_path):
    # rules.cc -> scope.h -> rules.h: no file cycle, but rules and scope need each other.
    files = dict(CLEAN)
    files["engine/rules.h"] = '#include "base/status.h"\n'
    files["engine/rules.cc"] = '#include "engine/rules.h"\n#include "engine/scope.h"\n'
    files["engine/scope.h"] = '#include "engine/rules.h"\n'
    tree = make_tree(tmp_path, files)
    code, out = run(tree)
    assert code == 0, out
    code, out = run(tree, "--components")
    assert code == 1, out
    assert "component cycle (x.h + x.cc as one node): src/engine/rules -> src/engine/scope " \
           "-> src/engine/rules" in out


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
