#!/usr/bin/env bash
# compare.sh runs extauth's side of bench/'s benchmarks in two builds, the
# commit BASE and the working tree, alternating them in explicit rounds
# (each round runs every row in both builds, which goes first flipping
# every round), and prints the median of the per-round ratios, working
# tree over BASE, with internal/benchratio: what a change costs each row of
# BENCHMARKS.md.
#
# Usage: bench/compare.sh BASE ROUNDS [BENCH=N...]
#   e.g. bench/compare.sh main 15
# BENCH is the -bench pattern of one row, N the operations of its shorter
# run; by default every row of BENCHMARKS.md's summary, N sized for about
# half a second of CPU per run. SIDE names the side compared across the
# builds when it is not extauth's: an anchor whose library was upgraded,
# e.g. SIDE=crewjam bench/compare.sh main 9 'BenchmarkSAML$/^acs_encrypted_assertion$/^crewjam$=100'.
#
# Each figure is the process's CPU time (user + system) per operation, not
# the wall time: each build runs a row at N and at 3N operations, and the
# difference of the two runs' CPU time is divided by 2N, so that the setup
# cancels out and the other processes of a shared, loaded machine do not
# count. B/op and allocs/op are the 3N run's. COMPARE_OUT names a file that
# keeps the per-run lines.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1 rounds=$2
side=${SIDE:-extauth}
shift 2
benches=("$@")
if [ ${#benches[@]} -eq 0 ]; then
	benches=('BenchmarkAuthorize$/^extauth$=20000' 'BenchmarkCallback$/^extauth$=5000'
		'BenchmarkSAML$/^authorize_unsigned$/^extauth$=20000' 'BenchmarkSAML$/^authorize_signed$/^extauth$=300'
		'BenchmarkSAML$/^acs_signed_response_and_assertion$/^extauth$=300' 'BenchmarkSAML$/^acs_encrypted_assertion$/^extauth$=100'
		'BenchmarkOIDCVerify$/^extauth$=4000' 'BenchmarkOIDCCallback$/^extauth$=2000')
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/base"
git archive "$base" | tar -x -C "$tmp/base"
(cd "$tmp/base" && go test -c -o "$tmp/base.test" ./bench/)
go test -c -o "$tmp/new.test" ./bench/

# cpu BUILD BENCH OPS: runs one row, leaves its result line in $tmp/line
# and prints the process's CPU seconds.
cpu() {
	local dir=bench
	[ "$1" = base ] && dir="$tmp/base/bench"
	local TIMEFORMAT='%3U %3S'
	{ time (cd "$dir" && "$tmp/$1.test" -test.run '^$' -test.bench "$2" -test.benchtime "${3}x" -test.benchmem > "$tmp/out"); } 2> "$tmp/time"
	grep '^Benchmark' "$tmp/out" > "$tmp/line"
	awk '{print $1 + $2}' "$tmp/time"
}

# run BUILD BENCH=N: one measurement of a row, as a benchmark line with
# the CPU time per operation; BASE's is renamed from .../SIDE to
# .../base, and the working tree's to .../extauth, so that benchratio
# pairs the two by round.
run() {
	local one three n=${2##*=}
	set -- "$1" "${2%=*}"
	one=$(cpu "$1" "$2" "$n")
	three=$(cpu "$1" "$2" $((3 * n)))
	awk -v one="$one" -v three="$three" -v n="$n" '{ $3 = sprintf("%.0f", (three - one) * 1e9 / (2 * n)); print }' "$tmp/line" |
		if [ "$1" = base ]; then sed -E "s#/${side}(-[0-9]+)? #/base\\1 #"; else sed -E "s#/${side}(-[0-9]+)? #/extauth\\1 #"; fi
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
