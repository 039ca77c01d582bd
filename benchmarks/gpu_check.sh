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
#   extbg  external_gpu.py longer than one call, the way learnbg runs the learning run: from a private copy under
#         /tmp/amdkv-extbg, budget EXTBG_S (default 1500), one run with EXT_FLAGS, or EXTBG_SCRIPT (a plan of
#         several runs: benchmarks/plans/kb_level1_finish.sh); output under /tmp/amdkv-extbg/out
#   extwait  wait for extbg's run (at most EXTWAIT_S, default 540, and never past 15 s before CALL_S) and pack
#         what it wrote so far (reports, run folders with each verdict, harness rows, its log)
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

# background runs (learnbg, extbg): one of each kind at a time, in /tmp/amdkv-<kind>, outliving the call
# that starts them (the machine stays warm 30 s between calls: send the next call at once)
LEARNBG=/tmp/amdkv-learnbg
EXTBG=/tmp/amdkv-extbg
bg_alive() {  # bg_alive [DIR]: the run in DIR (default: any background run) is alive
  local pidfile
  for pidfile in "${1:-/tmp/amdkv-*bg}"/pid; do
    [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null && return 0
  done
  return 1
}
# the external benchmarks' checkouts (carried in .ext) and the arguments every `ext` run gets. Absolute
# paths of this tree, also for an extbg run from its private copy: a suite spec names its checkout's path,
# and --amdkv-from / --rerender refuse to mix reports of other paths (so calls after extbg carry no .ext:
# a carried path is replaced, one not carried stays as it is)
EXT_KERNELBENCH="${EXT_KERNELBENCH:-$PWD/.ext/KernelBench}" EXT_GEAK="${EXT_GEAK:-$PWD/.ext/GEAK-eval}"
EXT_TRITONBENCH="${EXT_TRITONBENCH:-$PWD/.ext/TritonBench}"
ext_args() { echo "--kernelbench $EXT_KERNELBENCH --geak-eval $EXT_GEAK --tritonbench $EXT_TRITONBENCH --harness-site /tmp/site --jobs 8"; }

bg_start() {  # bg_start STEP DIR BUDGET_S CMD...: CMD from a private copy of the repo under DIR/repo (so the
  # next call's copy of the working tree does not change files under it), in a session of its own, under
  # timeout BUDGET_S (SIGINT, SIGKILL 20 s later); BG_DIR and BG_DEADLINE (epoch s) in its environment
  local step=$1 dir=$2 budget=$3; shift 3
  rm -rf "$dir" && mkdir -p "$dir/repo" "$OUT/$step"
  tar -c --exclude=./.whl --exclude=./.whlgen --exclude=./.git --exclude=./.venv --exclude=./build --exclude="./$OUT" . \
    | tar -x -C "$dir/repo"
  # the redirections on the whole subshell, and `exec`: a subshell left holding this script's stdout kept
  # the call's output pipe open as long as the run lived (2026-12-04: the call returned only at its 600-s
  # limit); with exec, $! is the run's own pid
  ( cd "$dir/repo" && PYTHONPATH="$dir/repo:$PYTHONPATH" BG_DIR="$dir" BG_DEADLINE=$(( $(date +%s) + budget )) \
      exec setsid nohup timeout -s INT -k 20 "$budget" "$@" ) > "$dir/log.txt" 2>&1 < /dev/null &
  echo $! > "$dir/pid"
  echo "step $step: started pid $(cat "$dir/pid"), budget $budget s" | tee -a "$SUMMARY"
  echo "started $(date -u +%T) budget $budget s: $*" > "$OUT/$step/started.txt"
}

bg_wait() {  # bg_wait DIR WAIT_S DONE_FILE: wait while DIR's run lives and DONE_FILE (if named) is not there,
  # at most WAIT_S and never past 15 s before CALL_S (the whole call's limit from this script's start);
  # prints finished / still running / ended without DONE_FILE
  local dir=$1 wait_s=$2 done_file=$3 start
  start=$(date +%s)
  if [ -n "${CALL_S:-}" ] && [ $(( CALL_S - 15 - (start - CALL_START) )) -lt "$wait_s" ]; then
    wait_s=$(( CALL_S - 15 - (start - CALL_START) ))
  fi
  while bg_alive "$dir" && { [ -z "$done_file" ] || [ ! -f "$done_file" ]; } && [ $(( $(date +%s) - start )) -lt "$wait_s" ]; do
    sleep 5
  done
  if [ -n "$done_file" ] && [ -f "$done_file" ]; then echo finished
  elif bg_alive "$dir"; then echo "still running"
  elif [ -n "$done_file" ]; then echo "ended without $(basename "$done_file")"
  else echo "finished (rc $(cat "$dir/rc" 2>/dev/null || echo unknown))"; fi
}

bg_collect() {  # bg_collect STEP DIR WAIT_S DONE_FILE LINES [FILE...]: bg_wait, then pack what the run wrote so far
  # (DIR/out, its log, FILEs) into $OUT/STEP, and the log's last LINES lines into the summary
  local step=$1 dir=$2 wait_s=$3 done_file=$4 lines=$5 start state; shift 5
  mkdir -p "$OUT/$step"
  start=$(date +%s)
  state=$(bg_wait "$dir" "$wait_s" "$done_file")
  cp -r "$dir/out/." "$OUT/$step/" 2>/dev/null
  cp "$dir/log.txt" "$@" "$OUT/$step/" 2>/dev/null
  echo "step $step: $state after $(( $(date +%s) - start )) s of waiting" | tee -a "$SUMMARY"
  tail -n "$lines" "$dir/log.txt" >> "$SUMMARY" 2>/dev/null
}

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
  bg_alive || pkill -9 -f 'amdkv[.]verify[.]' 2>/dev/null || true
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
      if bg_alive; then
        echo "step clean: skipped, a background run is alive (its files and workers are in use)" | tee -a "$SUMMARY"
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
      bg_start learnbg "$LEARNBG" "${LEARNBG_S:-1100}" env AMDKV_CACHE_DIR="$LEARNBG/cache" \
        AMDKV_REFERENCE_CACHE_GIB="${LEARNBG_CACHE_GIB:-8}" python3 benchmarks/learning_run.py --out "$LEARNBG/out" \
        --work "$LEARNBG/work" --budget-s "$(( ${LEARNBG_S:-1100} - 30 ))" ${LEARN_FLAGS:-} ;;
    learnwait)
      bg_collect learnwait "$LEARNBG" "${LEARNWAIT_S:-540}" "$LEARNBG/out/learning.json" 12 "$LEARNBG"/work/*.json ;;
    extbg)
      # EXTBG_SCRIPT (a bash script of the repo, run with EXT_ARGS, BG_DIR and BG_DEADLINE set): several
      # external_gpu.py runs one after another (benchmarks/plans/); else one run with EXT_FLAGS; output under
      # $EXTBG/out either way
      if [ -n "${EXTBG_SCRIPT:-}" ]; then
        bg_start extbg "$EXTBG" "${EXTBG_S:-1500}" env EXT_ARGS="$(ext_args)" bash -c 'bash "$0"; echo $? > "$BG_DIR/rc"' \
          "$EXTBG_SCRIPT"
      else
        bg_start extbg "$EXTBG" "${EXTBG_S:-1500}" bash -c 'python3 benchmarks/external_gpu.py --out "$BG_DIR/out" "$@"; echo $? > "$BG_DIR/rc"' \
          external_gpu $(ext_args) ${EXT_FLAGS:-}
      fi ;;
    extwait)
      # what the run wrote so far comes back every call (report, run folders with each verdict, harness rows):
      # if the last call ends before the run, its harness rows rebuild the harness side (--rerender)
      bg_collect extwait "$EXTBG" "${EXTWAIT_S:-540}" "" 30 ;;
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
      run_step_tail ext "${EXT_S:-420}" 30 python3 benchmarks/external_gpu.py --out "$OUT/ext" $(ext_args) ${EXT_FLAGS:-} ;;
    gen)
      run_step_tail gen "${GEN_S:-400}" 12 python3 benchmarks/gen_gpu.py --out "$OUT/gen" \
        --total-s "$(( ${GEN_S:-400} - 30 ))" ${GEN_FLAGS:-} ;;
    probe)
      run_step_tail probe "${PROBE_S:-400}" 8 python3 benchmarks/crash_probe.py --out "$OUT/probe" \
        --geak-eval .ext/GEAK-eval --tritonbench .ext/TritonBench ${PROBE_FLAGS:-} ;;
    gs)
      run_step_tail gs "${GS_S:-240}" 10 python3 benchmarks/gen_speed.py --out "$OUT/gs" ${GS_FLAGS:-} ;;
    *) echo "unknown step $step (refs adv fid tp hip hiplean hipsplit hipce learn learnbg learnwait tthr dry proc serve fault ext extbg extwait gen gs probe)" | tee -a "$SUMMARY"; continue ;;
  esac
  # caches (references, compiles, verdicts) and installed wheels (gen's site/) stay behind: large, not results
  tar -C "$OUT" --exclude='cache-*' --exclude='compile-cache' --exclude='build-cache' --exclude='refs' --exclude='site' -czf "$OUT/$step.tgz" "$step" \
    && rm -rf "${OUT:?}/$step"
done
cat "$SUMMARY"
