"""Prompts, code extraction and the multi-turn trajectory format (DESIGN.md sections 3, 4 and 6).

Shared by generation (agents calling LLMs), the corpora (`messages` and `trajectories`) and
training (SFT examples, RL prompts and rollouts). Standard library at import time; the token-level
helpers (`amdkv.prompts.chat_tokens`) import transformers when called. Guide: docs/prompts.md,
docs/trajectories.md.
"""

from amdkv.prompts.extract import EXTRACTION_REASONS, Extraction, extract_code, split_reasoning
from amdkv.prompts.feedback import Feedback, clean_log
from amdkv.prompts.messages import PromptConfig, build_messages, feedback_for, system_message, task_message
from amdkv.prompts.stages import STAGES, next_stage
from amdkv.prompts.target import ARCH_NAMES, DEFAULT_ARCH, target_facts
from amdkv.prompts.templates import PROMPT_VERSION

__all__ = [
    "ARCH_NAMES", "DEFAULT_ARCH", "EXTRACTION_REASONS", "PROMPT_VERSION", "STAGES",
    "Extraction", "Feedback", "PromptConfig", "build_messages",
    "clean_log", "extract_code", "feedback_for", "next_stage", "split_reasoning",
    "system_message", "target_facts", "task_message",
]
