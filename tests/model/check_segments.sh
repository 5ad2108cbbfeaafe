#!/usr/bin/env bash
# Model-checks tests/model/segments.pml (the filesystem backend's log slots in segment files)
# with spin: the correct model in three configurations must have no error with the search
# complete; each deliberately broken variant must be caught. Fails (never skips) without spin.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/segments.pml"
if ! command -v spin >/dev/null 2>&1; then
  echo "model check: spin is not installed; run scripts/install-deps" >&2
  exit 1
fi
cc="${CC:-cc}"
work="$(mktemp -d "${TMPDIR:-/tmp}/dex-segments-model.XXXXXX")"
trap 'rm -rf "$work"' EXIT
failures=0

# run <name> <expect: ok|caught> <spin -D flags...>
run() {
  local name="$1" expect="$2"
  shift 2
  local dir="$work/$name"
  mkdir -p "$dir"
  (cd "$dir" && spin "$@" -a "$model" >spin.out 2>&1) || { cat "$dir/spin.out"; failures=$((failures + 1)); return; }
  (cd "$dir" && "$cc" -O2 -DSAFETY -DMEMLIM=1536 -DCOLLAPSE -w -o pan pan.c) || { failures=$((failures + 1)); return; }
  (cd "$dir" && timeout 150 ./pan -m100000 >pan.out 2>&1) || true
  local errors states
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | head -1)
  states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.out" | head -1)
  if [ "$expect" = ok ]; then
    if [ "$errors" = 0 ] && ! grep -q "max search depth too small" "$dir/pan.out"; then
      echo "ok    $name: no error, $states states, search complete"
    else
      echo "FAIL  $name: expected no error"; tail -20 "$dir/pan.out"; failures=$((failures + 1))
    fi
  else
    if [ -n "$errors" ] && [ "$errors" != 0 ] && grep -q "assertion violated" "$dir/pan.out"; then
      echo "ok    $name: caught ($(grep -m1 'assertion violated' "$dir/pan.out"))"
    else
      echo "FAIL  $name: the broken variant was not caught"; failures=$((failures + 1))
    fi
  fi
}

run two-writers-two-slots ok -DNW=2 -DNS=2 -DCAP=2 -DNSEG=3 -DTEARS=1
run two-writers-three-slots ok -DNW=2 -DNS=3 -DCAP=1 -DNSEG=4 -DTEARS=0
run three-writers-one-slot ok -DNW=3 -DNS=1 -DCAP=1 -DNSEG=3 -DTEARS=1
run bug-no-verify caught -DBUG_NO_VERIFY
run bug-ignore-seal caught -DBUG_IGNORE_SEAL
if [ "$failures" -ne 0 ]; then
  echo "segments model check: $failures failure(s)"
  exit 1
fi
echo "segments model check: all runs as expected"
