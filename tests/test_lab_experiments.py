"""engine.lab.experiments: the lesson's experiments, training without the mask, the results command and file."""

import json
import math
import random
import threading

import pytest
import torch
from torch import nn

from engine.corpus import corpus_from_bytes
from engine.gpt import GPT, POS_ENCODINGS, config_params, preset
from engine.lab import experiments as X
from engine.lab import results as lab_results
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
    assert data["format"] == X.RESULTS_FORMAT and data["complete"] is True and data["corpus"]["name"] == "tang"
    assert data["settings"]["steps"] == 2 and data["settings"]["batch_size"] == 1
    assert data["machine"]["torch"] == torch.__version__ and data["total_wall_s"] >= 0
    runs = data["experiments"]["causal"]["runs"]
    assert [r["key"] for r in runs] == ["causal", "no_mask", "no_mask_rope"]
    assert len(runs[0]["loss_by_position"]) == 128 and runs[0]["history"]["step"] == [0, 2]
    assert X.load_results(out) == data
    printed = capsys.readouterr().out
    assert "no_mask_rope" in printed and "3 distinct runs" in printed


def test_mean_std_and_the_noise_rule():
    assert X.mean_std([2.0]) == (2.0, 0.0)
    mean, std = X.mean_std([1.0, 2.0, 3.0])
    assert mean == 2.0 and math.isclose(std, 1.0)  # sample standard deviation (ddof 1)
    with pytest.raises(ValueError):
        X.mean_std([])
    a = {"key": "a", "n_seeds": 3, "fixed_val_loss_mean": 5.0, "fixed_val_loss_std": 0.03}
    b = {"key": "b", "n_seeds": 3, "fixed_val_loss_mean": 4.9, "fixed_val_loss_std": 0.04}
    c = {"key": "c", "n_seeds": 3, "fixed_val_loss_mean": 4.98, "fixed_val_loss_std": 0.04}
    one = {"key": "d", "n_seeds": 1, "fixed_val_loss_mean": 1.0, "fixed_val_loss_std": 0.0}
    pairs = {(p["a"], p["b"]): p for p in X.compare_runs([a, b, c, one])}
    noise = 2 * math.sqrt((0.03**2 + 0.04**2) / 3)  # 0.0577
    assert math.isclose(pairs[("a", "b")]["noise"], round(noise, 4)) and pairs[("a", "b")]["delta_mean"] == -0.1
    assert pairs[("a", "b")]["exceeds_noise"] is True and pairs[("a", "c")]["exceeds_noise"] is False
    assert pairs[("a", "d")]["exceeds_noise"] is None and pairs[("a", "d")]["noise"] is None  # no spread from one seed
    assert X.NOISE_RULE["key"] == "welch_2se" and "sqrt" in X.NOISE_RULE["formula"]


def test_seeds_are_summarised_per_run(random_corpus):
    by_seed = [{**X.run_experiment("heads", random_corpus, steps=2, batch_size=2, seed=s, device="cpu",
                                   eval_batches=1), "seed": s} for s in (1, 2)]
    combined = X.combine_seeds(by_seed)
    assert combined["seeds"] == [1, 2] and [r["key"] for r in combined["runs"]] == ["heads_1", "heads_4", "heads_8"]
    for run, first, second in zip(combined["runs"], by_seed[0]["runs"], by_seed[1]["runs"], strict=True):
        values = [first["fixed_val_loss"], second["fixed_val_loss"]]
        assert run["n_seeds"] == 2 and run["seeds"] == [1, 2]
        assert [r["fixed_val_loss"] for r in run["seed_results"]] == values
        assert math.isclose(run["fixed_val_loss_mean"], sum(values) / 2, abs_tol=1e-4)
        assert math.isclose(run["fixed_val_loss_std"], abs(values[0] - values[1]) / math.sqrt(2), abs_tol=1e-4)
        assert run["history"] == first["history"]  # the curves of the first seed
        per_position = first["loss_by_position"]
        assert math.isclose(first["fixed_val_loss"], sum(per_position) / len(per_position), abs_tol=1e-3)
    assert len(combined["comparisons"]) == 3 and {c["a"] for c in combined["comparisons"]} == {"heads_1", "heads_4"}
    # an interrupted command: the second seed has only the first run
    partial = X.combine_seeds([by_seed[0], {**by_seed[1], "runs": by_seed[1]["runs"][:1]}])
    assert [r["n_seeds"] for r in partial["runs"]] == [2, 1, 1]
    with pytest.raises(ValueError):
        X.summarize_seeds([])


@pytest.mark.parametrize("text", ["", "1,1", "a,b", "-1", ",".join(map(str, range(17)))])
def test_bad_seed_lists_are_refused(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        X.parse_seeds(text)


def test_command_with_seeds_writes_means_and_comparisons(tmp_path, capsys):
    out = tmp_path / "seeds.json"
    assert X.main(["--out", str(out), "--steps", "2", "--batch-size", "1", "--experiments", "causal", "--seeds", "3,4",
                   "--corpus", "tang300", "--eval-batches", "1", "--device", "cpu"]) == 0
    data = X.load_results(out)
    assert data["format"] == "lab-experiments/3" and data["settings"]["seeds"] == [3, 4] and data["complete"]
    assert data["noise_rule"] == X.NOISE_RULE and data["corpus"]["name"] == "tang300"
    causal = data["experiments"]["causal"]
    assert causal["seeds"] == [3, 4] and all(r["n_seeds"] == 2 for r in causal["runs"])
    assert len(causal["comparisons"]) == 3
    printed = capsys.readouterr().out
    assert "6 distinct runs" in printed and "±" in printed


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
    assert data["complete"] is True and data["format"] == X.RESULTS_FORMAT and data["noise_rule"] == X.NOISE_RULE
    steps, seeds = data["settings"]["steps"], data["settings"]["seeds"]
    assert len(seeds) >= 2, "the shipped results give a spread over seeds"
    for name, experiment in X.EXPERIMENTS.items():
        shipped = data["experiments"][name]
        assert [r["key"] for r in shipped["runs"]] == [run.key for run in experiment.runs]
        assert shipped["seeds"] == seeds
        for r in shipped["runs"]:
            assert r["steps_done"] == steps and r["history"]["step"][-1] == steps
            assert len(r["loss_by_position"]) == 128 and r["n_seeds"] == len(seeds)
            values = [s["fixed_val_loss"] for s in r["seed_results"]]
            mean, std = X.mean_std(values)
            assert math.isclose(r["fixed_val_loss_mean"], mean, abs_tol=1e-4)
            assert math.isclose(r["fixed_val_loss_std"], std, abs_tol=1e-4)
        n = len(shipped["runs"])
        assert shipped["comparisons"] == X.compare_runs(shipped["runs"])
        assert len(shipped["comparisons"]) == n * (n - 1) // 2
    heads = data["experiments"]["heads"]["runs"]
    assert len({r["params"] for r in heads}) == 1
    # the course run is shared by the three experiments: trained once per seed
    course = [data["experiments"][name]["runs"][i]["seed_results"] for name, i in
              (("heads", 1), ("positions", 1), ("causal", 0))]
    assert course[0] == course[1] == course[2]


def test_the_command_runs_as_a_module(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "engine.lab.experiments", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "python -m engine.lab.experiments" in done.stdout


#: What the dropout experiment's runs claim: {key: (attention-weight dropout, residual dropout)}.
DROPOUT_CLAIMS = {"dropout_0": (0.0, 0.0), "dropout_resid": (0.0, 0.1), "dropout_both": (0.1, 0.1)}


@pytest.mark.parametrize("base_dropout", [0.0, 0.1, 0.3])
def test_dropout_runs_set_the_rates_they_claim_whatever_the_preset(base_dropout):
    runs = X.PRESET_EXPERIMENTS["dropout"].runs
    assert {run.key: None for run in runs}.keys() == DROPOUT_CLAIMS.keys() == lab_results.DROPOUT_RUNS.keys()
    assert lab_results.DROPOUT_RUNS == DROPOUT_CLAIMS
    assert "dropout" not in X.EXPERIMENTS and X.ALL_EXPERIMENTS["dropout"] is X.PRESET_EXPERIMENTS["dropout"]
    base = preset("course", dropout=base_dropout)
    others = {k: v for k, v in base.to_dict().items() if "dropout" not in k}
    for run in runs:
        config = run.config(base)
        attn, resid = DROPOUT_CLAIMS[run.key]
        assert (config.attn_dropout_rate, config.resid_dropout_rate) == (attn, resid)
        assert {k: v for k, v in config.to_dict().items() if "dropout" not in k} == others  # the course model
        model = GPT(run.config(preset("tiny", dropout=base_dropout)))
        attention = [block.attn for block in model.blocks]
        assert all(a.dropout == attn and a.attn_dropout.p == attn for a in attention)
        weight_dropouts = {id(a.attn_dropout) for a in attention}
        assert {m.p for m in model.modules() if isinstance(m, nn.Dropout) and id(m) not in weight_dropouts} == {resid}


def test_dropout_command_records_speed_and_is_read_by_the_lab(tmp_path, capsys):
    out = tmp_path / "dropout.json"
    assert X.main(["--out", str(out), "--steps", "2", "--batch-size", "1", "--experiments", "dropout", "--seeds", "3,4",
                   "--corpus", "tang300", "--eval-batches", "1", "--device", "cpu"]) == 0
    data = X.load_results(out)
    assert list(data["experiments"]) == ["dropout"] and data["complete"]
    runs = data["experiments"]["dropout"]["runs"]
    assert [r["key"] for r in runs] == list(DROPOUT_CLAIMS)
    for r in runs:
        per_seed = [s["step_tokens_per_s"] for s in r["seed_results"]]
        assert len(per_seed) == 2 and all(v > 0 for v in per_seed)
        assert math.isclose(r["step_tokens_per_s_mean"], X.mean_std(per_seed)[0], rel_tol=1e-4)
        # the optimizer steps alone are never slower than the whole run, evaluations included
        assert all(s["step_tokens_per_s"] >= s["tokens_per_s"] for s in r["seed_results"])
    loss = lab_results.dropout_loss(out)
    assert (loss.steps, loss.batch_size, loss.seeds, loss.corpus) == (2, 1, (3, 4), "tang300")
    for r in runs:
        read = loss.run(r["key"])
        assert (read.val_loss_mean, read.val_loss_std, read.tokens_per_s) == (
            r["fixed_val_loss_mean"], r["fixed_val_loss_std"], r["step_tokens_per_s_mean"])
    assert "steps tok/s" in capsys.readouterr().out
