"""engine.budget: caps and estimates; and the Lab's engine modules hold no sentence for the reader."""

from pathlib import Path

import pytest

from engine import budget
from engine.gpt import GPTConfig, config_params
from engine.presets import preset

ROOT = Path(__file__).resolve().parents[2]


def test_estimate_counts_parameters_without_allocating():
    config = preset("course", vocab_size=2500)
    est = budget.estimate(config, batch_size=4, steps=100)
    assert est.params == config_params(config)
    per_param, *_ = budget.MEMORY_COEFFICIENTS
    assert est.memory_bytes > per_param * est.params + budget.MEMORY_OVERHEAD  # activations come on top


@pytest.mark.parametrize("field, bigger", [("batch", 8), ("block_size", 128), ("n_embd", 128), ("n_layer", 4),
                                           ("vocab_size", 5000)])
def test_every_size_raises_the_estimate(field, bigger):
    base = dict(vocab_size=2500, block_size=64, n_embd=64, n_head=4, n_layer=2)
    batch = 4
    if field == "batch":
        batch = bigger
    else:
        base = {**base, field: bigger}
    small = budget.estimate(GPTConfig(vocab_size=2500, block_size=64, n_embd=64, n_head=4, n_layer=2), 4, 100)
    large = budget.estimate(GPTConfig(**base), batch, 100)
    assert large.memory_bytes > small.memory_bytes and large.seconds > small.seconds


def test_evaluations_add_time():
    config = preset("quick", vocab_size=2500)
    assert budget.estimate(config, 8, 100, 10, 10).seconds > budget.estimate(config, 8, 100).seconds


@pytest.mark.parametrize("override, key", [
    ({"n_layer": budget.MAX_N_LAYER + 1}, "n_layer"),
    ({"n_embd": 512, "n_head": 8}, "n_embd"),
    ({"block_size": 512}, "block_size"),
    ({"vocab_size": budget.MAX_VOCAB + 1}, "vocab_size"),
])
def test_size_caps(override, key):
    assert [r.key for r in budget.size_refusals(preset("tiny", **override))] == [key]


def test_training_caps_and_the_largest_batch_that_fits():
    quick = preset("quick", vocab_size=2500)
    estimate, refusals = budget.training_refusals(quick, 16, 400, 20, 10)
    assert refusals == [] and estimate.memory_bytes <= budget.MAX_TRAINING_BYTES
    _, refusals = budget.training_refusals(quick, budget.MAX_BATCH_SIZE + 1, budget.MAX_STEPS + 1)
    assert [r.key for r in refusals] == ["batch_size", "steps"]
    largest = preset("course", n_layer=8, n_embd=256, n_head=8, block_size=256, vocab_size=2500)
    estimate, refusals = budget.training_refusals(largest, 64, 5000, 250, 10)
    assert {r.key for r in refusals} == {"memory", "time"} and estimate.memory_bytes > 10 * budget.MAX_TRAINING_BYTES
    fit = budget.largest_batch(preset("course", vocab_size=2500), 1000, 50, 10)
    assert fit is not None and not budget.training_refusals(preset("course", vocab_size=2500), fit, 1000, 50, 10)[1]
    assert budget.training_refusals(preset("course", vocab_size=2500), fit * 2, 1000, 50, 10)[1]


def test_the_largest_model_the_controls_allow_fits_the_parameter_cap():
    config = GPTConfig(vocab_size=budget.MAX_VOCAB, block_size=budget.MAX_BLOCK_SIZE, n_embd=budget.MAX_N_EMBD,
                       n_head=8, n_layer=budget.MAX_N_LAYER)
    assert config_params(config) <= budget.MAX_PARAMS
    assert budget.MAX_CHECKPOINT_BYTES >= 4 * budget.MAX_PARAMS




def test_one_upload_limit_in_the_unit_the_widget_counts():
    """The widget's max_upload_size (megabytes of 10**6 bytes in most browsers) states the engine's limit exactly,
    and the engine refuses the first byte over it (files of 2 000 001 bytes used to pass the engine)."""
    from engine.lab.models import read_corpus_upload

    for limit in (budget.MAX_TEXT_BYTES, budget.MAX_CHECKPOINT_BYTES):
        assert budget.upload_widget_mb(limit) * budget.UPLOAD_UNIT == limit
    assert budget.MAX_CHECKPOINT_BYTES >= 4 * budget.MAX_PARAMS + 8 + budget.MAX_HEADER_BYTES
    for wrong in (0, budget.UPLOAD_UNIT - 1, budget.UPLOAD_UNIT + 1, 2 * budget.MB):
        with pytest.raises(ValueError):
            budget.upload_widget_mb(wrong)
    line = "白日依山尽\n\n".encode()
    at_limit = (line * (budget.MAX_TEXT_BYTES // len(line) + 1))[: budget.MAX_TEXT_BYTES]
    at_limit = at_limit[: len(at_limit.decode("utf-8", "ignore").encode())]  # whole characters only
    assert read_corpus_upload(at_limit, "full.txt").problem is None
    over = b"a" * (budget.MAX_TEXT_BYTES + 1)
    outcome = read_corpus_upload(over, "over.txt")
    assert (outcome.problem, outcome.value, outcome.limit) == ("too_large", len(over), budget.MAX_TEXT_BYTES)


def test_the_server_caps_uploads_above_every_limit():
    """Streamlit's server refuses a file over server.maxUploadSize (MiB) while it streams; that cap lets the largest
    legitimate file through and no more than a megabyte besides; a session holds at most one file of each kind."""
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml").read_text())
    cap = config["server"]["maxUploadSize"] * 2**20
    largest = max(budget.MAX_TEXT_BYTES, budget.MAX_CHECKPOINT_BYTES)
    assert largest <= cap < largest + 2**20
    assert budget.MAX_SESSION_UPLOAD_BYTES == budget.MAX_TEXT_BYTES + budget.MAX_CHECKPOINT_BYTES
    assert budget.MAX_UPLOADS_HELD_BYTES >= budget.MAX_SESSION_UPLOAD_BYTES
