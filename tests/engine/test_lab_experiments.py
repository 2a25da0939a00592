"""engine.lab.experiments: the exercises' definitions, whole-split validation, paired statistics, the resumable
command and its results file; the older sets; the Lab page's paired rerun."""

import dataclasses
import json
import math
import os
import random
import signal
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from engine import budget as budget_module
from engine import chapter
from engine.corpus import Corpus, Record, corpus_from_bytes
from engine.gpt import GPT, config_params
from engine.lab import experiments as X
from engine.lab import results as R
from engine.lab.experiments import __main__ as command
from engine.lab.experiments import rerun as P
from engine.lab.experiments import stats, store
from engine.lab.jobs import wait_until_finished
from engine.lab.runner import LabRunner
from engine.positions import ENCODINGS
from engine.presets import preset
from engine.training import TrainConfig, train

pytestmark = pytest.mark.usefixtures("one_thread")

#: Text with no structure at all: 16 characters drawn at random. A causal model can do no better than
#: ln 16 = 2.77 nats; a model that sees the next character can copy it.
_RNG = random.Random(0)
#: A paired rerun's budget, shortened to 20 steps (the page's shortest is ``P.RERUN_STEPS[0]``).
SHORT_RERUN = dataclasses.replace(P.rerun_budget(P.RERUN_STEPS[0]), steps=20, warmup_steps=2, eval_interval=20)
RANDOM_TEXT = "".join(_RNG.choice("春夏秋冬山水风月花鸟云雨日夜天地") for _ in range(4000))


@pytest.fixture(scope="module")
def random_corpus():
    return corpus_from_bytes(RANDOM_TEXT.encode("utf-8"), "random.txt")


# --- the exercises ------------------------------------------------------------------------------------------------

def test_exercises_are_the_lessons():
    budget = X.EXERCISE_BUDGET
    assert budget.steps == 1000 and preset("course").dropout == 0.0
    assert budget.train_config(5).seed == 5 and budget.train_config(5).steps == budget.steps
    heads = [X.EXERCISE_RUNS[k].config() for k in X.EXERCISES["heads"].runs]
    assert [c.n_head for c in heads] == [1, 4, 8] and {c.n_embd for c in heads} == {128}
    positions = [X.EXERCISE_RUNS[k].config().pos_encoding for k in X.EXERCISES["positions"].runs]
    assert positions == [e.key for e in ENCODINGS]  # every encoding, in the registry's order
    assert X.EXERCISES["positions"].reference == "course"
    no_mask = [X.EXERCISE_RUNS[k].config() for k in X.EXERCISES["no_mask"].runs]
    assert [(c.causal, c.pos_encoding) for c in no_mask] == [(True, "learned"), (False, "learned"), (False, "rope")]
    course = preset("course").to_dict()
    for key, run in X.EXERCISE_RUNS.items():
        changed = {k for k, v in run.config().to_dict().items() if v != course[k]}
        assert changed == set(dict(run.overrides)), key
    with pytest.raises(ValueError):
        X.Exercise("bad", ("heads_1",))  # no reference among the runs


def test_plan_puts_complete_paired_sets_first_and_trains_each_configuration_once_per_seed():
    tasks = X.plan([1, 2, 3])
    ids = [t.run_id for t in tasks]
    assert len(ids) == len(set(ids)) == 3 * len(X.EXERCISE_RUNS)
    assert ids[:6] == ["heads_1@seed1", "course@seed1", "heads_8@seed1", "heads_1@seed2", "course@seed2",
                       "heads_8@seed2"]
    # every seed's heads set is done before any position run, the positions before the unmasked runs
    first = {name: min(i for i, t in enumerate(tasks) if t.key in X.EXERCISES[name].runs and t.key != "course")
             for name in X.EXERCISES}
    last = {name: max(i for i, t in enumerate(tasks) if t.key in X.EXERCISES[name].runs and t.key != "course")
            for name in X.EXERCISES}
    assert last["heads"] < first["positions"] and last["positions"] < first["no_mask"]
    with pytest.raises(KeyError):
        X.plan([1], ["nope"])


def test_runs_of_a_seed_start_from_the_same_weights_where_shapes_allow():
    base = preset("tiny")
    weights = {}
    for key in X.EXERCISE_RUNS:
        model, own = X.paired_model(X.EXERCISE_RUNS[key].config(base), 3, base)
        weights[key] = dict(model.named_parameters())
        assert own == [n for n, p in weights[key].items() if n not in weights.get("course", weights[key])], key
    reference = weights["course"]
    for key, params in weights.items():
        assert set(params) <= set(reference), key  # a position encoding only takes tensors away
        assert all(torch.equal(params[n], reference[n]) for n in params), key
    assert set(weights["heads_1"]) == set(weights["heads_8"]) == set(reference)  # the head count changes no shape
    assert "pos_emb.weight" in reference  # the learned table: the one tensor the other encodings do without
    for key in ("pos_none", "pos_sinusoidal", "pos_rope"):
        assert set(reference) - set(weights[key]) == {"pos_emb.weight"}, key
    other_seed, _ = X.paired_model(base, 4, base)
    assert any(not torch.equal(p, reference[n]) for n, p in other_seed.named_parameters())


# --- whole-split validation ---------------------------------------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(length=st.integers(17, 120), batch_size=st.integers(1, 9))
def test_split_loss_is_every_window_once_whatever_the_batch(length, batch_size):
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    ids = torch.randint(16, (length,), generator=torch.Generator().manual_seed(length), dtype=torch.int32)
    got = X.split_loss(model, ids, batch_size=batch_size)
    T = model.config.block_size
    windows = (length - 1) // T
    assert (got.windows, got.tokens, len(got.by_position)) == (windows, windows * T, T)
    with torch.no_grad():
        direct = torch.stack([
            nn.functional.cross_entropy(model(ids[w * T:(w + 1) * T].long()[None]).logits[0],
                                        ids[w * T + 1:(w + 1) * T + 1].long(), reduction="none")
            for w in range(windows)])  # (W, T)
    assert math.isclose(got.mean, float(direct.mean()), rel_tol=1e-5)
    assert all(math.isclose(a, float(b), rel_tol=1e-5) for a, b in zip(got.by_position, direct.mean(0), strict=True))
    assert model.training is False


def test_split_loss_refuses_a_split_shorter_than_a_window():
    model = GPT(preset("tiny"))
    model.train()
    with pytest.raises(ValueError, match="block_size"):
        X.split_loss(model, torch.zeros(16, dtype=torch.int32))
    X.split_loss(model, torch.zeros(17, dtype=torch.int32))
    assert model.training  # the mode is put back


def test_samples_never_write_the_unknown_token():
    rare = "".join(chr(0x4E00 + i) for i in range(200))  # 200 characters seen once each: all unknown at min_count 2
    records = [Record("", "", "白日" + RANDOM_TEXT[i:i + 200] + rare[i // 20:i // 20 + 3])
               for i in range(0, 3800, 200)]  # the lesson's prompt is known, the rare characters share one token
    corpus = Corpus("rare", records, min_count=2)
    assert corpus.tokenizer.unk_id is not None and chapter.LESSON_PROMPT == "白日"
    config = TrainConfig(steps=5, batch_size=4, warmup_steps=1, eval_interval=5, eval_iters=1, device="cpu")
    run = X.train_run(X.Run("course"), corpus, config, base=preset("tiny"))
    for text in (run["samples"]["greedy"], run["samples"]["sampled"]):
        assert text.startswith("白日") and len(text) == 2 + X.SAMPLE_CHARS and "\ufffd" not in text


# --- paired statistics --------------------------------------------------------------------------------------------

#: Student's t quantiles t_{0.975} for 1 … 5 degrees of freedom (any statistics table).
T_975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706}


def test_t_distribution_matches_the_tables():
    for df, t in T_975.items():
        assert math.isclose(stats.t_quantile(0.975, df), t, abs_tol=1e-4)
        assert math.isclose(stats.t_cdf(t, df), 0.975, abs_tol=1e-5)
    assert stats.t_cdf(0.0, 3) == 0.5
    with pytest.raises(ValueError):
        stats.t_cdf(1.0, 0)


@settings(max_examples=50, deadline=None)
@given(x=st.floats(-30, 30), df=st.integers(1, 12))
def test_t_quantile_inverts_the_cdf(x, df):
    p = stats.t_cdf(x, df)
    assert math.isclose(stats.t_cdf(-x, df), 1 - p, abs_tol=1e-12)
    if 1e-9 < p < 1 - 1e-9:
        assert math.isclose(stats.t_quantile(p, df), x, abs_tol=1e-6 * max(1.0, abs(x) ** 3))


def test_paired_comparison_on_crafted_losses():
    a = {1: 5.00, 2: 5.10, 3: 4.90}
    b = {1: 4.90, 2: 5.02, 3: 4.78, 4: 1.0}  # seed 4 has no partner: left out
    c = stats.paired_comparison("a", "b", a, b)
    diffs = [b[s] - a[s] for s in (1, 2, 3)]  # -0.10, -0.08, -0.12
    mean = sum(diffs) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 2)
    half = stats.t_quantile(0.975, 2) * sd / math.sqrt(3)
    assert c.seeds == (1, 2, 3) and math.isclose(c.mean, mean) and math.isclose(c.sd, sd)
    assert math.isclose(c.t_interval[0], mean - half) and math.isclose(c.t_interval[1], mean + half)
    assert c.verdict == "b_beats_a" and c.t_interval[1] < 0
    assert min(diffs) - 1e-12 <= c.bootstrap_interval[0] <= c.bootstrap_interval[1] <= max(diffs) + 1e-12
    assert math.isclose(c.detectable, (stats.t_quantile(0.975, 2) + stats.t_quantile(0.8, 2)) * sd / math.sqrt(3))
    # the same effect drowned in seed-to-seed spread: no verdict either way
    noisy = stats.paired_comparison("a", "b", a, {1: 4.5, 2: 5.5, 3: 4.72})
    assert noisy.verdict == "no_detectable_difference" and noisy.t_interval[0] < 0 < noisy.t_interval[1]
    assert noisy.detectable > abs(noisy.mean)
    assert stats.paired_comparison("b", "a", b, a).verdict == "a_beats_b"
    one = stats.paired_comparison("a", "b", {1: 5.0}, {1: 4.0, 2: 3.0})
    assert one.verdict == "too_few_seeds" and one.sd is one.t_interval is one.detectable is None and one.mean == -1.0
    with pytest.raises(ValueError, match="share no seed"):
        stats.paired_comparison("a", "b", {1: 5.0}, {2: 5.0})
    assert set(R.VERDICTS) >= {c.verdict, noisy.verdict, one.verdict}
    # one dataclass for both sides: what the command stores, the results reader gives back (rounded to 5 decimals)
    for comparison in (c, noisy, one):
        back = R._paired(stats.comparison_to_dict(comparison))
        assert isinstance(back, R.PairedDifference) and back.verdict == comparison.verdict
        assert back.seeds == comparison.seeds and math.isclose(back.mean, comparison.mean, abs_tol=1e-5)


def test_exercise_summary_pairs_by_seed_and_by_position():
    def run(key, seed, loss, curve):
        return {"key": key, "seed": seed, "val_loss": loss, "val_loss_by_position": curve}
    runs = {f"{k}@{s}": run(k, s, loss, [loss + i for i in range(3)]) for k, s, loss in (
        ("course", 1, 5.0), ("course", 2, 5.2), ("pos_rope", 1, 4.8), ("pos_rope", 2, 5.1), ("pos_none", 1, 5.5))}
    summary = store.exercise_summary("positions", runs)
    assert summary["seeds_complete"] == [] and summary["reference"] == "course"
    rope = next(c for c in summary["comparisons"] if c["b"] == "pos_rope")
    assert rope["seeds"] == [1, 2] and math.isclose(rope["mean"], -0.15)
    none = next(c for c in summary["comparisons"] if c["b"] == "pos_none")
    assert none["verdict"] == "too_few_seeds"
    assert [b for b in (c["b"] for c in summary["comparisons"])] == ["pos_none", "pos_rope"]  # no sinusoidal run yet
    curves = summary["by_position"]
    assert curves["course"]["difference"] is None and curves["course"]["mean"] == [5.1, 6.1, 7.1]
    assert curves["pos_rope"]["difference"] == [-0.15, -0.15, -0.15]


# --- the command: parallel, resumable, atomic ------------------------------------------------------------------------

class CheckedResultsFile(store.ResultsFile):
    """Reads the file back after every write: it must parse and hold every run written so far."""

    writes = 0

    def write(self):
        super().write()
        CheckedResultsFile.writes += 1
        on_disk = json.loads(self.path.read_text(encoding="utf-8"))
        assert set(on_disk["runs"]) == set(self.data["runs"])
        if on_disk["runs"]:
            read = R.read_exercises(self.path)
            assert {r.run_id for r in read.runs} == set(self.data["runs"])
        assert not [p for p in os.listdir(self.path.parent) if p.endswith(".tmp")]


def test_command_resumes_and_a_killed_worker_loses_only_its_own_run(tmp_path, monkeypatch, capsys):
    text = tmp_path / "random.txt"
    text.write_text(RANDOM_TEXT, encoding="utf-8")
    out = tmp_path / "exercises.json"
    argv = ["--out", str(out), "--corpus-file", str(text), "--base", "tiny", "--steps", "3", "--batch-size", "2",
            "--warmup", "1", "--seeds", "1", "--exercises", "heads", "--jobs", "2", "--device", "cpu"]
    monkeypatch.setattr(command, "ResultsFile", CheckedResultsFile)
    real_run_tasks = command.run_tasks

    def killing(tasks, results, worker, jobs, on_event):
        def kill_heads_8(kind, task, details):
            on_event(kind, task, details)
            if kind == "start" and task.run_id == "heads_8@seed1":
                os.kill(details["pid"], signal.SIGKILL)
        return real_run_tasks(tasks, results, worker, jobs=jobs, on_event=kill_heads_8)

    monkeypatch.setattr(command, "run_tasks", killing)
    assert command.main(argv) == 1
    data = json.loads(out.read_text(encoding="utf-8"))
    assert set(data["runs"]) == {"heads_1@seed1", "course@seed1"} and data["complete"] is False  # either may end first
    assert [(f["run_id"], f["exitcode"]) for f in data["failed"]] == [("heads_8@seed1", -signal.SIGKILL)]
    finished = {k: r["finished"] for k, r in data["runs"].items()}
    # the second sitting trains only the killed run
    monkeypatch.setattr(command, "run_tasks", real_run_tasks)
    capsys.readouterr()
    assert command.main(argv) == 0
    printed = capsys.readouterr().out
    assert "3 runs planned, 2 in" in printed and "1 trained, 2 already there" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["complete"] is True and list(data["runs"])[2:] == ["heads_8@seed1"] and set(data["runs"]) == {
        "heads_1@seed1", "course@seed1", "heads_8@seed1"}
    assert {k: data["runs"][k]["finished"] for k in finished} == finished
    assert [s["jobs"] for s in data["sessions"]] == [2, 2] and all("load_end" in s for s in data["sessions"])
    run = data["runs"]["heads_8@seed1"]
    assert run["session"] == 1 and run["machine"]["torch"] == torch.__version__ and run["torch_threads"] == 1
    assert run["machine"]["device_name"] == "CPU" and run["load_start"] is not None and run["steps_done"] == 3
    read = R.read_exercises(out)
    assert read.complete and read.steps == 3 and read.seeds == (1,) and len(read.commands) == 2
    heads = read.exercise("heads")
    assert heads.seeds_complete == (1,) and {c.b for c in heads.comparisons} == {"heads_1", "heads_8"}
    assert all(c.verdict == "too_few_seeds" for c in heads.comparisons)
    assert read.runs_of("course")[0].val_windows == (len(RANDOM_TEXT) // 10 - 1) // 16
    assert CheckedResultsFile.writes >= 6
    assert out.stat().st_mode & 0o777 == 0o644 and not store.lock_path(out).parent.samefile(tmp_path)
    # other settings never mix into the file
    before = out.read_bytes()
    assert command.main([*argv, "--steps", "4"]) == 2
    assert out.read_bytes() == before
    assert "other settings" in capsys.readouterr().err
    assert command.main([*argv, "--list"]) == 0 and out.read_bytes() == before


def test_a_new_seed_adds_runs_to_a_file_that_one_command_writes_at_a_time(tmp_path):
    """A run the file holds is never trained again; a command with more seeds adds only the new ones."""
    out = tmp_path / "x.json"
    session = {"command": "test"}
    settings_ = {"budget": {}, "base_model": {}, "corpus": {}, "exercises": ["heads"], "seeds": [1]}
    first = store.ResultsFile(out, settings_, ["heads_1@seed1"], session)
    first.add_run({"run_id": "heads_1@seed1", "key": "heads_1", "seed": 1, "val_loss": 5.0,
                   "val_loss_by_position": [5.0]})
    with pytest.raises(store.ResultsBusyError):  # the first command still writes it
        store.ResultsFile(out, settings_, [], session)
    first.close()
    again = store.ResultsFile(out, {**settings_, "seeds": [2]}, ["heads_1@seed2"], session)
    assert again.done == {"heads_1@seed1"} and again.data["settings"]["seeds"] == [1, 2]
    assert again.data["planned"] == ["heads_1@seed1", "heads_1@seed2"] and not again.data["complete"]
    again.close()
    with pytest.raises(store.ResultsMismatchError):
        store.ResultsFile(out, {**settings_, "budget": {"steps": 2}}, [], session)
    (tmp_path / "bad.json").write_text('{"format": "lab-experiments/3"}', encoding="utf-8")
    with pytest.raises(ValueError, match="lab-exercises"):
        store.ResultsFile(tmp_path / "bad.json", settings_, [], session)


def test_read_exercises_refuses_crafted_files(tmp_path):
    assert R.read_exercises(tmp_path / "missing.json") is None
    for text in ("{", '{"format": "lab-exercises/1"}', '{"format": "x", "runs": {}}'):
        (tmp_path / "bad.json").write_text(text, encoding="utf-8")
        with pytest.raises(ValueError):
            R.read_exercises(tmp_path / "bad.json")


def test_command_refuses_bad_options(capsys):
    for argv in (["--jobs", "0"], ["--threads", "x"], ["--seeds", "1,1"], ["--lr", "-1"], ["--lr", "nan"],
                 ["--corpus-file", "/nonexistent"], ["--seeds", str(2**31)]):
        with pytest.raises(SystemExit) as exc:
            command.main(argv)
        assert exc.value.code == 2, argv


def test_the_command_runs_as_a_module():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "engine.lab.experiments", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "python -m engine.lab.experiments" in done.stdout and "--jobs" in done.stdout


# --- the older sets (shipped lab_dropout.json; the page's reruns) ----------------------------------------------

def test_experiments_are_the_lessons_exercises():
    heads = [run.config() for run in X.EXPERIMENTS["heads"].runs]
    assert [c.n_head for c in heads] == [1, 4, 8] and {c.n_embd for c in heads} == {128}
    positions = [run.config().pos_encoding for run in X.EXPERIMENTS["positions"].runs]
    assert positions == [e.key for e in ENCODINGS]  # one run per encoding, in the registry's order
    masks = [(run.config().causal, run.config().pos_encoding) for run in X.EXPERIMENTS["causal"].runs]
    assert masks == [(True, "learned"), (False, "learned"), (False, "rope")]
    course = preset("course")
    for experiment in X.EXPERIMENTS.values():
        for run in experiment.runs:
            changed = {k for k, v in run.config().to_dict().items() if v != course.to_dict()[k]}
            assert changed == set(dict(run.overrides)), run.key


def test_head_count_does_not_change_the_parameter_count():
    counts = {config_params(run.config(preset("course", vocab_size=2500))) for run in X.EXPERIMENTS["heads"].runs}
    assert len(counts) == 1


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
    assert heads["runs"][1]["key"] == "heads_4" and heads["runs"][1]["history"] == outcome["runs"][0]["history"]
    stop = threading.Event()
    stop.set()
    stopped = X.run_experiment("positions", random_corpus, steps=3, batch_size=2, stop=stop, device="cpu")
    assert stopped["stopped"] and stopped["runs"] == []
    with pytest.raises(KeyError, match="unknown experiment"):
        X.run_experiment("nope", random_corpus)


def test_a_paired_rerun_pairs_its_runs_by_seed_and_compares_them_as_the_shipped_runs_do(random_corpus):
    budget = SHORT_RERUN
    cache, seen = {}, []
    rerun = P.paired_rerun("heads", "heads_1", random_corpus, budget, (1, 2, 3), 2, run_cache=cache,
                           on_run_start=lambda i, key, steps: seen.append((i, key, steps)))
    assert seen == [(i, key, 20) for i, key in enumerate(["course", "heads_1"] * 3)]
    assert [(r.key, r.seed) for r in rerun.runs] == [(k, s) for s in (1, 2, 3) for k in ("course", "heads_1")]
    assert rerun.val_windows == 2 and rerun.steps == 20 and rerun.batch_size == P.RERUN_BATCH == 4
    # the comparison is the shipped runs' paired test on the runs' losses, seed by seed
    expected = X.paired_comparison("course", "heads_1", {r.seed: r.val_loss for r in rerun.runs if r.key == "course"},
                                   {r.seed: r.val_loss for r in rerun.runs if r.key == "heads_1"})
    assert rerun.comparison == expected and len(rerun.comparison.differences) == 3
    # the losses are those of the first windows of the validation split, read again from a model trained alike
    model, _own = X.paired_model(dataclasses.replace(preset("course"), n_head=1, vocab_size=random_corpus.vocab_size),
                                 2, dataclasses.replace(preset("course"), vocab_size=random_corpus.vocab_size))
    again = train(model, random_corpus, budget.train_config(2)).model
    block = preset("course").block_size
    val = X.split_loss(again, random_corpus.val_ids[: 2 * block + 1])
    assert math.isclose(rerun.run("heads_1", 2).val_loss, val.mean, rel_tol=1e-5)
    assert math.isclose(rerun.run("heads_1", 2).last_position_loss, val.by_position[-1], rel_tol=1e-5)
    # a second comparison of the same settings reuses the reference's three runs
    rope = P.paired_rerun("heads", "heads_8", random_corpus, budget, (1, 2, 3), 2, run_cache=cache)
    assert len(cache) == 9 and [rope.run("course", s) for s in (1, 2, 3)] == [rerun.run("course", s) for s in (1, 2, 3)]
    stop = threading.Event()
    stop.set()
    assert P.paired_rerun("heads", "heads_1", random_corpus, budget, (1,), 2, stop=stop) is None
    started = []  # stopped in the third run: the first seed's pair is kept and compared, alone
    part = P.paired_rerun("positions", "pos_rope", random_corpus, budget, (1, 2), 2, stop=lambda: len(started) > 2,
                          on_run_start=lambda i, key, steps: started.append(i))
    assert part.seeds == (1,) and part.planned_seeds == (1, 2) and not part.complete and len(part.runs) == 2
    assert part.comparison.verdict == "too_few_seeds"
    assert rerun.complete and rerun.planned_seeds == (1, 2, 3)
    with pytest.raises(KeyError, match="compares"):
        P.paired_rerun("heads", "course", random_corpus, budget, (1,), 2)
    with pytest.raises(ValueError, match="at least one seed"):
        P.paired_rerun("heads", "heads_1", random_corpus, budget, (), 2)


def test_without_the_mask_a_rerun_compares_the_last_position(random_corpus):
    rerun = P.paired_rerun("no_mask", "no_mask_learned", random_corpus, SHORT_RERUN, (1, 2), 2)
    assert rerun.measure == "last_position"
    assert rerun.comparison.differences == tuple(
        rerun.run("no_mask_learned", s).last_position_loss - rerun.run("course", s).last_position_loss for s in (1, 2))
    with pytest.raises(ValueError, match="unknown measure"):
        rerun.runs[0].measured("median")


def test_a_rerun_job_runs_in_the_background_and_is_cached(random_corpus):
    runner = LabRunner()
    budget = SHORT_RERUN
    job, cached = runner.submit_rerun("positions", "pos_none", random_corpus, budget, (1, 2), 2)
    assert cached is None
    snap = wait_until_finished(job, 120)
    assert snap.state == "done" and snap.run_count == 4 and job.result.key == "pos_none"
    again_job, again = runner.submit_rerun("positions", "pos_none", random_corpus, budget, (1, 2), 2)
    assert again_job is None and again is job.result


def test_the_rerun_plan_checks_the_text_the_memory_and_the_time(monkeypatch):
    tang_like = dataclasses.replace(preset("course"), vocab_size=3171)
    plan = P.plan_rerun("heads", "heads_1", None, 300)
    assert [p.key for p in plan.problems] == ["no_corpus"] and plan.runs == 2 * len(P.RERUN_SEEDS)

    class Text:  # the two things the plan reads of a text
        vocab_size, max_block_size = tang_like.vocab_size, 400

    plan = P.plan_rerun("positions", "pos_rope", Text(), P.RERUN_STEPS[1])
    assert plan.ok and plan.memory_bytes < budget_module.MAX_TRAINING_BYTES  # the longest rerun fits the caps
    one = budget_module.estimate(tang_like, P.RERUN_BATCH, P.RERUN_STEPS[1], P.RERUN_STEPS[1], P.RERUN_EVAL_ITERS)
    assert plan.seconds > 2 * len(P.RERUN_SEEDS) * one.seconds * 0.9  # six runs, each at least its training
    Text.max_block_size = 64
    assert [p.key for p in P.plan_rerun("heads", "heads_1", Text(), 100).problems] == ["block_size"]
    Text.max_block_size, Text.vocab_size = 400, budget_module.MAX_VOCAB
    widest = P.plan_rerun("heads", "heads_1", Text(), P.RERUN_STEPS[1])
    assert widest.memory_bytes < budget_module.MAX_TRAINING_BYTES  # batch 4 fits the largest vocabulary allowed
    assert not widest.over_cap or widest.seconds > budget_module.MAX_JOB_WALL_S
    monkeypatch.setattr(budget_module, "MAX_JOB_WALL_S", widest.seconds / 2)
    capped = P.plan_rerun("heads", "heads_1", Text(), P.RERUN_STEPS[1])
    assert capped.ok and capped.over_cap  # no refusal: the job stops at its cap and keeps the seeds it finished
    with pytest.raises(ValueError):
        P.rerun_budget(P.RERUN_STEPS[1] + 1)
    with pytest.raises(KeyError):
        P.plan_rerun("heads", "pos_rope", Text(), 100)


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
    noise = 2 * math.sqrt((0.03**2 + 0.04**2) / 3)
    assert math.isclose(pairs[("a", "b")]["noise"], round(noise, 4)) and pairs[("a", "b")]["delta_mean"] == -0.1
    assert pairs[("a", "b")]["exceeds_noise"] is True and pairs[("a", "c")]["exceeds_noise"] is False
    assert pairs[("a", "d")]["exceeds_noise"] is None and pairs[("a", "d")]["noise"] is None
    assert X.NOISE_RULE["key"] == "welch_2se" and "sqrt" in X.NOISE_RULE["formula"]


def test_seeds_are_summarised_per_run(random_corpus):
    by_seed = [X.run_experiment("heads", random_corpus, steps=2, batch_size=2, seed=s, device="cpu",
                                eval_batches=1)["runs"][0] for s in (1, 2)]
    run = X.summarize_seeds(by_seed)
    values = [r["fixed_val_loss"] for r in by_seed]
    assert run["n_seeds"] == 2 and run["seeds"] == [1, 2]
    assert [r["fixed_val_loss"] for r in run["seed_results"]] == values
    assert math.isclose(run["fixed_val_loss_mean"], sum(values) / 2, abs_tol=1e-4)
    assert math.isclose(run["fixed_val_loss_std"], abs(values[0] - values[1]) / math.sqrt(2), abs_tol=1e-4)
    with pytest.raises(ValueError):
        X.summarize_seeds([])


def test_shipped_dropout_file_is_complete_and_labelled():
    data = X.load_results(X.DROPOUT_RESULTS_FILE)
    assert data is not None, "assets/lab_dropout.json is missing"
    assert data["complete"] is True and data["format"] == X.RESULTS_FORMAT and data["noise_rule"] == X.NOISE_RULE
    steps, seeds = data["settings"]["steps"], data["settings"]["seeds"]
    assert len(seeds) >= 2, "the shipped results give a spread over seeds"
    assert list(data["experiments"]) == list(X.PRESET_EXPERIMENTS)
    for name, experiment in X.PRESET_EXPERIMENTS.items():
        shipped = data["experiments"][name]
        assert [r["key"] for r in shipped["runs"]] == [run.key for run in experiment.runs]
        for r in shipped["runs"]:
            assert r["steps_done"] == steps and r["n_seeds"] == len(seeds)
            mean, std = X.mean_std([s["fixed_val_loss"] for s in r["seed_results"]])
            assert math.isclose(r["fixed_val_loss_mean"], mean, abs_tol=1e-4)
            assert math.isclose(r["fixed_val_loss_std"], std, abs_tol=1e-4)
        assert shipped["comparisons"] == X.compare_runs(shipped["runs"])


def test_the_earlier_experiments_file_is_gone():
    """The exercises file answers what lab_experiments.json (300 steps of batch 8) showed; nothing reads it."""
    assert not (R.ASSETS / "lab_experiments.json").exists() and not hasattr(R, "RESULTS_FILE")


# --- the shipped exercises file, as the Lab shows it -----------------------------------------------------------------

@pytest.fixture(scope="module")
def shipped_exercises():
    data = R.read_exercises()
    assert data is not None, "assets/lab_exercises.json is missing"
    return data


def test_the_shipped_exercises_hold_every_run_and_their_paired_comparisons(shipped_exercises):
    data = shipped_exercises
    assert data.complete and data.planned == len(data.runs) == len(X.plan(data.seeds)) and len(data.seeds) >= 3
    assert (data.steps, data.batch_size, data.learning_rate) == (X.EXERCISE_BUDGET.steps, X.EXERCISE_BUDGET.batch_size,
                                                                 X.EXERCISE_BUDGET.learning_rate)
    assert [e.name for e in data.exercises] == list(X.EXERCISES)
    for exercise in data.exercises:
        spec = X.EXERCISES[exercise.name]
        assert exercise.runs == spec.runs and exercise.reference == spec.reference
        assert exercise.seeds_complete == data.seeds
        assert [c.b for c in exercise.comparisons] == [k for k in spec.runs if k != spec.reference]
        for c in exercise.comparisons:
            loss = {key: {r.seed: r.val_loss for r in data.runs_of(key)} for key in (c.a, c.b)}
            again = stats.paired_comparison(c.a, c.b, loss[c.a], loss[c.b])  # the file's numbers, from its runs
            assert c.verdict == again.verdict == R.interval_verdict(c.t_interval)
            assert c.seeds == again.seeds and c.differences == pytest.approx(again.differences, abs=1e-5)
            assert c.mean == pytest.approx(again.mean, abs=1e-5) and c.detectable == pytest.approx(again.detectable,
                                                                                                     abs=1e-5)
        for curve in exercise.by_position:
            runs = data.runs_of(curve.key)
            mean = [sum(r.val_loss_by_position[i] for r in runs) / len(runs) for i in range(data.block_size)]
            assert curve.mean == pytest.approx(mean, abs=1e-4)
            assert (curve.difference is None) == (curve.key == exercise.reference)


def test_the_shipped_samples_use_todays_vocabulary(shipped_exercises):
    from engine.tokenizer import UNK

    for r in shipped_exercises.runs:
        assert r.samples.prompt == chapter.LESSON_PROMPT and r.samples.greedy.startswith(chapter.LESSON_PROMPT)
        assert UNK not in r.samples.greedy + r.samples.sampled, r.run_id


def _exercises_json() -> dict:
    return json.loads(R.EXERCISES_FILE.read_text(encoding="utf-8"))


@pytest.mark.parametrize("verdict", ["b_beats_a", "a_beats_b", "too_few_seeds"])
def test_a_verdict_its_interval_does_not_support_is_refused(tmp_path, verdict):
    data = _exercises_json()
    comparison = next(c for c in data["exercises"]["heads"]["comparisons"] if c["b"] == "heads_8")
    assert comparison["verdict"] == "no_detectable_difference" and comparison["t_interval"][0] < 0
    comparison["verdict"] = verdict
    (tmp_path / "x.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match="does not follow"):
        R.read_exercises(tmp_path / "x.json")
    comparison["verdict"], comparison["t_interval"] = "b_beats_a", [-0.2, -0.0]  # -0.000004 rounded to 5 decimals
    (tmp_path / "x.json").write_text(json.dumps(data), encoding="utf-8")
    assert R.read_exercises(tmp_path / "x.json").exercise("heads").comparison("heads_8").verdict == "b_beats_a"


@given(low=st.floats(-5, 5), width=st.floats(0, 5))
def test_interval_verdict_says_which_side_of_zero(low, width):
    high = low + width
    verdict = R.interval_verdict((low, high))
    assert verdict == ("b_beats_a" if high < 0 else "a_beats_b" if low > 0 else "no_detectable_difference")
    assert R.interval_verdict(None) == "too_few_seeds"


def test_mean_difference_averages_a_range_of_positions():
    curve = R.PositionCurve("pos_rope", (1, 2), (5.0, 4.0, 3.0, 2.0), (0.0, -0.1, -0.2, -0.3))
    assert curve.mean_difference(0, 2) == pytest.approx(-0.05) and curve.mean_difference(2) == pytest.approx(-0.25)
    assert curve.mean_difference(4) is None
    assert R.PositionCurve("course", (1,), (5.0,), None).mean_difference(0) is None


def test_the_position_curves_figure_draws_the_file_under_its_labels(shipped_exercises):
    from engine.figures import lab as LF

    exercise = shipped_exercises.exercise("positions")
    curves = exercise.by_position
    labels = LF.PositionCurvesLabels(loss_title="L " * 30, difference_title="D", position="p", loss="l",
                                     difference="d", separators=",\u202f")
    fig = LF.position_curves_figure([c.mean for c in curves], [c.difference for c in curves],
                                    [c.key for c in curves], labels, baselines={"bigram": 5.17})
    compared = [c for c in curves if c.difference is not None]
    assert len(fig.data) == len(curves) + len(compared)
    assert [t.name for t in fig.data] == [c.key for c in curves] + [c.key for c in compared]
    assert list(fig.data[0].y) == list(curves[0].mean) and list(fig.data[len(curves)].y) == list(compared[0].difference)
    assert {t.yaxis for t in fig.data[len(curves):]} == {"y2"} and not any(t.showlegend for t in fig.data[len(curves):])
    assert "<br>" in fig.layout.title.text  # a long title wraps instead of running off a phone's width
    assert "D" in [a.text for a in fig.layout.annotations]  # the lower panel's title
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # the panels stack, the loss above
    assert [s.y0 for s in fig.layout.shapes] == [5.17] and fig.layout.separators == ",\u202f"
    with pytest.raises(ValueError):
        LF.position_curves_figure([c.mean for c in curves], [c.difference for c in curves], ["a"], labels)


def test_the_no_mask_chart_labels_the_bigram_where_its_log_axis_draws_it(shipped_exercises):
    from engine.figures import lab as LF

    curves = shipped_exercises.exercise("no_mask").by_position
    fig = LF.loss_by_position_figure([c.mean for c in curves], [c.key for c in curves],
                                     LF.ByPositionLabels(title="T", position="p", loss="l"), baselines={"b": 5.17})
    assert [list(t.y) for t in fig.data] == [pytest.approx(c.mean) for c in curves] and fig.layout.yaxis.type == "log"
    assert [s.y0 for s in fig.layout.shapes] == [5.17]
    assert [(a.text, a.y) for a in fig.layout.annotations] == [("b", pytest.approx(math.log10(5.17)))]
    with pytest.raises(ValueError):
        LF.loss_by_position_figure([c.mean for c in curves], ["a"], LF.ByPositionLabels(title="", position="p",
                                                                                        loss="l"))


#: What the dropout experiment's runs claim: {key: (attention-weight dropout, residual dropout)}.
DROPOUT_CLAIMS = {"dropout_0": (0.0, 0.0), "dropout_resid": (0.0, 0.1), "dropout_both": (0.1, 0.1)}


@pytest.mark.parametrize("base_dropout", [0.0, 0.1, 0.3])
def test_dropout_runs_set_the_rates_they_claim_whatever_the_preset(base_dropout):
    runs = X.PRESET_EXPERIMENTS["dropout"].runs
    assert {run.key: None for run in runs}.keys() == DROPOUT_CLAIMS.keys() == R.DROPOUT_RUNS.keys()
    assert "dropout" not in X.EXPERIMENTS and X.ALL_EXPERIMENTS["dropout"] is X.PRESET_EXPERIMENTS["dropout"]
    base = preset("course", dropout=base_dropout)
    others = {k: v for k, v in base.to_dict().items() if "dropout" not in k}
    for run in runs:
        config = run.config(base)
        assert (config.attn_dropout_rate, config.resid_dropout_rate) == DROPOUT_CLAIMS[run.key]
        assert {k: v for k, v in config.to_dict().items() if "dropout" not in k} == others
        model = GPT(run.config(preset("tiny", dropout=base_dropout)))
        attn = DROPOUT_CLAIMS[run.key][0]
        assert all(block.attn.dropout == attn and block.attn.attn_dropout.p == attn for block in model.blocks)


def test_budget_is_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        X.EXERCISE_BUDGET.steps = 3
    with pytest.raises(ValueError):
        X.Budget(steps=10, warmup_steps=20)
