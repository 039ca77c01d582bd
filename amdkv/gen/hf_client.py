"""A local `transformers` model as an LLM client: chat template, batched `generate`.

Requests from many threads are collected by one generation thread and run as one `generate`
call (up to `max_batch` sequences; a request for n samples is its prompt repeated n times), so
concurrent agents share the model instead of queueing one by one. Requests with different
sampling parameters go in different batches (one `generate` call has one temperature).

Details that matter: left padding (decoder-only models continue from the right end); the prompt
is the tokenizer's chat template with the generation prompt; the reply is decoded without the
special tokens (ChatML markers, padding), which keeps a Qwen3 `<think>` block (not special) for
extraction to split off; `finish_reason` is `stop` when an end-of-sequence token was produced and
`length` when `max_tokens` ran out; token counts are exact. `temperature == 0` means greedy.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Sequence

from amdkv.gen.llm import ClientStats, LLMError, Message, Reply, RequestContext, SamplingParams


@dataclasses.dataclass
class _Job:
    messages: Sequence[Message]
    n: int
    params: SamplingParams
    future: "Future[list[Reply]]"


class TransformersChatClient:
    """`model`: a local folder (or anything `from_pretrained` takes offline), or pass `model_obj` and
    `tokenizer` already loaded (tests). `device`: `cpu`, `cuda`, `cuda:1`, `auto` (cuda if any)."""

    def __init__(self, model: str, *, model_obj: Any = None, tokenizer: Any = None, device: str = "auto",
                 dtype: str = "auto", max_batch: int = 16, batch_wait_s: float = 0.02) -> None:
        import torch

        self.model = model
        self.stats = ClientStats()
        self.max_batch = max_batch
        self.batch_wait_s = batch_wait_s
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        if tokenizer is None or model_obj is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            tokenizer = tokenizer or AutoTokenizer.from_pretrained(model)
            torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            model_obj = model_obj or AutoModelForCausalLM.from_pretrained(model, dtype=torch_dtype)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self.lm = model_obj.to(device).eval()
        self._eos_ids = _eos_ids(self.lm, tokenizer)
        self._jobs: "queue.Queue[_Job | None]" = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="amdkv-hf-generate", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ protocol
    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        job = _Job(list(messages), n, params or SamplingParams(), Future())
        self._jobs.put(job)
        return job.future.result()

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)

    # ------------------------------------------------------------------ the generation thread
    def _loop(self) -> None:
        while True:
            first = self._jobs.get()
            if first is None:
                return
            jobs = [first]
            deadline = time.monotonic() + self.batch_wait_s
            while sum(j.n for j in jobs) < self.max_batch:
                try:
                    nxt = self._jobs.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if nxt is None:
                    self._jobs.put(None)  # finish this batch, then stop
                    break
                jobs.append(nxt)
            for group in _by_params(jobs):
                self._run(group)

    def _run(self, jobs: list[_Job]) -> None:
        try:
            results = self._generate(jobs)
        except Exception as exc:  # noqa: BLE001 - every waiting caller must hear about it
            self.stats.add(failures=len(jobs))
            for job in jobs:
                job.future.set_exception(LLMError(f"local generation with {self.model} failed: {exc!r}",
                                                  hint="check the model folder, the device and its memory"))
            return
        for job, replies in zip(jobs, results):
            job.future.set_result(replies)

    def _generate(self, jobs: list[_Job]) -> list[list[Reply]]:
        import torch

        params = jobs[0].params
        prompts = [self.tokenizer.apply_chat_template([{"role": m["role"], "content": m["content"]} for m in j.messages],
                                                      add_generation_prompt=True, tokenize=False) for j in jobs]
        expanded = [p for p, j in zip(prompts, jobs) for _ in range(j.n)]
        enc = self.tokenizer(expanded, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        kwargs: dict[str, Any] = {"max_new_tokens": params.max_tokens, "pad_token_id": self.tokenizer.pad_token_id}
        if params.temperature > 0:
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if params.seed is not None:
            torch.manual_seed(params.seed)
        started = time.monotonic()
        with torch.no_grad():
            out = self.lm.generate(**enc, **kwargs)
        self.stats.add(requests=len(jobs), request_seconds=time.monotonic() - started)
        new_tokens = out[:, enc["input_ids"].shape[1]:].tolist()
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        replies: list[Reply] = []
        for ids, prompt_len in zip(new_tokens, prompt_lens):
            stop_at = next((i for i, t in enumerate(ids) if t in self._eos_ids), None)
            used = ids if stop_at is None else ids[: stop_at + 1]
            text = self.tokenizer.decode(used, skip_special_tokens=True)
            replies.append(Reply(content=text, finish_reason="length" if stop_at is None else "stop",
                                 prompt_tokens=int(prompt_len), completion_tokens=len(used)))
        grouped, start = [], 0
        for j in jobs:
            grouped.append(replies[start:start + j.n])
            start += j.n
        # a prompt is read once per request, however many samples it asks for (as servers count it)
        self.stats.add(replies=len(replies), prompt_tokens=sum(g[0].prompt_tokens or 0 for g in grouped),
                       completion_tokens=sum(r.completion_tokens or 0 for r in replies))
        return grouped


def _by_params(jobs: list[_Job]) -> list[list[_Job]]:
    groups: dict[str, list[_Job]] = {}
    for j in jobs:
        groups.setdefault(repr(sorted(j.params.to_dict().items())), []).append(j)
    return list(groups.values())


def _eos_ids(model: Any, tokenizer: Any) -> set[int]:
    ids = {tokenizer.eos_token_id}
    cfg_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids |= set(cfg_eos) if isinstance(cfg_eos, (list, tuple)) else {cfg_eos}
    return {i for i in ids if i is not None}
