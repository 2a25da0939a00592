"""engine.lab: registry keys, session isolation, concurrency limit, jobs, uploads, generation, attention maps."""

import dataclasses
import time

import pytest
import torch

from engine import lab
from engine.corpus import MAX_BYTES, corpus_from_bytes
from engine.gpt import GPT, preset
from engine.rng import uses_global_rng
from engine.training import CheckpointError, TrainConfig, checkpoint_to_bytes

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。", "床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"]
TEXT = "\n\n".join(LINES[i % 4] + "\n" + LINES[(i + 1) % 4] for i in range(24))
OTHER_TEXT = TEXT.replace("月", "日")
FAST = TrainConfig(steps=20, batch_size=8, learning_rate=3e-3, warmup_steps=2, eval_interval=10, eval_iters=2, device="cpu")
LONG = dataclasses.replace(FAST, steps=100_000, eval_interval=100_000)


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_bytes(TEXT.encode("utf-8"), "poems.txt")


@pytest.fixture(scope="module")
def other_corpus():
    return corpus_from_bytes(OTHER_TEXT.encode("utf-8"), "poems.txt")


def finished(job, timeout=60.0):
    snap = lab.wait_until_finished(job, timeout)
    assert snap.finished, f"job still {snap.state} after {timeout} s"
    return snap


@pytest.fixture(scope="module")
def trained(corpus):
    runner = lab.LabRunner(threads=1)
    submitted = runner.submit(preset("tiny"), FAST, corpus)
    finished(submitted.job)
    return runner, submitted.job


# --- keys and registry ---------------------------------------------------------------------------------------------


def test_corpus_fingerprint_follows_the_text_not_the_name(corpus, other_corpus):
    renamed = corpus_from_bytes(TEXT.encode("utf-8"), "another-name.txt")
    assert lab.corpus_fingerprint(renamed) == lab.corpus_fingerprint(corpus)
    assert lab.corpus_fingerprint(other_corpus) != lab.corpus_fingerprint(corpus)
    assert len(lab.corpus_fingerprint(corpus)) == 16


def test_run_key_covers_model_training_and_text(corpus, other_corpus):
    key = lab.RunKey.make(preset("tiny"), FAST, corpus)
    assert key.model.vocab_size == corpus.vocab_size  # the preset's vocab_size (16) is replaced
    assert key == lab.RunKey.make(preset("tiny"), FAST, corpus)
    assert key.digest() == lab.RunKey.make(preset("tiny"), FAST, corpus).digest()
    variants = [
        lab.RunKey.make(preset("tiny", n_head=2), FAST, corpus),
        lab.RunKey.make(preset("tiny", causal=False), FAST, corpus),
        lab.RunKey.make(preset("tiny"), dataclasses.replace(FAST, seed=1), corpus),
        lab.RunKey.make(preset("tiny"), dataclasses.replace(FAST, steps=21), corpus),
        lab.RunKey.make(preset("tiny"), FAST, other_corpus),
    ]
    assert all(v != key for v in variants)
    assert len({v.digest() for v in variants} | {key.digest()}) == 6


def test_lru_keeps_the_most_recently_used():
    cache = lab.LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.keys() == ["a", "c"] and len(cache) == 2
    assert cache.get("zz", "default") == "default"
    cache["d"] = 4
    assert cache["d"] == 4 and cache.keys() == ["c", "d"]
    with pytest.raises(ValueError, match="capacity"):
        lab.LRU(0)


def test_finished_model_is_registered_and_reused(trained, corpus):
    runner, job = trained
    assert job.snapshot().state == "done"
    model = job.result
    assert isinstance(model, lab.LabModel) and model.source == "trained" and not model.stopped
    assert runner.lookup(preset("tiny"), FAST, corpus) is model
    again = runner.submit(preset("tiny"), FAST, corpus)
    assert again.reused and again.model is model and again.job is None
    assert runner.lookup(preset("tiny"), dataclasses.replace(FAST, seed=7), corpus) is None


def test_two_sessions_never_see_each_others_models(corpus, other_corpus):
    runner = lab.LabRunner(threads=1)
    session_a, session_b = {}, {}
    job_a = runner.submit(preset("tiny"), FAST, corpus).job
    finished(job_a)
    session_a["model"] = job_a.result
    # B trains on another text with the same settings: the registry must not hand it A's model.
    submitted_b = runner.submit(preset("tiny"), FAST, other_corpus)
    assert not submitted_b.reused
    finished(submitted_b.job)
    session_b["model"] = submitted_b.job.result
    assert session_a["model"] is not session_b["model"]
    assert session_a["model"].model_id != session_b["model"].model_id
    assert session_a["model"].tokenizer != session_b["model"].tokenizer
    # the same settings on the same text give the same weights, which is why reuse is safe
    fresh = lab.LabRunner(threads=1).submit(preset("tiny"), FAST, corpus).job
    finished(fresh)
    assert fresh.result.model_id == session_a["model"].model_id


def test_stopped_runs_stay_out_of_the_registry(corpus):
    runner = lab.LabRunner(threads=1)
    job = runner.submit(preset("tiny"), LONG, corpus).job
    deadline = time.monotonic() + 30
    while job.snapshot().step < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    job.stop()
    snap = finished(job)
    assert snap.state == "stopped" and 3 <= snap.step < LONG.steps
    assert job.result is not None and job.result.stopped  # what was learned is kept
    assert job.result.summary["steps_done"] == snap.step
    assert len(runner.registry) == 0
    assert runner.lookup(preset("tiny"), LONG, corpus) is None  # a new request with these settings trains anew


# --- concurrency ------------------------------------------------------------------------------------------------------


def test_limit_queues_the_second_training_with_a_clear_message(corpus):
    runner = lab.LabRunner(max_concurrent=1, threads=1)
    first = runner.submit(preset("tiny"), LONG, corpus).job
    second = runner.submit(preset("tiny", n_layer=1), FAST, corpus).job
    deadline = time.monotonic() + 30
    while first.snapshot().state != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    snap = second.snapshot()
    assert snap.state == "queued" and snap.step == 0
    assert "at most 1 model at once" in snap.message and "1 is training now" in snap.message
    assert runner.running_count() == 1 and runner.waiting_count() == 1
    first.stop()
    assert finished(first).state == "stopped"
    assert finished(second).state == "done"  # it got the slot once the first one stopped
    assert runner.running_count() == 0 and runner.waiting_count() == 0


def test_stop_while_queued_trains_nothing(corpus):
    runner = lab.LabRunner(max_concurrent=1, threads=1)
    first = runner.submit(preset("tiny"), LONG, corpus).job
    second = runner.submit(preset("tiny", n_layer=1), LONG, corpus).job
    time.sleep(0.2)
    second.stop()
    snap = finished(second, 10)
    assert snap.state == "stopped" and snap.step == 0 and second.result is None
    assert "nothing was trained" in snap.message
    first.stop()
    finished(first)
    assert runner.running_count() == 0 and runner.waiting_count() == 0


def test_two_slots_run_two_trainings_at_once(corpus):
    runner = lab.LabRunner(max_concurrent=2, threads=1)
    jobs = [runner.submit(preset("tiny", n_layer=n), LONG, corpus).job for n in (1, 2)]
    deadline = time.monotonic() + 30
    while any(j.snapshot().state != "running" for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [j.snapshot().state for j in jobs] == ["running", "running"]
    assert runner.running_count() == 2
    for j in jobs:
        j.stop()
    assert all(finished(j).state == "stopped" for j in jobs)


def test_errors_are_reported_in_the_snapshot(corpus):
    class Failing(lab.Job):
        def _work(self, progress, stop):
            raise RuntimeError("boom")

    runner = lab.LabRunner()
    job = Failing(runner, steps=5).start()
    snap = finished(job, 10)
    assert snap.state == "error" and snap.message == "RuntimeError: boom" and job.result is None
    assert runner.running_count() == 0
    with pytest.raises(ValueError, match="too long for corpus"):
        runner.submit(preset("tiny", block_size=corpus.max_block_size + 1), FAST, corpus)
    with pytest.raises(ValueError, match="max_concurrent"):
        lab.LabRunner(max_concurrent=0)


def test_snapshot_reports_progress(trained):
    _, job = trained
    snap = job.snapshot()
    assert snap.finished and snap.fraction == 1.0 and snap.eta_s is None
    assert snap.step == snap.steps == FAST.steps
    assert len(snap.step_losses) == FAST.steps and all(loss > 0 for loss in snap.step_losses)
    assert [h[0] for h in snap.history] == [0, 10, 20]
    assert snap.history[-1][1] < snap.history[0][1]  # the train loss fell
    assert snap.tokens_per_s > 0 and snap.elapsed_s > 0


def test_running_snapshot_has_an_eta(corpus):
    job = lab.LabRunner(threads=1).submit(preset("tiny"), dataclasses.replace(FAST, steps=5000), corpus).job
    deadline = time.monotonic() + 30
    while job.snapshot().step < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    snap = job.snapshot()
    job.stop()
    finished(job)
    assert snap.state == "running" and snap.eta_s is not None and snap.eta_s > 0
    assert 0 < snap.fraction < 1
    assert lab.describe_eta(75.2) == "about 1 min 15 s left"
    assert lab.describe_eta(9) == "about 9 s left" and lab.describe_eta(None).startswith("estimating")


# --- uploads ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b" \n\t\n", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    ("白日依山尽".encode("gbk"), "not UTF-8"),
    (b"a" * (MAX_BYTES + 1), "20 MB limit"),
    (b"ab", "too short"),
])
def test_bad_corpus_uploads_give_a_message_not_an_exception(data, message):
    outcome = lab.read_corpus_upload(data, "upload.txt")
    assert outcome.corpus is None and message in outcome.error and "upload.txt" in outcome.error


def test_good_corpus_upload(corpus):
    outcome = lab.read_corpus_upload(TEXT.encode("utf-8"), "poems.txt")
    assert outcome.error is None and outcome.corpus.vocab_size == corpus.vocab_size


def test_checkpoint_upload_round_trip_and_broken_files(trained):
    model = trained[1].result
    data = checkpoint_to_bytes(model.model, model.tokenizer, model.summary)
    loaded = lab.read_checkpoint_upload(data, "mine.safetensors")
    assert loaded.source == "uploaded" and loaded.model_id == model.model_id
    for broken, message in ((b"", "empty"), (b"garbage", "shorter"), (data[: len(data) // 2], "cannot be read")):
        with pytest.raises(CheckpointError, match=message):
            lab.read_checkpoint_upload(broken, "bad.safetensors")


# --- using a model ----------------------------------------------------------------------------------------------------


def test_generate_notes_unknown_characters_and_is_seeded(trained):
    model = trained[1].result
    out = lab.generate(model, "白日X依Y", 12, temperature=0)
    assert out["unknown"] == ["X", "Y"] and out["kept"] == "白日依" and out["started_from"] == "prompt"
    assert out["text"] == "白日依" + out["new"] and len(out["new"]) == 12
    assert lab.generate(model, "白日", 12, temperature=0)["new"] == lab.generate(model, "白日", 12, temperature=0)["new"]
    a = lab.generate(model, "白日", 30, temperature=1.0, top_k=None, seed=3)["new"]
    b = lab.generate(model, "白日", 30, temperature=1.0, top_k=None, seed=3)["new"]
    assert a == b
    empty = lab.generate(model, "ZZZ", 5, temperature=0)
    assert empty["started_from"] == "newline" and empty["kept"] == "" and len(empty["new"]) == 5


def test_long_prompts_are_cropped_to_block_size(trained):
    model = trained[1].result
    block = model.config.block_size
    long_prompt = "白日依山尽，黄河入海流。" * 4  # 48 characters, block_size 16
    info = lab.prepare_prompt(model.tokenizer, long_prompt, block)
    assert info["cropped"] == len(long_prompt) - block
    out = lab.generate(model, long_prompt, 4, temperature=0)
    tail = lab.generate(model, long_prompt[-block:], 4, temperature=0)
    assert out["new"] == tail["new"]  # only the last block_size characters matter


def test_attention_maps_are_causal_and_rows_sum_to_one(trained):
    model = trained[1].result
    maps = lab.attention_maps(model, "白日依山尽，黄河入海流。")
    w = maps["attn_weights"]
    c = model.config
    assert w.shape == (c.n_layer, c.n_head, 12, 12) and maps["tokens"] == list("白日依山尽，黄河入海流。")
    torch.testing.assert_close(w.sum(-1), torch.ones(c.n_layer, c.n_head, 12), atol=1e-5, rtol=0)
    assert torch.all(w.triu(diagonal=1) == 0)
    cut = lab.attention_maps(model, "白日Q依山尽，黄河入海流。", max_len=5)
    assert cut["tokens"] == list("白日依山尽") and cut["cut"] == 7 and cut["unknown"] == ["Q"]
    none = lab.attention_maps(model, "QQ")
    assert none["tokens"] == [] and none["attn_weights"].shape == (c.n_layer, c.n_head, 0, 0)


def test_position_tables_start_from_the_seeded_init(trained):
    model = trained[1].result
    tables = lab.position_tables(model)
    assert tables["seed"] == FAST.seed
    assert tables["trained"].shape == tables["untrained"].shape == (16, 32)
    torch.manual_seed(FAST.seed)
    initial = GPT(model.config).pos_emb.weight.detach()
    torch.testing.assert_close(tables["untrained"], initial, atol=0, rtol=0)
    assert not torch.equal(tables["trained"], tables["untrained"])
    rope = lab.LabModel(GPT(preset("tiny", pos_encoding="rope")), model.tokenizer, {}, "trained", "x")
    assert lab.position_tables(rope) is None


def test_count_params_and_weights_id():
    config = preset("course", vocab_size=2500)
    assert lab.count_params(config) == GPT(config).num_params()
    model = GPT(preset("tiny"))
    before = lab.weights_id(model)
    assert before == lab.weights_id(model)
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1
    assert lab.weights_id(model) != before


def test_describe_names_size_and_losses(trained):
    text = trained[1].result.describe()
    assert "n_layer 2" in text and "20 steps" in text and "val loss" in text


def test_job_threads_do_not_change_the_callers_threads(corpus):
    before = torch.get_num_threads()  # 1, set by the module fixture
    seen = []

    class Probe(lab.Job):
        def _work(self, progress, stop):
            seen.append(torch.get_num_threads())
            return None, False

    finished(Probe(lab.LabRunner(threads=2), steps=1).start(), 10)
    assert seen == [2] and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads"):
        lab.LabRunner(threads=0)


def test_training_does_not_disturb_chapter_style_seeding(corpus):
    """Dropout masks come from the global generator; pages seed it under engine.rng's lock (chapter numbers)."""

    @uses_global_rng
    def chapter_draw():
        torch.manual_seed(123)
        torch.rand(2000)  # a long draw gives the training thread time to interleave
        return torch.rand(3, 2)

    expected = chapter_draw()
    job = lab.LabRunner(threads=1).submit(preset("tiny", dropout=0.5), LONG, corpus).job
    deadline = time.monotonic() + 30
    while job.snapshot().step < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        draws = [chapter_draw() for _ in range(200)]
    finally:
        job.stop()
        finished(job)
    assert job.snapshot().step > 2
    assert all(torch.equal(d, expected) for d in draws)


def test_torch_threads_is_scoped():
    before = torch.get_num_threads()
    with lab.torch_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="n must be"):
        with lab.torch_threads(0):
            pass
