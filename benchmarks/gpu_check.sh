#!/usr/bin/env bash
# One device call on an NVIDIA GPU machine: the GPU checks of the verifier, in steps, each under its
# own time limit, so that the call ends inside the device tool's 10-minute limit and keeps whatever
# finished. Usage on the GPU machine, from the repo root:
#
#   OUT=out STEPS="refs adv" bash benchmarks/gpu_check.sh
#
# Steps (run in the order given; each writes $OUT/<step>/ and is packed to $OUT/<step>.tgz, because
# the device tool returns at most 8 files):
#   refs  every bundled Triton reference solution (amdkv demo, torch.compile baseline on) + table;
#         REFS_FLAGS="--task ID --task ID" for a subset
#   adv   the adversarial set (benchmarks/adversarial_gpu.py)
#   fid   timing fidelity against the profiler, 14 kernels (benchmarks/timing_fidelity.py)
#   tp    Triton throughput, cold + warm on GPU 0, + two-GPU phase when 2 GPUs are visible
#   hip   every HIP reference solution + the broken HIP set, cold + warm (benchmarks/hip_gpu_check.py),
#         with the verifier's default build order (lean first since session 19; docs/hip.md)
#   hipsplit  the same without the lean scheme (AMDKV_HIP_LEAN_BUILD=0: split, then full), for comparison
#   hiplean   the same with the lean scheme forced on (AMDKV_HIP_LEAN_BUILD=1)
#   hipce    cold compile-error latency of HIP builds on this host (benchmarks/hip_compile_error.py: split,
#            lean-first, speculative full; issue 20's <= 15 s goal; docs/hip.md, "Compile errors")
#   learn the training stack learns: SFT then GRPO on procedural tasks (benchmarks/learning_run.py)
#   learnbg  the same run, longer than one call: started in a session of its own (setsid) from a private
#         copy of the repo under /tmp/amdkv-learnbg, budget LEARNBG_S (default 1100), and left running; later
#         steps of this call and of later calls go on beside it (the machine stays warm only 30 s between
#         calls: send the next call at once). While it runs, no step kills verifier workers it did not start;
#         its reference cache is capped at LEARNBG_CACHE_GIB (8)
#   learnwait  wait for learnbg's run (at most LEARNWAIT_S, default 540, and never past 15 s before CALL_S,
#         the whole call's limit counted from this script's start, when set) and pack what it wrote so far
#         (learning.json/png when it finished, else each arm's curve and SFT results, the log)
#   tthr  SFT tokens/s against plain TRL, RL step split (benchmarks/train_throughput.py)
#   dry   the 8B configs' memory dry run (benchmarks/train_dryrun.py)
#   proc  procedural templated solutions verified (benchmarks/procedural_gpu.py)
#   serve `amdkv eval` in-process against `amdkv serve` + the service's cache (benchmarks/serve_vs_inprocess.py)
#   fault the fault suite and the OS sandbox's cost (benchmarks/fault_suite_gpu.py)
#   ext   external benchmarks' references against their own harnesses (benchmarks/external_gpu.py;
#         needs .ext/ and the harness wheels: docs/benchmarks.md)
#   gen   `amdkv gen` over every bundled task with a served tiny model and with replay (benchmarks/gen_gpu.py)
#   gs    decoding speed of the learning run's model, variant by variant (benchmarks/gen_speed.py)
#   probe TritonBench-G reference crashes, one worker setting changed at a time (benchmarks/crash_probe.py)
#   clean what earlier calls on this warm machine left: the reference cache's refs/ under AMDKV_CACHE_DIR,
#         external_gpu's and workers' temp folders, stray verifier processes (not while a learnbg run
#         lives). Put it first in a call that needs the disk: on 2026-12-06 a KernelBench shard sent
#         after three calls started with ~20 of 64 GB free and 17 of its 25 problems met a full disk
# Limits (seconds, env): REFS_S=330 ADV_S=150 FID_S=150 TP_S=420 HIP_S=420 LEARN_S=560 TTHR_S=300
# DRY_S=120 PROC_S=240 PROBE_S=400 SERVE_S=240 FAULT_S=320 EXT_S=420 GEN_S=400 GS_S=240. JOBS (refs) default 8.
# The HF libraries the image lacks (datasets, trl, evaluate, fastapi, ...) come as wheels in WHEELS
# (default .whl, carried): installed once into /tmp/site, first on PYTHONPATH.
# A step cut by its limit gets SIGINT first (Python unwinds and kills its workers), SIGKILL 20 s later.
set -uo pipefail
CALL_START=$(date +%s)
OUT="${OUT:-gpu_check_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export AMDKV_CACHE_DIR="${AMDKV_CACHE_DIR:-/tmp/amdkv-cache}"
WHEELS="${WHEELS:-.whl}"
if [ -d "$WHEELS" ] && [ ! -d /tmp/site ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$WHEELS"/*.whl > /dev/null 2>&1
fi
[ -d /tmp/site ] && export PYTHONPATH="/tmp/site:$PYTHONPATH"
STEPS="${STEPS:-refs adv}"
JOBS="${JOBS:-8}"
NGPU=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
SUMMARY="$OUT/summary.txt"
disk_free() { df -h --output=avail "${AMDKV_CACHE_DIR%/*}" 2>/dev/null | tail -1 | tr -d ' '; }
mem_free() { free -g 2>/dev/null | awk '/^Mem:/ {print $7 "G"}'; }
{ date -u +"%F %T UTC"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1;
  echo "gpus visible: $NGPU; cpus: $(nproc)"
  # what earlier calls on a warm machine left: free disk where the caches live, and free host memory;
  # and that disk's file system type (tmpfs: every cached file takes host memory too; not known for
  # the device machines as of session 20)
  echo "at start: free disk $(disk_free) ($(df --output=fstype "${AMDKV_CACHE_DIR%/*}" 2>/dev/null | tail -1 | tr -d ' '));" \
       "free memory $(mem_free)"; } > "$SUMMARY"
python3 -m amdkv.cli env --json > "$OUT/env.json" 2>&1

LEARNBG=/tmp/amdkv-learnbg
learnbg_alive() { [ -f "$LEARNBG/pid" ] && kill -0 "$(cat "$LEARNBG/pid")" 2>/dev/null; }

run_step() {  # run_step NAME LIMIT_S CMD...   (output -> $OUT/NAME/log.txt)
  local name=$1 limit=$2; shift 2
  mkdir -p "$OUT/$name"
  local start=$(date +%s)
  # free disk (bytes, where the caches live) and available host memory (kB) every 2 s while the step
  # runs: session 23's first KernelBench quarter had a short write on a disk that read 64G free before
  # and after the step, and nothing said what it held in between
  ( while sleep 2; do echo "$(( $(date +%s) - start )) $(df -B1 --output=avail "${AMDKV_CACHE_DIR%/*}" 2>/dev/null | tail -1 | tr -d ' ') $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)"; done ) > "$OUT/$name/free.log" 2>/dev/null &
  local monitor=$!
  timeout -s INT -k 20 "$limit" "$@" > "$OUT/$name/log.txt" 2>&1
  local rc=$?
  kill "$monitor" 2>/dev/null
  # the least free disk and memory the step saw
  awk 'NR == 1 || $2 < d {d = $2} NR == 1 || $3 < m {m = $3} END {if (NR) printf "step '"$name"': least free disk %.1f GiB, least available memory %.1f GiB (%d samples, 2 s apart)\n", d / 2^30, m / 2^20, NR}' "$OUT/$name/free.log" | tee -a "$SUMMARY"
  # sandboxed workers run in their own sessions: make sure none outlives its step (unless a learnbg
  # run is alive: its verifier's workers match the same pattern; the step's Python unwound its own)
  learnbg_alive || pkill -9 -f 'amdkv[.]verify[.]' 2>/dev/null || true
  # the free disk after each step: the KernelBench reference phase of 2026-12-04 failed short writes
  # beside a learning run whose reference cache was not capped, with no record of the disk
  echo "step $name: rc=$rc in $(( $(date +%s) - start )) s (limit $limit s); free disk $(disk_free)" | tee -a "$SUMMARY"
}

run_step_tail() {  # run_step_tail NAME LIMIT_S LINES CMD...   (run_step, then the log's last LINES lines -> summary)
  local name=$1 limit=$2 lines=$3; shift 3
  run_step "$name" "$limit" "$@"
  tail -n "$lines" "$OUT/$name/log.txt" >> "$SUMMARY"
}

for step in $STEPS; do
  case "$step" in
    clean)
      if learnbg_alive; then
        echo "step clean: skipped, a learnbg run is alive (its files and workers are in use)" | tee -a "$SUMMARY"
      else
        # (CLEAN_KILL=0: the test suite's, whose other tests' workers run beside it)
        [ "${CLEAN_KILL:-1}" = 0 ] || pkill -9 -f 'amdkv[.]verify[.]' 2>/dev/null || true
        rm -rf "$AMDKV_CACHE_DIR/refs" "${CLEAN_TMP:-/tmp}"/external-gpu-* "${CLEAN_TMP:-/tmp}"/amdkv-worker-* 2>/dev/null
        echo "step clean: free disk $(disk_free); free memory $(mem_free)" | tee -a "$SUMMARY"
      fi ;;
    refs)
      run_step refs "${REFS_S:-330}" python3 -m amdkv.cli demo --device auto --jobs "$JOBS" \
        --out "$OUT/refs/references.jsonl" ${REFS_FLAGS:-}
      python3 benchmarks/reference_table.py "$OUT/refs/references.jsonl" > "$OUT/refs/table.md" 2>> "$OUT/refs/log.txt"
      tail -n 4 "$OUT/refs/table.md" >> "$SUMMARY" ;;
    adv)
      run_step_tail adv "${ADV_S:-150}" 1 python3 benchmarks/adversarial_gpu.py --out "$OUT/adv/adversarial.jsonl" --jobs 4 ${ADV_FLAGS:-} ;;
    fid)
      run_step fid "${FID_S:-150}" python3 benchmarks/timing_fidelity.py --out "$OUT/fid" ${FID_FLAGS:-}
      grep -E "^Goal" "$OUT/fid/fidelity.md" >> "$SUMMARY" 2>/dev/null ;;
    tp)
      run_step tp "${TP_S:-420}" python3 benchmarks/throughput.py --out "$OUT/tp" --gpus "$NGPU" ${TP_FLAGS:-}
      grep -E "^\| (cold|warm)|scaling|Steady" "$OUT/tp/throughput.md" >> "$SUMMARY" 2>/dev/null ;;
    hip|hiplean|hipsplit)  # hip: the verifier's default order; hiplean / hipsplit force the lean scheme on / off
      lean=$(case $step in hiplean) echo 1 ;; hipsplit) echo 0 ;; esac)
      run_step "$step" "${HIP_S:-420}" env ${lean:+AMDKV_HIP_LEAN_BUILD=$lean} python3 benchmarks/hip_gpu_check.py \
        --out "$OUT/$step" --budget-s "$(( ${HIP_S:-420} - 60 ))" ${HIP_FLAGS:-}
      grep -E "statuses as expected|^throughput|^schemes" "$OUT/$step/log.txt" >> "$SUMMARY" 2>/dev/null ;;
    hipce)
      run_step hipce "${HIPCE_S:-300}" python3 benchmarks/hip_compile_error.py --out "$OUT/hipce" \
        --settings cuda,cuda_lean,cuda_spec --repeat 2 ${HIPCE_FLAGS:-}
      grep -E "^\| cuda" "$OUT/hipce/compile_error.md" | tail -3 >> "$SUMMARY" 2>/dev/null ;;
    learn)
      run_step_tail learn "${LEARN_S:-560}" 12 python3 benchmarks/learning_run.py --out "$OUT/learn" \
        --budget-s "$(( ${LEARN_S:-560} - 30 ))" ${LEARN_FLAGS:-} ;;
    learnbg)
      rm -rf "$LEARNBG" && mkdir -p "$LEARNBG/repo" "$OUT/learnbg"
      tar -c --exclude=./.ext --exclude=./.whl --exclude=./.whlgen --exclude=./.git --exclude=./.venv --exclude=./build --exclude="./$OUT" . \
        | tar -x -C "$LEARNBG/repo"
      # the redirections on the whole subshell, and `exec`: a subshell left holding this script's stdout
      # kept the call's output pipe open as long as the run lived (2026-12-04: the call returned only at
      # its 600-s limit); with exec, $! is the run's own pid
      ( cd "$LEARNBG/repo" && PYTHONPATH="$LEARNBG/repo:$PYTHONPATH" AMDKV_CACHE_DIR="$LEARNBG/cache" \
          AMDKV_REFERENCE_CACHE_GIB="${LEARNBG_CACHE_GIB:-8}" exec setsid nohup \
          timeout -s INT -k 20 "${LEARNBG_S:-1100}" python3 benchmarks/learning_run.py --out "$LEARNBG/out" \
          --work "$LEARNBG/work" --budget-s "$(( ${LEARNBG_S:-1100} - 30 ))" ${LEARN_FLAGS:-} \
        ) > "$LEARNBG/log.txt" 2>&1 < /dev/null &
      echo $! > "$LEARNBG/pid"
      echo "step learnbg: started pid $(cat "$LEARNBG/pid"), budget ${LEARNBG_S:-1100} s" | tee -a "$SUMMARY"
      echo "started $(date -u +%T) budget ${LEARNBG_S:-1100} s flags ${LEARN_FLAGS:-}" > "$OUT/learnbg/started.txt" ;;
    learnwait)
      mkdir -p "$OUT/learnwait"
      start=$(date +%s)
      wait_s=${LEARNWAIT_S:-540}
      if [ -n "${CALL_S:-}" ] && [ $(( CALL_S - 15 - (start - CALL_START) )) -lt "$wait_s" ]; then
        wait_s=$(( CALL_S - 15 - (start - CALL_START) ))
      fi
      while learnbg_alive && [ ! -f "$LEARNBG/out/learning.json" ] && [ $(( $(date +%s) - start )) -lt "$wait_s" ]; do
        sleep 5
      done
      state=$( [ -f "$LEARNBG/out/learning.json" ] && echo finished || { learnbg_alive && echo "still running" || echo "ended without learning.json"; } )
      cp -r "$LEARNBG/out/." "$OUT/learnwait/" 2>/dev/null
      cp "$LEARNBG"/work/*.json "$LEARNBG/log.txt" "$OUT/learnwait/" 2>/dev/null
      echo "step learnwait: $state after $(( $(date +%s) - start )) s of waiting" | tee -a "$SUMMARY"
      tail -n 12 "$LEARNBG/log.txt" >> "$SUMMARY" 2>/dev/null ;;
    tthr)
      run_step_tail tthr "${TTHR_S:-300}" 8 python3 benchmarks/train_throughput.py --out "$OUT/tthr" ${TTHR_FLAGS:-} ;;
    dry)
      run_step_tail dry "${DRY_S:-120}" 6 python3 benchmarks/train_dryrun.py --out "$OUT/dry" ${DRY_FLAGS:-} ;;
    proc)
      run_step_tail proc "${PROC_S:-240}" 14 python3 benchmarks/procedural_gpu.py --out "$OUT/proc" \
        --budget-s "$(( ${PROC_S:-240} - 40 ))" ${PROC_FLAGS:-} ;;
    serve)
      run_step_tail serve "${SERVE_S:-240}" 8 python3 benchmarks/serve_vs_inprocess.py --out "$OUT/serve" ${SERVE_FLAGS:-} ;;
    fault)
      run_step_tail fault "${FAULT_S:-320}" 30 python3 benchmarks/fault_suite_gpu.py --out "$OUT/fault" ${FAULT_FLAGS:-} ;;
    ext)
      run_step_tail ext "${EXT_S:-420}" 30 python3 benchmarks/external_gpu.py --out "$OUT/ext" --kernelbench .ext/KernelBench \
        --geak-eval .ext/GEAK-eval --tritonbench .ext/TritonBench --harness-site /tmp/site --jobs 8 ${EXT_FLAGS:-} ;;
    gen)
      run_step_tail gen "${GEN_S:-400}" 12 python3 benchmarks/gen_gpu.py --out "$OUT/gen" \
        --total-s "$(( ${GEN_S:-400} - 30 ))" ${GEN_FLAGS:-} ;;
    probe)
      run_step_tail probe "${PROBE_S:-400}" 8 python3 benchmarks/crash_probe.py --out "$OUT/probe" \
        --geak-eval .ext/GEAK-eval --tritonbench .ext/TritonBench ${PROBE_FLAGS:-} ;;
    gs)
      run_step_tail gs "${GS_S:-240}" 10 python3 benchmarks/gen_speed.py --out "$OUT/gs" ${GS_FLAGS:-} ;;
    *) echo "unknown step $step (refs adv fid tp hip hiplean hipsplit hipce learn learnbg learnwait tthr dry proc serve fault ext gen gs probe)" | tee -a "$SUMMARY"; continue ;;
  esac
  # caches (references, compiles, verdicts) and installed wheels (gen's site/) stay behind: large, not results
  tar -C "$OUT" --exclude='cache-*' --exclude='compile-cache' --exclude='build-cache' --exclude='refs' --exclude='site' -czf "$OUT/$step.tgz" "$step" \
    && rm -rf "${OUT:?}/$step"
done
cat "$SUMMARY"
