#!/usr/bin/env bash
# KernelBench level 1 to its end as one background run on the GPU machine (gpu_check.sh `extbg` with
# EXTBG_SCRIPT=benchmarks/plans/kb_level1_finish.sh, then `extwait` call after call):
#   1. amdkv's side of the problems KB_MERGED has not judged (the largest, one at a time: --skip-done),
#      and KB_RERUN's again (--rerun: judged before a fix);
#   2. KB_MERGED and step 1 merged (--rerender --later-replaces: step 1's rows replace not-started and re-run ones);
#   3. KernelBench's own harness over the whole level, smallest first, every job ending 40 s before the run's
#      deadline (--harness-deadline; --amdkv-from the merge; --skip-done KB_HARNESS_DONE's harness rows, when a
#      call before ran some), one job at a time as KernelBench runs it, up to 300 s a job;
#   4. both sides again in this run, over the same candidates, smallest first, from an empty reference cache
#      (--harness-judged-only): amdkv's side gets two fifths of what is left, the harness the rest. Why: steps 1-3
#      put together the level's verdicts from many calls and sessions, so their times are not one run's; the
#      issue asks for both sides' candidates per minute measured in the same call, and this is the largest
#      same-run measurement the time left allows. KB_SAME_RUN=0 leaves it out; it needs KB_SAME_RUN_MIN_S (450) left.
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
# The defaults go on from session 28: session 26's merge (amdkv's side of all 100, `45_Average_Pooling_2D` re-run
# after the fix for the verifier's own copies), nothing to re-run, and the harness reports of sessions 25-28 (all
# 100 problems run). Steps 1 and 3 find nothing left and say so (rc 1 by design); step 4, both sides in the same
# run, gets the run's time: what to run again after a change to the verifier or the harness.
set -u
S25=docs/results/2026-12-06-session25-h100
S26=docs/results/2026-12-06-session26-h100
S27=docs/results/2026-12-06-session27-h100
S28=docs/results/2026-12-06-session28-h100
MERGED="${KB_MERGED:-$S26/ext_kb_level1_merged.json}"
RERUN="${KB_RERUN-}"
HARNESS_DONE="${KB_HARNESS_DONE-$S25/step3_harness_a.json $S25/step3_harness_b.json $S26/step3_harness_c.json $S26/step3_harness_d.json $S26/step3_harness_e.json $S26/step3_harness_f.json $S27/step3_harness_g.json $S27/step3_harness_h.json $S28/step3_harness_i.json}"
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
# a job runs at most 300 s (45_Average_Pooling_2D, 16 GiB, last: ~120-180 s expected, twice the 60-88 s measured
# for the 8-GiB problems in sessions 26-27; ~240 s by session 25's estimate), and every job ends 40 s before the
# run's deadline (--harness-deadline: one still running then is "not run (deadline)" and the next run's
# --skip-done starts it again); none starts in the last minute before that. Before session 26 no job started in
# the last 320 s, kept for a job that mostly took a minute.
HARNESS_END=$(( $(left) - 40 ))
# shellcheck disable=SC2086
run --out "$OUTD/harness" $EXT_ARGS --only kb --shard 0/1 --amdkv-from "$AMDKV_SIDE" \
  --budgets "kb_harness=$(( HARNESS_END - 60 ))" --harness-deadline "$HARNESS_END" --kb-harness-timeout 300 \
  ${HARNESS_DONE:+--skip-done $HARNESS_DONE}
echo "plan step 3: rc $?"

echo "== plan step 4: both sides in this run, over the same candidates ($(left) s left)"
SAME_LEFT=$(( $(left) - 40 ))
SAME_AMDKV=$(( SAME_LEFT * 2 / 5 ))
SAME_HARNESS_END=$(( SAME_LEFT - SAME_AMDKV - 150 ))
if [ "${KB_SAME_RUN:-1}" = 0 ]; then
  echo "plan step 4: left out (KB_SAME_RUN=0)"
elif [ "$SAME_LEFT" -lt "${KB_SAME_RUN_MIN_S:-450}" ] || [ "$SAME_HARNESS_END" -lt 120 ]; then
  echo "plan step 4: left out, $SAME_LEFT s left (it needs KB_SAME_RUN_MIN_S, ${KB_SAME_RUN_MIN_S:-450}, and 120 s for the harness after amdkv's two fifths and the 150 s kept)"
else
  # amdkv two fifths, measured (session 28): with a fifth (248 s of budget, its phase 337 s with the level's load
  # and the verifications still in flight), amdkv judged the smallest 50 and the harness ran the same 50 in 485 s,
  # ending 358 s before its deadline. 337 / (337 + 485) = 0.41 of the time would have kept both busy. (Session 27
  # chose a fifth from per-candidate sums of sessions 23-25, 653 s against 700 s over the smallest 55, before
  # amdkv's phase had been timed whole.) If amdkv judges more than the harness can follow, the harness's deadline
  # cuts it and it has run a prefix of amdkv's set: the report says how many each side ran. Its budget stops new
  # verifications; those in flight may finish after it, and loading the level takes ~5-20 s before it starts: 150 s
  # are kept for both (session 28: 94 s, 5 s of load and 89 s of verdicts in flight, the longest 148 s; two fifths
  # reach larger problems). The harness's jobs end by the run's deadline less 40 s (its
  # --harness-deadline counts from its own phase's start) and none starts in the minute before that.
  # shellcheck disable=SC2086
  run --out "$OUTD/same_run" $EXT_ARGS --only kb --shard 0/1 --harness-judged-only \
    --budgets "kb=$SAME_AMDKV,kb_harness=$(( SAME_HARNESS_END - 60 ))" --harness-deadline "$SAME_HARNESS_END" \
    --kb-harness-timeout 300
  echo "plan step 4: rc $?"
fi
