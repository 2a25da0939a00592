"""engine.training.EarlyStop: a training stops after ``patience`` evaluations in a row above its best val loss."""

from __future__ import annotations

import pytest

from engine import presets
from engine.corpus import corpus_from_text
from engine.training import EarlyStop, TrainConfig, train


def test_it_stops_after_patience_rises_in_a_row_and_keeps_the_best():
    watch = EarlyStop(patience=2)
    for step, val in ((0, 5.0), (10, 4.0), (20, 4.5), (30, 3.9), (40, 4.1)):
        watch.on_eval(step, 0.0, val)
        assert not watch()
    watch.on_eval(50, 0.0, 4.2)
    assert watch() and watch.stopped_at == 50 and (watch.best, watch.best_step) == (3.9, 30)
    watch.on_eval(60, 0.0, 3.0)  # a later evaluation does not move the stop
    assert watch.stopped_at == 50


def test_patience_zero_never_stops_and_a_negative_one_is_refused():
    watch = EarlyStop(0)
    for step in range(10):
        watch.on_eval(step, 0.0, float(step))
    assert not watch() and watch.stopped_at is None
    for bad in (-1, 1.5, "2"):
        with pytest.raises(ValueError, match="patience"):
            EarlyStop(bad)


def test_a_training_that_memorises_stops_early():
    """A tiny text seen over and over at a high learning rate: validation rises, and the run ends before its steps
    with an evaluation at its last step."""
    text = "\n\n".join(f"床前明月光{i % 7}疑是地上霜" for i in range(40))
    corpus = corpus_from_text(text, "tiny")
    watch = EarlyStop(patience=2)
    config = TrainConfig(steps=400, batch_size=8, learning_rate=3e-2, warmup_steps=5, eval_interval=10,
                         eval_iters=2, seed=0)
    result = train(presets.preset("tiny", block_size=8), corpus, config, callbacks=watch, stop=watch)
    history = result.history
    if watch.stopped_at is None:
        pytest.fail(f"the validation loss never rose twice in a row: {history['val_loss'].round(3).tolist()}")
    assert result.stopped and int(history["step"].iloc[-1]) < config.steps
    assert watch.best == pytest.approx(history["val_loss"].min())
