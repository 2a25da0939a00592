"""Benchmarks that print numbers (never timed tests).

Run ``python -m engine.bench <name>``; each sub-command lives in the module
``engine.bench.<name>`` and exposes ``main(argv: list[str]) -> int``.
"""

SUBCOMMANDS = ("attention", "train", "generate", "pages", "load", "queue", "notebook", "docs")
