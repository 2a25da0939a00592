"""Dispatch ``python -m engine.bench <name> [options]`` to ``engine.bench.<name>.main``."""

import importlib
import importlib.util
import sys

from engine.bench import SUBCOMMANDS


def main(argv: list[str]) -> int:
    available = [name for name in SUBCOMMANDS if importlib.util.find_spec(f"engine.bench.{name}")]
    if not argv or argv[0] not in available:
        print(f"usage: python -m engine.bench {{{','.join(available)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(f"engine.bench.{argv[0]}")
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
