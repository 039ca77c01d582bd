"""The one builder of infra-error verdicts and the one rule for `compiled` (verify/verdict.py)."""

from __future__ import annotations

from amdkv.verify.verdict import (COMPILE_ERROR, INFRA_ERROR, STATUSES, Verdict, compiled_after,
                                  infra_error_verdict)


def test_infra_error_verdict_is_never_a_judgement_of_the_candidate():
    v = infra_error_verdict("ray_node_lost", "node 3 died", task_id="l1_relu", language="auto",
                            platform="cuda", device="H200", candidate_sha256="ab" * 32)
    assert (v.status, v.reason, v.correct, v.compiled, v.interpreter_verified) == (INFRA_ERROR, "ray_node_lost",
                                                                                 None, None, False)
    assert (v.task_id, v.language, v.platform, v.device, v.diagnostics) == ("l1_relu", None, "cuda", "H200",
                                                                          "node 3 died")
    assert Verdict.from_dict(v.to_dict()) == v
    assert infra_error_verdict("x", "y", language="triton").language == "triton"


def test_compiled_after_is_false_exactly_for_compile_error():
    assert [s for s in STATUSES if not compiled_after(s)] == [COMPILE_ERROR]
    for status in STATUSES:  # enforce_invariants applies the same rule
        v = Verdict(status=status, compiled=True).enforce_invariants()
        assert v.compiled is compiled_after(status)
