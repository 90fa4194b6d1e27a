#!/usr/bin/env bash
# Runs each libFuzzer target of tests/fuzz for RUNS executions, from its
# committed corpus and regression inputs, and prints one summary line per
# target: executions, executions per second, seconds, coverage (edges and
# features at the end) and crashes. New corpus inputs go to BUILD/fuzz-work,
# crash inputs to BUILD/fuzz-artifacts, the full logs to BUILD/fuzz-logs.
#   scripts/fuzz.sh BUILD RUNS      (BUILD: a clang build with the fuzzers built)
# Fails when a fuzzer fails (a crash, a sanitizer report, a timeout).
set -uo pipefail
build=$1 runs=$2 src=tests/fuzz status=0
mkdir -p "$build/fuzz-logs" "$build/fuzz-artifacts"
printf '%-18s %12s %9s %8s %6s %7s %s\n' target executions exec/s seconds edges features crashes
for t in fuzz_safetensors fuzz_plan fuzz_train_args fuzz_bpe; do
  work=$build/fuzz-work/$t log=$build/fuzz-logs/$t.log
  mkdir -p "$work"
  inputs=("$work" "$src/corpus/$t")
  [ -d "$src/regress/$t" ] && inputs+=("$src/regress/$t")
  dict=()
  [ -f "$src/$t.dict" ] && dict=(-dict="$src/$t.dict")
  start=$(date +%s%N)
  UBSAN_OPTIONS=print_stacktrace=1 "$build/tests/fuzz/$t" -runs="$runs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" "${dict[@]}" "${inputs[@]}" >"$log" 2>&1
  rc=$?
  seconds=$((($(date +%s%N) - start) / 1000000000))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  edges=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  features=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  crashes=0
  if [ $rc -ne 0 ]; then
    crashes=1 status=1
    echo "$t failed (exit $rc); the end of $log:" >&2
    tail -40 "$log" >&2
  fi
  printf '%-18s %12s %9s %8s %6s %7s %s\n' "$t" "${execs:-?}" "${rate:-?}" "$seconds" "${edges:-?}" \
    "${features:-?}" "$crashes"
done
exit $status
