"""amdkv.evaluation: `amdkv eval` (samples file -> verified, resumable results -> metrics and reports).

Named `evaluation` (not `eval`) so it shadows neither the builtin nor a Hub artefact; docs/eval.md
describes the samples format, the output folder, resuming and `--compare`.
"""

from amdkv.evaluation.compare import compare_metrics, load_metrics, print_comparison
from amdkv.evaluation.runner import (EvalOutcome, EvalSettings, parse_float_list, parse_int_list,
                                     run_eval)
from amdkv.evaluation.samples import TaskSamples, parse_samples_file, sample_hash

__all__ = ["EvalOutcome", "EvalSettings", "TaskSamples", "compare_metrics", "load_metrics",
           "parse_float_list", "parse_int_list", "parse_samples_file", "print_comparison",
           "run_eval", "sample_hash"]
