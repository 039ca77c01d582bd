"""A real OpenAI-compatible HTTP server on loopback whose "model" answers from a script.

Used by the generation tests for what a real model server cannot be made to do on demand: answer
500, stall past the client's timeout, drop choices, refuse a long prompt, die mid-run. The HTTP
side is real (FastAPI + uvicorn, the `/v1/chat/completions` wire format the `openai` package
parses); only the model is scripted: the reply to turn t of a conversation (t = the number of
assistant messages in it) is `scripted_reply(actions[t], reference solution of the task)`, the task
being the last "## Task `id`" header of the first user message. The functional-reference request
(amdkv/gen/functional.py) is answered from `FUNCTIONAL` (right for l1_relu, wrong for l1_softmax). The real-model path is tested
with `transformers serve` and an overfit tiny model (tests/test_gen_serve.py).

    python tests/gen_fake_server.py --port 8123 --log requests.jsonl [--actions compile_error,solution]
        [--fail-first 2 --fail-status 500] [--sleep-first 1 --sleep-s 5] [--ignore-n] [--reasoning]
        [--max-prompt-chars 20000] [--model fake-model] [--delay-s 0.5]

Every request is appended to --log as one JSON line (`n`, turn, task, status) before it is
answered, so tests count what the server really saw. `POST /control` with a JSON object of
settings (the option names with underscores) changes the behaviour, restarts the request count and
empties the log, so one server process serves many tests.
"""

import argparse
import asyncio
import json
import re
import threading
import time
import uuid
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

TASK_HEADER = re.compile(r"## Task `([^`]+)`")


# Answers to the functional-reference request (amdkv/gen/functional.py), by task: right for
# l1_relu, wrong for l1_softmax (softmax over the first dimension), none for the others.
FUNCTIONAL_PROGRAM = """import torch
import torch.nn as nn
import torch.nn.functional as F


def module_fn(x):
    return {expr}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return module_fn(x)
"""
FUNCTIONAL = {"l1_relu": "F.relu(x)", "l1_softmax": "torch.softmax(x, dim=0)"}

BEHAVIOUR = ("model", "actions", "fail_first", "fail_status", "sleep_first", "sleep_s", "delay_s", "ignore_n",
             "reasoning", "max_prompt_chars")


def build_app(args: argparse.Namespace):
    # FastAPI reads the endpoint's annotations at runtime: no `from __future__ import annotations`
    # in this file, and `Request` must be a module-level name
    from amdkv.gen.replay import reference_solution, scripted_reply
    from amdkv.tasks.suites import load_suite

    tasks = {t.id: t for t in load_suite(args.tasks)}
    conf = {k: getattr(args, k) for k in BEHAVIOUR}
    seen = {"count": 0}
    lock = threading.Lock()
    app = FastAPI()

    def log(entry: dict) -> None:
        with lock, open(args.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": conf["model"], "object": "model"}]}

    @app.post("/control")
    async def control(request: Request):
        """Change the behaviour (any BEHAVIOUR key), restart the request count, empty the log."""
        changes = await request.json()
        unknown = set(changes) - set(BEHAVIOUR)
        if unknown:
            return JSONResponse({"error": {"message": f"unknown settings {sorted(unknown)}"}}, status_code=400)
        with lock:
            conf.update({k: getattr(args, k) for k in BEHAVIOUR}, **changes)
            seen["count"] = 0
            open(args.log, "w").close()
        return conf

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        with lock:
            seen["count"] += 1
            index = seen["count"]
        messages = body.get("messages") or []
        first_user = next((m["content"] for m in messages if m["role"] == "user"), "")
        headers = TASK_HEADER.findall(first_user)
        task_id = headers[-1] if headers else None
        functional = bool(messages) and messages[0]["content"].startswith("You rewrite PyTorch modules")
        if functional:
            task_id = next((tid for tid, t in tasks.items() if t.source.strip() in first_user), None)
        turn = sum(m["role"] == "assistant" for m in messages)
        n = int(body.get("n") or 1)
        entry = {"i": index, "task": task_id, "turn": turn, "n": n}
        if body.get("model") != conf["model"]:
            log({**entry, "status": 404})
            return JSONResponse({"error": {"message": f"model {body.get('model')!r} not found"}}, status_code=404)
        if index <= conf["fail_first"]:
            log({**entry, "status": conf["fail_status"]})
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=conf["fail_status"])
        if index <= conf["sleep_first"]:
            log({**entry, "status": "sleep"})
            await asyncio.sleep(conf["sleep_s"])  # never time.sleep: it would stall every other request
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        if conf["max_prompt_chars"] and prompt_chars > conf["max_prompt_chars"]:
            log({**entry, "status": 400})
            return JSONResponse({"error": {"message": f"This model's maximum context length is exceeded "
                                                      f"({prompt_chars} characters)"}}, status_code=400)
        if conf["delay_s"]:
            await asyncio.sleep(conf["delay_s"])
        code = reference_solution(tasks[task_id], args.language) if task_id in tasks else None
        actions = conf["actions"].split(",")
        action = actions[min(turn, len(actions) - 1)]
        choices = []
        for i in range(1 if conf["ignore_n"] else n):
            if functional:
                expr = FUNCTIONAL.get(task_id)
                content = ("```python\n" + FUNCTIONAL_PROGRAM.format(expr=expr) + "```\n") if expr else "No."
                finish = "stop"
            elif code is None:
                content, finish = "I cannot help with that.", "stop"
            else:
                reply = scripted_reply(action, code)
                content, finish = reply.content, reply.finish_reason
            message = {"role": "assistant", "content": content}
            if conf["reasoning"]:
                message["reasoning_content"] = f"Thinking about {task_id}, turn {turn}, choice {i}."
            choices.append({"index": i, "message": message, "finish_reason": finish})
        log({**entry, "status": 200, "choices": len(choices)})
        completion = sum(len(c["message"]["content"]) // 4 for c in choices)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": conf["model"], "choices": choices,
                "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": completion,
                          "total_tokens": prompt_chars // 4 + completion}}

    return app


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--model", default="fake-model")
    p.add_argument("--tasks", default="builtin:all")
    p.add_argument("--language", default="triton")
    p.add_argument("--actions", default="solution", help="scripted action per turn (the last repeats)")
    p.add_argument("--fail-first", type=int, default=0)
    p.add_argument("--fail-status", type=int, default=500)
    p.add_argument("--sleep-first", type=int, default=0)
    p.add_argument("--sleep-s", type=float, default=0.0)
    p.add_argument("--delay-s", type=float, default=0.0)
    p.add_argument("--ignore-n", action="store_true")
    p.add_argument("--reasoning", action="store_true")
    p.add_argument("--max-prompt-chars", type=int, default=0)
    args = p.parse_args()
    Path(args.log).touch()
    import uvicorn

    uvicorn.run(build_app(args), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
