"""The presets are one record each (engine.presets): the model half, the training half, one default."""

import pytest

from engine import budget
from engine.gpt import GPTConfig
from engine.presets import DEFAULT_PRESET, PRESETS, Preset, PresetTraining, preset
from engine.training import TrainConfig


def test_each_preset_holds_both_halves_and_the_default_trains():
    assert list(PRESETS) == ["course", "quick", "tiny"]
    for name, p in PRESETS.items():
        assert isinstance(p, Preset) and p.name == name and isinstance(p.model, GPTConfig)
    assert isinstance(PRESETS[DEFAULT_PRESET].training, PresetTraining)
    assert PRESETS["tiny"].training is None  # a model for tests, no button trains it
    assert (PRESETS["course"].model.n_embd, PRESETS["course"].model.n_layer, PRESETS["course"].model.block_size) == (
        128, 4, 128)  # the lesson's model


def test_preset_gives_the_model_half_with_overrides():
    assert preset("quick") == PRESETS["quick"].model
    assert preset("course", vocab_size=77, n_head=8).vocab_size == 77
    with pytest.raises(ValueError, match="unknown preset 'big'; choose one of"):
        preset("big")
    with pytest.raises(ValueError, match="n_embd"):
        preset("tiny", n_head=5)


@pytest.mark.parametrize("name", [name for name, p in PRESETS.items() if p.training is not None])
def test_a_preset_training_fits_the_budget_on_the_tang_vocabulary(name):
    training = PRESETS[name].training
    train = TrainConfig.for_steps(training.steps, training.batch_size)
    _, refusals = budget.training_refusals(preset(name, vocab_size=2500), train.batch_size, train.steps,
                                           train.eval_interval, train.eval_iters)
    assert refusals == []
