"""Open a model client by kind (`openai`, `hf`), with the request cache in front: the one place
`amdkv gen {triton,hip}` and `amdkv gen rocm-qa` build their model clients."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from amdkv.gen.retry import RetryPolicy


def open_model_client(kind: str, model: str, *, base_url: str | None = None, api_key: str | None = None,
                      concurrency: int = 8, request_timeout: float = 600.0, retry: RetryPolicy | None = None,
                      hf_device: str = "auto", cache_dir: str | Path | None = None) -> Any:
    """An `OpenAIChatClient` (kind `openai`) or `TransformersChatClient` (`hf`), wrapped in a
    `CachedClient` over `cache_dir` unless it is None."""
    if kind == "openai":
        from amdkv.gen.openai_client import OpenAIChatClient

        client: Any = OpenAIChatClient(model, base_url, api_key=api_key, max_concurrency=concurrency,
                                       request_timeout=request_timeout, retry=retry)
    elif kind == "hf":
        from amdkv.gen.hf_client import TransformersChatClient

        client = TransformersChatClient(model, device=hf_device, max_batch=max(16, concurrency))
    else:
        raise ValueError(f"not a model client kind: {kind!r}")
    if cache_dir is None:
        return client
    from amdkv.gen.request_cache import CachedClient, RequestCache

    return CachedClient(client, RequestCache(cache_dir))


def request_cache_dir(setting: str | None, out: str | Path) -> Path | None:
    """The `--request-cache` option: None -> OUT/requests, "" -> off (None), else that folder."""
    if setting == "":
        return None
    return Path(setting) if setting else Path(out) / "requests"
