"""The README and docs/ stand alone in a clone: the README stays short, every link and every repository path they
name exists, and no machine's path or file outside the repository is written into them."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "assets").glob("*/README.md")])
#: Top-level entries a path written in a document may start with (others are commands' outputs, e.g. runs/).
TOP = ("engine", "ui", "views", "tests", "tools", "assets", "docs", "deploy", "content", "locales", ".streamlit", ".ci")
MACHINE_PATH = re.compile(r"(^|[^A-Za-z0-9_.])/(home|root|tmp|work|Users)/")


def _names(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def test_the_readme_is_for_readers_and_teachers():
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 150
    first_screen = "\n".join(text.splitlines()[:20])
    assert "docs/teaching.md" in first_screen
    for command in ("make run", "make test", "make check"):
        assert command in text


@pytest.mark.parametrize("doc", DOCS, ids=_names)
def test_nothing_outside_the_repository(doc):
    text = doc.read_text("utf-8")
    assert "../shared" not in text and not MACHINE_PATH.search(text)


@pytest.mark.parametrize("doc", DOCS, ids=_names)
def test_every_link_and_named_path_exists(doc):
    text = doc.read_text("utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if not re.match(r"[a-z]+:", target) and not (doc.parent / target).exists():
            missing.append(target)
    for token in re.findall(r"`([^`\s]+)`", text):
        path = token.rstrip(".,;:")
        if (path.split("/", 1)[0] in TOP and "/" in path and not re.search(r"[<>*{}]", path)
                and not (ROOT / path).exists()):
            missing.append(path)
    assert not missing, f"{_names(doc)} names what the repository does not have: {missing}"


def test_the_model_card_states_what_the_checkpoint_holds():
    card = (ROOT / "assets" / "models" / "README.md").read_text("utf-8")
    summary = json.loads((ROOT / "assets" / "models" / "course_tang" / "checkpoint.json").read_text("utf-8"))["summary"]
    train = summary["train_config"]
    for fact in (f"train {summary['final_train_loss']:.3f} / validation {summary['final_val_loss']:.3f} nats",
                 f"{train['steps']:,} steps of batch {train['batch_size']}".replace(",", " "),
                 f"peak learning rate {train['learning_rate']:g}", f"seed {train['seed']}",
                 f"{summary['wall_s']:,.0f} s of training".replace(",", " ")):
        assert fact in card, fact
    listing = card.split("```bash")[1].split("```")[0]
    assert listing.replace("\\\n", " ").split() == summary["command"].split()  # the command, as it ran
