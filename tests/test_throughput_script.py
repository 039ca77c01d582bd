"""benchmarks/throughput.py's parts that decide what a GPU call reports, run here: the phase options'
settings and the per-candidate time outside every worker phase. The script itself needs a GPU."""

from __future__ import annotations

from bench_scripts import load_benchmark_script


tp = load_benchmark_script("throughput")


def test_phase_options_switch_settings_off_and_on() -> None:
    untouched = {"AMDKV_BLOCKING_SYNC": None, "AMDKV_SEED_TRITON_STUBS": None, "AMDKV_RESIDENT_INPUTS": None,
                 "AMDKV_SHARE_TRITON_LAUNCHERS": None}
    assert tp.phase_environment([]) == untouched
    assert tp.phase_environment(["base"])["AMDKV_SEED_TRITON_STUBS"] == "0"
    assert tp.phase_environment(["seed"]) == {**untouched, "AMDKV_SEED_TRITON_STUBS": "1"}
    assert tp.phase_environment(["hostinputs"])["AMDKV_RESIDENT_INPUTS"] == "0"
    assert tp.phase_environment(["noseed"]) == {**untouched, "AMDKV_SEED_TRITON_STUBS": "0"}
    assert tp.phase_environment(["launchers"]) == {**untouched, "AMDKV_SHARE_TRITON_LAUNCHERS": "1"}
    assert tp.phase_environment(["nolaunchers"]) == {**untouched, "AMDKV_SHARE_TRITON_LAUNCHERS": "0"}


def test_unphased_time_is_per_candidate_and_leaves_out_what_is_not_a_job_phase() -> None:
    """Session 17 subtracted medians of the phases from the median job time (a 0.58-s "gap" that
    medians cannot show): the gap is taken per candidate, from the job's own phases only."""
    timings = {"worker_job_s": 3.0, "worker_first_call_s": 1.0, "worker_trials_s": 0.5, "worker_timing_s": 0.2,
               "worker_lock_held_s": 0.1, "worker_lock_wait_s": 0.05,  # inside the timing phase
               "worker_first_call_cpu_s": 0.9, "worker_first_call_children_cpu_s": 0.3,  # CPU, not wall
               "worker_startup_s": 0.7, "worker_startup_cuda_context_s": 0.2,  # before the job
               "worker_prepare_s": 0.1, "total_s": 4.0}
    assert abs(tp.unphased_job_s(timings) - 1.2) < 1e-9
    assert tp.unphased_job_s({"total_s": 1.0}) is None
