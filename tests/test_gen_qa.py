"""ROCm-libraries QA: the chunker on a small C++/HIP tree written here, the grounding check, pair
parsing, deduplication, and `amdkv gen rocm-qa` end to end with the scripted QA model (no model:
it reads each chunk from its prompt and answers with grounded pairs, a near duplicate and a
planted ungrounded pair; docs/gen.md)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from gen_support import PYTHON, env

from amdkv.data.store import RecordStore
from amdkv.gen.qa.chunker import chunk_file, function_name, mask_source
from amdkv.gen.qa.grounding import check_pair, identifiers_named, open_tree
from amdkv.gen.qa.pairs import Deduplicator, parse_pairs

SOURCE = textwrap.dedent("""\
    #pragma once
    #include <hip/hip_runtime.h>
    #define DEFINE_SCALE(T) void scale_##T(T* x) { x[0] *= 2; }

    namespace rocdemo {
    namespace detail {

    /*! \\brief Scales a vector in place.
     *  One thread per element. */
    template <typename T, int NB>
    __global__ void __launch_bounds__(NB) scal_kernel(int n, T alpha, T* x)
    {
        int i = blockIdx.x * NB + threadIdx.x;
        if(i < n) { x[i] *= alpha; }
        const char* s = "a { brace in a string";
    }

    template <class T> struct Accumulator : public Base<T>
    {
        T total{};
        Accumulator(int n) : total(0), count{n}
        {
            reset();
        }
        void add(T v) const noexcept
        {
            total += v;
        }
        int count;
    };

    } // namespace detail

    extern "C" {
    int rocdemo_status_to_int(int status)
    {
        return status == 0 ? 0 : 1;
    }
    }

    static const int table[] = {
        1, 2, 3,
    };

    ROCDEMO_KERNEL(256) axpy_kernel(int n, float a, const float* x, float* y)
    {
        int i = threadIdx.x;
        y[i] += a * x[i];
    }

    int Functor::operator()(int a) const
    {
        return a + offset;
    }
    } // namespace rocdemo
    """)


@pytest.fixture()
def tree(tmp_path) -> Path:
    root = tmp_path / "rocdemo"
    (root / "library" / "src").mkdir(parents=True)
    (root / "library" / "src" / "demo.hpp").write_text(SOURCE)
    (root / "library" / "src" / "notes.txt").write_text("not a source file {")
    (root / "LICENSE.md").write_text("MIT License\n\nCopyright (c) 2025 ...\n")
    return root


def test_chunker_finds_functions_and_classes_with_exact_lines():
    chunks = chunk_file(SOURCE, library="rocdemo", file="demo.hpp", commit="c0ffee")
    got = [(c.kind, c.name, c.line_start, c.line_end) for c in chunks]
    assert got == [
        ("function", "rocdemo::detail::scal_kernel", 8, 16),     # with its doc comment
        ("class", "rocdemo::detail::Accumulator", 18, 30),
        ("function", "rocdemo::rocdemo_status_to_int", 35, 38),  # inside extern "C"
        ("function", "rocdemo::axpy_kernel", 45, 49),            # after a macro in the signature
        ("function", "rocdemo::Functor::operator()", 51, 54),
    ]
    lines = SOURCE.split("\n")
    for c in chunks:
        assert c.text == "\n".join(lines[c.line_start - 1:c.line_end])
        assert c.numbered().split("\n")[0].lstrip().startswith(f"{c.line_start}| ")
    # a long class is split into its members; a long function is truncated
    small = chunk_file(SOURCE, library="rocdemo", file="demo.hpp", commit="c0ffee", max_lines=12)
    names = [c.name for c in small]
    assert "rocdemo::detail::Accumulator" not in names
    assert "rocdemo::detail::Accumulator::Accumulator" in names and "rocdemo::detail::Accumulator::add" in names


def test_masking_and_names():
    masked = mask_source('int a = 1; // { comment\nconst char* s = "}"; /* { */ char c = \'{\';\n#define X {\n')
    assert "{" not in masked and "}" not in masked and masked.count("\n") == 3
    assert function_name("template <typename T> __global__ void k(T* x) const") == "k"
    assert function_name("Foo::Foo(int n) : a(n), b{n}") == "Foo::Foo"
    assert function_name("auto f(int x) -> decltype(x)") == "f"
    assert function_name("if (x > 0)") is None
    assert function_name("auto g = [](int x)") is None


def test_grounding_rules(tree):
    t = open_tree(tree)
    assert t.library == "rocdemo" and t.licence == "MIT" and t.commit.startswith("sha256:")
    f = "library/src/demo.hpp"
    ok = check_pair(t, file=f, line_start=11, line_end=14, answer="`scal_kernel` multiplies by `alpha` with "
                    "one thread per element, indexed by blockIdx.x * NB + threadIdx.x.")
    assert ok.grounded and {"scal_kernel", "alpha"} <= set(ok.identifiers)
    assert check_pair(t, file="library/src/nope.hpp", line_start=1, line_end=2, answer="`x`").reason == "file_missing"
    assert check_pair(t, file="../../etc/passwd", line_start=1, line_end=1, answer="`root`").reason == "file_missing"
    assert check_pair(t, file=f, line_start=50, line_end=90, answer="`offset`").reason == "lines_out_of_range"
    assert check_pair(t, file=f, line_start=0, line_end=3, answer="`pragma`").reason == "lines_out_of_range"
    assert check_pair(t, file=f, line_start=1, line_end=54, answer="`scal_kernel`", max_span=40).reason == "span_too_wide"
    assert check_pair(t, file=f, line_start=11, line_end=14, answer="It scales the vector.").reason == "no_identifiers"
    wrong = check_pair(t, file=f, line_start=11, line_end=14, answer="`scal_kernel` calls rocblas_sscal_helper().")
    assert wrong.reason == "identifier_missing" and wrong.missing == ("rocblas_sscal_helper",)
    # names listed by the model count too, qualified names by their last part
    listed = check_pair(t, file=f, line_start=35, line_end=38, answer="It maps a status to 0 or 1.",
                        identifiers=["rocdemo::rocdemo_status_to_int"])
    assert listed.grounded
    assert identifiers_named("Use `hipMalloc` then my_helper() and ns::thing; the a of it.") == [
        "hipMalloc", "my_helper", "ns::thing"]


def test_parse_pairs_and_dedup():
    reply = ("<think>let me look</think>Here:\n```json\n"
             + json.dumps([{"question": "Q1?", "answer": "A1 `x`", "file": "f.cpp", "line_start": 1, "line_end": "2"},
                           {"question": "Q2?", "answer": "", "file": "f.cpp", "line_start": 1, "line_end": 2},
                           {"question": "Q3?", "answer": "A3", "file": "f.cpp", "line_start": True, "line_end": 2}])
             + "\n```")
    pairs, malformed, found = parse_pairs(reply)
    assert found and malformed == 2 and [p.question for p in pairs] == ["Q1?"] and pairs[0].line_end == 2
    assert parse_pairs("no json here") == ([], 0, False)
    d = Deduplicator()
    q, a = "What does the function scal_kernel compute for each element of the vector x?", "It multiplies x by alpha."
    assert not d.seen(q, a, ["scal_kernel"])
    assert d.seen(q.upper(), a, ["scal_kernel"])                                   # exact after normalising
    assert d.seen(q.replace("compute", "compute exactly"), a, ["scal_kernel"])     # near, same names
    assert not d.seen(q.replace("scal_kernel", "axpy_kernel"), a, ["axpy_kernel"])  # near in words, other names


def _qa_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "amdkv.cli", "gen", "rocm-qa", *args], env=env(), capture_output=True,
                          text=True, timeout=300)


def test_rocm_qa_end_to_end_keeps_grounded_pairs_drops_planted(tree, tmp_path):
    out = tmp_path / "qa"
    proc = _qa_cli("--source", str(tree), "--library", "rocDemo", "--llm", "replay", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    inv = summary["this_invocation"]
    assert summary["chunks"]["rocDemo"]["chunks"] == 5 and inv["chunks_asked"] == 5
    # per chunk: 1 planted ungrounded pair and 1 near duplicate are dropped, never kept
    assert inv["drop:identifier_missing"] + inv["drop:lines_out_of_range"] == 5
    assert inv["drop:duplicate"] == 5
    records = list(RecordStore(out / "records", create=False).dicts())
    assert len(records) == inv["kept"] == summary["pairs_recorded"] >= 5
    lines = SOURCE.split("\n")
    for rec in records:
        qa = rec["qa"]
        assert rec["kind"] == "rocm_qa" and rec["licence"] == "MIT"
        assert qa["library"] == "rocDemo" and qa["file"] == "library/src/demo.hpp" and qa["commit"].startswith("sha256:")
        assert qa["grounding"]["grounded"] and "hipImaginaryHelperForQA" not in qa["answer"]
        cited = "\n".join(lines[qa["line_start"] - 1:qa["line_end"]])
        assert all(i.split("::")[-1] in cited for i in qa["grounding"]["identifiers"])
    # a re-run asks nothing again and records nothing twice
    again = _qa_cli("--source", str(tree), "--library", "rocDemo", "--llm", "replay", "--out", str(out), "--json")
    assert again.returncode == 0
    assert json.loads(again.stdout)["this_invocation"]["chunks_asked"] == 0
    stats = RecordStore(out / "records", create=False).stats()
    assert stats["records"] == len(records) and stats["duplicates_skipped"] == 0
