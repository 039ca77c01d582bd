"""ROCm-libraries QA: question-answer pairs grounded in exact files and line ranges of library
source trees (chunker -> model -> grounding check -> dedup -> `rocm_qa` records). Guide: docs/gen.md."""
