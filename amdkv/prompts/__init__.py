"""Prompts, code extraction and the multi-turn trajectory format (DESIGN.md sections 3, 4 and 6).

Shared by generation (agents calling LLMs), the corpora (`messages` and `trajectories`) and
training (SFT examples, RL prompts and rollouts). Standard library at import time; the token-level
helpers (`amdkv.prompts.chat_tokens`) import transformers when called. Guide: docs/prompts.md,
docs/trajectories.md.
"""

from amdkv.prompts.benchmark import benchmark_message, kernel_api_names
from amdkv.prompts.extract import EXTRACTION_REASONS, Extraction, extract_code, split_reasoning
from amdkv.prompts.feedback import Feedback, clean_log
from amdkv.prompts.messages import PromptConfig, build_messages, feedback_for, system_message, task_message
from amdkv.prompts.stages import STAGES, next_stage
from amdkv.prompts.target import ARCH_NAMES, DEFAULT_ARCH, target_facts
from amdkv.prompts.templates import PROMPT_VERSION
from amdkv.prompts.trajectory import (DEFAULT_GAMMA, TRAJECTORY_SCHEMA_VERSION, Trajectory, Turn, discounted_returns,
                                      prompt_key)

__all__ = [
    "ARCH_NAMES", "DEFAULT_ARCH", "DEFAULT_GAMMA", "EXTRACTION_REASONS", "PROMPT_VERSION", "STAGES",
    "TRAJECTORY_SCHEMA_VERSION", "Extraction", "Feedback", "PromptConfig", "Trajectory", "Turn", "benchmark_message",
    "build_messages", "clean_log", "discounted_returns", "extract_code", "feedback_for", "kernel_api_names",
    "next_stage", "prompt_key", "split_reasoning", "system_message", "target_facts", "task_message",
]
