"""Training loop (callbacks, stop flag, divergence), checkpoints, and the command line."""

import dataclasses
import json
import threading
from pathlib import Path

import pytest
import safetensors.torch
import torch

from engine import train as train_cli
from engine.checkpoint import (
    META_FILE,
    SHIPPED_MODEL,
    WEIGHTS_FILE,
    CheckpointError,
    checkpoint_from_bytes,
    checkpoint_to_bytes,
    load_checkpoint,
    save_checkpoint,
)
from engine.corpus import corpus_from_bytes
from engine.device import configure_threads, default_threads, pick_device
from engine.gpt import GPT
from engine.presets import preset
from engine.training import STATE_FILE, Callbacks, ResumeError, TrainConfig, TrainingDivergedError, train

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。", "床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"]
TEXT = "\n\n".join(LINES[i % 4] + "\n" + LINES[(i + 1) % 4] for i in range(24))


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_bytes(TEXT.encode("utf-8"), "poems.txt")


FAST = TrainConfig(steps=30, batch_size=8, learning_rate=3e-3, warmup_steps=5, eval_interval=10, eval_iters=2,
                   device="cpu")


@pytest.fixture(scope="module")
def trained(corpus):
    return train(preset("tiny"), corpus, FAST)


# --- loop -----------------------------------------------------------------------------------------


def test_pick_device():
    assert pick_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert pick_device() == torch.device("cpu")
    with pytest.raises(ValueError, match="unknown device"):
        pick_device("tpu")


def test_thread_helper_sets_the_count_once_per_process(monkeypatch):
    assert default_threads(1) == 1 and default_threads(2) == 1 and default_threads(16) == 15
    with pytest.raises(ValueError):
        configure_threads(0)
    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr("engine.device._configured", None)
    assert configure_threads(3) == 3
    assert configure_threads(1) == 3 and configure_threads() == 3  # later calls change nothing
    assert calls == [3]


def test_one_schedule_for_every_length():
    c = TrainConfig.for_steps(1000, 16, learning_rate=2e-3, seed=3)
    assert (c.warmup_steps, c.eval_interval, c.eval_iters, c.learning_rate, c.seed) == (50, 50, 10, 2e-3, 3)
    assert (TrainConfig.for_steps(1, 1).warmup_steps, TrainConfig.for_steps(1, 1).eval_interval) == (0, 5)
    assert TrainConfig.for_steps(100, 4, eval_interval=7).eval_interval == 7
    with pytest.raises(ValueError):
        TrainConfig.for_steps(0, 4)


def test_train_config_validation_and_schedule():
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="warmup_steps"):
        TrainConfig(steps=10, warmup_steps=11)
    c = TrainConfig(steps=100, learning_rate=1e-3, warmup_steps=10, min_lr_ratio=0.1)
    assert c.lr_at(5) == pytest.approx(5e-4)
    assert c.lr_at(10) == pytest.approx(1e-3)
    assert c.lr_at(100) == pytest.approx(1e-4)


def test_training_reduces_loss_and_keeps_history(trained, corpus):
    h = trained.history
    assert list(h.columns) == ["step", "train_loss", "val_loss", "elapsed_s"]
    assert list(h["step"]) == [0, 10, 20, 30]
    assert h["train_loss"].iloc[-1] < 0.7 * h["train_loss"].iloc[0]
    assert not trained.stopped and trained.steps_done == 30 and len(trained.step_losses) == 30
    assert trained.model.config.vocab_size == corpus.vocab_size and not trained.model.training
    assert trained.final_val_loss == h["val_loss"].iloc[-1]
    summary = trained.summary()
    json.dumps(summary)  # JSON-ready
    assert summary["steps_done"] == 30 and summary["corpus"] == "poems.txt"


def test_same_seed_same_run(corpus):
    config = TrainConfig(steps=4, batch_size=4, warmup_steps=1, eval_interval=4, eval_iters=1, device="cpu")
    a = train(preset("tiny", dropout=0.1), corpus, config)
    b = train(preset("tiny", dropout=0.1), corpus, config)
    assert a.step_losses == b.step_losses


def test_training_draws_nothing_from_the_global_generator(corpus):
    """Initial weights come from manual_seed under engine.rng's lock; batches and dropout from private generators."""
    config = TrainConfig(steps=6, batch_size=4, warmup_steps=1, eval_interval=3, eval_iters=1, device="cpu")
    torch.manual_seed(99)
    before = torch.random.get_rng_state()
    dropped = train(preset("tiny", dropout=0.3), corpus, config)
    assert torch.equal(torch.random.get_rng_state(), before)
    plain = train(preset("tiny", dropout=0.0), corpus, config)
    assert dropped.step_losses != plain.step_losses  # the masks were applied
    assert all(type(m).__name__ == "Dropout" for m in dropped.model.modules() if "Dropout" in type(m).__name__)
    assert all(block.attn.dropout == 0.3 for block in dropped.model.blocks)  # put back after training
    torch.manual_seed(config.seed)
    torch.testing.assert_close(GPT(dropped.model.config).tok_emb.weight, train(
        preset("tiny", dropout=0.3), corpus, TrainConfig(steps=1, batch_size=4, warmup_steps=0, eval_interval=1,
                                                         eval_iters=1, learning_rate=1e-12, device="cpu")
    ).model.tok_emb.weight.cpu(), atol=1e-9, rtol=0)  # the chapter's init: manual_seed(seed), then GPT(config)


def test_attention_dropout_set_apart_from_dropout_is_applied(corpus):
    """attn_dropout > 0 with dropout 0 (the dropout experiment's "both" run on the course preset) drops weights."""
    config = TrainConfig(steps=4, batch_size=4, warmup_steps=1, eval_interval=4, eval_iters=1, device="cpu")
    plain = train(preset("tiny", dropout=0.0), corpus, config)
    attention = train(preset("tiny", dropout=0.0, attn_dropout=0.5), corpus, config)
    assert attention.step_losses != plain.step_losses


def test_callbacks_are_called(corpus):
    steps, evals = [], []
    config = TrainConfig(steps=6, batch_size=4, warmup_steps=1, eval_interval=3, eval_iters=1, device="cpu")
    train(preset("tiny"), corpus, config,
          callbacks=Callbacks(on_step=lambda s, loss, tps: steps.append((s, loss, tps)),
                              on_eval=lambda s, tr, va: evals.append((s, tr, va))))
    assert [s for s, _, _ in steps] == [1, 2, 3, 4, 5, 6]
    assert all(loss > 0 and tps > 0 for _, loss, tps in steps)
    assert [s for s, _, _ in evals] == [0, 3, 6]


@pytest.mark.parametrize("kind", ["event", "callable"])
def test_stop_flag_ends_the_run(corpus, kind):
    event = threading.Event()
    stop = event if kind == "event" else event.is_set

    def on_step(step, loss, tokens_per_s):
        if step == 3:
            event.set()

    config = TrainConfig(steps=50, batch_size=4, warmup_steps=1, eval_interval=10, eval_iters=1, device="cpu")
    result = train(preset("tiny"), corpus, config, callbacks=Callbacks(on_step=on_step), stop=stop)
    assert result.stopped and result.steps_done == 3
    assert list(result.history["step"]) == [0, 3]  # a stopped run still ends with an evaluation



RESUMABLE = TrainConfig(steps=12, batch_size=4, learning_rate=3e-3, warmup_steps=2, eval_interval=3, eval_iters=1,
                        device="cpu")


def _stop_at(step_to_stop: int) -> tuple[threading.Event, Callbacks]:
    event = threading.Event()
    return event, Callbacks(on_step=lambda step, loss, tps: event.set() if step == step_to_stop else None)


@pytest.mark.parametrize("stop_at", [6, 7])
def test_a_resumed_run_equals_one_run(corpus, tmp_path, stop_at):
    """N steps in one go equal N/2 (or a stop between evaluations), a restart from the state, and the rest."""
    whole = train(preset("tiny", dropout=0.1), corpus, RESUMABLE)
    event, hooks = _stop_at(stop_at)
    first = train(preset("tiny", dropout=0.1), corpus, RESUMABLE, callbacks=hooks, stop=event, state_dir=tmp_path)
    assert first.stopped and first.steps_done == stop_at
    assert json.loads((tmp_path / STATE_FILE).read_text())["step"] == stop_at
    evals = []
    rest = train(preset("tiny", dropout=0.1), corpus, RESUMABLE, state_dir=tmp_path,
                 callbacks=Callbacks(on_eval=lambda s, tr, va: evals.append(s)))
    assert not rest.stopped and rest.steps_done == RESUMABLE.steps
    assert evals == [s for s in (9, 12) if s > stop_at]  # no second evaluation at 0
    assert rest.step_losses == whole.step_losses  # dropout masks and batches continue where they stopped
    for name, tensor in whole.model.state_dict().items():
        assert torch.equal(rest.model.state_dict()[name], tensor), name
    resumed = rest.history.drop(columns="elapsed_s")
    assert resumed[resumed["step"] != stop_at].reset_index(drop=True).equals(
        whole.history.drop(columns="elapsed_s")[lambda h: h["step"] != stop_at].reset_index(drop=True))
    assert rest.history["elapsed_s"].is_monotonic_increasing
    assert {p.name for p in tmp_path.iterdir()} == {STATE_FILE, "state-12.safetensors"}


def test_a_state_from_other_settings_or_damaged_is_refused(corpus, tmp_path):
    event, hooks = _stop_at(3)
    train(preset("tiny"), corpus, RESUMABLE, callbacks=hooks, stop=event, state_dir=tmp_path)
    with pytest.raises(ResumeError, match="train_config"):
        train(preset("tiny"), corpus, dataclasses.replace(RESUMABLE, learning_rate=1e-3), state_dir=tmp_path)
    with pytest.raises(ResumeError, match="model_config"):
        train(preset("tiny", n_layer=1), corpus, RESUMABLE, state_dir=tmp_path)
    tensors = tmp_path / "state-3.safetensors"
    original = tensors.read_bytes()
    tensors.write_bytes(original * 2)  # more than weights, two moments, steps and headers can take
    with pytest.raises(ResumeError, match="larger than"):
        train(preset("tiny"), corpus, RESUMABLE, state_dir=tmp_path)
    data = bytearray(original)
    data[-1] ^= 0xFF
    tensors.write_bytes(bytes(data))
    with pytest.raises(ResumeError, match="SHA-256"):
        train(preset("tiny"), corpus, RESUMABLE, state_dir=tmp_path)
    meta = json.loads((tmp_path / STATE_FILE).read_text())
    for field, value, message in [("step", 99, "step 99"), ("step_losses", [1.0], "step_losses"),
                                  ("history", [{"step": "x"}], "history"), ("format", "other", "format")]:
        (tmp_path / STATE_FILE).write_text(json.dumps({**meta, field: value}))
        with pytest.raises(ResumeError, match=message):
            train(preset("tiny"), corpus, RESUMABLE, state_dir=tmp_path)
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(ResumeError, match="not JSON"):
        train(preset("tiny"), corpus, RESUMABLE, state_dir=tmp_path)


def test_nan_loss_raises_a_clear_error(corpus):
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=corpus.vocab_size))
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(TrainingDivergedError, match="became nan at step 1"):
        train(model, corpus, FAST)


def test_train_rejects_mismatched_model_and_long_block(corpus):
    with pytest.raises(ValueError, match="vocab_size 16 differs"):
        train(GPT(preset("tiny", vocab_size=16)), corpus, FAST)
    with pytest.raises(ValueError, match="too long for corpus"):
        train(preset("tiny", block_size=10_000), corpus, FAST)


# --- checkpoints ----------------------------------------------------------------------------------


def _logits(model):
    idx = torch.arange(8)[None, :] % model.config.vocab_size  # (1, 8)
    with torch.no_grad():
        return model(idx).logits


def test_save_load_gives_identical_logits(trained, tmp_path):
    folder = save_checkpoint(tmp_path / "ckpt", trained.model, trained.tokenizer, trained.summary())
    assert sorted(p.name for p in folder.iterdir()) == [META_FILE, WEIGHTS_FILE]  # no temporary files left
    ckpt = load_checkpoint(folder)
    assert ckpt.config == trained.model.config and ckpt.tokenizer == trained.tokenizer
    assert ckpt.summary["steps_done"] == 30
    torch.testing.assert_close(_logits(ckpt.model), _logits(trained.model), atol=0, rtol=0)


def test_single_file_round_trip(trained, tmp_path):
    data = checkpoint_to_bytes(trained.model, trained.tokenizer, {"corpus": "upload", "steps_done": 30, "note": "x"})
    ckpt = checkpoint_from_bytes(data)
    assert ckpt.summary == {"corpus": "upload", "steps_done": 30}  # the known fields, checked; unknown ones dropped
    torch.testing.assert_close(_logits(ckpt.model), _logits(trained.model), atol=0, rtol=0)
    path = tmp_path / "model.safetensors"
    path.write_bytes(data)
    torch.testing.assert_close(_logits(load_checkpoint(path).model), _logits(trained.model), atol=0, rtol=0)


def test_broken_checkpoints_give_clear_errors(trained, tmp_path):
    assert issubclass(CheckpointError, ValueError)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "nothing")
    folder = save_checkpoint(tmp_path / "c", trained.model, trained.tokenizer)

    weights = (folder / WEIGHTS_FILE).read_bytes()
    (folder / WEIGHTS_FILE).write_bytes(weights[: len(weights) // 2])
    with pytest.raises(CheckpointError, match="SHA-256 does not match"):
        load_checkpoint(folder)
    (folder / WEIGHTS_FILE).write_bytes(weights)

    meta = (folder / META_FILE).read_text(encoding="utf-8")
    (folder / META_FILE).write_text(meta[:40], encoding="utf-8")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(folder)

    edited = json.loads(meta)
    edited["config"]["n_layer"] = 3
    (folder / META_FILE).write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(CheckpointError, match="do not match the config"):
        load_checkpoint(folder)

    edited = json.loads(meta)
    edited["tokenizer"]["chars"] = edited["tokenizer"]["chars"][:-1]
    (folder / META_FILE).write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(CheckpointError, match="tokenizer has"):
        load_checkpoint(folder)

    (folder / META_FILE).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(CheckpointError, match="expected format"):
        load_checkpoint(folder)

    (folder / META_FILE).unlink()
    with pytest.raises(CheckpointError, match="checkpoint.json is missing"):
        load_checkpoint(folder)


@pytest.mark.parametrize(
    "data, message",
    [(b"", "empty"), (b"short", "shorter than"), (b"\xff" * 64, "header length exceeds"),
     (b"garbage!" + b"{}" * 4, "header length")],
)
def test_bad_bytes_give_clear_errors(data, message):
    with pytest.raises(CheckpointError, match=message):
        checkpoint_from_bytes(data)


def test_truncated_single_file_and_foreign_safetensors(trained):
    data = checkpoint_to_bytes(trained.model, trained.tokenizer)
    with pytest.raises(CheckpointError):
        checkpoint_from_bytes(data[:-100])
    foreign = safetensors.torch.save({"w": torch.zeros(2)})
    with pytest.raises(CheckpointError, match="not made by this app"):
        checkpoint_from_bytes(foreign)


# --- command line ---------------------------------------------------------------------------------


def test_command_line_trains_prints_and_saves(tmp_path, capsys):
    text_file = tmp_path / "poems.txt"
    text_file.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "model"
    code = train_cli.main(["--preset", "tiny", "--corpus", str(text_file), "--steps", "4", "--batch-size", "4",
                           "--eval-interval", "2", "--eval-iters", "1", "--log-interval", "2",
                           "--sample-chars", "6", "--device", "cpu", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    assert "step     2/4" in printed and "eval     4:" in printed
    assert "done after 4 steps" in printed and "val loss" in printed
    assert "greedy  '白日" in printed and "sampled '白日" in printed
    ckpt = load_checkpoint(out)
    assert ckpt.summary["command"].startswith("python -m engine.train --preset tiny")
    assert ckpt.config.vocab_size == ckpt.tokenizer.vocab_size


def test_the_app_ships_the_model_trained_on_the_full_corpus():
    """``tests/engine/test_shipped_tang.py`` checks that model itself (losses, baselines, samples)."""
    assert SHIPPED_MODEL == Path(__file__).resolve().parents[2] / "assets" / "models" / "course_tang"
    ckpt = load_checkpoint(SHIPPED_MODEL)
    assert ckpt.summary["corpus"] == "tang" and not ckpt.model.training
    assert sum(f.stat().st_size for f in SHIPPED_MODEL.iterdir()) < 10 * 2**20