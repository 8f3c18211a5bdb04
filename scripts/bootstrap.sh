#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine (run as root, or with sudo available):
#   scripts/bootstrap.sh run    install missing packages, build (Release), plan the bundled default
#   scripts/bootstrap.sh test   install missing packages, build (Release), run the test suite, then
#                               the whole suite again built with clang under ASan + UBSan in
#                               build-sanitize/ and the libFuzzer harnesses (what CI runs)
#   scripts/bootstrap.sh sanitize  only that instrumented half, in build-sanitize/
# Every sanitizer report is fatal; leak checking is off in the suite (Open MPI keeps its
# allocations until exit by design) and on in the libFuzzer runs (no MPI there).
set -euo pipefail
mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}

packages=(build-essential cmake ninja-build ccache pkg-config libfmt-dev libyaml-cpp-dev
  nlohmann-json3-dev libeigen3-dev libboost-graph-dev libcli11-dev libtbb-dev libopenmpi-dev
  openmpi-bin zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev)
if [ "$mode" = test ] || [ "$mode" = sanitize ]; then
  packages+=(chromium clang libclang-rt-14-dev)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  echo "bootstrap: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

export CCACHE_BASEDIR=$root  # clones in other folders share the compiler cache

# The instrumented half: everything but the benchmarks and CUDA, compiled by clang at -O1 (three
# times faster to build than gcc -O3 with sanitizers) with ASan, UBSan and libFuzzer's coverage.
sanitized_suite() {
  local sbuild=${PW_SANITIZE_BUILD_DIR:-$root/build-sanitize}
  CC=clang CXX=clang++ cmake -S "$root" -B "$sbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" -DPIPEWRIGHT_SANITIZE=address,undefined \
    -DPIPEWRIGHT_LIBFUZZER=ON -DPIPEWRIGHT_BUILD_BENCH=OFF -DPIPEWRIGHT_ENABLE_CUDA=OFF
  cmake --build "$sbuild" -j"$(nproc)"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  # Timing tests measure the uninstrumented build only; the exhaustive certificate searches
  # (minutes in the plain build, over 15 minutes each instrumented) run there too.
  ctest --test-dir "$sbuild" -LE 'gpu|timing|fuzz' -E "$heavy" --output-on-failure -j"$(nproc)"
  # The readers' mutation fuzzing with 5x the inputs, then libFuzzer on every reader.
  PW_FUZZ_INPUTS=2000 ctest --test-dir "$sbuild" -L fuzz -LE libfuzzer --output-on-failure \
    -j"$(nproc)"
  ctest --test-dir "$sbuild" -L libfuzzer --output-on-failure -j"$(nproc)"
}
heavy='^Search\.(DesTierIsCertifiedAgainstAnExhaustiveDes|AtLeastAsFastAsPublishedConfigurations)$'

if [ "$mode" != sanitize ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build" -j"$(nproc)"
fi

case "$mode" in
  run)
    "$build/tools/pipewright" plan
    ;;
  test)
    # mpirun refuses root unless told otherwise; CI runs as root.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Timing-sensitive tests first, alone; then everything else in parallel.
    ctest --test-dir "$build" -L timing -LE gpu --output-on-failure
    ctest --test-dir "$build" -LE 'gpu|timing' --output-on-failure -j"$(nproc)"
    sanitized_suite
    ;;
  sanitize)
    sanitized_suite
    ;;
  *)
    echo "usage: $0 run|test|sanitize" >&2
    exit 2
    ;;
esac
