#!/usr/bin/env bash
# A deeper libFuzzer campaign than the test command's (about 20 s per reader), by hand:
#   scripts/fuzz.sh SECONDS [TARGET...]     (default: every target of tests/fuzz/fuzz_targets.h)
# Needs the instrumented build (scripts/bootstrap.sh sanitize, or build-sanitize/ configured with
# -DPIPEWRIGHT_LIBFUZZER=ON). Runs the targets two at a time (one per core), each from its seeds,
# the reproducers and the corpus kept by earlier runs in build-sanitize/tests/fuzz/libfuzzer/, and
# prints one line per target: inputs run, coverage, corpus size and the outcome. A crash, leak,
# timeout (10 s per input) or out-of-memory (2 GB) input is saved beside the corpus as
# <target>-crash-..., and the script exits 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fuzz=${PW_SANITIZE_BUILD_DIR:-$root/build-sanitize}/tests/fuzz
seconds=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
[ -x "$fuzz/pw_libfuzzer" ] || { echo "fuzz.sh: no $fuzz/pw_libfuzzer; run scripts/bootstrap.sh sanitize" >&2; exit 2; }
out=$fuzz/libfuzzer
# The build's list of targets (pw_fuzz_seeds checks it against the table).
read -r -a all <<<"$(sed -n '/set(PW_FUZZ_TARGETS/,/)/p' "$root/tests/fuzz/CMakeLists.txt" |
  tr -d ')' | sed 's/set(PW_FUZZ_TARGETS//; s/:[0-9]*//g' | tr -s ' \n' ' ')"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
"$fuzz/pw_fuzz_seeds" "$out/seeds" - "${all[@]}" >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
run() {
  local t=$1 kept=() log=$out/$1.log
  mkdir -p "$out/corpus/$t"
  [ -d "$root/tests/fuzz/regressions/$t" ] && kept=("$root/tests/fuzz/regressions/$t")
  if PW_FUZZ_TARGET=$t "$fuzz/pw_libfuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/$t-" "$out/corpus/$t" "$out/seeds/$t" "${kept[@]}" \
    >"$log" 2>&1; then result=clean; else result="FOUND (see $log)"; fi
  printf '%-16s %10s inputs  cov %5s  corpus %5s  %s\n' "$t" \
    "$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")" \
    "$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)" \
    "$(ls "$out/corpus/$t" | wc -l)" "$result"
  [ "$result" = clean ]
}
status=0
for ((i = 0; i < ${#targets[@]}; i += 2)); do
  run "${targets[i]}" & a=$!
  if ((i + 1 < ${#targets[@]})); then run "${targets[i + 1]}" & b=$!; wait $b || status=1; fi
  wait $a || status=1
done
exit $status
