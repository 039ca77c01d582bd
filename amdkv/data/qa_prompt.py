"""The system message of `rocm_qa` rows (`messages` = system, the question, the grounded answer).

The kernel prompts (`amdkv.prompts`, templates/v1) have no QA stage, and a released template
folder is frozen, so the QA system message is versioned here on its own (`QA_PROMPT_VERSION`,
stored in every row's `prompt_version`). Change the text only together with the version.
"""

from __future__ import annotations

QA_PROMPT_VERSION = "qa-v1"

QA_SYSTEM_PROMPT = (
    "You are an expert on AMD ROCm libraries (rocBLAS, hipBLASLt, rocSOLVER, MIOpen, "
    "composable_kernel, rocPRIM, hipCUB, rocFFT, RCCL and the HIP runtime) and on AMD Instinct "
    "GPUs (CDNA: gfx90a, gfx942, gfx950). Answer questions about how these libraries are written "
    "and used. Base every answer on the library's source code: name the file and the lines your "
    "answer relies on, quote identifiers exactly, and say so when the code does not settle the "
    "question instead of guessing."
)


def qa_messages(question: str, answer: str) -> list[dict[str, str | None]]:
    return [{"role": "system", "content": QA_SYSTEM_PROMPT, "reasoning_content": None},
            {"role": "user", "content": question, "reasoning_content": None},
            {"role": "assistant", "content": answer, "reasoning_content": None}]
