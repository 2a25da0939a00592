"""The model trained on the full Tang corpus (assets/models/course_tang).

It loads, fits the corpus, and beats counting.
"""

from pathlib import Path

import pytest

from engine.baselines import corpus_baselines
from engine.checkpoint import load_checkpoint
from engine.corpus import load_corpus
from engine.presets import preset
from engine.sampling import generate_text

FOLDER = Path(__file__).resolve().parents[2] / "assets" / "models" / "course_tang"


@pytest.fixture(scope="module")
def ckpt():
    return load_checkpoint(FOLDER)


@pytest.fixture(scope="module")
def tang():
    return load_corpus("tang")


def test_shipped_tang_model_is_the_course_model_on_tang(ckpt, tang):
    assert ckpt.tokenizer == tang.tokenizer and ckpt.tokenizer.unk is not None
    expected = preset("course", vocab_size=tang.vocab_size, dropout=ckpt.config.dropout)
    assert ckpt.config == expected
    assert ckpt.summary["corpus"] == "tang"
    assert ckpt.summary["command"].startswith("python -m engine.train --preset course --corpus tang ")
    assert sum(f.stat().st_size for f in FOLDER.iterdir()) < 10 * 2**20


def test_shipped_tang_model_beats_the_bigram(ckpt, tang):
    baselines = corpus_baselines(tang)
    history = ckpt.summary["history"]
    best_val = min(history["val_loss"])
    assert ckpt.summary["final_val_loss"] == best_val  # the last evaluation is the best one: no overfitting to undo
    assert best_val < baselines.bigram.val_nats - 0.3 < baselines.unigram.val_nats


def test_shipped_tang_model_writes_from_the_lesson_prompts(ckpt):
    for prompt in ("白日", "明月"):
        text = generate_text(ckpt.model, ckpt.tokenizer, prompt, 12, temperature=0)
        assert text.startswith(prompt) and len(text) == len(prompt) + 12
