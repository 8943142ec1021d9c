#!/usr/bin/env bash
# fuzz.sh [--save]: runs every fuzz target of the module for FUZZTIME each
# (default 30s; `make check` runs 3s). The inputs each target keeps are in
# its package's testdata/fuzz/<Target>/, kept in the repo: plain `go test`
# replays them as regression cases, and fuzzing starts from them.
#
# --save copies what this run found (Go keeps new interesting inputs in
# its build cache, not in testdata) into testdata/fuzz, so the corpus grows
# with each run someone chooses to keep.
#
# Env: FUZZTIME (go test -fuzztime), FUZZ_PARALLEL (workers per target;
# default 1, so a short run in CI leaves the other cores alone), FUZZ_MATCH
# (a regular expression: only the targets it matches). Minimizing a new
# input is capped at 5 s (Go's default, 60 s, would let one find stall a
# short run; during it the exec count stands still, which looks like a
# hang and is not).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

save=
[[ "${1:-}" == "--save" ]] && save=1
fuzztime="${FUZZTIME:-30s}"
parallel="${FUZZ_PARALLEL:-1}"
cache="$(go env GOCACHE)/fuzz"

# fuzz_once runs one target. Go's fuzzer can end a short run with
# "context deadline exceeded" and no failing input: the time ran out while
# it was still handling an input it found new (seen in `make check`,
# 2026-12-06, FuzzEncodeFilterResult at 3 s). That is the harness, not a
# finding, so it runs once more; a failure that wrote an input to
# testdata/fuzz, or fails again, counts.
fuzz_once() {
  local dir=$1 target=$2 seeds=$3 before=$4 out now
  for attempt in 1 2; do
    out="$(mktemp)"
    if (cd "$dir" && go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s -parallel "$parallel" .) 2>&1 | tee "$out"; [[ ${PIPESTATUS[0]} -eq 0 ]]; then
      rm -f "$out"
      return 0
    fi
    now=0
    [[ -d "$seeds" ]] && now=$(find "$seeds" -type f | wc -l)
    if [[ $attempt -eq 1 && $now -eq $before ]] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      echo "    $target: the fuzz run ran out of time with no failing input (Go's harness); running it once more"
      rm -f "$out"
      continue
    fi
    rm -f "$out"
    return 1
  done
  return 1
}

total=0 failed=()
# The module's own packages only (bench and e2e are modules of their own).
for dir in $(go list -f '{{.Dir}}' ./...); do
  targets="$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go 2>/dev/null || true)"
  [[ -z "$targets" ]] && continue
  pkg="$(go list "$dir")"
  for target in $targets; do
    [[ -n "${FUZZ_MATCH:-}" && ! "$target" =~ $FUZZ_MATCH ]] && continue
    total=$((total + 1))
    seeds="$dir/testdata/fuzz/$target"
    before=0
    [[ -d "$seeds" ]] && before=$(find "$seeds" -type f | wc -l)
    echo "==> $pkg $target for $fuzztime (corpus: $before inputs)"
    if ! fuzz_once "$dir" "$target" "$seeds" "$before"; then
      # A failing input is written to testdata/fuzz by go test itself:
      # commit it with the fix, and it stays a regression test.
      failed+=("$pkg $target")
      continue
    fi
    if [[ -n "$save" && -d "$cache/$pkg/$target" ]]; then
      mkdir -p "$seeds"
      cp -n "$cache/$pkg/$target"/* "$seeds"/ 2>/dev/null || true
      echo "    corpus now $(find "$seeds" -type f | wc -l) inputs"
    fi
  done
done

if (( total == 0 )); then
  echo "no fuzz targets found: has go test -list changed?" >&2
  exit 1
fi
if (( ${#failed[@]} > 0 )); then
  printf 'fuzzing found failures in:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "fuzzed $total targets for $fuzztime each"
