#!/usr/bin/env bash
# profile-diff.sh DIR [PROCESS...]: what `bench --profile-joins DIR` found.
# For each process (default: every one profiled), merges each system's join
# waves into DIR/<system>-<process>.pb.gz and prints, in CPU-seconds summed
# over the waves: both systems' totals, then the functions whose cumulative
# time differs most (everynode's waves less upstream's; -diff_base).
set -euo pipefail
dir="${1:?usage: profile-diff.sh DIR [PROCESS...]}"
shift
if [[ $# -eq 0 ]]; then
  mapfile -t procs < <(ls "$dir" | sed -n 's/^upstream-r[0-9]*-w[0-9]*-\(.*\)\.pprof$/\1/p' | sort -u)
else
  procs=("$@")
fi
for p in "${procs[@]}"; do
  for s in upstream everynode; do
    mapfile -t files < <(ls "$dir"/"$s"-r*-w*-"$p".pprof 2>/dev/null)
    if [[ ${#files[@]} -eq 0 ]]; then echo "no $s profiles of $p in $dir" >&2; continue 2; fi
    go tool pprof -proto "${files[@]}" >"$dir/$s-$p.pb.gz" 2>/dev/null
    total=$(go tool pprof -top -nodecount=1 "$dir/$s-$p.pb.gz" 2>/dev/null | sed -n 's/.*of \([0-9.]*m\?s\) total.*/\1/p')
    echo "$p, $s: ${#files[@]} waves, ${total:-?} of CPU samples"
  done
  echo "--- $p: everynode's waves less upstream's, by cumulative time"
  go tool pprof -top -cum -nodecount="${TOP:-30}" -diff_base="$dir/upstream-$p.pb.gz" "$dir/everynode-$p.pb.gz" 2>/dev/null | sed 1,5d
  echo
done
