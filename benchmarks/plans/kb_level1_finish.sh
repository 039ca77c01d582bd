#!/usr/bin/env bash
# KernelBench level 1 to its end as one background run on the GPU machine (gpu_check.sh `extbg` with
# EXTBG_SCRIPT=benchmarks/plans/kb_level1_finish.sh, then `extwait` call after call):
#   1. amdkv's side of the problems KB_MERGED has not judged (the largest, one at a time: --skip-done),
#      and KB_RERUN's again (--rerun: judged before a fix);
#   2. KB_MERGED and step 1 merged (--rerender --later-replaces: step 1's rows replace not-started and re-run ones);
#   3. KernelBench's own harness over the whole level, smallest first, every job ending 40 s before the run's
#      deadline (--harness-deadline; --amdkv-from the merge; --skip-done KB_HARNESS_DONE's harness rows, when a
#      call before ran some), one job at a time as KernelBench runs it, up to 300 s a job.
# Why one background run and not a call per step: a call's step must end inside the device tool's 10
# minutes, so each call left ~100-150 s of budget unused for a large problem that might start at its end
# (session 24: calls ended at 366-455 s of 560), and a cut step loses the verdict in flight. The run's
# output comes back with every `extwait` (gpu_check.sh), each step in a folder of its own under
# $BG_DIR/out: amdkv/, merged/, harness/.
#
# Environment: EXT_ARGS (checkouts, from gpu_check.sh), BG_DIR and BG_DEADLINE (epoch seconds, from
# bg_start); KB_MERGED (the amdkv side so far), KB_RERUN (task ids whose amdkv side runs again,
# space-separated), KB_HARNESS_DONE (reports whose harness rows to skip, space-separated), KB_AMDKV_S
# (start budget of step 1, default 700), PLAN_FLAGS (added to every run: `--device cpu` in the test).
# The defaults go on from session 26: its merge (amdkv's side of all 100, `45_Average_Pooling_2D` re-run
# after the fix for the verifier's own copies), nothing to re-run, and the harness reports of sessions 25
# and 26 (76 problems run). With nothing left on amdkv's side, step 1 says so and step 3 runs the harness.
set -u
S25=docs/results/2026-12-06-session25-h100
S26=docs/results/2026-12-06-session26-h100
MERGED="${KB_MERGED:-$S26/ext_kb_level1_merged.json}"
RERUN="${KB_RERUN-}"
HARNESS_DONE="${KB_HARNESS_DONE-$S25/step3_harness_a.json $S25/step3_harness_b.json $S26/step3_harness_c.json $S26/step3_harness_d.json $S26/step3_harness_e.json $S26/step3_harness_f.json}"
OUTD="$BG_DIR/out"
mkdir -p "$OUTD"
left() { echo $(( BG_DEADLINE - $(date +%s) )); }
min() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }
# shellcheck disable=SC2086  # EXT_ARGS and PLAN_FLAGS are argument lists
run() { python3 benchmarks/external_gpu.py "$@" ${PLAN_FLAGS:-}; }

echo "== plan step 1: amdkv's side of what $MERGED has not judged${RERUN:+, and again: $RERUN} ($(left) s left)"
rerun_args=()
for t in $RERUN; do rerun_args+=(--rerun "$t"); done
# shellcheck disable=SC2086
run --out "$OUTD/amdkv" $EXT_ARGS --only kb --shard 0/1 --kb-jobs 2 \
  --budgets "kb=$(min "${KB_AMDKV_S:-700}" $(( $(left) - 300 ))),kb_harness=0" --skip-done "$MERGED" \
  "${rerun_args[@]}"
echo "plan step 1: rc $?"
[ -f "$OUTD/amdkv/external_gpu.json" ] || echo "plan step 1 wrote no report (nothing left to run?): the amdkv side stays $MERGED"

AMDKV_SIDE="$MERGED"
if [ -f "$OUTD/amdkv/external_gpu.json" ]; then
  echo "== plan step 2: merge"
  run --out "$OUTD/merged" --rerender "$MERGED" "$OUTD/amdkv/external_gpu.json" --later-replaces > /dev/null \
    && AMDKV_SIDE="$OUTD/merged/external_gpu.json"
  echo "plan step 2: amdkv side from $AMDKV_SIDE"
fi

echo "== plan step 3: KernelBench's harness ($(left) s left)"
# a job runs at most 300 s (45_Average_Pooling_2D, last, an estimated ~240), and every job ends 40 s before the
# run's deadline (--harness-deadline: one still running then is "not run (deadline)" and the next run's
# --skip-done starts it again); none starts in the last minute before that. Before session 26 no job started in
# the last 320 s, kept for a job that mostly took a minute.
HARNESS_END=$(( $(left) - 40 ))
# shellcheck disable=SC2086
run --out "$OUTD/harness" $EXT_ARGS --only kb --shard 0/1 --amdkv-from "$AMDKV_SIDE" \
  --budgets "kb_harness=$(( HARNESS_END - 60 ))" --harness-deadline "$HARNESS_END" --kb-harness-timeout 300 \
  ${HARNESS_DONE:+--skip-done $HARNESS_DONE}
echo "plan step 3: rc $?"
