"""`amdkv gen` end to end through the OpenAI client against a real model server: `transformers
serve` on loopback with the tiny Qwen3 model (tests/fixtures_tiny.py) overfit to answer the request
for one bundled task with a fenced Triton kernel (trained by the fixture; the trained model is
committed in tests/data/gen_overfit/ and retrained when stale, see `overfit_model`). Also the local transformers
client (batched `generate`) on the same model.

Nothing here is scripted: the reply is what the model generates, greedily, from the prompt
`amdkv gen` builds and the server renders with the model's chat template.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fixtures_tiny import tiny_tokenizer  # noqa: F401
from gen_support import env, free_port, gen_cli, run_trajectories, statuses, wait_http

TASK_ID = "l1_relu"
MAX_STEPS = 600
REFRESH = 8
# Training the model (only when tests/data/gen_overfit/ is stale) takes ~1-2 minutes on an idle
# 2-core machine, 5-10 on a shared one.
pytestmark = pytest.mark.timeout(1800)


def _overfit(model, prompt_ids: list[int], reply_ids: list[int]) -> int:
    """Train `model` until it continues `prompt_ids` with `reply_ids` (every next token the argmax,
    loss < 0.05); returns the
    steps taken. The 2.5 k-token prompt is run without gradients (its keys and values are context;
    the reply is what must be learnt) and only every REFRESH steps with the current weights:
    back-propagating through the prompt at every step costs ~4x as much on a 2-core machine. The
    loss that ends training is measured on freshly computed prompt keys and values."""
    import copy

    import torch

    prefix = torch.tensor([prompt_ids[:-1]])
    tail = torch.tensor([[prompt_ids[-1]] + reply_ids[:-1]])
    target = torch.tensor(reply_ids)
    positions = torch.arange(len(prompt_ids) - 1, len(prompt_ids) - 1 + len(reply_ids)).unsqueeze(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for step in range(MAX_STEPS):
        fresh = step % REFRESH == 0
        if fresh:
            model.eval()
            with torch.no_grad():
                prompt_cache = model(input_ids=prefix, use_cache=True).past_key_values
        model.train()
        logits = model(input_ids=tail, past_key_values=copy.deepcopy(prompt_cache), position_ids=positions).logits[0]
        loss = torch.nn.functional.cross_entropy(logits, target)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if fresh and loss.item() < 0.05 and bool((logits.argmax(-1) == target).all()):
            return step  # greedy decoding now gives the reply, with a margin
    raise AssertionError(f"the tiny model did not learn the reply in {MAX_STEPS} steps (loss {loss.item():.3f})")


FIXTURE = Path(__file__).resolve().parent / "data" / "gen_overfit"
REFRESH_ENV = "AMDKV_REFRESH_GEN_FIXTURE"


def _request_and_reply(tokenizer) -> tuple[object, str, str]:
    """(task, rendered prompt, reply): what the model must answer, as text."""
    from amdkv.gen.replay import fenced, reference_solution
    from amdkv.prompts import PromptConfig, build_messages
    from amdkv.tasks.suites import load_suite

    task = next(t for t in load_suite("builtin:all") if t.id == TASK_ID)
    messages = build_messages(task, PromptConfig(language="triton", shots=0))
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return task, prompt, fenced(reference_solution(task, "triton"))


def _key(tokenizer, prompt: str, reply: str) -> str:
    """Everything that decides the trained model: the prompt and reply as token ids, the training
    settings and the torch/transformers versions."""
    import hashlib

    import torch
    import transformers

    ids = [tokenizer(prompt, add_special_tokens=False)["input_ids"],
           tokenizer(reply + tokenizer.eos_token, add_special_tokens=False)["input_ids"]]
    return hashlib.sha256(json.dumps([ids, MAX_STEPS, REFRESH, torch.__version__.split("+")[0],
                                      transformers.__version__, len(tokenizer)]).encode()).hexdigest()[:16]


def _train(folder: Path, tokenizer, prompt: str, reply: str, key: str) -> None:
    from amdkv.train.tiny_model import build_model

    model = build_model(tokenizer)
    steps = _overfit(model, tokenizer(prompt, add_special_tokens=False)["input_ids"],
                     tokenizer(reply + tokenizer.eos_token, add_special_tokens=False)["input_ids"])
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "trained.json").write_text(json.dumps({"steps": steps, "task": TASK_ID, "key": key}) + "\n")


@pytest.fixture(scope="module")
def overfit_model(request, tmp_path_factory):
    """(folder, task, reply): the tiny model (with its tokenizer) trained to answer the `write`
    request of TASK_ID (0 shots, gfx942) with the task's bundled Triton solution in a fence.

    Training takes 2.5-5 minutes on a shared 2-core machine, so the trained model is committed in
    tests/data/gen_overfit/ (1.4 MB: model, tokenizer, trained.json with the key of everything
    that decides it: prompt and reply token ids, training settings, torch and transformers
    versions). When the key no longer matches (a prompt template, the task or a library version
    changed) the fixture trains again, into pytest's cache folder (a second run skips it), and
    `AMDKV_REFRESH_GEN_FIXTURE=1 pytest tests/test_gen_serve.py` writes the new model into
    tests/data/gen_overfit/ for committing. The committed tokenizer is used, not tiny_tokenizer:
    the shared one is rebuilt from the bundled tasks and changes with them."""
    from transformers import AutoTokenizer

    if FIXTURE.is_dir() and not os.environ.get(REFRESH_ENV):
        tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
        task, prompt, reply = _request_and_reply(tokenizer)
        key = _key(tokenizer, prompt, reply)
        if json.loads((FIXTURE / "trained.json").read_text()).get("key") == key:
            return FIXTURE, task, reply
    tiny_tokenizer = request.getfixturevalue("tiny_tokenizer")  # built only when training
    task, prompt, reply = _request_and_reply(tiny_tokenizer)
    key = _key(tiny_tokenizer, prompt, reply)
    if os.environ.get(REFRESH_ENV):
        folder = FIXTURE
    else:
        cache = getattr(request.config, "cache", None)  # None under `-p no:cacheprovider`: a temp folder
        root = cache.mkdir("amdkv-gen-overfit") if cache is not None else tmp_path_factory.mktemp("amdkv-gen-overfit")
        folder = root / key
    trained = folder / "trained.json"
    if not (trained.exists() and json.loads(trained.read_text()).get("key") == key):
        _train(folder, tiny_tokenizer, prompt, reply, key)
    return folder, task, reply


@pytest.fixture(scope="module")
def served(overfit_model):
    """`transformers serve` of the overfit model on a free loopback port."""
    # the console script of this interpreter's environment (its bin/ need not be on PATH)
    beside = Path(sys.executable).parent / "transformers"
    exe = str(beside) if beside.exists() else shutil.which("transformers")
    if exe is None:
        pytest.skip("the `transformers` command is not installed (pip install 'transformers[serving]')")
    folder = overfit_model[0]
    port = free_port()
    proc = subprocess.Popen([exe, "serve", str(folder), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
                             "--log-level", "warning"], env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_http(f"http://127.0.0.1:{port}/health", timeout=300, proc=proc)
    except (RuntimeError, TimeoutError) as exc:
        proc.kill()
        err = proc.stderr.read()[-2000:] if proc.stderr else ""
        if "serving" in err and "pip install" in err:
            pytest.skip(f"`transformers serve` lacks its extra: {err.strip()[-300:]}")
        raise AssertionError(f"transformers serve did not start: {exc}\n{err}") from exc
    yield f"http://127.0.0.1:{port}/v1", str(folder)
    proc.kill()
    proc.wait(timeout=30)


def test_gen_through_transformers_serve(served, overfit_model, tmp_path):
    base_url, model = served
    out = tmp_path / "run"
    proc = gen_cli("triton", "--tasks", "builtin:all", "--task", TASK_ID, "--llm", "openai", "--model", model,
                   "--base-url", base_url, "--turns", "1", "--samples", "2", "--shots", "0", "--temperature", "0",
                   "--max-tokens", "400", "--device", "cpu", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    recs = run_trajectories(out)
    assert len(recs) == 2
    for rec in recs:
        first = rec["trajectory"]["turns"][0]
        assert first["reply"].strip() == overfit_model[2].strip()   # the model's own greedy answer
        assert statuses(rec)[0] == "ok"
        assert first["prompt_tokens"] > 1000 and first["completion_tokens"] > 100
        assert rec["trajectory"]["model"] == model
    # transformers serve ignores `n` and answers one choice: the client noticed and asked again
    assert summary["tokens"]["short_choices"] >= 1
    assert summary["tokens"]["completion_tokens"] > 0 and summary["throughput"]["completion_tokens_per_s"] > 0
    assert summary["outcomes"]["first_turn_correct"] == 2


def test_transformers_client_batches_concurrent_requests(overfit_model):
    """The local client: two threads' requests (different prompt lengths, left-padded into one
    batch) get the same greedy replies as alone; n samples come back from one call."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from amdkv.gen.hf_client import TransformersChatClient
    from amdkv.gen.llm import SamplingParams
    from amdkv.prompts import PromptConfig, build_messages

    folder, task, reply = overfit_model
    client = TransformersChatClient(str(folder), model_obj=AutoModelForCausalLM.from_pretrained(folder),
                                    tokenizer=AutoTokenizer.from_pretrained(folder), device="cpu", batch_wait_s=0.5)
    try:
        greedy = SamplingParams(temperature=0.0, max_tokens=300)
        messages = build_messages(task, PromptConfig(shots=0))
        short = [{"role": "user", "content": "hello"}]
        results: dict[str, list] = {}
        threads = [threading.Thread(target=lambda k, m, n: results.__setitem__(k, client.chat(m, n, greedy)),
                                    args=(k, m, n)) for k, m, n in (("task", messages, 2), ("short", short, 1))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [r.content for r in results["task"]] == [reply, reply]
        assert results["task"][0].finish_reason == "stop" and results["task"][0].completion_tokens > 100
        alone = client.chat(short, 1, greedy)
        assert alone[0].content == results["short"][0].content
        assert client.stats["replies"] == 4
    finally:
        client.close()
