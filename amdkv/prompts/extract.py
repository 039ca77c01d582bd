"""Take the candidate program out of a model's reply, or say precisely why there is none.

A reply is split into its reasoning (`<think>...</think>`, never searched for code) and its answer.
In the answer, the program is the fenced block that defines `class ModelNew` (both languages are
Python files: a HIP candidate is KernelBench-style Python that builds its kernels with
`load_inline`). Rules, in order (docs/prompts.md, "Extraction"):

1. Reasoning: everything up to the last `</think>` is reasoning (a reply may start inside the
   block when the prompt already opened it). `<think>` without `</think>` means the reply was cut
   off while thinking: `truncated`.
2. Fences: ``` or ~~~ (3 or more), any indentation, any info string (`python`, `py`, `Python3`,
   `cpp`, none). A block is closed by a fence line of the same character, at least as long, with
   no info string. The info string is not trusted: a block is a candidate when its text defines a
   top-level `class ModelNew` (by the AST when it parses, by a line `class ModelNew` when it does
   not, so a program with a syntax error still reaches the verifier, which explains the error).
3. One candidate block: taken. Several with different text: the LAST is taken (models put the
   final version last) and a note says so; with `on_conflict="fail"` the result is `ambiguous`.
   Blocks with identical text count once.
4. An unclosed last fence: taken when its text parses and defines `ModelNew` (the model forgot the
   closing fence), else `truncated` (the reply hit the token limit mid-program).
5. No fence at all: the answer itself, from its first line that starts code (`import`, `from`,
   `class`, `def`, `@`) and with trailing prose lines dropped, is taken when it parses and defines
   `ModelNew`; else `no_code_block`.
6. Fenced blocks but none defines `ModelNew`: `no_model_new`.

Kernel-file benchmark tasks (TritonBench-G, ROCmBench: `api_names=`, from
`amdkv.prompts.benchmark.kernel_api_names(task)`) take the benchmark's kernel code instead of a
`ModelNew` program: the same rules, with "defines `ModelNew`" read as "defines one of the names the
benchmark's tests call, at top level, above the benchmark's separator line" (any top-level function
or class when no name is known); `no_model_new` then means that no block defines them. The code is
taken as written: the verifier cuts it at the separator line (`amdkv.verify.program.candidate_part`,
the one place that does), so what follows that line is never the candidate's.

Standard library only: generation clients, dataset builders and trainers all import this.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Literal, Sequence

from amdkv.source_ast import parse as parse_source
from amdkv.verify.program import candidate_part

# The closed set of extraction reasons (a reply either gives `ok` or exactly one of the others).
OK = "ok"
EMPTY = "empty"                  # no answer text at all (blank reply, or only reasoning)
TRUNCATED = "truncated"          # cut off: inside <think>, or inside an unclosed fence that does not parse
NO_CODE_BLOCK = "no_code_block"  # no fenced block, and the bare answer is not a program defining ModelNew
NO_MODEL_NEW = "no_model_new"    # fenced blocks, none defines `class ModelNew`
AMBIGUOUS = "ambiguous"          # several different blocks define ModelNew and on_conflict="fail"
EXTRACTION_REASONS = (OK, EMPTY, TRUNCATED, NO_CODE_BLOCK, NO_MODEL_NEW, AMBIGUOUS)

# How the code was found (Extraction.method).
FENCED = "fenced"
UNCLOSED_FENCE = "unclosed_fence"
UNFENCED = "unfenced"

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*?)[ \t]*$")
_CODE_START = re.compile(r"^(import |from \S+ import |class |def |@|#!|\"\"\"|''')")
_MODEL_NEW_LINE = re.compile(r"^class[ \t]+ModelNew\b", re.MULTILINE)


@dataclasses.dataclass(frozen=True)
class Extraction:
    """The result of `extract_code`.

    `code` is the program text (None unless `reason == "ok"`); `detail` says in one sentence what
    was found, for logs and for the feedback shown to the model; `notes` record choices made on
    the way (e.g. which of several blocks was taken). `reasoning`/`answer` are the two parts of
    the reply (`reasoning` None when the reply had no think block)."""

    code: str | None
    reason: str
    detail: str
    method: str | None = None
    reasoning: str | None = None
    answer: str = ""
    blocks: int = 0                # fenced blocks in the answer (closed or not)
    model_new_blocks: int = 0      # distinct blocks that define ModelNew
    language_tag: str | None = None  # info string of the block taken ('' for an unlabeled fence)
    notes: tuple[str, ...] = ()
    api_names: tuple[str, ...] | None = None  # kernel-file mode: the names looked for (None: ModelNew programs)

    @property
    def ok(self) -> bool:
        return self.reason == OK

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class _Block:
    text: str
    info: str
    closed: bool
    index: int


def split_reasoning(reply: str) -> tuple[str | None, str, bool]:
    """`(reasoning, answer, reasoning_closed)` of a reply.

    Everything before the last `</think>` is reasoning (its `<think>` tag, if any, removed); a
    `<think>` that is never closed makes the whole rest reasoning with `reasoning_closed=False`.
    Replies without tags are all answer (`reasoning` None)."""
    text = reply.replace("\r\n", "\n").replace("\r", "\n")
    close = text.rfind(THINK_CLOSE)
    if close >= 0:
        before, answer = text[:close], text[close + len(THINK_CLOSE):]
        opened = before.find(THINK_OPEN)
        reasoning = before[opened + len(THINK_OPEN):] if opened >= 0 else before
        return reasoning.strip("\n"), answer.lstrip("\n"), True
    opened = text.find(THINK_OPEN)
    if opened >= 0 and not text[:opened].strip():
        return text[opened + len(THINK_OPEN):].strip("\n"), "", False
    return None, text, True


def _fenced_blocks(answer: str) -> list[_Block]:
    lines = answer.split("\n")
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), len(m.group("indent"))
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            c = _FENCE.match(lines[j])
            if c and not c.group("info") and c.group("fence")[0] == fence[0] and len(c.group("fence")) >= len(fence):
                closed = True
                break
            body.append(lines[j])
            j += 1
        blocks.append(_Block(_dedent(body, indent), m.group("info").strip(), closed, len(blocks)))
        i = j + 1
    return blocks


def _dedent(lines: list[str], indent: int) -> str:
    """Remove up to the fence's own indentation (spaces) from each line: fences inside list items.
    Nothing else in the code changes (tabs and string contents stay as written)."""
    out = [line[min(indent, len(line) - len(line.lstrip(" "))):] for line in lines] if indent else lines
    return "\n".join(out).strip("\n") + "\n"


def _parses(code: str) -> ast.Module | None:
    try:
        return parse_source(code)
    except (SyntaxError, ValueError):
        return None


def _has_model_new(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)


def defines_model_new(code: str) -> bool:
    """A top-level `class ModelNew` (AST when the code parses, a `class ModelNew` line when not)."""
    tree = _parses(code)
    return _has_model_new(tree) if tree is not None else bool(_MODEL_NEW_LINE.search(code))


@dataclasses.dataclass(frozen=True)
class _Wanted:
    """What makes a block a candidate: a `ModelNew` program (`api` None), or kernel code that defines
    one of `api` (any top-level function or class when `api` is empty) above the separator line."""

    api: tuple[str, ...] | None = None

    @property
    def what(self) -> str:  # the words of the messages
        if self.api is None:
            return "ModelNew"
        return ", ".join(f"`{n}`" for n in self.api) if self.api else "a top-level function"

    def tree_defines(self, tree: ast.Module) -> bool:
        if self.api is None:
            return _has_model_new(tree)
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not self.api or node.name in self.api:
                    return True
            elif self.api and isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in self.api for t in targets):
                    return True
        return False

    def line_defines(self, code: str) -> bool:
        """For code that does not parse: a definition line of a wanted name."""
        if self.api is None:
            return bool(_MODEL_NEW_LINE.search(code))
        names = "|".join(map(re.escape, self.api)) or r"\w+"
        pattern = rf"^(?:(?:async[ \t]+)?def|class)[ \t]+(?:{names})\b"
        if self.api:
            pattern += rf"|^(?:{names})[ \t]*[:=]"
        return bool(re.search(pattern, code, re.MULTILINE))

    def defines(self, code: str) -> bool:
        if self.api is not None:  # the candidate's part only, cut at the separator as the verifier cuts it
            code = candidate_part({}, code)
        tree = _parses(code)
        return self.tree_defines(tree) if tree is not None else self.line_defines(code)


def _unfenced_program(answer: str, wanted: _Wanted = _Wanted()) -> str | None:
    """The bare answer as a program: from the first code-looking line on, without trailing prose.

    The longest prefix (from that line) that parses and defines ModelNew is taken; when none
    parses but a `class ModelNew` line is there, the whole rest is taken, so that a program with a
    syntax error reaches the verifier (which explains the error) instead of being called missing.
    (Kernel-file mode: the names wanted instead of ModelNew.)"""
    lines = answer.strip("\n").split("\n")
    start = next((k for k, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    body = lines[start:]
    for end in range(len(body), 0, -1):
        code = "\n".join(body[:end]).strip("\n") + "\n"
        tree = _parses(code)
        if tree is not None and (wanted.tree_defines(tree) if wanted.api is None else wanted.defines(code)):
            return code
    rest = "\n".join(body).strip("\n") + "\n"
    return rest if wanted.line_defines(rest) else None


def extract_code(reply: str, language: str = "triton", *,
                 on_conflict: Literal["last", "fail"] = "last", api_names: Sequence[str] | None = None) -> Extraction:
    """The candidate program in `reply` (see the module docstring for the rules).

    `language` (`triton` or `hip`) only words the messages: both are Python files defining
    `ModelNew`, and which language a program really is, is the verifier's business.
    `api_names`: a kernel-file benchmark task's names (`amdkv.prompts.benchmark.kernel_api_names`):
    the program is then kernel code defining one of them, not a `ModelNew` file.
    """
    wanted = _Wanted(None if api_names is None else tuple(api_names))
    reasoning, answer, closed = split_reasoning(reply)
    common = {"reasoning": reasoning, "answer": answer, "api_names": wanted.api}
    program = f"a {language_name(language)} program defining ModelNew" if wanted.api is None \
        else f"{language_name(language)} kernel code defining {wanted.what}"
    if not closed:
        return Extraction(None, TRUNCATED, "the reply ended inside its <think> block, before any answer "
                          "(it hit the token limit while reasoning)", **common)
    if not answer.strip():
        what = "only reasoning and no answer after </think>" if reasoning is not None else "an empty reply"
        return Extraction(None, EMPTY, f"the reply had {what}", **common)

    blocks = _fenced_blocks(answer)
    if not blocks:
        code = _unfenced_program(answer, wanted)
        if code is not None:
            whole = "a program defining ModelNew" if wanted.api is None else f"kernel code defining {wanted.what}"
            return Extraction(code, OK, f"no fenced block; the whole answer is {whole}",
                              method=UNFENCED, notes=("answer was not fenced",), **common)
        return Extraction(None, NO_CODE_BLOCK, f"the answer has no fenced code block (```python ... ```) "
                          f"and is not itself {program}", **common)

    counts = {"blocks": len(blocks)}
    candidates = [b for b in blocks if b.closed and wanted.defines(b.text)]
    notes: list[str] = []
    last = blocks[-1]
    method = FENCED
    if not last.closed:  # only the last block can be unclosed: it runs to the end of the reply
        if _parses(last.text) is not None and wanted.defines(last.text):
            candidates.append(last)
            notes.append("the last fence was never closed; its text parses, so it was taken")
        elif candidates:
            notes.append("an unclosed, incomplete block at the end of the reply was ignored")
        else:
            return Extraction(None, TRUNCATED, "the reply ends inside an unclosed fenced block whose code is "
                              "incomplete (it hit the token limit while writing the program)", **counts, **common)
    candidates = _distinct(candidates)
    if not candidates:
        tags = ", ".join(sorted({b.info or "unlabeled" for b in blocks}))
        none = "`class ModelNew`" if wanted.api is None else \
            f"{wanted.what} (what the benchmark's tests call) above a line of 146 '#'"
        return Extraction(None, NO_MODEL_NEW, f"{len(blocks)} fenced block(s) ({tags}), none defines {none}",
                          **counts, **common)
    if len(candidates) > 1:
        if on_conflict == "fail":
            where = ", ".join(str(b.index + 1) for b in candidates)
            each = "`class ModelNew`" if wanted.api is None else wanted.what
            return Extraction(None, AMBIGUOUS, f"{len(candidates)} different fenced blocks (blocks {where}) each "
                              f"define {each}; answer with exactly one complete {language_name(language)} "
                              "program", model_new_blocks=len(candidates), **counts, **common)
        notes.append(f"{len(candidates)} different blocks define {wanted.what}; took the last one")
    chosen = candidates[-1]
    if not chosen.closed:
        method = UNCLOSED_FENCE
    return Extraction(chosen.text, OK, f"took fenced block {chosen.index + 1} of {len(blocks)}", method=method,
                      language_tag=chosen.info, model_new_blocks=len(candidates), notes=tuple(notes),
                      **counts, **common)


def _distinct(blocks: list[_Block]) -> list[_Block]:
    """Blocks with identical text count once (the later copy is kept)."""
    seen: dict[str, _Block] = {}
    for b in blocks:
        seen.pop(b.text.strip(), None)
        seen[b.text.strip()] = b
    return sorted(seen.values(), key=lambda b: b.index)


def language_name(language: str) -> str:
    """How prompts and messages name a language."""
    return {"triton": "Triton", "hip": "HIP"}.get(language, language)
