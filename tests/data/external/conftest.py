"""These are benchmark-format fixture files (some are named test_*.py, as in GEAK-eval): data, not tests."""

collect_ignore_glob = ["*"]
