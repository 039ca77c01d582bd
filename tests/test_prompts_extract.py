"""Code extraction from model replies, on a corpus of awkward replies (tests/data/replies/manifest.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amdkv.prompts import EXTRACTION_REASONS, extract_code, split_reasoning
from amdkv.prompts.extract import OK, defines_model_new

REPLIES = Path(__file__).resolve().parent / "data" / "replies"
MANIFEST = json.loads((REPLIES / "manifest.json").read_text())


def _read(name: str) -> str:
    return (REPLIES / name).read_bytes().decode("utf-8")  # bytes: keep CRLF files as written


def test_manifest_covers_every_reply_file_and_every_reason():
    files = {p.name for p in REPLIES.glob("*.txt")}
    assert files == {e["file"] for e in MANIFEST}
    assert {e["reason"] for e in MANIFEST} | {e.get("strict_reason") for e in MANIFEST if "strict_reason" in e} \
        == set(EXTRACTION_REASONS)


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["file"] for e in MANIFEST])
def test_reply_corpus(entry):
    reply = _read(entry["file"])
    ex = extract_code(reply, entry.get("language", "triton"))
    assert ex.reason == entry["reason"], (ex.reason, ex.detail)
    assert ex.reason in EXTRACTION_REASONS and ex.detail
    assert (ex.code is not None) == (ex.reason == OK)
    if ex.ok:
        assert defines_model_new(ex.code)
        assert "<think>" not in ex.code and "</think>" not in ex.code
        assert not ex.code.lstrip().startswith("```")
    if "method" in entry:
        assert ex.method == entry["method"]
    if "tag" in entry:
        assert ex.language_tag == entry["tag"]
    for text in entry.get("contains", []):
        assert text in ex.code
    for text in entry.get("excludes", []):
        assert ex.code is None or text not in ex.code
    if "starts_with" in entry:
        assert ex.code.startswith(entry["starts_with"])
    if "model_new_blocks" in entry:
        assert ex.model_new_blocks == entry["model_new_blocks"]
    if "notes" in entry:
        assert len(ex.notes) == entry["notes"], ex.notes
    assert (ex.reasoning is not None) == bool(entry.get("reasoning")), ex.reasoning
    if "strict_reason" in entry:
        strict = extract_code(reply, entry.get("language", "triton"), on_conflict="fail")
        assert strict.reason == entry["strict_reason"]
        assert (strict.code is None) == (strict.reason != OK)


def test_reasoning_is_kept_apart_and_never_searched():
    ex = extract_code(_read("think_with_code_then_answer.txt"))
    assert "draft = True" in ex.reasoning and "draft" not in ex.answer
    assert ex.answer.startswith("```python")


def test_split_reasoning_forms():
    assert split_reasoning("no tags here") == (None, "no tags here", True)
    assert split_reasoning("<think>\na\n</think>\n\nb") == ("a", "b", True)
    assert split_reasoning("a</think>b") == ("a", "b", True)          # template opened <think>
    assert split_reasoning("<think>\nunfinished") == ("unfinished", "", False)
    assert split_reasoning("x\r\ny") == (None, "x\ny", True)


def test_failure_details_say_what_was_found():
    ex = extract_code(_read("no_model_new.txt"))
    assert "1 fenced block(s) (python)" in ex.detail and "ModelNew" in ex.detail
    ex = extract_code(_read("two_versions_last_wins.txt"), on_conflict="fail")
    assert "blocks 1, 2" in ex.detail
    ex = extract_code(_read("prose_only.txt"), "hip")
    assert "HIP program" in ex.detail


def test_extraction_to_dict_is_json():
    ex = extract_code(_read("fenced_python.txt"))
    assert json.loads(json.dumps(ex.to_dict()))["reason"] == "ok"
