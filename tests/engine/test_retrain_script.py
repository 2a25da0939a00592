"""tools/retrain_clean_corpus.sh retrains what ships with the commands that made it (only the corpus changes)."""

import json
import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "retrain_clean_corpus.sh"


def command(text: str, start: str) -> list[str]:
    """The script's command that starts with ``start``, continuation lines joined, ``"$PY" -m`` as ``python -m``."""
    joined = re.sub(r"\\\n\s*", " ", text)
    line = next(line for line in joined.splitlines() if start in line)
    return shlex.split(line[line.index(start):].replace('"$PY"', "python").split("&&")[0].split(")")[0])


def options(argv: list[str]) -> list[str]:
    """The argv without the values of --out and --resume (paths, different in staging)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--out", "--resume"):
            skip = True
        else:
            kept.append(arg)
    return kept


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], check=False).returncode == 0


def test_the_model_is_retrained_with_its_command():
    shipped = json.loads((ROOT / "assets/models/course_tang/checkpoint.json").read_text(encoding="utf-8"))
    script = command(SCRIPT.read_text(encoding="utf-8"), '"$PY" -m engine.train')
    assert options(script) == options(shlex.split(shipped["summary"]["command"]))


def test_the_dropout_runs_are_retrained_with_their_command():
    shipped = json.loads((ROOT / "assets/lab_dropout.json").read_text(encoding="utf-8"))
    script = command(SCRIPT.read_text(encoding="utf-8"), '"$PY" -m engine.lab.experiments --corpus tang')
    assert options(script) == options(shlex.split(shipped["command"]))
