#!/usr/bin/env bash
# One-command set-up for a fresh Debian 12 machine (run as root, or with sudo available):
#   scripts/bootstrap.sh run    install missing packages, build (Release), plan the bundled default
#   scripts/bootstrap.sh test   install missing packages, build (Release), run the test suite
#   (test also runs the fuzzed readers under ASan + UBSan, built in build-sanitize/)
#   scripts/bootstrap.sh sanitize  the same suite built with ASan + UBSan in build-sanitize/
#                                  (every finding fatal; Open MPI's own leaks not counted)
set -euo pipefail
mode=${1:-run}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PW_BUILD_DIR:-$root/build}

packages=(build-essential cmake ninja-build ccache pkg-config libfmt-dev libyaml-cpp-dev
  nlohmann-json3-dev libeigen3-dev libboost-graph-dev libcli11-dev libtbb-dev libopenmpi-dev
  openmpi-bin zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev)
if [ "$mode" = test ] || [ "$mode" = sanitize ]; then packages+=(chromium); fi

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

if [ "$mode" = sanitize ]; then
  build=${PW_SANITIZE_BUILD_DIR:-$root/build-sanitize}
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPIPEWRIGHT_SANITIZE=address,undefined
else
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build "$build" -j"$(nproc)"

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
    # The fuzzed input readers once more, built with ASan + UBSan (only their test binary and the
    # libraries it links, in build-sanitize/, about 6 minutes on 2 cores) and fed 5x the inputs:
    # any sanitizer report fails the test.
    sbuild=${PW_SANITIZE_BUILD_DIR:-$root/build-sanitize}
    cmake -S "$root" -B "$sbuild" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DPIPEWRIGHT_SANITIZE=address,undefined
    cmake --build "$sbuild" -j"$(nproc)" --target fuzz_tests
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      PW_FUZZ_INPUTS=2000 ctest --test-dir "$sbuild" -L fuzz --output-on-failure -j"$(nproc)"
    ;;
  sanitize)
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Any report fails its test; leak checking is off because Open MPI keeps its allocations
    # until exit by design (its own leaks are not ours to fix).
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    # Timing tests measure the uninstrumented build only.
    ctest --test-dir "$build" -LE 'gpu|timing' --output-on-failure -j"$(nproc)"
    ;;
  *)
    echo "usage: $0 run|test|sanitize" >&2
    exit 2
    ;;
esac
