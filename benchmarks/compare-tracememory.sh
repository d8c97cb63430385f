#!/usr/bin/env bash
# compare-tracememory.sh: the span filter's trace memory benchmarks (tracememory_test.go and
# BenchmarkSpanFilter) against an older commit of the processor, side by side in the same run.
#
# The benchmark files of the working tree are compiled twice: once against this worktree's
# svcspanfilterprocessor and pkg, once against those of BASE (taken with `git archive` into a
# temporary module tree, GOWORK=off). The two test binaries then run in alternation, COUNT rounds
# of -count=1 each, so that load from other processes on a shared machine falls on both sides
# alike; benchstat compares them.
#
# usage: benchmarks/compare-tracememory.sh [BASE] [COUNT] [BENCH-REGEXP]
#   BASE   commit of the "before" processor (default 61421b8: before the trace memory)
#   COUNT  rounds per side (default 6)
#   BENCH  -bench regexp (default: the trace memory benchmarks and BenchmarkSpanFilter)
# Environment: CPU (GOMAXPROCS of the benchmarks, default 1, see below), BENCHTIME, OUT, GO.
# Output: $OUT (default build/bench-tracememory/) old.txt, new.txt and benchstat.txt.
set -euo pipefail

BASE=${1:-61421b8}
COUNT=${2:-6}
# (BenchmarkSpanFilter also runs its contrib side, ottl: the same code in both builds.)
BENCH=${3:-'^(BenchmarkSpanFilter|BenchmarkSpanFilterChildrenFirst|BenchmarkConcurrentConsume16|BenchmarkTraceWith5000HeldSpans|BenchmarkSlowNextConsumer)$'}
BENCHTIME=${BENCHTIME:-}
# GOMAXPROCS of the benchmarks (-test.cpu). One by default: the CPU figure is then the processor's
# work plus the garbage collection it causes. With idle cores the runtime's idle-priority mark
# workers fill them with opportunistic marking, which the process's CPU time counts: on 2 cores that
# figure varied by ±25-45% between runs of one build and hid a gap of 1.4x in the held path's own
# work (measured 2026-11-23). CPU=2 measures as before.
CPU=${CPU:-1}
GO=${GO:-go}

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
out=${OUT:-$root/build/bench-tracememory}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The "before" tree: the processor and its in-repo dependencies at BASE, the benchmarks of now.
git -C "$root" archive "$BASE" svcspanfilterprocessor svcmetadataprocessor pkg | tar -x -C "$tmp"
mkdir -p "$tmp/benchmarks"
cp "$root"/benchmarks/{go.mod,go.sum,doc.go,spanfilter_test.go,tracememory_test.go} "$tmp/benchmarks/"

echo "building the benchmark binaries (old: $BASE, new: working tree)" >&2
(cd "$tmp/benchmarks" && GOWORK=off GOFLAGS=-mod=mod $GO test -c -o "$out/old.test" .)
(cd "$root/benchmarks" && $GO test -c -o "$out/new.test" .)

: >"$out/old.txt"
: >"$out/new.txt"
args=(-test.run '^$' -test.bench "$BENCH" -test.benchmem -test.count 1 -test.cpu "$CPU")
if [[ -n "$BENCHTIME" ]]; then args+=(-test.benchtime "$BENCHTIME"); fi
for i in $(seq 1 "$COUNT"); do
	echo "round $i/$COUNT" >&2
	(cd "$tmp/benchmarks" && "$out/old.test" "${args[@]}" | tee -a "$out/old.txt" >/dev/null)
	(cd "$root/benchmarks" && "$out/new.test" "${args[@]}" | tee -a "$out/new.txt" >/dev/null)
done
$GO run golang.org/x/perf/cmd/benchstat@latest "$out/old.txt" "$out/new.txt" | tee "$out/benchstat.txt"
