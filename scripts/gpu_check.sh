#!/usr/bin/env bash
# The checks that need a GPU, in one run (docs/executor.md, "CUDA backends on an H100"). Groups,
# chosen by GPU_CHECK_STEPS (default: all, in this order):
#   executor    `execute --backend cuda-single --check-gradients` of every plan PLANS/s_*.yaml
#               (tiny GPT model, fp64 reference within the bf16 tolerance); `--backend cuda` of
#               PLANS/p1.yaml as one rank (NCCL's one-rank communicators); the real-size plans
#               PLANS/big*.yaml (from `plan --emit`) with measured runs, for `pipewright compare`;
#   pipelining  pipewright's PyTorch CSVs (PLANS/csv/*.csv, compute_only; PLANS/csv/comms_*.csv,
#               compute_comms) through PyTorch's schedule runtime (scripts/torch_pipelining_check.py)
#   sanitizer   compute-sanitizer memcheck of the 1F1B cuda-single run (API errors that NCCL's
#               own kernel probing raises are not reported) and racecheck of the one-rank run;
#   torch, torch_compiled  PyTorch profiler traces of a Llama-style step, eager and
#               torch.compile (scripts/torch_step_trace.py), for `calibrate --from-trace`;
#   calibrate, calibrate_full  `calibrate --backend cuda --quick`, and the full sweep, with raw
#               measurements.
# Each step runs under its own time limit and the whole under DEADLINE seconds; a failing step is
# reported and the next one runs. Usage: scripts/gpu_check.sh PIPEWRIGHT PLANS OUT [DEADLINE]
set -u
PW=$1
PLANS=$2
OUT=$3
DEADLINE=${4:-420}
STEPS=${GPU_CHECK_STEPS:-executor pipelining sanitizer torch torch_compiled calibrate calibrate_full}
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
  local t0 rc dt
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  dt=$(awk "BEGIN{print $(date +%s.%N) - $t0}")
  printf '%-28s rc=%-3s %6.1f s  %s\n' "$name" "$rc" "$dt" "$(tail -n 1 "$OUT/$name.log" | cut -c1-150)" |
    tee -a "$SUMMARY"
}

for group in $STEPS; do
  case $group in
    executor)
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
      [ -f "$PLANS/big1.yaml" ] && step big1_cuda 90 "$PW" execute "$PLANS/big1.yaml" \
        --backend cuda --iterations 4 --measured "$OUT/big1_cuda_run.json"
      ;;
    pipelining)
      # one process group per CSV, so that a schedule PyTorch cannot run does not stop the rest
      env -u LD_LIBRARY_PATH python3 -c "import inspect, torch.distributed.pipelining.stage as s; print(inspect.getsource(s))" >"$OUT/torch_stage_src.py" 2>&1
      for csv in "$PLANS"/csv/*.csv; do
        c=$(basename "$csv" .csv)
        form=compute_only
        case $c in comms_*) form=compute_comms ;; esac
        step "pp_$c" 45 env -u LD_LIBRARY_PATH python3 "$SCRIPTS/torch_pipelining_check.py" \
          --form $form "$csv"
        case $c in v-half)
          step "pp_${c}_inferred" 45 env -u LD_LIBRARY_PATH python3 \
            "$SCRIPTS/torch_pipelining_check.py" --form $form --infer-shapes "$csv" ;;
        esac
      done
      ;;
    sanitizer)
      if command -v compute-sanitizer >/dev/null; then
        step memcheck_1f1b 90 compute-sanitizer --tool memcheck --report-api-errors no \
          --error-exitcode 9 "$PW" execute "$PLANS/s_1f1b.yaml" --backend cuda-single \
          --iterations 1 --check-gradients
        step racecheck_p1 90 compute-sanitizer --tool racecheck --report-api-errors no \
          --error-exitcode 9 "$PW" execute "$PLANS/p1.yaml" --backend cuda --iterations 1
      fi
      ;;
    torch)
      step torch_trace 150 env -u LD_LIBRARY_PATH python3 "$SCRIPTS/torch_step_trace.py" \
        --out "$OUT/torch_step.json" --summary "$OUT/torch_step_summary.json"
      [ -f "$OUT/torch_step.json" ] && gzip -f "$OUT/torch_step.json"
      ;;
    torch_compiled)
      step torch_trace_compiled 180 env -u LD_LIBRARY_PATH python3 "$SCRIPTS/torch_step_trace.py" \
        --compile --out "$OUT/torch_step_compiled.json" \
        --summary "$OUT/torch_step_compiled_summary.json"
      [ -f "$OUT/torch_step_compiled.json" ] && gzip -f "$OUT/torch_step_compiled.json"
      ;;
    calibrate)
      step calibrate_quick 240 "$PW" calibrate --backend cuda --quick --base dgx-h100 \
        --out "$OUT/h100-calibrated.yaml" --raw "$OUT/h100-raw.json"
      ;;
    calibrate_full)
      step calibrate_full 240 "$PW" calibrate --backend cuda --base dgx-h100 \
        --out "$OUT/h100-calibrated-full.yaml" --raw "$OUT/h100-raw-full.json"
      ;;
    *) echo "unknown step group $group" | tee -a "$SUMMARY" ;;
  esac
done
echo "=== summary ($(($(date +%s) - START)) s) ==="
cat "$SUMMARY"
