"""Human-readable renderings of verdicts and metrics (console tables, markdown, HTML)."""
