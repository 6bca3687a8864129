#!/usr/bin/env bash
# compare.sh runs extauth's side of bench/'s benchmarks in two builds, the
# commit BASE and the working tree, alternating them in explicit rounds
# (each round runs every benchmark in both builds, which goes first
# flipping every round), and prints the median of the per-round ratios,
# working tree over BASE, with internal/benchratio: how much a change costs
# each row of BENCHMARKS.md, in one run on one machine.
#
# Usage: bench/compare.sh BASE ROUNDS BENCHTIME [BENCH...]
#   e.g. bench/compare.sh main 12 2000x
# BENCH are -bench patterns of one row each; by default every row of
# BENCHMARKS.md's summary.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1 rounds=$2 benchtime=$3
shift 3
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
	benches=('BenchmarkAuthorize$/^extauth$' 'BenchmarkCallback$/^extauth$' 'BenchmarkSAML$/./^extauth$'
		'BenchmarkOIDCVerify$/^extauth$' 'BenchmarkOIDCCallback$/^extauth$')
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git archive "$base" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./bench/)
go test -c -o "$tmp/new.test" ./bench/

# run SIDE BENCH: one run of a build; BASE's results are renamed from
# .../extauth to .../base, so that benchratio pairs the two by round.
run() {
	local dir=bench
	[ "$1" = base ] && dir="$tmp/base/bench"
	(cd "$dir" && "$tmp/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "$benchtime" -test.benchmem) |
		grep '^Benchmark' |
		if [ "$1" = base ]; then sed -E 's#/extauth(-[0-9]+)?([[:space:]])#/base\1\2#'; else cat; fi
}

for ((r = 0; r < rounds; r++)); do
	for b in "${benches[@]}"; do
		if ((r % 2)); then
			run new "$b"
			run base "$b"
		else
			run base "$b"
			run new "$b"
		fi
	done
done | tee "${COMPARE_OUT:-/dev/null}" | go run ./internal/benchratio
