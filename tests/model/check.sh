#!/usr/bin/env bash
# Model-checks tests/model/lease_log.pml with spin (docs/model.md):
#   - the correct model in four configurations must have no error, with the
#     search complete (exhaustive: no bitstate, no depth bound reached);
#   - the liveness property must hold under weak fairness;
#   - every deliberately broken variant must be caught, by the property named;
#   - every reachability probe must be reached (nothing is checked vacuously).
# Needs spin and a C compiler (scripts/install-deps installs spin).
# DEX_MODEL_KEEP=1 keeps the work directory; DEX_MODEL_ONLY=<regex> runs only
# the matching runs (by name).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
model="$here/lease_log.pml"

if ! command -v spin >/dev/null 2>&1; then
  echo "model check: spin is not installed; run scripts/install-deps (it installs the Debian package spin)" >&2
  exit 1
fi
cc="${CC:-cc}"
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "model check: no C compiler ($cc) for spin's verifier; run scripts/install-deps" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/dex-model.XXXXXX")"
if [ "${DEX_MODEL_KEEP:-0}" != 1 ]; then trap 'rm -rf "$work"' EXIT; fi

# Every run: a bound on time and memory, so a state-space blow-up fails fast.
run_timeout=150   # seconds per run
memlim=1536       # MB per run
depth=100000

failures=0
total_states=0
start_all=$SECONDS

fail() { echo "FAIL  $*"; failures=$((failures + 1)); }

selected() { [ -z "${DEX_MODEL_ONLY:-}" ] || [[ "$1" =~ ${DEX_MODEL_ONLY} ]]; }

# build <dir> <opt> <mode: safety|liveness> <spin -D flags...>
build() {
  local dir="$1" opt="$2" mode="$3"
  shift 3
  mkdir -p "$dir"
  (cd "$dir" && spin "$@" -a "$model" >spin.out 2>&1) || { cat "$dir/spin.out"; return 1; }
  local defs=(-DMEMLIM=$memlim -DCOLLAPSE)
  if [ "$mode" = safety ]; then defs+=(-DSAFETY); else defs+=(-DNFAIR=3); fi
  (cd "$dir" && "$cc" "$opt" "${defs[@]}" -w -o pan pan.c >cc.out 2>&1) || { cat "$dir/cc.out"; return 1; }
}

# verify <dir> <mode> -> pan's output in <dir>/pan.out
verify() {
  local dir="$1" mode="$2"
  local args=(-m$depth)
  if [ "$mode" = liveness ]; then args+=(-a -f); fi
  (cd "$dir" && timeout "$run_timeout" ./pan "${args[@]}" >pan.out 2>&1) || {
    local rc=$?
    if [ $rc -eq 124 ]; then echo "(timed out after ${run_timeout} s)" >>"$dir/pan.out"; fi
  }
}

field() {  # states, time, errors from pan.out
  local out="$1"
  states=$(awk '/states, stored/ {print $1; exit}' "$out")
  secs=$(awk '/pan: elapsed time/ {print $4; exit}' "$out")
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
  states=${states:-?}; secs=${secs:-?}; errors=${errors:-?}
}

# The trail of a violation, as the model's printf lines.
show_trail() {
  local dir="$1"
  shift
  local trail
  trail=$(ls "$dir"/*.trail 2>/dev/null | head -1) || true
  [ -n "$trail" ] || return 0
  (cd "$dir" && spin "$@" -t -k "$trail" "$model" 2>&1) |
    awk '/^spin: trail ends/ {exit} /^spin: text of failed/ {print "        " $0; next}
         /^\t/ || /Never claim/ || /^#processes/ || /^ *$/ {next} {sub(/^ +/, ""); print "        " $0}' |
    head -40
}

# correct <name> <spin -D flags...>: no error, search complete.
correct() {
  local name="$1"
  shift
  selected "$name" || return 0
  local dir="$work/$name"
  build "$dir" -O2 safety "$@" || { fail "$name: could not build the verifier"; return; }
  verify "$dir" safety
  field "$dir/pan.out"
  if [ "$errors" != 0 ] || grep -q "Search not completed\|max search depth too small\|timed out" "$dir/pan.out"; then
    fail "$name ($*): errors $errors; states $states"
    grep -m3 "assertion violated\|max search depth\|timed out\|MEMLIM\|error" "$dir/pan.out" | sed 's/^/        /' || true
    show_trail "$dir" "$@"
    return
  fi
  total_states=$((total_states + states))
  printf 'PASS  %-22s %12s states  %6s s   %s\n' "$name" "$states" "$secs" "$*"
}

# live <name> <spin -D flags...>: the ltl formula holds under weak fairness.
live() {
  local name="$1"
  shift
  selected "$name" || return 0
  local dir="$work/$name"
  build "$dir" -O2 liveness -DLIVENESS "$@" || { fail "$name: could not build the verifier"; return; }
  verify "$dir" liveness
  field "$dir/pan.out"
  if [ "$errors" != 0 ] || grep -q "Search not completed\|max search depth too small\|timed out" "$dir/pan.out"; then
    fail "$name ($*): errors $errors; states $states"
    grep -m3 "acceptance cycle\|max search depth\|timed out\|MEMLIM" "$dir/pan.out" | sed 's/^/        /' || true
    show_trail "$dir" -DLIVENESS "$@"
    return
  fi
  total_states=$((total_states + states))
  printf 'PASS  %-22s %12s states  %6s s   %s (weak fairness)\n' "$name" "$states" "$secs" "$*"
}

# broken <name> <property> <pattern> <mode> <spin -D flags...>: spin must report
# a violation whose text matches <pattern>.
broken() {
  local name="$1" prop="$2" pattern="$3" mode="$4"
  shift 4
  selected "$name" || return 0
  local dir="$work/$name"
  local flags=("$@")
  if [ "$mode" = liveness ]; then flags=(-DLIVENESS "$@"); fi
  build "$dir" -O0 "$mode" "${flags[@]}" || { fail "$name: could not build the verifier"; return; }
  verify "$dir" "$mode"
  field "$dir/pan.out"
  if [ "$errors" = 0 ] || ! grep -q -- "$pattern" "$dir/pan.out"; then
    fail "$name ($*): the broken variant was NOT caught as a violation of $prop (errors $errors)"
    return
  fi
  printf 'PASS  %-22s caught: %s after %s states\n' "$name" "$prop" "$states"
  grep -m1 "assertion violated\|acceptance cycle" "$dir/pan.out" | sed 's/^/        spin: /'
  show_trail "$dir" "${flags[@]}"
}

echo "model check: $(spin -V | head -1); $model"

# ---- the correct model (exhaustive)
correct two-processes    -DNP=2 -DNB=2 -DMAXF=2 -DMAXREN=1 -DMAXEP=2
correct three-processes  -DNP=3 -DNB=1 -DMAXF=0 -DMAXREN=0 -DMAXEP=3
correct settle-early     -DNP=2 -DNB=2 -DMAXF=1 -DMAXREN=1 -DMAXEP=2 -DSETTLE_EARLY
correct broken-clocks    -DNP=2 -DNB=2 -DMAXF=1 -DMAXREN=0 -DMAXEP=2 -DBROKEN_CLOCKS -DCRASHES
live    released-taken   -DNP=3 -DNO_WRITER -DMAXREN=1 -DMAXEP=4 -DCRASHES

# ---- broken variants: each must be caught
small=(-DNP=2 -DNB=2 -DMAXF=1 -DMAXREN=0 -DMAXEP=2)
broken ack-without-lease   "(a) no acknowledged batch lost" "acked" safety \
  "${small[@]}" -DBUG_ACK_WITHOUT_LEASE_CHECK -DSETTLE_EARLY
broken gc-no-margin        "(a) no acknowledged batch lost" "acked" safety \
  "${small[@]}" -DBUG_GC_NO_MARGIN
broken skip-taken-slot     "(b) fencing after an EpochStart" "es_ghost" safety \
  "${small[@]}" -DBUG_WRITER_SKIPS_TAKEN_SLOT -DBROKEN_CLOCKS
broken no-expiry-wait      "(c) one valid lease" "valid\[0\]" safety \
  "${small[@]}" -DBUG_NO_EXPIRY_WAIT
broken release-still-valid "(c) one valid lease" "valid\[0\]" safety \
  "${small[@]}" -DBUG_RELEASE_STILL_VALID
broken take-released-with-create "(d) a released lease is taken" "acceptance cycle" liveness \
  -DNP=3 -DNO_WRITER -DMAXREN=1 -DMAXEP=4 -DCRASHES -DBUG_TAKE_RELEASED_WITH_CREATE

# ---- reachability probes (one verifier, the probe chosen at run time)
probe_names=(
  ""
  "a log write lands after its writer stopped"
  "a late write re-creates a collected slot"
  "a written batch is not acknowledged: the lease ended"
  "a later epoch's batch is acknowledged after a GC"
  "a lost answer: the writer adopts its own batch"
  "open() moves past a slot an older writer filled"
  "a settled epoch collects past its EpochStart"
  "GC deletes another writer's acknowledged batch"
  "a waiter takes over an expired lease"
  "a process adopts its own acquisition write"
  "a waiter takes over a released lease at once"
)
if selected probes; then
  dir="$work/probes"
  if build "$dir" -O0 safety -DPROBES "${small[@]}"; then
    reached=0
    for n in $(seq 1 $((${#probe_names[@]} - 1))); do
      (cd "$dir" && DEX_PROBE=$n timeout "$run_timeout" ./pan -m$depth >probe$n.out 2>&1) || true
      if grep -q "assertion violated 0" "$dir/probe$n.out"; then
        reached=$((reached + 1))
      else
        fail "probe $n (${probe_names[$n]}) is never reached: the model is too weak to check it"
      fi
      rm -f "$dir"/*.trail
    done
    printf 'PASS  %-22s %d of %d scenarios reached\n' probes "$reached" $((${#probe_names[@]} - 1))
  else
    fail "probes: could not build the verifier"
  fi
fi

echo "model check: $total_states states in the passing runs, $((SECONDS - start_all)) s in all"
if [ "$failures" -ne 0 ]; then
  echo "model check: $failures FAILED"
  exit 1
fi
echo "model check: OK"
