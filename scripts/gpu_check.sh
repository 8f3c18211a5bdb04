#!/usr/bin/env bash
# The checks that need a GPU, in one run (docs/executor.md, "CUDA backends: run on an H100"):
#   1. `execute --backend cuda-single --check-gradients` of every schedule plan in PLANS/s_*.yaml
#      (tiny GPT model, fp64 reference within the bf16 tolerance);
#   2. `execute --backend cuda` of PLANS/p1.yaml as one rank (NCCL's one-rank communicators);
#   3. real-size plans PLANS/big*.yaml (from `plan --emit`) with measured runs and traces, for
#      `pipewright compare --plan ... --measured ...`;
#   4. a PyTorch profiler trace of a Llama-style step (scripts/torch_step_trace.py) for
#      `calibrate --from-trace`;
#   5. `calibrate --backend cuda --quick` with its raw measurements;
#   6. compute-sanitizer memcheck of the 1F1B cuda-single run.
# Each step runs under its own time limit and the whole under DEADLINE seconds; a failing step is
# reported and the next one runs. Usage: scripts/gpu_check.sh PIPEWRIGHT PLANS OUT [DEADLINE]
set -u
PW=$1
PLANS=$2
OUT=$3
DEADLINE=${4:-420}
START=$(date +%s)
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"

# step NAME LIMIT CMD...: runs CMD with its output in $OUT/NAME.log, under min(LIMIT, time left).
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((DEADLINE - ($(date +%s) - START) - 5))
  if [ "$left" -lt 10 ]; then
    echo "$name: SKIPPED (no time left)" | tee -a "$SUMMARY"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  local dt
  dt=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  printf '%-28s rc=%-3s %6.1f s  %s\n' "$name" "$rc" "$dt" "$(tail -n 1 "$OUT/$name.log" | cut -c1-150)" |
    tee -a "$SUMMARY"
}

for plan in "$PLANS"/s_*.yaml; do
  s=$(basename "$plan" .yaml)
  step "single_${s#s_}" 60 "$PW" execute "$plan" --backend cuda-single --iterations 3 \
    --check-gradients --measured "$OUT/single_${s#s_}_run.json"
done
step cuda_p1 60 "$PW" execute "$PLANS/p1.yaml" --backend cuda --iterations 3 --check-gradients
for plan in "$PLANS"/big*.yaml; do
  b=$(basename "$plan" .yaml)
  step "${b}_cuda-single" 90 "$PW" execute "$plan" --backend cuda-single --iterations 4 \
    --measured "$OUT/${b}_single_run.json" --trace "$OUT/${b}_single_trace.json.gz"
done
[ -f "$PLANS/big1.yaml" ] && step big1_cuda 90 "$PW" execute "$PLANS/big1.yaml" --backend cuda \
  --iterations 4 --measured "$OUT/big1_cuda_run.json"
step torch_trace 150 env -u LD_LIBRARY_PATH python3 "$SCRIPTS/torch_step_trace.py" --out "$OUT/torch_step.json" \
  --summary "$OUT/torch_step_summary.json"
[ -f "$OUT/torch_step.json" ] && gzip -f "$OUT/torch_step.json"
step calibrate_quick 240 "$PW" calibrate --backend cuda --quick --base dgx-h100 \
  --out "$OUT/h100-calibrated.yaml" --raw "$OUT/h100-raw.json"
if command -v compute-sanitizer >/dev/null; then
  step sanitizer_1f1b 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$PW" execute \
    "$PLANS/s_1f1b.yaml" --backend cuda-single --iterations 1 --check-gradients
fi
echo "=== summary ($(($(date +%s) - START)) s) ==="
cat "$SUMMARY"
