#!/usr/bin/env bash
# One device call (H200): `amdkv eval` over every bundled task with the reference solution and two
# broken samples per task (benchmarks/eval_samples.py), on the local GPU, torch.compile baselines on.
# Writes results, metrics.json, report.md/html and a reference-solution table under $OUT.
set -uo pipefail
OUT="${OUT:-h200_eval_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export AMDKV_CACHE_DIR="${AMDKV_CACHE_DIR:-/tmp/amdkv-cache}"
python3 -m amdkv.cli env --json > "$OUT/env.json" 2>&1
python3 benchmarks/eval_samples.py --out "$OUT/samples.jsonl"
start=$(date +%s)
python3 -m amdkv.cli eval builtin:all --samples "$OUT/samples.jsonl" --k 1,3 --device auto \
  --jobs "${JOBS:-6}" --out "$OUT/eval" > "$OUT/eval.txt" 2> "$OUT/eval.err"
echo "eval: rc=$? in $(( $(date +%s) - start )) s"
python3 benchmarks/reference_table.py "$OUT/eval/results.jsonl" > "$OUT/gpu_check.md"
tail -n 90 "$OUT/gpu_check.md"
