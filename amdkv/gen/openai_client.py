"""A client for any OpenAI-compatible chat server: vLLM, SGLang, `transformers serve`, hosted APIs.

Built on the `openai` package (its own retries off: `amdkv.gen.retry` retries transient failures
only, with backoff, jitter and Retry-After, and counts them). What it adds to a bare call:

- `n` samples, checked: some servers return fewer choices than asked without saying so
  (`transformers serve` ignores `n` and returns one); the missing ones are asked again, and the
  number of such short responses is counted (`short_choices`).
- reasoning text kept apart where the server returns it (`reasoning_content`, or `reasoning` in
  newer vLLM), so trajectories store it beside the answer.
- only the fields asked for are sent (strict servers answer 422 to anything unknown);
  `SamplingParams.extra` goes out as `extra_body`.
- bounded concurrency (a semaphore over in-flight HTTP requests), token accounting per run.
- errors sorted once: connection errors, timeouts, 408/425/429/5xx are transient (retried; when
  the retries run out, `TransientLLMError`); a prompt longer than the model's context is
  `ContextTooLong` (that trajectory ends); any other 4xx is `ClientConfigError` (every request
  would fail: the run stops and says what to fix).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Sequence

from amdkv.gen.llm import (ClientConfigError, ClientStats, ContextTooLong, LLMError, Message, Reply, RequestContext,
                           SamplingParams, TransientLLMError, share_tokens)
from amdkv.gen.retry import RetryPolicy, Transient, call_with_retries

TRANSIENT_STATUS = frozenset({408, 425, 429}) | frozenset(range(500, 600))
_CONTEXT_WORDS = ("context length", "context_length", "maximum context", "too long", "max_model_len",
                  "exceeds the model")
MAX_TOPUPS = 8  # requests per chat() to collect the n choices asked for


class OpenAIChatClient:
    """See the module docstring. `api_key`: the argument, else OPENAI_API_KEY, else "EMPTY" (local
    servers need none)."""

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, max_concurrency: int = 8,
                 request_timeout: float = 600.0, retry: RetryPolicy | None = None) -> None:
        import openai

        self.model = model
        self.base_url = base_url
        self.stats = ClientStats()
        self.retry = retry or RetryPolicy()
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                                     max_retries=0, timeout=request_timeout)
        self._slots = threading.BoundedSemaphore(max_concurrency)

    # ------------------------------------------------------------------ protocol
    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        params = params or SamplingParams()
        replies: list[Reply] = []
        for _ in range(MAX_TOPUPS):
            asked = n - len(replies)
            got = self._request(messages, asked, params)
            if len(got) < asked:  # detected: ask again for the rest
                self.stats.add(short_choices=1)
            replies += got
            if len(replies) >= n:
                return replies[:n]
        raise TransientLLMError(f"{self.base_url} returned {len(replies)} of {n} choices after {MAX_TOPUPS} requests",
                                hint="the server drops choices; ask for fewer samples per request (--samples)")

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------------ one HTTP request
    def _request(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Reply]:
        body: dict[str, Any] = {"model": self.model, "messages": [_wire_message(m) for m in messages],
                                "temperature": params.temperature, "top_p": params.top_p,
                                "max_tokens": params.max_tokens}
        if n != 1:
            body["n"] = n
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.extra:
            body["extra_body"] = dict(params.extra)

        def once() -> Any:
            with self._slots:
                self.stats.add(requests=1)
                started = time.monotonic()
                try:
                    return self._client.chat.completions.create(**body)
                finally:
                    self.stats.add(request_seconds=time.monotonic() - started)

        try:
            response = call_with_retries(once, classify=self._classify, policy=self.retry,
                                         on_retry=lambda *_: self.stats.add(retries=1))
        except LLMError:
            self.stats.add(failures=1)
            raise
        return self._replies(response)

    def _replies(self, response: Any) -> list[Reply]:
        choices = sorted(response.choices or [], key=lambda c: c.index or 0)
        usage = getattr(response, "usage", None)
        prompt_tokens = getattr(usage, "prompt_tokens", None)
        contents = [(c.message.content or "") if c.message is not None else "" for c in choices]
        shares = share_tokens(getattr(usage, "completion_tokens", None), contents)
        replies = [Reply(content=text, reasoning_content=_reasoning(c.message), finish_reason=c.finish_reason,
                         prompt_tokens=prompt_tokens, completion_tokens=share, tokens_exact=len(choices) == 1)
                   for c, text, share in zip(choices, contents, shares)]
        self.stats.add(replies=len(replies), prompt_tokens=prompt_tokens or 0,
                       completion_tokens=getattr(usage, "completion_tokens", None) or 0)
        return replies

    def _classify(self, exc: BaseException) -> BaseException:
        oa = self._openai
        where = f"{self.base_url} (model {self.model})"
        if isinstance(exc, oa.APIConnectionError):  # includes APITimeoutError
            kind = "timed out" if isinstance(exc, oa.APITimeoutError) else "could not be reached"
            return Transient(exc, final=TransientLLMError(
                f"{where} {kind} ({exc}); gave up after {self.retry.attempts} attempts",
                hint="check that the server is running and --base-url is right; a re-run resumes"))
        if isinstance(exc, oa.APIStatusError):
            status = exc.status_code
            text = _error_text(exc)
            if status in TRANSIENT_STATUS:
                return Transient(exc, retry_after=_retry_after(exc), final=TransientLLMError(
                    f"{where} answered {status} ({text}) {self.retry.attempts} times",
                    hint="the server is overloaded or failing; a re-run resumes"))
            if status == 400 and any(w in text.lower() for w in _CONTEXT_WORDS):
                return ContextTooLong(f"the conversation is longer than {self.model}'s context: {text}",
                                      hint="use fewer turns (--turns), fewer shots (--shots) or a smaller --max-tokens")
            return ClientConfigError(f"{where} refused the request with {status}: {text}",
                                     hint=_config_hint(status))
        return exc


def _wire_message(m: Message) -> dict[str, Any]:
    """Role and content only: earlier reasoning is not sent back (servers with Qwen3's stock
    template would drop it anyway; docs/trajectories.md says why recordings note this)."""
    return {"role": m["role"], "content": m["content"]}


def _reasoning(message: Any) -> str | None:
    if message is None:
        return None
    for name in ("reasoning_content", "reasoning"):
        value = getattr(message, name, None)
        if value is None:
            value = (getattr(message, "model_extra", None) or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _error_text(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        if msg:
            return str(msg)[:500]
        detail = body.get("detail")
        if detail:
            return str(detail)[:500]
    return str(getattr(exc, "message", exc))[:500]


def _retry_after(exc: Any) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def _config_hint(status: int) -> str:
    return {401: "set OPENAI_API_KEY (or --api-key) for this server",
            403: "this key may not use this model",
            404: "check --model (GET <base-url>/models lists what the server has) and --base-url (ends in /v1)",
            422: "the server rejected a request field: drop custom fields from --extra-body"}.get(
        status, "check --model, --base-url and the sampling options")
