"""Generation: LLM clients, the kernel-generation agents and ROCm-libraries QA (DESIGN.md section 3).

- `amdkv.gen.llm`: the client protocol (`chat(messages, n, params, context) -> list[Reply]`);
  clients: `openai_client.OpenAIChatClient` (any OpenAI-compatible server), `hf_client.
  TransformersChatClient` (a local model, batched `generate`), `replay.StoredReplay` /
  `replay.ScriptedReplay` (no model); `request_cache.CachedClient` in front of any of them.
- `amdkv.gen.agent`: TritonKernelGen and HIPKernelGen (write -> verify -> fix -> optimise).
- `amdkv.gen.pipeline`: many tasks at once, generation never blocked by verification.
- `amdkv.gen.run`: `run_gen(GenSettings(...))`, the resumable run folder behind `amdkv gen`.
- `amdkv.gen.qa`: ROCm-library question-answer pairs grounded in source lines (`amdkv gen rocm-qa`).

Guide and measured numbers: docs/gen.md. Importing this package loads nothing heavy; each client
imports its library (openai, transformers) when it is built.
"""
