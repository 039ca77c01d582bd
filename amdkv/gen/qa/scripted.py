"""A scripted QA "model" (`--llm replay` for `amdkv gen rocm-qa`): runs the whole QA pipeline
deterministically without a model, and exercises every filter on real source trees.

It reads its request the way a model would (the file, the line range and the numbered lines of
the chunk) and answers with a JSON array of:
1. what the definition is: cites the lines from the definition's name onwards, names it;
2. a name the definition uses: cites the first line holding the first other identifier;
3. the same question as 1 reworded slightly (a near duplicate: the deduplicator must drop it);
4. a planted ungrounded pair: it names `hipImaginaryHelperForQA`, which no cited line holds
   (dropped as `identifier_missing`); on every second chunk instead it cites lines past the end
   of the file (dropped as `lines_out_of_range`).
So on any tree, a correct checker keeps pairs 1-2 where the chunk allows, and never 3 or 4.
"""

from __future__ import annotations

import json
import re
from typing import Sequence

from amdkv.gen.llm import ClientStats, Message, Reply, RequestContext, SamplingParams

PLANTED_IDENTIFIER = "hipImaginaryHelperForQA"
_HEADER = re.compile(r"File: (?P<file>\S+), lines (?P<start>\d+)-(?P<end>\d+): the (?P<kind>\w+) `(?P<name>[^`]+)`")
_LINE = re.compile(r"^\s*(\d+)\| (.*)$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMON = {"const", "int", "float", "double", "void", "char", "bool", "auto", "template", "typename", "class",
           "struct", "return", "if", "else", "for", "while", "static", "inline", "unsigned", "size_t", "true",
           "false", "nullptr", "this", "std", "public", "private", "protected", "namespace", "using", "typedef",
           "__global__", "__device__", "__host__", "__forceinline__", "constexpr", "override", "virtual", "operator",
           "long", "short", "signed", "sizeof", "new", "delete", "case", "break", "continue", "switch", "default"}


class ScriptedQA:
    """See the module docstring. Protocol of amdkv.gen.llm (chat/close, model, stats)."""

    def __init__(self, model: str = "scripted-qa") -> None:
        self.model = model
        self.stats = ClientStats()

    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        prompt = messages[-1]["content"]
        self.stats.add(requests=1, replies=n)
        return [Reply(content="```json\n" + json.dumps(self._pairs(prompt), indent=1) + "\n```", finish_reason="stop")
                for _ in range(n)]

    def close(self) -> None:
        pass

    @staticmethod
    def _pairs(prompt: str) -> list[dict]:
        head = _HEADER.search(prompt)
        if head is None:
            return []
        file, name = head["file"], head["name"]
        parts = name.split("::")
        # an operator is named by its class (`Functor::operator()` -> `Functor`): `operator` alone
        # is a keyword, not a name the check can look for
        short = parts[-2] if parts[-1].startswith("operator") and len(parts) > 1 else parts[-1]
        lines = [(int(m.group(1)), m.group(2)) for m in map(_LINE.match, prompt.split("\n")) if m]
        if not lines:
            return []
        first, last = lines[0][0], lines[-1][0]
        at_name = next((n for n, text in lines if re.search(rf"\b{re.escape(short)}\b", text)), first)
        what = {"question": f"What does the {head['kind']} `{name}` in {file} define?",
                "answer": f"`{short}` is a {head['kind']} defined in {file}, starting at line {at_name}.",
                "file": file, "line_start": at_name, "line_end": min(at_name + 2, last), "identifiers": [short]}
        pairs = [what]
        used = next(((n, w) for n, text in lines if n > at_name for w in _WORD.findall(text)
                     if w != short and w not in _COMMON and len(w) > 2), None)
        if used is not None:
            pairs.append({"question": f"Which name does `{short}` use at line {used[0]}?",
                          "answer": f"It uses `{used[1]}`.", "file": file, "line_start": used[0],
                          "line_end": used[0], "identifiers": [used[1]]})
        pairs.append({**what, "question": what["question"].replace(" define?", " define, briefly?")})
        if first % 2:
            pairs.append({"question": f"How does `{short}` use {PLANTED_IDENTIFIER}?",
                          "answer": f"It calls `{PLANTED_IDENTIFIER}` on every element.", "file": file,
                          "line_start": first, "line_end": min(first + 2, last), "identifiers": [PLANTED_IDENTIFIER]})
        else:
            pairs.append({"question": f"Where does the file {file} end after `{short}`?",
                          "answer": f"After `{short}`.", "file": file, "line_start": last + 100000,
                          "line_end": last + 100002, "identifiers": [short]})
        return pairs
