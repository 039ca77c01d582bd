"""Training: SFT and RL wiring for TRL, reward functions, reward workers (DESIGN.md section 6).

Modules load transformers/TRL inside the functions that need them, so `import amdkv.train` stays light.
"""
