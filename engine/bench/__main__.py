"""Dispatch ``python -m engine.bench <name> [options]`` to ``engine.bench.<name>.main``.

A sub-command whose module sets ``PRINTS_MACHINE = True`` prints the machine and the ceiling it
measured itself (and stores them in its JSON); for any other (``pages``, which runs Streamlit in a
child process) the dispatcher prints them first, so every benchmark names its machine.
"""

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
    if not getattr(module, "PRINTS_MACHINE", False):
        # as the sub-command itself, by name: PyTorch is imported only where the dispatcher measures, and `load`,
        # whose benchmark processes must not map it, keeps it out of this one
        machine = importlib.import_module("engine.bench.machine")
        for line in machine.header_lines(machine.machine_info(), machine.matmul_ceiling()):
            print(line, flush=True)
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
