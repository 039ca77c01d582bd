#!/usr/bin/env bash
# One device call: verify every bundled Triton reference solution (and the adversarial set, when
# present) on the local GPU, write verdicts and a markdown table under $OUT (default ./gpu_check_out).
# Usage on the GPU machine, from the repo root:  bash benchmarks/gpu_check.sh
set -uo pipefail
OUT="${OUT:-gpu_check_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export AMDKV_CACHE_DIR="${AMDKV_CACHE_DIR:-/tmp/amdkv-cache}"
JOBS="${JOBS:-4}"
python3 -m amdkv.cli env --json > "$OUT/env.json" 2>&1
start=$(date +%s)
python3 -m amdkv.cli demo --device auto --jobs "$JOBS" ${DEMO_FLAGS:-} --out "$OUT/references.jsonl" \
  > "$OUT/demo.txt" 2> "$OUT/demo.err"
echo "references: rc=$? in $(( $(date +%s) - start )) s"
if [ -f tests/data/adversarial/manifest.json ]; then
  start=$(date +%s)
  python3 benchmarks/adversarial_gpu.py --out "$OUT/adversarial.jsonl" > "$OUT/adversarial.txt" 2>&1
  echo "adversarial: rc=$? in $(( $(date +%s) - start )) s"
fi
python3 benchmarks/verdict_table.py "$OUT/references.jsonl" ${OUT}/adversarial.jsonl > "$OUT/gpu_check.md" 2> "$OUT/table.err"
tail -n 120 "$OUT/gpu_check.md"
