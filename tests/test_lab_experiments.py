"""engine.lab.experiments: the lesson's experiments, training without the mask, the results command and file."""

import json
import math
import random
import threading

import pytest
import torch

from engine.corpus import corpus_from_bytes
from engine.gpt import GPT, POS_ENCODINGS, config_params, preset
from engine.lab import experiments as X
from engine.lab.jobs import wait_until_finished
from engine.lab.runner import LabRunner
from engine.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")

#: Text with no structure at all: 16 characters drawn at random. A causal model can do no better than
#: ln 16 = 2.77 nats; a model that sees the next character can copy it.
_RNG = random.Random(0)
RANDOM_TEXT = "".join(_RNG.choice("春夏秋冬山水风月花鸟云雨日夜天地") for _ in range(4000))


@pytest.fixture(scope="module")
def random_corpus():
    return corpus_from_bytes(RANDOM_TEXT.encode("utf-8"), "random.txt")


def test_experiments_are_the_lessons_exercises():
    heads = [run.config() for run in X.EXPERIMENTS["heads"].runs]
    assert [c.n_head for c in heads] == [1, 4, 8] and {c.n_embd for c in heads} == {128}
    positions = [run.config().pos_encoding for run in X.EXPERIMENTS["positions"].runs]
    assert positions[:3] == ["none", "learned", "rope"]
    assert ("sinusoidal" in positions) == ("sinusoidal" in POS_ENCODINGS)
    masks = [(run.config().causal, run.config().pos_encoding) for run in X.EXPERIMENTS["causal"].runs]
    assert masks == [(True, "learned"), (False, "learned"), (False, "rope")]
    # every run is the course's model except for the field it varies
    course = preset("course")
    for experiment in X.EXPERIMENTS.values():
        for run in experiment.runs:
            changed = {k for k, v in run.config().to_dict().items() if v != course.to_dict()[k]}
            assert changed == set(dict(run.overrides)), run.key


def test_head_count_does_not_change_the_parameter_count():
    counts = {config_params(run.config(preset("course", vocab_size=2500))) for run in X.EXPERIMENTS["heads"].runs}
    assert len(counts) == 1


def test_train_config_scales_with_steps():
    config = TrainConfig.for_steps(1000, 8)
    assert (config.steps, config.batch_size, config.warmup_steps, config.eval_interval) == (1000, 8, 50, 50)
    short = TrainConfig.for_steps(30, 4)
    assert (short.warmup_steps, short.eval_interval) == (3, 5)


def test_loss_by_position_averages_to_the_mean_loss(random_corpus):
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=random_corpus.vocab_size)).eval()
    per_position = X.loss_by_position(model, random_corpus, batch_size=4, batches=3, seed=5)
    assert per_position.shape == (16,) and per_position.dtype == torch.float32
    generator = torch.Generator().manual_seed(5)
    losses = [model(*random_corpus.get_batch("val", 4, 16, generator)).loss.item() for _ in range(3)]
    assert math.isclose(float(per_position.mean()), sum(losses) / 3, rel_tol=1e-4)


def test_without_the_mask_the_loss_collapses_but_not_at_the_last_position(random_corpus):
    config = TrainConfig(steps=200, batch_size=16, learning_rate=3e-3, warmup_steps=10, eval_interval=200,
                         eval_iters=4, device="cpu")
    chance = math.log(random_corpus.vocab_size)
    causal = X.train_run(X.Run("causal"), random_corpus, config, base=preset("tiny"))
    no_mask = X.train_run(X.Run("no mask", (("causal", False),)), random_corpus, config, base=preset("tiny"))
    assert no_mask["config"]["causal"] is False and causal["config"]["causal"] is True
    assert causal["final_val_loss"] > 0.9 * chance  # nothing to learn from random text
    assert no_mask["final_train_loss"] < 0.3 * causal["final_train_loss"]  # it reads the answer
    assert no_mask["final_val_loss"] < 0.3 * causal["final_val_loss"]
    # the last position has no next character to copy: there it is no better than chance
    assert no_mask["last_position_val_loss"] > 0.9 * chance
    assert no_mask["last_position_val_loss"] > 3 * no_mask["final_val_loss"]
    assert max(no_mask["loss_by_position"][:-1]) < no_mask["last_position_val_loss"]
    assert set(no_mask["samples"]) == {"prompt", "greedy", "sampled"}


def test_run_experiment_shares_runs_and_stops(random_corpus):
    cache = {}
    seen = []
    outcome = X.run_experiment("causal", random_corpus, steps=3, batch_size=2, run_cache=cache,
                               on_run_start=lambda i, label, steps: seen.append((i, label, steps)), device="cpu")
    keys = ["causal", "no_mask", "no_mask_rope"]
    assert not outcome["stopped"] and [r["key"] for r in outcome["runs"]] == keys
    assert seen == [(i, key, 3) for i, key in enumerate(keys)] and len(cache) == 3
    heads = X.run_experiment("heads", random_corpus, steps=3, batch_size=2, run_cache=cache, device="cpu")
    assert len(cache) == 5  # the 4-head course run came from the cache
    course_in_heads = heads["runs"][1]
    assert course_in_heads["key"] == "heads_4"
    assert course_in_heads["history"] == outcome["runs"][0]["history"]
    stop = threading.Event()
    stop.set()
    stopped = X.run_experiment("positions", random_corpus, steps=3, batch_size=2, stop=stop, device="cpu")
    assert stopped["stopped"] and stopped["runs"] == []
    with pytest.raises(KeyError, match="unknown experiment"):
        X.run_experiment("nope", random_corpus)


def test_experiment_job_runs_in_the_background_and_is_cached(random_corpus):
    runner = LabRunner()
    job, cached = runner.submit_experiment("causal", random_corpus, steps=2, batch_size=2)
    assert cached is None
    snap = wait_until_finished(job, 60)
    assert snap.state == "done" and snap.run_count == 3 and job.result["steps"] == 2
    again_job, again = runner.submit_experiment("causal", random_corpus, steps=2, batch_size=2)
    assert again_job is None and again is job.result


def test_command_writes_a_results_file(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert X.main(["--out", str(out), "--steps", "2", "--batch-size", "1", "--experiments", "causal",
                   "--device", "cpu"]) == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["format"] == X.RESULTS_FORMAT and data["complete"] is True
    assert data["settings"]["steps"] == 2 and data["settings"]["batch_size"] == 1
    assert data["machine"]["torch"] == torch.__version__ and data["total_wall_s"] >= 0
    runs = data["experiments"]["causal"]["runs"]
    assert [r["key"] for r in runs] == ["causal", "no_mask", "no_mask_rope"]
    assert len(runs[0]["loss_by_position"]) == 128 and runs[0]["history"]["step"] == [0, 2]
    assert X.load_results(out) == data
    printed = capsys.readouterr().out
    assert "no_mask_rope" in printed and "3 distinct runs" in printed


def test_load_results_refuses_other_files(tmp_path):
    assert X.load_results(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        X.load_results(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"format": "x"}', encoding="utf-8")
    with pytest.raises(ValueError, match="results file"):
        X.load_results(tmp_path / "other.json")


def test_shipped_results_file_is_complete_and_labelled():
    data = X.load_results()
    assert data is not None, "assets/lab_experiments.json is missing: run python -m engine.lab.experiments"
    assert data["complete"] is True
    steps = data["settings"]["steps"]
    for name, experiment in X.EXPERIMENTS.items():
        shipped = data["experiments"][name]
        assert [r["key"] for r in shipped["runs"]] == [run.key for run in experiment.runs]
        for r in shipped["runs"]:
            assert r["steps_done"] == steps and r["history"]["step"][-1] == steps
            assert math.isfinite(r["final_val_loss"]) and len(r["loss_by_position"]) == 128
    heads = data["experiments"]["heads"]["runs"]
    assert len({r["params"] for r in heads}) == 1
    causal, no_mask, no_mask_rope = data["experiments"]["causal"]["runs"]
    assert no_mask["final_train_loss"] < causal["final_train_loss"]
    # with RoPE the copy is found: far lower loss, except at the last position, where there is nothing to copy
    assert no_mask_rope["final_val_loss"] < 0.5 * causal["final_val_loss"]
    assert no_mask_rope["last_position_val_loss"] > 2 * no_mask_rope["final_val_loss"]


def test_the_command_runs_as_a_module(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "engine.lab.experiments", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "python -m engine.lab.experiments" in done.stdout
