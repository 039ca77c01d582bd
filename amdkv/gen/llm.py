"""The one small protocol every LLM client speaks, and the plain data that crosses it.

    client.chat(messages, n=4, params=SamplingParams(temperature=0.7), context=RequestContext(...))
        -> list[Reply]        # exactly n replies, or an exception

Clients are synchronous and thread-safe; concurrency comes from the caller's threads (the
generation pipeline runs `chat` in a bounded thread pool) and each client bounds its own
in-flight requests. Why threads and not asyncio: the verifier's contract is
`concurrent.futures.Future` (`BaseVerifier.submit`), `transformers.generate` blocks a thread
anyway, and the `openai` and `httpx` sync clients are thread-safe; one futures-based event loop
(amdkv/gen/pipeline.py) then waits on generation and verification futures alike, without an
asyncio loop bridged to executor threads.

`RequestContext` says which task, sample and turn a request belongs to. Real models ignore it
(it never reaches the server); the replay client uses it to find the stored reply, and the
request cache uses the sample index so that two samples that reach the same conversation are
still sampled independently.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

from amdkv.errors import AmdkvError, BadInputError, InfrastructureError

Message = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class SamplingParams:
    """What a request asks of the sampler. `extra`: server-specific fields sent as they are (e.g.
    vLLM's `top_k`, `chat_template_kwargs`); servers that validate strictly (transformers serve
    answers 422) reject fields they do not know, so nothing is sent that was not asked for."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 4096
    seed: int | None = None
    stop: tuple[str, ...] = ()
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_tokens < 1:
            raise BadInputError(f"sampling parameters temperature={self.temperature}, top_p={self.top_p}, "
                                f"max_tokens={self.max_tokens} are out of range",
                                hint="temperature >= 0, 0 < top_p <= 1, max_tokens >= 1")
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "extra", dict(self.extra))

    def to_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens,
                "seed": self.seed, "stop": list(self.stop), "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SamplingParams":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclasses.dataclass(frozen=True)
class RequestContext:
    """Which unit of work a request serves (never sent to a server)."""

    task_id: str
    sample: int = 0
    turn: int = 0
    stage: str = "write"
    language: str = "triton"


@dataclasses.dataclass
class Reply:
    """One choice of a chat completion.

    `content`: the answer text (may still hold a `<think>` block: extraction splits it off);
    `reasoning_content`: the server's separate reasoning text where its reasoning parser returns
    one (vLLM/SGLang `reasoning_content` or `reasoning`), else None. `completion_tokens` is exact
    when the response held one choice; with several choices the response's total is shared out in
    proportion to their lengths (`tokens_exact` False). `cached`: served from the request cache."""

    content: str
    reasoning_content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tokens_exact: bool = True
    cached: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Reply":
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


class LLMError(InfrastructureError):
    """A request failed for good (after the retries its kind allows)."""


class TransientLLMError(LLMError):
    """The server could not answer now (connection refused or reset, timeout, 429, 5xx): retried
    with backoff; raised only when the retries ran out."""


class ContextTooLong(AmdkvError):
    """The conversation no longer fits the model's context: the trajectory ends there (recorded,
    stop reason `context_length`); other tasks go on."""


class ReplayExhausted(AmdkvError):
    """The replay client has no stored reply for this (task, sample, turn): the trajectory ends
    (stop reason `replay_exhausted`)."""


class ClientConfigError(BadInputError):
    """The server refused the request as malformed or unauthorised (400/401/403/404/422): every
    request would fail the same way, so the run stops and says what to fix."""


@runtime_checkable
class LLMClient(Protocol):
    """What the agents call. `model` names what answers (recorded in every trajectory)."""

    model: str
    stats: "ClientStats"

    def chat(self, messages: Sequence[Message], n: int = 1, params: SamplingParams | None = None, *,
             context: RequestContext | None = None) -> list[Reply]:
        ...

    def close(self) -> None:
        ...


class ClientStats:
    """Token accounting and request counts of one client over one run (thread-safe).

    Written into the run's summary: `requests` sent to the model (top-ups for missing choices and
    retries included), `retries` (transient failures retried), `failures` (requests that failed for
    good), `short_choices` (responses with fewer choices than asked, topped up), `replies`
    generated, `cached_replies` served from the request cache, and the prompt and completion
    tokens the server reported (cache hits cost none)."""

    FIELDS = ("requests", "retries", "failures", "short_choices", "replies", "cached_replies", "prompt_tokens",
              "completion_tokens", "request_seconds")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, float] = {k: 0 for k in self.FIELDS}

    def add(self, **deltas: float) -> None:
        with self._lock:
            for k, v in deltas.items():
                if k not in self._values:
                    raise KeyError(f"unknown client statistic {k!r}")
                self._values[k] += v or 0

    def __getitem__(self, name: str) -> float:
        with self._lock:
            return self._values[name]

    def to_dict(self) -> dict[str, float]:
        with self._lock:
            out = dict(self._values)
        out["request_seconds"] = round(out["request_seconds"], 3)
        return out


def share_tokens(total: int | None, texts: Sequence[str]) -> list[int | None]:
    """A response's completion-token total shared out over its choices in proportion to their
    lengths (largest remainders, so the parts add up to the total). One choice: the total."""
    if total is None:
        return [None] * len(texts)
    if len(texts) == 1:
        return [total]
    weights = [max(len(t), 1) for t in texts]
    scale = total / sum(weights)
    parts = [int(w * scale) for w in weights]
    order = sorted(range(len(texts)), key=lambda i: (w := weights[i] * scale) - int(w), reverse=True)
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts
