"""A real OpenAI-compatible HTTP server on loopback whose "model" answers from a script.

Used by the generation tests for what a real model server cannot be made to do on demand: answer
500, stall past the client's timeout, drop choices, refuse a long prompt, die mid-run. The HTTP
side is real (FastAPI + uvicorn, the `/v1/chat/completions` wire format the `openai` package
parses); only the model is scripted: the reply to turn t of a conversation (t = the number of
assistant messages in it) is `scripted_reply(actions[t], reference solution of the task)`, the task
being the last "## Task `id`" header of the first user message. The real-model path is tested
with `transformers serve` and an overfit tiny model (tests/test_gen_serve.py).

    python tests/gen_fake_server.py --port 8123 --log requests.jsonl [--actions compile_error,solution]
        [--fail-first 2 --fail-status 500] [--sleep-first 1 --sleep-s 5] [--ignore-n] [--reasoning]
        [--max-prompt-chars 20000] [--model fake-model] [--delay-s 0.5]

Every request is appended to --log as one JSON line (`n`, turn, task, status) before it is
answered, so tests count what the server really saw.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import uuid
from pathlib import Path

TASK_HEADER = re.compile(r"## Task `([^`]+)`")


def build_app(args: argparse.Namespace):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    from amdkv.gen.replay import reference_solution, scripted_reply
    from amdkv.tasks.suites import load_suite

    tasks = {t.id: t for t in load_suite(args.tasks)}
    actions = args.actions.split(",")
    seen = {"count": 0}
    lock = threading.Lock()
    app = FastAPI()

    def log(entry: dict) -> None:
        with lock, open(args.log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": args.model, "object": "model"}]}

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
        turn = sum(m["role"] == "assistant" for m in messages)
        n = int(body.get("n") or 1)
        entry = {"i": index, "task": task_id, "turn": turn, "n": n}
        if body.get("model") != args.model:
            log({**entry, "status": 404})
            return JSONResponse({"error": {"message": f"model {body.get('model')!r} not found"}}, status_code=404)
        if index <= args.fail_first:
            log({**entry, "status": args.fail_status})
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=args.fail_status)
        if index <= args.sleep_first:
            log({**entry, "status": "sleep"})
            time.sleep(args.sleep_s)
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        if args.max_prompt_chars and prompt_chars > args.max_prompt_chars:
            log({**entry, "status": 400})
            return JSONResponse({"error": {"message": f"This model's maximum context length is exceeded "
                                                      f"({prompt_chars} characters)"}}, status_code=400)
        if args.delay_s:
            time.sleep(args.delay_s)
        code = reference_solution(tasks[task_id], args.language) if task_id in tasks else None
        action = actions[min(turn, len(actions) - 1)]
        choices = []
        for i in range(1 if args.ignore_n else n):
            if code is None:
                content, finish, reasoning = "I cannot help with that.", "stop", None
            else:
                reply = scripted_reply(action, code)
                content, finish, reasoning = reply.content, reply.finish_reason, None
                if args.reasoning:
                    reasoning = f"Thinking about {task_id}, turn {turn}, choice {i}."
            message = {"role": "assistant", "content": content}
            if reasoning is not None:
                message["reasoning_content"] = reasoning
            choices.append({"index": i, "message": message, "finish_reason": finish})
        log({**entry, "status": 200, "choices": len(choices)})
        completion = sum(len(c["message"]["content"]) // 4 for c in choices)
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": args.model, "choices": choices,
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
