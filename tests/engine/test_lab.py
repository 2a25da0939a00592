"""engine.lab: registry keys, session isolation, concurrency limit, jobs, uploads, generation, attention maps."""

import dataclasses
import json
import math
import re
import time
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import budget, chapter
from engine.checkpoint import CheckpointError, checkpoint_to_bytes
from engine.corpus import corpus_from_bytes
from engine.gpt import GPT, config_params
from engine.lab import generation, internals, loops, poem_forms
from engine.lab import jobs as J
from engine.lab import models as M
from engine.lab import results as RS
from engine.lab import runner as R
from engine.lab import settings as S
from engine.presets import PRESETS, preset
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer
from engine.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_thread")

LINES = ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。", "床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"]
TEXT = "\n\n".join(LINES[i % 4] + "\n" + LINES[(i + 1) % 4] for i in range(24))
OTHER_TEXT = TEXT.replace("月", "日")
FAST = TrainConfig(steps=20, batch_size=8, learning_rate=3e-3, warmup_steps=2, eval_interval=10, eval_iters=2,
                   device="cpu")
LONG = dataclasses.replace(FAST, steps=100_000, eval_interval=100_000)


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_bytes(TEXT.encode("utf-8"), "poems.txt")


@pytest.fixture(scope="module")
def other_corpus():
    return corpus_from_bytes(OTHER_TEXT.encode("utf-8"), "poems.txt")


def submit(runner, model_config, train_config, corpus, **options):
    """Submits a training with exactly ``train_config`` (the page's plans use TrainConfig.for_steps)."""
    plan = S.TrainingPlan(dataclasses.replace(model_config, vocab_size=corpus.vocab_size), train_config, None, (), None)
    return runner.submit(plan, corpus, **options)


def finished(job, timeout=60.0):
    snap = J.wait_until_finished(job, timeout)
    assert snap.finished, f"job still {snap.state} after {timeout} s"
    return snap


@pytest.fixture(scope="module")
def trained(corpus):
    runner = R.LabRunner()
    submitted = submit(runner, preset("tiny"), FAST, corpus)
    finished(submitted.job)
    return runner, submitted.job


# --- keys and registry ---------------------------------------------------------------------------------------------


def test_corpus_fingerprint_follows_the_text_not_the_name(corpus, other_corpus):
    renamed = corpus_from_bytes(TEXT.encode("utf-8"), "another-name.txt")
    assert M.corpus_fingerprint(renamed) == M.corpus_fingerprint(corpus)
    assert M.corpus_fingerprint(other_corpus) != M.corpus_fingerprint(corpus)
    assert len(M.corpus_fingerprint(corpus)) == 16


def test_run_key_covers_model_training_and_text(corpus, other_corpus):
    key = J.RunKey.make(preset("tiny"), FAST, corpus)
    assert key.model.vocab_size == corpus.vocab_size  # the preset's vocab_size (16) is replaced
    assert key == J.RunKey.make(preset("tiny"), FAST, corpus)
    assert key.digest() == J.RunKey.make(preset("tiny"), FAST, corpus).digest()
    variants = [
        J.RunKey.make(preset("tiny", n_head=2), FAST, corpus),
        J.RunKey.make(preset("tiny", causal=False), FAST, corpus),
        J.RunKey.make(preset("tiny"), dataclasses.replace(FAST, seed=1), corpus),
        J.RunKey.make(preset("tiny"), dataclasses.replace(FAST, steps=21), corpus),
        J.RunKey.make(preset("tiny"), FAST, other_corpus),
    ]
    assert all(v != key for v in variants)
    assert len({v.digest() for v in variants} | {key.digest()}) == 6


def test_lru_keeps_the_most_recently_used():
    cache = R.LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)
    assert "b" not in cache and cache.keys() == ["a", "c"] and len(cache) == 2
    assert cache.get("zz", "default") == "default"
    cache["d"] = 4
    assert cache["d"] == 4 and cache.keys() == ["c", "d"]
    with pytest.raises(ValueError, match="capacity"):
        R.LRU(0)


def test_finished_model_is_registered_and_reused(trained, corpus):
    runner, job = trained
    assert job.snapshot().state == "done"
    model = job.result
    assert isinstance(model, M.LabModel) and model.source == "trained" and not model.stopped
    assert runner.lookup(preset("tiny"), FAST, corpus) is model
    again = submit(runner, preset("tiny"), FAST, corpus)
    assert again.reused and again.model is model and again.job is None
    assert runner.lookup(preset("tiny"), dataclasses.replace(FAST, seed=7), corpus) is None


def test_two_sessions_never_see_each_others_models(corpus, other_corpus):
    runner = R.LabRunner()
    session_a, session_b = {}, {}
    job_a = submit(runner, preset("tiny"), FAST, corpus).job
    finished(job_a)
    session_a["model"] = job_a.result
    # B trains on another text with the same settings: the registry must not hand it A's model.
    submitted_b = submit(runner, preset("tiny"), FAST, other_corpus)
    assert not submitted_b.reused
    finished(submitted_b.job)
    session_b["model"] = submitted_b.job.result
    assert session_a["model"] is not session_b["model"]
    assert session_a["model"].model_id != session_b["model"].model_id
    assert session_a["model"].tokenizer != session_b["model"].tokenizer
    # the same settings on the same text give the same weights, which is why reuse is safe
    fresh = submit(R.LabRunner(), preset("tiny"), FAST, corpus).job
    finished(fresh)
    assert fresh.result.model_id == session_a["model"].model_id


def test_stopped_runs_stay_out_of_the_registry(corpus):
    runner = R.LabRunner()
    job = submit(runner, preset("tiny"), LONG, corpus).job
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
    runner = R.LabRunner(max_concurrent=1)
    first = submit(runner, preset("tiny"), LONG, corpus).job
    second = submit(runner, preset("tiny", n_layer=1), FAST, corpus).job
    deadline = time.monotonic() + 30
    while first.snapshot().state != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    snap = second.snapshot()
    assert snap.state == "queued" and snap.step == 0
    assert (snap.running, snap.limit) == (1, 1)  # the page says why it waits from these
    assert runner.running_count() == 1 and runner.waiting_count() == 1
    first.stop()
    assert finished(first).state == "stopped"
    assert finished(second).state == "done"  # it got the slot once the first one stopped
    assert runner.running_count() == 0 and runner.waiting_count() == 0


def test_stop_while_queued_trains_nothing(corpus):
    runner = R.LabRunner(max_concurrent=1)
    first = submit(runner, preset("tiny"), LONG, corpus).job
    second = submit(runner, preset("tiny", n_layer=1), LONG, corpus).job
    time.sleep(0.2)
    second.stop()
    snap = finished(second, 10)
    assert snap.state == "stopped" and snap.step == 0 and second.result is None
    assert snap.stop_reason == "while_queued"
    first.stop()
    finished(first)
    assert runner.running_count() == 0 and runner.waiting_count() == 0


def test_two_slots_run_two_trainings_at_once(corpus):
    runner = R.LabRunner(max_concurrent=2)
    jobs = [submit(runner, preset("tiny", n_layer=n), LONG, corpus).job for n in (1, 2)]
    deadline = time.monotonic() + 30
    while any(j.snapshot().state != "running" for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [j.snapshot().state for j in jobs] == ["running", "running"]
    assert runner.running_count() == 2
    for j in jobs:
        j.stop()
    assert all(finished(j).state == "stopped" for j in jobs)


def test_errors_are_reported_in_the_snapshot(corpus):
    class Failing(J.Job):
        def _work(self, progress, stop):
            raise RuntimeError("boom")

    runner = R.LabRunner()
    job = Failing(runner, steps=5).start()
    snap = finished(job, 10)
    assert snap.state == "error" and snap.error == "RuntimeError: boom" and job.result is None
    assert runner.running_count() == 0
    too_long = S.plan_training(preset("tiny", block_size=corpus.max_block_size + 1), corpus, 20, 8, 1e-3)
    assert [p.key for p in too_long.problems] == ["block_size"]
    with pytest.raises(ValueError, match="may not start"):
        runner.submit(too_long, corpus)
    with pytest.raises(ValueError, match="max_concurrent"):
        R.LabRunner(max_concurrent=0)


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
    job = submit(R.LabRunner(), preset("tiny"), dataclasses.replace(FAST, steps=5000), corpus).job
    deadline = time.monotonic() + 30
    while job.snapshot().step < 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    snap = job.snapshot()
    job.stop()
    finished(job)
    assert snap.state == "running" and snap.eta_s is not None and snap.eta_s > 0
    assert 0 < snap.fraction < 1


def test_eta_follows_the_jobs_latest_measured_rate():
    """A fake clock: 100 steps at 0.1 s, then the server slows to 0.5 s a step; the time left is re-estimated from
    the latest steps (0.5 s each), not the average since the start."""
    now = [0.0]
    progress = J._Progress(steps=1000, clock=lambda: now[0])
    progress.start()
    for step in range(1, 101):
        now[0] += 0.1
        progress.on_step(step, 3.0, 100.0)
    assert progress.snapshot().eta_s == pytest.approx(900 * 0.1)
    for step in range(101, 101 + J.ETA_WINDOW_STEPS):
        now[0] += 0.5
        progress.on_step(step, 3.0, 100.0)
    snap = progress.snapshot()
    assert snap.eta_s == pytest.approx((1000 - snap.step) * 0.5)  # the whole-run average would say about 0.43 s
    now[0] += 10.0  # a step (or an evaluation) under way for 10 s counts too
    assert progress.snapshot().eta_s > snap.eta_s


def test_steps_by_cap_says_where_the_cap_stops_a_slow_training():
    snap = J.Snapshot(state="running", step=600, steps=1800, elapsed_s=600.0, eta_s=1200.0)  # 1 s a step
    assert J.steps_by_cap(snap, max_wall_s=900) == 900  # 300 s left at the cap: 300 more steps
    assert J.steps_by_cap(snap, max_wall_s=1800) is None  # it ends before the cap
    assert J.steps_by_cap(dataclasses.replace(snap, eta_s=None), max_wall_s=900) is None
    assert J.steps_by_cap(dataclasses.replace(snap, state="done"), max_wall_s=900) is None


# --- uploads ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("data, problem", [
    (b"", "empty"),
    (b" \n\t\n", "empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    ("白日依山尽".encode("gbk"), "not_utf8"),
    (b"a" * (budget.MAX_TEXT_BYTES + 1), "too_large"),
    (b"ab", "too_short"),
    ("白日依山尽\x00".encode("utf-16"), "binary"),
    (b"\xfe\xff\xd8\x00\x00a", "not_utf8"),  # UTF-16-BE with a lone high surrogate
])
def test_bad_corpus_uploads_give_a_key_not_an_exception(data, problem):
    outcome = M.read_corpus_upload(data, "upload.txt")
    assert outcome.corpus is None and outcome.problem == problem


def test_an_upload_with_200000_distinct_characters_is_refused_before_the_corpus_is_built(monkeypatch):
    """0.8 MB of text, every character distinct: refused from its vocabulary size, no tokenizer or model built."""
    text = "".join(chr(0x4E00 + i) if i < 20_000 else chr(0x20000 + i) for i in range(200_000))
    data = text.encode("utf-8")
    assert len(data) < budget.MAX_TEXT_BYTES and len(set(text)) == 200_000
    monkeypatch.setattr(M, "corpus_from_text", lambda *a: pytest.fail("the corpus must not be built"))
    outcome = M.read_corpus_upload(data, "many.txt")
    assert (outcome.problem, outcome.value, outcome.limit) == ("vocab", 200_000, budget.MAX_VOCAB)


def test_good_corpus_upload(corpus):
    outcome = M.read_corpus_upload(TEXT.encode("utf-8"), "poems.txt")
    assert outcome.problem is None and outcome.corpus.vocab_size == corpus.vocab_size


def test_checkpoint_upload_round_trip_and_broken_files(trained):
    model = trained[1].result
    data = checkpoint_to_bytes(model.model, model.tokenizer, model.summary)
    loaded = M.read_checkpoint_upload(data, "mine.safetensors")
    assert loaded.source == "uploaded" and loaded.model_id == model.model_id
    for broken, reason in ((b"", "missing"), (b"garbage", "unreadable"), (data[: len(data) // 2], "shapes")):
        with pytest.raises(CheckpointError) as info:
            M.read_checkpoint_upload(broken, "bad.safetensors")
        assert info.value.reason == reason and str(info.value).startswith("bad.safetensors")


# --- using a model ----------------------------------------------------------------------------------------------------


def test_generate_notes_unknown_characters_and_is_seeded(trained):
    model = trained[1].result
    out = generation.generate(model, "白日X依Y", 12, temperature=0)
    assert out.prompt.unknown == ("X", "Y") and out.prompt.kept == "白日依" and out.prompt.started_from == "prompt"
    assert not out.prompt.as_unk and out.prompt.ids == tuple(model.tokenizer.encode("白日依"))  # dropped, no token
    assert out.prompt.given == "白日X依Y" and out.text == "白日X依Y" + out.new  # the reader's prompt as typed
    assert len(out.new) == 12 and out.greedy
    # the model read the known characters only
    assert out.new == generation.generate(model, "白日依", 12, temperature=0).new
    greedy = [generation.generate(model, "白日", 12, temperature=0).new for _ in range(2)]
    assert greedy[0] == greedy[1]
    a = generation.generate(model, "白日", 30, temperature=1.0, top_k=None, seed=3)
    b = generation.generate(model, "白日", 30, temperature=1.0, top_k=None, seed=3)
    assert a.new == b.new and not a.greedy
    empty = generation.generate(model, "ZZZ", 5, temperature=0)
    assert empty.prompt.started_from == "newline" and empty.prompt.kept == "" and len(empty.new) == 5
    assert empty.text == "ZZZ" + empty.new


#: A crafted prompt: two characters of the Tang vocabulary, then a snowman and a Latin letter, which it lacks.
UNKNOWN_PROMPT = "明月☃x"


def test_unknown_characters_are_read_as_the_unknown_token_and_the_prompt_comes_back_as_typed(shipped):
    tokenizer = shipped.tokenizer
    assert tokenizer.unknown_chars(UNKNOWN_PROMPT) == ["☃", "x"] and tokenizer.unk_id is not None
    out = generation.generate(shipped, UNKNOWN_PROMPT, 12, temperature=0)
    info = out.prompt
    assert info.unknown == ("☃", "x") and info.as_unk and info.started_from == "prompt"
    assert info.ids == (tokenizer.stoi["明"], tokenizer.stoi["月"], tokenizer.unk_id, tokenizer.unk_id)
    assert info.given == info.kept == UNKNOWN_PROMPT and out.text == UNKNOWN_PROMPT + out.new
    assert tokenizer.unk not in out.text and len(out.new) == 12  # no U+FFFD where the prompt's characters were
    typed_unk = generation.generate(shipped, "明月" + tokenizer.unk * 2, 12, temperature=0)
    assert typed_unk.new == out.new  # the model read its unknown token in their place



def test_attention_on_a_line_reads_unknown_characters_as_the_prompt_does(shipped, trained):
    """Section 5 follows the generation's rule: the unknown token where the vocabulary has one, shown as typed."""
    unk = shipped.tokenizer.unk
    maps = internals.attention_maps(shipped, UNKNOWN_PROMPT)
    assert maps.tokens == tuple(UNKNOWN_PROMPT) and maps.unknown == ("☃", "x") and maps.as_unk and maps.cut == 0
    typed_unk = internals.attention_maps(shipped, "明月" + unk * 2)  # what the model reads: its unknown token twice
    torch.testing.assert_close(maps.attn_weights, typed_unk.attn_weights, rtol=0, atol=0)
    assert typed_unk.tokens == tuple("明月" + unk * 2) and not typed_unk.unknown
    looked = internals.last_position_attention(shipped, UNKNOWN_PROMPT)
    assert looked.tokens == tuple(UNKNOWN_PROMPT)  # the next character's attention names them as typed too
    torch.testing.assert_close(looked.attn_weights, maps.attn_weights[:, :, -1, :])
    assert internals.next_char_probs(shipped, UNKNOWN_PROMPT).context == UNKNOWN_PROMPT
    only_unknown = internals.attention_maps(shipped, "☃☃")  # read as two unknown tokens: drawn
    assert only_unknown.tokens == ("☃", "☃") and only_unknown.attn_weights.shape[-1] == 2
    tang = trained[1].result  # a vocabulary without an unknown token: they are left out
    dropped = internals.attention_maps(tang, "白日☃依")
    assert dropped.tokens == tuple("白日依") and dropped.unknown == ("☃",) and not dropped.as_unk
    assert internals.last_position_attention(tang, "白日☃依").tokens == tuple("白日依")


def test_a_prompt_counts_what_the_model_reads_as_its_unknown_token(shipped, trained):
    tokenizer = shipped.tokenizer
    prompt = UNKNOWN_PROMPT + tokenizer.unk + "☃"  # a typed U+FFFD is the unknown token too
    info = generation.prepare_prompt(tokenizer, prompt, shipped.config.block_size)
    assert info.read_as_unk == sum(i == tokenizer.unk_id for i in info.ids) == 4
    assert len(info.ids) - info.read_as_unk == 2  # 明 and 月 are the known ones
    assert generation.prepare_prompt(tokenizer, "明月", 128).read_as_unk == 0
    tang = trained[1].result  # without an unknown token nothing is read as one: the unknown characters are dropped
    dropped = generation.prepare_prompt(tang.tokenizer, "白日☃依", 16)
    assert dropped.read_as_unk == 0 and len(dropped.ids) == 3

def test_an_unknown_ideograph_counts_as_a_letter_of_the_form(shipped):
    """A rare character the vocabulary pools into the unknown token still fills its place in the line."""
    prompt = "明月鱻光照，"
    assert shipped.tokenizer.unknown_chars(prompt) == ["鱻"] and "鱻".isalpha()
    for seed in range(3):
        out = generation.generate(shipped, prompt, None, 0.8, 20, seed, 0.9, poem_forms.PoemForm(5, 4))
        assert out.text.startswith(prompt) and shape_of(out.text) == couplets(5, 4), out.text


def test_temperature_zero_is_the_argmax_at_every_step(trained):
    """Greedy on purpose: each new character is the most likely one after the text so far."""
    lab_model = trained[1].result
    out = generation.generate(lab_model, "白日", 6, temperature=0)
    ids = list(out.prompt.ids)
    for char in out.new:
        with torch.no_grad():
            logits = lab_model.model(torch.tensor([ids[-lab_model.config.block_size:]])).logits[0, -1]  # (V,)
        assert lab_model.tokenizer.itos[int(logits.argmax())] == char
        ids.append(lab_model.tokenizer.stoi[char])


def test_non_finite_logits_are_refused_before_sampling(trained):
    good = trained[1].result
    model = GPT(good.config)
    model.load_state_dict(good.model.state_dict())
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")  # every logit row then holds a NaN
    broken = M.LabModel(model.eval(), good.tokenizer, {}, "uploaded", M.weights_id(model, good.tokenizer))
    for temperature in (0.0, 0.8):
        with pytest.raises(generation.NonFiniteLogitsError):
            generation.generate(broken, "白日", 5, temperature=temperature)


def test_long_prompts_are_cropped_to_block_size(trained):
    model = trained[1].result
    block = model.config.block_size
    long_prompt = "白日依山尽，黄河入海流。" * 4  # 48 characters, block_size 16
    info = generation.prepare_prompt(model.tokenizer, long_prompt, block)
    assert info.cropped == len(long_prompt) - block
    out = generation.generate(model, long_prompt, 4, temperature=0)
    tail = generation.generate(model, long_prompt[-block:], 4, temperature=0)
    assert out.new == tail.new  # only the last block_size characters matter



def test_a_prompt_is_bounded_before_it_is_encoded(trained):
    model = trained[1].result
    limit = S.MAX_PROMPT_CHARS
    assert limit >= 2 * budget.MAX_BLOCK_SIZE  # longer than any Lab model's context: the crop can still be seen
    at_limit = ("白日依山尽，黄河入海流。" * limit)[:limit]
    assert len(generation.prepare_prompt(model.tokenizer, at_limit, 16).ids) == limit
    over = at_limit + "白"
    for call in (lambda: generation.prepare_prompt(model.tokenizer, over, 16),
                 lambda: generation.generate(model, over, 1),
                 lambda: internals.attention_maps(model, over), lambda: internals.next_char_probs(model, over),
                 lambda: internals.last_position_attention(model, over)):
        with pytest.raises(ValueError, match=str(limit)):
            call()

# --- poem forms and greedy loops -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    return M.load_shipped()


def shape_of(text: str) -> str:
    """One symbol per character: L a letter, ',' an odd line's end, '.' an even line's end, '/' a newline."""
    return "".join("," if c == "，" else "." if c in "。？！" else "/" if c == "\n" else "L" if c.isalpha() else "?"
                   for c in text)


def couplets(line_length: int, n_lines: int) -> str:
    """The shape of a poem of n_lines lines of line_length characters, a newline between couplets."""
    couplet = "L" * line_length + "," + "L" * line_length + "."
    return "/".join([couplet] * (n_lines // 2))


SAMPLINGS = ((0.0, None, 1.0), (1.5, None, 1.0), (0.8, 5, 0.5))  # temperature, top_k, top_p


@pytest.mark.parametrize("prompt", ["", "白日", "白日依山尽，", "白日依山尽，黄河入海流。\n"])
def test_a_poem_form_is_met_exactly_for_every_seed(trained, prompt):
    model = trained[1].result
    forms = ((5, 2), (5, 4), (7, 4), (5, 8)) if "，" not in prompt else ((5, 4), (5, 8))
    for line_length, n_lines in forms:
        form = poem_forms.PoemForm(line_length, n_lines)
        for seed in range(5):
            for temperature, top_k, top_p in SAMPLINGS:
                out = generation.generate(model, prompt, None, temperature, top_k, seed, top_p, form)
                assert shape_of(out.text) == couplets(line_length, n_lines), (form, seed, out.text)
                assert out.form == form


def test_a_line_length_alone_runs_to_max_new_tokens_and_lines_alone_stay_in_bounds(trained):
    model = trained[1].result
    low, high = S.POEM_FREE_LINE
    free_line = f"L{{{low},{high}}}"
    for seed in range(5):
        out = generation.generate(model, "白日", 40, 1.5, None, seed, 1.0, poem_forms.PoemForm(7, None))
        assert len(out.new) == 40 and shape_of(out.text) == couplets(7, 16)[: len(out.text)]
        free = generation.generate(model, "白日", None, 1.5, None, seed, 1.0, poem_forms.PoemForm(None, 4))
        couplet = f"{free_line},{free_line}\\."
        assert re.fullmatch(f"{couplet}/{couplet}", shape_of(free.text)), free.text


def test_the_shipped_model_writes_the_forms_exactly(shipped):
    for line_length, n_lines in ((5, 4), (7, 8)):
        for seed in range(3):
            form = poem_forms.PoemForm(line_length, n_lines)
            out = generation.generate(shipped, "明月", None, 0.8, 20, seed, 0.9, form)
            assert shape_of(out.text) == couplets(line_length, n_lines), out.text
            assert shipped.tokenizer.itos[shipped.tokenizer.unk_id] not in out.text


@pytest.mark.parametrize(("line_length", "n_lines"), [(6, 4), (5, 3), (5, 0), (5, S.POEM_LINES[1] + 2), (None, None),
                                                      (True, 4), (5, True), (5, 4.0)])
def test_a_poem_form_outside_the_choices_is_refused(line_length, n_lines):
    with pytest.raises(ValueError):
        poem_forms.PoemForm(line_length, n_lines)


def test_forms_that_cannot_be_written_are_refused_with_a_reason(trained):
    model = trained[1].result
    form = poem_forms.PoemForm(5, 4)
    for prompt in ("白日依山尽黄", "白日，", "白日\n", "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"):
        with pytest.raises(poem_forms.FormError) as error:
            generation.generate(model, prompt, None, form=form)
        assert error.value.reason == "prompt"
    with pytest.raises(poem_forms.FormError) as error:
        generation.generate(model, "白日", 10, form=form)
    assert error.value.reason == "length" and error.value.needed == len(couplets(5, 4)) - 2
    assert len(generation.generate(model, "白日", error.value.needed, form=form).new) == error.value.needed
    english = corpus_from_bytes(b"the cat sat on the mat\n\n" * 40, "cats.txt")
    tiny = GPT(preset("tiny", vocab_size=english.vocab_size)).eval()
    cats = M.LabModel(tiny, english.tokenizer, {}, "uploaded", M.weights_id(tiny, english.tokenizer))
    with pytest.raises(poem_forms.FormError) as error:
        generation.generate(cats, "the", None, form=form)
    assert error.value.reason == "vocabulary"
    for bad in ({"max_new_tokens": None}, {"max_new_tokens": None, "form": poem_forms.PoemForm(5, None)},
                {"max_new_tokens": -1}, {"top_p": 0.0}, {"top_p": 1.2}, {"temperature": -1.0}):
        with pytest.raises(ValueError):
            generation.generate(model, "白日", **{"max_new_tokens": 5, **bad})


def test_the_next_character_view_follows_the_form_and_top_p(trained):
    model = trained[1].result
    form = poem_forms.PoemForm(5, 4)
    end = internals.next_char_probs(model, "白日依山尽", temperature=1.0, top_k=0, form=form)
    assert end.candidates == ("，",) and float(end.probs[0]) == pytest.approx(1.0)  # the line's end is the only choice
    inside = internals.next_char_probs(model, "白日", temperature=1.0, top_k=0, form=form, n=50)
    assert all(c.isalpha() for c in inside.candidates) and len(inside.candidates) == sum(
        c.isalpha() for c in model.tokenizer.itos)
    for seed in range(6):  # the view's draw is generate's first character
        view = internals.next_char_probs(model, "白日", 0.9, 0, seed, top_p=0.8, form=form)
        drawn = generation.generate(model, "白日", None, 0.9, None, seed, 0.8, form).new[0]
        assert view.candidates[view.sampled] == drawn
        plain = internals.next_char_probs(model, "白日依", 0.9, 5, seed, top_p=0.6)
        assert plain.candidates[plain.sampled] == generation.generate(model, "白日依", 1, 0.9, 5, seed, 0.6).new
    assert view.top_ps[-1] == 1.0 and 0.8 in view.top_ps
    assert view.by_top_p.shape == (len(view.top_ps), len(view.candidates))
    torch.testing.assert_close(view.by_top_p[view.top_ps.index(0.8)], view.probs)
    torch.testing.assert_close(view.by_top_p[-1], internals.next_char_probs(model, "白日", 0.9, 0, form=form).probs)
    support = (view.by_top_p > 0).sum(-1)  # a smaller top-p keeps no more characters
    assert all(a <= b for a, b in zip(support.tolist(), support.tolist()[1:], strict=False))
    for bad in ({"top_p": 0.0}, {"top_ps": (0.5, 1.5)}, {"top_ks": (-1,)}, {"temperatures": (-0.5,)}):
        with pytest.raises(ValueError):
            internals.next_char_probs(model, "白日", **bad)


@pytest.mark.parametrize(("text", "start", "span", "covered"), [
    ("abcabcabc", 0, "abc", 9),
    ("xyabababz", 2, "ab", 6),
    ("qabcabcab", 1, "abc", 8),  # the last copy cut short
    ("aaaaaa", 0, "a", 6),
    ("abababab", 0, "ab", 8),  # the shortest span, not "abab"
    ("ababab-xyzxyzxyz", 7, "xyz", 9),  # the longer of two loops
    ("春风吹雨露，春色满庭花。\n春风吹雨露，春色满庭花。\n春风", 0, "春风吹雨露，春色满庭花。\n", 28),
])
def test_find_loop_on_crafted_text(text, start, span, covered):
    loop = loops.find_loop(text)
    assert (loop.start, loop.span, loop.covered) == (start, span, covered)
    assert loop.period == len(span) and loop.end == start + covered and loop.copies == covered // len(span)


def test_find_loop_without_a_loop_and_its_bounds():
    for text in ("", "a", "abcdef", "abab", "白日依山尽"):
        assert loops.find_loop(text) is None
    tie = loops.find_loop("ababcdcd", min_chars=2)  # two loops of 4: the earlier
    assert (tie.start, tie.span, tie.covered) == (0, "ab", 4)
    with pytest.raises(ValueError):
        loops.find_loop("a" * (loops.MAX_LOOP_TEXT + 1))
    for bad in (1, 2.5, True):
        with pytest.raises(ValueError):
            loops.find_loop("abab", min_chars=bad)


def stretches(text: str):
    """Every stretch of text with period p and two full copies: (covered, p, start), by brute force."""
    for p in range(1, len(text) // 2 + 1):
        for s in range(len(text)):
            e = s
            while e + p < len(text) and text[e] == text[e + p]:
                e += 1
            if e - s >= p:
                yield e - s + p, p, s


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab，。\n", max_size=40), min_chars=st.integers(2, 8))
def test_find_loop_is_the_longest_repetition(text, min_chars):
    found = [(c, p, s) for c, p, s in stretches(text) if c >= min_chars]
    loop = loops.find_loop(text, min_chars)
    if not found:
        assert loop is None
        return
    covered, period, start = max(found, key=lambda f: (f[0], -f[1], -f[2]))
    assert (loop.covered, loop.period, loop.start) == (covered, period, start)
    assert text[loop.start : loop.end] == (loop.span * (loop.copies + 1))[: loop.covered]


@settings(max_examples=100, deadline=None)
@given(prefix=st.text(alphabet="xyz", max_size=6), span=st.text(alphabet="ab。", min_size=1, max_size=5),
       copies=st.integers(2, 5), suffix=st.text(alphabet="xyz", max_size=6))
def test_find_loop_finds_a_planted_loop(prefix, span, copies, suffix):
    text = prefix + span * copies + suffix
    loop = loops.find_loop(text, min_chars=2)
    assert loop is not None and loop.covered >= len(span) * copies


def test_find_loop_on_the_shipped_models_greedy_text(shipped):
    """Greedy decoding of the shipped model falls into a loop; once the loop fills the context, it never leaves it."""
    block = shipped.config.block_size
    for prompt in ("明月", "春风"):
        out = generation.generate(shipped, prompt, 300, temperature=0)
        loop = loops.find_loop(out.new)
        assert loop is not None and loop.copies >= 2, out.new
        assert out.new[loop.start : loop.end] == (loop.span * (loop.copies + 1))[: loop.covered]
        if loop.covered >= block + loop.period:
            assert loop.end == len(out.new)



def test_greedy_loop_finds_the_first_prompt_whose_greedy_text_loops(shipped):
    longest = S.GENERATE_LENGTH[1]
    first, *rest = chapter.SAMPLE_PROMPTS
    found = loops.greedy_loop(shipped)
    assert found.length == longest and found.generation is not None and found.loop is not None
    tried = found.tried
    assert tried == chapter.SAMPLE_PROMPTS[: len(tried)]  # in order, and it stopped at the first loop
    for prompt in tried[:-1]:
        assert loops.find_loop(generation.generate(shipped, prompt, longest, temperature=0).new) is None
    out = generation.generate(shipped, tried[-1], longest, temperature=0)
    assert found.generation == out and found.loop == loops.find_loop(out.new)
    short = loops.greedy_loop(shipped, (first,), 8)  # a short text, without a loop yet (checked next)
    assert loops.find_loop(generation.generate(shipped, first, 8, temperature=0).new) is None
    assert short.tried == (first,) and short.generation is None and short.loop is None and short.length == 8
    with pytest.raises(ValueError):
        loops.greedy_loop(shipped, length=0)


def test_greedy_loop_skips_prompts_the_vocabulary_lacks(trained):
    english = corpus_from_bytes(b"the cat sat on the mat\n\n" * 40, "cats.txt")
    tiny = GPT(preset("tiny", vocab_size=english.vocab_size)).eval()
    model = M.LabModel(tiny, english.tokenizer, {}, "uploaded", M.weights_id(tiny, english.tokenizer))
    found = loops.greedy_loop(model, length=40)
    assert found.tried == ("",)  # none of the Tang prompts: the model starts from a newline
    out = generation.generate(model, "", 40, temperature=0)
    assert found.loop == loops.find_loop(out.new) and found.generation == (out if found.loop else None)
    tang = trained[1].result
    # once each; X is not in its vocabulary
    assert loops.greedy_loop(tang, ("白日", "白日", "X白"), 12).tried == ("白日",)

def test_attention_maps_are_causal_and_rows_sum_to_one(trained):
    model = trained[1].result
    maps = internals.attention_maps(model, "白日依山尽，黄河入海流。")
    w = maps.attn_weights
    c = model.config
    assert w.shape == (c.n_layer, c.n_head, 12, 12) and maps.tokens == tuple("白日依山尽，黄河入海流。")
    torch.testing.assert_close(w.sum(-1), torch.ones(c.n_layer, c.n_head, 12), atol=1e-5, rtol=0)
    assert torch.all(w.triu(diagonal=1) == 0)
    assert maps.row_sum == pytest.approx(1.0, abs=1e-5) and 0 < maps.self_weight <= 1
    cut = internals.attention_maps(model, "白日Q依山尽，黄河入海流。", max_len=5)
    assert cut.tokens == tuple("白日依山尽") and cut.cut == 7 and cut.unknown == ("Q",)
    none = internals.attention_maps(model, "QQ")
    assert none.tokens == () and none.attn_weights.shape == (c.n_layer, c.n_head, 0, 0)


def test_position_tables_start_from_the_seeded_init(trained):
    model = trained[1].result
    tables = internals.position_tables(model)
    assert tables.seed == FAST.seed
    assert tables.trained.shape == tables.untrained.shape == (16, 32)
    torch.manual_seed(FAST.seed)
    initial = GPT(model.config).pos_emb.weight.detach()
    torch.testing.assert_close(tables.untrained, initial, atol=0, rtol=0)
    assert not torch.equal(tables.trained, tables.untrained)
    rope = M.LabModel(GPT(preset("tiny", pos_encoding="rope")), model.tokenizer, {}, "trained", "x")
    assert internals.position_tables(rope) is None
    crafted = M.LabModel(model.model, model.tokenizer, {"train_config": {"seed": "7; rm -rf"}}, "uploaded", "y")
    assert internals.position_tables(crafted).seed == 1337  # a checkpoint's summary is not trusted


def test_params_and_weights_id(trained):
    assert trained[1].result.params == config_params(trained[1].result.config)
    model = GPT(preset("tiny"))
    tokenizer = CharTokenizer("abcdefghijklmnop")  # the tiny preset's 16 tokens
    before = M.weights_id(model, tokenizer)
    assert before == M.weights_id(model, CharTokenizer("abcdefghijklmnop"))
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1
    assert M.weights_id(model, tokenizer) != before


def test_same_weights_with_another_vocabulary_is_another_model(trained):
    """Two checkpoints with equal weights and different characters: the second must not get the first's id
    (the Lab's generation and attention caches are keyed by it)."""
    model = trained[1].result
    chars = "".join(model.tokenizer.itos)
    shifted = CharTokenizer(chr(ord(c) + 0x100) if c not in "\n " else c for c in chars)
    assert shifted.vocab_size == model.tokenizer.vocab_size
    first = M.read_checkpoint_upload(checkpoint_to_bytes(model.model, model.tokenizer, model.summary), "a")
    second = M.read_checkpoint_upload(checkpoint_to_bytes(model.model, shifted, model.summary), "b")
    assert first.model_id != second.model_id
    assert first.model_id == M.read_checkpoint_upload(checkpoint_to_bytes(model.model, model.tokenizer,
                                                                          model.summary), "c").model_id


# --- process-wide state -----------------------------------------------------------------------------------------------


def test_jobs_leave_the_thread_count_alone(corpus):
    before = torch.get_num_threads()
    seen = []

    class Probe(J.Job):
        def _work(self, progress, stop):
            seen.append(torch.get_num_threads())
            return None, False

    finished(Probe(R.LabRunner(), steps=1).start(), 10)
    finished(submit(R.LabRunner(), preset("tiny"), FAST, corpus).job)
    assert seen == [before] and torch.get_num_threads() == before


def test_training_does_not_disturb_chapter_style_seeding(corpus):
    """Training draws nothing from the global generator: pages seeding it never wait and keep their numbers."""

    @uses_global_rng
    def chapter_draw():
        torch.manual_seed(123)
        torch.rand(2000)  # a long draw gives the training thread time to interleave
        return torch.rand(3, 2)

    expected = chapter_draw()
    job = submit(R.LabRunner(), preset("tiny", dropout=0.5), LONG, corpus).job
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


# --- jobs end with their reader ---------------------------------------------------------------------------------------


def wait_for_step(job, step, timeout=30):
    deadline = time.monotonic() + timeout
    while job.snapshot().step < step and not job.snapshot().finished and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_job_stops_when_its_session_ends_and_keeps_its_model(corpus):
    session = {"alive": True}
    runner = R.LabRunner()
    job = submit(runner, preset("tiny"), LONG, corpus, owner_alive=lambda: session["alive"], orphan_grace_s=0.2).job
    wait_for_step(job, 3)
    session["alive"] = False  # the reader closed the tab
    snap = finished(job, 30)
    assert snap.state == "stopped" and snap.stop_reason == "owner_left" and 3 <= snap.step < LONG.steps
    assert job.result is not None and job.result.stopped  # what it learned is kept
    assert runner.running_count() == 0  # the slot is free for the next reader


def test_a_reader_who_reloads_takes_the_job_over(corpus):
    first = {"alive": True}
    runner = R.LabRunner()
    job = submit(runner, preset("tiny"), LONG, corpus, owner_alive=lambda: first["alive"], orphan_grace_s=30).job
    wait_for_step(job, 2)
    assert runner.reattach(job.token, lambda: True) is None  # a shared link cannot take a job from its reader
    assert runner.reattach("0" * 32, lambda: True) is None and runner.reattach("../etc", lambda: True) is None
    first["alive"] = False  # the reload ends the old session ...
    second = {"alive": True}
    assert runner.reattach(job.token, lambda: second["alive"]) is job  # ... and the new one finds the job
    time.sleep(0.3)
    assert job.snapshot().state == "running"
    job.stop()
    snap = finished(job)
    assert snap.state == "stopped" and snap.stop_reason == "by_reader"


def test_an_old_link_cannot_fetch_a_finished_model(corpus):
    owner = {"alive": True}
    runner = R.LabRunner()
    job = submit(runner, preset("tiny"), FAST, corpus, owner_alive=lambda: owner["alive"], orphan_grace_s=0.2).job
    finished(job)
    owner["alive"] = False
    time.sleep(0.4)
    assert runner.reattach(job.token, lambda: True) is None


def test_a_job_stops_at_its_wall_time_cap(corpus):
    job = submit(R.LabRunner(), preset("tiny"), LONG, corpus, max_wall_s=0.5).job
    snap = finished(job, 30)
    assert snap.state == "stopped" and snap.stop_reason == "wall_cap" and snap.step >= 1
    assert job.result is not None


def test_a_failing_liveness_check_keeps_the_job(corpus):
    def broken():
        raise RuntimeError("no runtime")

    job = submit(R.LabRunner(), preset("tiny"), FAST, corpus, owner_alive=broken, orphan_grace_s=0).job
    assert finished(job).state == "done"


# --- the Lab's rules --------------------------------------------------------------------------------------------------


def test_head_choices():
    assert S.head_choices(48, "learned") == (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)
    assert S.head_choices(48, "rope") == (1, 2, 3, 4, 6, 8, 12, 24)
    assert S.default_heads(16, "learned", wanted=24) == 4
    assert S.head_choices(48, "alibi") == S.head_choices(48, "learned")  # ALiBi rotates nothing: every divisor
    with pytest.raises(ValueError, match="pos_encoding must be one of"):
        S.head_choices(32, "ALiBi")


def test_the_largest_settings_are_refused_with_an_estimate(corpus):
    plan = S.plan_training(preset("course", n_layer=8, n_embd=256, n_head=8, block_size=256), corpus, 5000, 64, 1e-3)
    keys = [p.key for p in plan.problems]
    assert "memory" in keys and "time" in keys and not plan.ok
    memory = next(p for p in plan.problems if p.key == "memory")
    assert memory.value > 10 * memory.limit and memory.limit == budget.MAX_TRAINING_BYTES
    assert plan.estimate.params == config_params(plan.model)
    with pytest.raises(ValueError, match="may not start"):
        R.LabRunner().submit(plan, corpus)


@pytest.mark.parametrize("vocab_size", [2500, budget.MAX_VOCAB])  # the Tang poems' vocabulary, and the cap
def test_presets_fit_the_caps(vocab_size):
    for name, training in ((p.name, p.training) for p in PRESETS.values() if p.training is not None):
        train = TrainConfig.for_steps(training.steps, training.batch_size)
        _, refusals = budget.training_refusals(preset(name, vocab_size=vocab_size), train.batch_size, train.steps,
                                               train.eval_interval, train.eval_iters)
        assert refusals == [] or vocab_size > 2500 and name == "course", (name, refusals)


def test_plan_uses_the_one_schedule(corpus):
    plan = S.plan_training(preset("tiny"), corpus, 400, 8, 2e-3, seed=5)
    assert plan.train == TrainConfig.for_steps(400, 8, learning_rate=2e-3, seed=5)
    assert plan.model.vocab_size == corpus.vocab_size
    assert [p.key for p in S.plan_training(preset("tiny"), None, 400, 8, 2e-3).problems] == ["no_corpus"]


# --- the unknown token, the next character, where attention looked ---------------------------------------------


@pytest.fixture(scope="module")
def unk_model():
    """A tiny model over a vocabulary with an unknown token, whose lm_head makes that token by far the likeliest."""
    from engine.tokenizer import CharTokenizer

    tokenizer = CharTokenizer.from_counts({c: 10 for c in "白日依山尽，黄河入海流。\n"} | {"罕": 1}, min_count=5)
    assert tokenizer.unk_id is not None
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=tokenizer.vocab_size)).eval()
    with torch.no_grad():  # every position's final hidden state becomes all ones, and only the unknown token's row
        model.ln_f.weight.zero_()  # of lm_head points that way: its logit is 32 * 3, every other one 0
        model.ln_f.bias.fill_(1.0)
        model.lm_head.weight.zero_()
        model.lm_head.weight[tokenizer.unk_id] = 3.0
    return M.LabModel(model, tokenizer, {}, "uploaded", M.weights_id(model, tokenizer))


def test_generation_never_writes_the_unknown_token(unk_model):
    unk = unk_model.tokenizer.itos[unk_model.tokenizer.unk_id]
    for temperature, top_k in ((0.0, None), (1.0, None), (2.0, 1), (0.5, 3)):
        out = generation.generate(unk_model, "白日", 40, temperature=temperature, top_k=top_k, seed=4)
        assert len(out.new) == 40 and unk not in out.new
    probs = internals.next_char_probs(unk_model, "白日", temperature=1.0, top_k=0)
    assert unk not in probs.candidates


def test_next_char_probs_follow_temperature_and_top_k(trained):
    model = trained[1].result
    view = internals.next_char_probs(model, "白日依", temperature=0.8, top_k=5, seed=2, n=8)
    C = len(view.candidates)
    assert C in (8, 9) and view.by_temperature.shape == (len(view.temperatures), C)
    assert view.by_top_k.shape == (len(view.top_ks), C) and view.probs.shape == (C,)
    assert 0.8 in view.temperatures and 5 in view.top_ks and view.top_ks[-1] == 0  # "all" last
    # the candidates come most likely first, and top-k keeps exactly k of them
    ids = generation.prepare_prompt(model.tokenizer, "白日依", 16).ids
    logits = model.model(torch.tensor([list(ids)])).logits[0, -1]
    order = [model.tokenizer.itos[i] for i in torch.argsort(logits, descending=True)[:8].tolist()]
    assert list(view.candidates[:8]) == order
    assert int((view.probs > 0).sum()) == 5 and abs(float(view.probs.sum()) - 1.0) < 1e-5
    row_k1 = view.by_top_k[view.top_ks.index(1)]
    assert float(row_k1[0]) == pytest.approx(1.0) and float(row_k1[1:].sum()) == 0.0
    # a higher temperature flattens: the favourite's probability falls as the temperature rises
    favourite = view.by_temperature[:, 0].tolist()
    assert all(a >= b - 1e-6 for a, b in zip(favourite, favourite[1:], strict=False))
    torch.testing.assert_close(view.by_temperature[view.temperatures.index(0.8)], view.probs)
    # the sampled character is the first one generate writes with the same settings
    first = generation.generate(model, "白日依", 1, temperature=0.8, top_k=5, seed=2).new
    assert view.candidates[view.sampled] == first
    greedy = internals.next_char_probs(model, "白日依", temperature=0.0, top_k=0)
    assert greedy.sampled == 0 and float(greedy.probs[0]) == 1.0
    assert view.shapes == {"idx": (1, 3), "residual": (1, 3, 32), "logits": (1, 3, model.config.vocab_size),
                           "attn_weights": (1, 4, 3, 3)}
    for bad in ({"temperature": -1.0}, {"temperature": float("nan")}, {"top_k": -2}, {"n": 0}):
        with pytest.raises(ValueError):
            internals.next_char_probs(model, "白日", **bad)


def test_last_position_attention_is_the_last_row_of_the_maps(trained):
    model = trained[1].result
    looked = internals.last_position_attention(model, "白日依山尽")
    maps = internals.attention_maps(model, "白日依山尽")
    assert looked.tokens == maps.tokens and looked.attn_weights.shape == (2, 4, 5)
    torch.testing.assert_close(looked.attn_weights, maps.attn_weights[:, :, -1, :])
    torch.testing.assert_close(looked.head_mean.sum(-1), torch.ones(2))


def test_next_char_figure_has_two_sliders_over_the_precomputed_rows(trained):
    from engine.figures import lab as LF

    view = internals.next_char_probs(trained[1].result, "白日", temperature=0.8, top_k=5, seed=1, n=6)
    text = LF.NextCharLabels(title="T", x="X", y="Y", temperature="t: ", top_k="k: ", all="ALL", sampled="S {char}")
    fig = LF.next_char_figure(view.candidates, view.probs, view.sampled, view.temperatures, view.by_temperature,
                              view.top_ks, view.by_top_k, text)
    t_slider, k_slider = fig.layout.sliders
    assert [s.label for s in t_slider.steps] == [f"{t:g}" for t in view.temperatures]
    assert [s.label for s in k_slider.steps][-1] == "ALL"
    assert t_slider.steps[t_slider.active].args[0]["x"][0] == pytest.approx(view.probs.tolist(), abs=1e-5)
    assert k_slider.steps[k_slider.active].args[0]["x"][0] == pytest.approx(view.probs.tolist(), abs=1e-5)
    assert list(fig.data[0].x) == pytest.approx(view.probs.tolist(), abs=1e-5)
    assert list(fig.layout.yaxis.ticktext) == list(view.candidates)
    colors = list(fig.data[0].marker.color)
    assert colors[view.sampled] == LF.SAMPLED_COLOR and colors.count(LF.SAMPLED_COLOR) == 1
    key = fig.layout.annotations[0]
    assert key.text == f"■ S {view.candidates[view.sampled]}" and key.font.color == LF.SAMPLED_COLOR
    assert key.y == len(view.candidates) and list(fig.layout.yaxis.range) == [len(view.candidates) + 0.5, -0.5]
    # the bars' percentages are written from customdata, which each slider step replaces with its own rows
    percents = [row[1] for row in fig.data[0].customdata]
    assert percents == pytest.approx((100 * view.probs).tolist(), abs=1e-3)
    assert fig.data[0].texttemplate == "%{customdata[1]:.1f}%" and list(fig.layout.xaxis.ticktext)[-1] == "100%"
    step = t_slider.steps[0].args[0]
    assert [row[1] for row in step["customdata"][0]] == pytest.approx([100 * v for v in step["x"][0]], abs=1e-3)
    french = LF.next_char_figure(view.candidates, view.probs, view.sampled, view.temperatures, view.by_temperature,
                                 view.top_ks, view.by_top_k, dataclasses.replace(text, percent_suffix="\u00a0%"))
    assert french.data[0].texttemplate == "%{customdata[1]:.1f}\u00a0%"
    assert list(french.layout.xaxis.ticktext) == ["0\u00a0%", "25\u00a0%", "50\u00a0%", "75\u00a0%", "100\u00a0%"]
    with pytest.raises(ValueError):
        LF.next_char_figure(view.candidates[:-1], view.probs, 0, view.temperatures, view.by_temperature,
                            view.top_ks, view.by_top_k, text)


def test_last_attention_and_kv_cache_figures():
    from engine.figures import lab as LF
    from engine.sampling import kv_cache_steps

    w = torch.softmax(torch.randn(3, 2, 5, generator=torch.Generator().manual_seed(0)), dim=-1)  # (n_layer, nh, T)
    text = LF.LastAttentionLabels(title="", layer="L", key="K", mean="mean", head="h{head}", layer_label="l{layer}")
    fig = LF.last_attention_figure(w, tuple("白日依山尽"), text)
    assert len(fig.data) == 3 and [s.label for s in fig.layout.sliders[0].steps] == ["mean", "h0", "h1"]
    z = torch.tensor(fig.data[0].z, dtype=torch.float32)
    torch.testing.assert_close(z, w.mean(1), atol=5e-5, rtol=0)  # the figure sends 4 decimals
    with pytest.raises(ValueError):
        LF.last_attention_figure(w, tuple("白日"), text)
    steps = kv_cache_steps(prompt_len=3, max_new_tokens=20, block_size=16)
    kv = LF.kv_cache_figure(steps, LF.KvCacheLabels(title="", reused="R", computed="C", step="s", keys="k",
                                                    slide="slide", separators=",."))
    reused, computed = kv.data
    assert list(reused.y) == [s.reused for s in steps] and list(computed.y) == [s.computed for s in steps]
    assert [r + c for r, c in zip(reused.y, computed.y, strict=True)][-1] == 16  # the full window once it slid
    assert kv.layout.shapes[0].x0 == next(s.step for s in steps if s.window_start > 0) - 0.5
    labels = LF.LossLabels(title="", batch="b", train="t", val="v", step="s", loss="l")
    chart = LF.loss_chart([(0, 5.0, 5.1)], [5.0], 10, labels, baselines={"uni": 6.0, "bi": 5.5})
    assert kv.layout.separators == ",." and chart.layout.separators == LF.DEFAULT_SEPARATORS
    assert sorted(s.y0 for s in chart.layout.shapes) == [5.5, 6.0]
    assert {a.text for a in chart.layout.annotations} == {"uni", "bi"}


def test_shipped_dropout_measurement_is_the_course_presets_training_and_its_choice():
    loss = RS.dropout_loss()
    assert loss is not None, "assets/lab_dropout.json is missing: see engine.lab.experiments (--experiments dropout)"
    data = json.loads(RS.DROPOUT_RESULTS_FILE.read_text(encoding="utf-8"))
    assert data["complete"] and data["corpus"]["name"] == "tang" and len(loss.seeds) >= 3
    course = PRESETS["course"].training
    assert (loss.steps, loss.batch_size, loss.learning_rate) == (course.steps, course.batch_size, course.learning_rate)
    shipped = {r["key"]: r for r in data["experiments"]["dropout"]["runs"]}
    for run in loss.runs:
        r = shipped[run.key]
        assert (run.val_loss_mean, run.val_loss_std, run.tokens_per_s) == (
            r["fixed_val_loss_mean"], r["fixed_val_loss_std"], r["step_tokens_per_s_mean"])
        assert r["steps_done"] == course.steps and r["n_seeds"] == len(loss.seeds)
    # the preset follows the measurement: dropout only where it lowers the loss beyond the seed noise
    rates = (preset("course").attn_dropout_rate, preset("course").resid_dropout_rate)
    if loss.dropout_helps:
        assert any(loss.lowers(r.key) for r in loss.runs if (r.attn_dropout, r.resid_dropout) == rates)
    else:
        assert rates == (0.0, 0.0)


def _dropout_file(tmp_path, change) -> Path:
    data = json.loads(RS.DROPOUT_RESULTS_FILE.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "dropout.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _set(keys, value):
    def change(data):
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return change


@pytest.mark.parametrize("change", [
    _set(("format",), "lab-experiments/0"),
    _set(("experiments",), {}),
    lambda d: d["experiments"]["dropout"]["runs"].pop(1),
    _set(("experiments", "dropout", "runs", 0, "config", "resid_dropout"), 0.2),
    _set(("experiments", "dropout", "runs", 2, "n_seeds"), 1),
    _set(("experiments", "dropout", "runs", 0, "fixed_val_loss_mean"), "low"),
    _set(("experiments", "dropout", "runs", 0, "fixed_val_loss_std"), float("nan")),
    _set(("experiments", "dropout", "runs", 1, "step_tokens_per_s_mean"), None),
    _set(("experiments", "dropout", "comparisons"), []),
    _set(("experiments", "dropout", "comparisons", 0, "exceeds_noise"), None),
    _set(("machine",), "a laptop"),
], ids=["format", "no experiment", "run missing", "other rate", "one seed", "text loss", "nan spread",
        "no speed", "no comparisons", "no verdict", "machine"])
def test_dropout_loss_refuses_a_malformed_file(tmp_path, change):
    with pytest.raises(ValueError):
        RS.dropout_loss(_dropout_file(tmp_path, change))


def test_dropout_loss_reads_the_noise_rules_verdict(tmp_path):
    assert RS.dropout_loss(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError):
        RS.dropout_loss(tmp_path / "bad.json")

    def lower_both(data):
        both = next(c for c in data["experiments"]["dropout"]["comparisons"] if c["b"] == "dropout_both"
                    and c["a"] == "dropout_0")
        both.update(delta_mean=-0.5, exceeds_noise=True)

    loss = RS.dropout_loss(_dropout_file(tmp_path, lower_both))
    assert loss.lowers("dropout_both") and loss.dropout_helps

    def raise_both(data):
        for c in data["experiments"]["dropout"]["comparisons"]:
            if c["a"] == "dropout_0":
                c.update(delta_mean=0.5, exceeds_noise=True)  # worse beyond the noise: not a reason to keep dropout

    assert not RS.dropout_loss(_dropout_file(tmp_path, raise_both)).dropout_helps


def test_the_shipped_results_are_read_into_dataclasses_with_the_files_values():
    data = json.loads(RS.DROPOUT_RESULTS_FILE.read_text(encoding="utf-8"))
    results = RS.read_results(RS.DROPOUT_RESULTS_FILE)
    assert results is not None and data["format"] in RS.READABLE_FORMATS
    assert (results.command, results.steps, results.batch_size, results.block_size, results.corpus) == (
        data["command"], data["settings"]["steps"], data["settings"]["batch_size"],
        data["settings"]["base_model"]["block_size"], data["corpus"]["name"])
    assert [e.name for e in results.experiments] == list(data["experiments"])
    for exp in results.experiments:
        raw = data["experiments"][exp.name]
        assert exp.seeds == tuple(raw["seeds"]) and len(exp.comparisons) == len(raw["comparisons"])
        for run, r in zip(exp.runs, raw["runs"], strict=True):
            assert (run.key, run.params, run.n_seeds) == (r["key"], r["params"], r["n_seeds"])
            assert (run.train_loss, run.val_loss, run.val_std, run.last_position_loss) == (
                r["final_train_loss_mean"], r["fixed_val_loss_mean"], r["fixed_val_loss_std"],
                r["last_position_val_loss_mean"])
            assert run.history.step == tuple(r["history"]["step"]) and run.loss_by_position[-1] == r[
                "last_position_val_loss"]
            assert run.perplexity == pytest.approx(math.exp(r["fixed_val_loss_mean"]))
    assert results.seeds == tuple(sorted({s for e in data["experiments"].values() for s in e["seeds"]}))


def _format_2(data: dict) -> dict:
    """A format-3 file as format 2 wrote it: one seed, no statistics, no fixed windows, no comparisons."""
    old = {**data, "format": "lab-experiments/2", "experiments": {}}
    for name, exp in data["experiments"].items():
        runs = [{k: v for k, v in r.items() if not k.endswith(("_mean", "_std")) and k not in (
            "seeds", "n_seeds", "seed_results", "fixed_val_loss", "step_tokens_per_s")} for r in exp["runs"]]
        old["experiments"][name] = {k: v for k, v in exp.items() if k not in ("seeds", "comparisons", "seed")}
        old["experiments"][name]["runs"] = runs
    return old


def test_a_format_2_file_and_a_run_experiment_dict_read_as_one_seed(tmp_path):
    data = json.loads(RS.DROPOUT_RESULTS_FILE.read_text(encoding="utf-8"))
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_format_2(data)), encoding="utf-8")
    old = RS.read_results(path)
    for exp in old.experiments:
        raw = data["experiments"][exp.name]["runs"]
        assert not exp.seeds and not exp.comparisons and not exp.several_seeds
        assert [r.val_loss for r in exp.runs] == [r["final_val_loss"] for r in raw]  # no fixed windows in /2
        assert [r.train_loss for r in exp.runs] == [r["final_train_loss"] for r in raw]
        assert all(r.val_std is None and r.step_tokens_per_s is None for r in exp.runs)
    live = {"name": "dropout", "steps": 10, "batch_size": 8, "corpus": "tang300", "stopped": False,
            "runs": [{k: v for k, v in r.items() if not k.endswith(("_mean", "_std")) and k not in (
                "seeds", "n_seeds", "seed_results")} for r in data["experiments"]["dropout"]["runs"]]}
    rerun = RS.experiment_result(live)
    assert [r.val_loss for r in rerun.runs] == [r["fixed_val_loss"] for r in live["runs"]]
    assert rerun.run("dropout_both").key == "dropout_both" and rerun.same_params == (
        len({r["params"] for r in live["runs"]}) == 1)


@pytest.mark.parametrize("change", [
    _set(("experiments", "dropout", "runs"), []),
    _set(("experiments", "dropout", "runs", 0, "fixed_val_loss_mean"), -1.0),
    _set(("experiments", "dropout", "runs", 0, "params"), "many"),
    _set(("experiments", "dropout", "runs", 0, "history", "step"), [0]),
    _set(("experiments", "dropout", "runs", 0, "loss_by_position"), list(range(RS.MAX_POINTS + 1))),
    _set(("experiments", "dropout", "comparisons", 0, "exceeds_noise"), "yes"),
    _set(("settings", "base_model"), None),
    _set(("experiments", "dropout", "runs", 0, "config", "n_head"), 0),
], ids=["no runs", "negative loss", "text params", "short curve", "too long", "verdict", "no model", "bad config"])
def test_read_results_refuses_a_malformed_file(tmp_path, change):
    data = json.loads(RS.DROPOUT_RESULTS_FILE.read_text(encoding="utf-8"))
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError):
        RS.read_results(path)


def test_dropout_price_reads_the_benchmark_and_refuses_a_broken_one(tmp_path):
    data = json.loads(RS.BENCH_TRAIN_FILE.read_text(encoding="utf-8"))
    price = RS.dropout_price()
    rows = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["rows"]}
    assert (price.both_on, price.attn_off) == (rows[(0.1, 0.1)]["tokens_per_s"], rows[(0.0, 0.1)]["tokens_per_s"])
    block = data["config"]["block_size"]
    assert price.speedup_at(block) == pytest.approx(price.attn_off / price.both_on)
    assert price.speedup_at(7) is None and [t for t, _x in price.speedup] == sorted(t for t, _x in price.speedup)
    data["rows"] = data["rows"][:1]
    (tmp_path / "bench.json").write_text(json.dumps(data), encoding="utf-8")
    assert RS.dropout_price(tmp_path / "bench.json") is None and RS.dropout_price(tmp_path / "none.json") is None


def test_experiment_figures_take_the_runs_results_and_their_labels():
    from engine.figures import lab as LF

    results = RS.read_results(RS.DROPOUT_RESULTS_FILE)
    exp = results.experiments[0]
    names = tuple(r.key for r in exp.runs)
    labels = LF.CurvesLabels(title="T", val="V", train="R", step="s", loss="l", separators=",\u202f")
    fig = LF.experiment_curves([r.history for r in exp.runs], names, labels, baselines={"uni": 6.0})
    assert [t.name for t in fig.data] == [f"{n} · {s}" for n in names for s in ("V", "R")]
    assert list(fig.data[0].y) == list(exp.runs[0].history.val_loss) and fig.layout.separators == ",\u202f"
    with pytest.raises(ValueError):
        LF.experiment_curves([r.history for r in exp.runs], names[:-1], labels)
    by_position = LF.loss_by_position_figure([r.loss_by_position for r in exp.runs], names,
                                             LF.ByPositionLabels(title="", position="p", loss="l"))
    assert len(by_position.data) == len(exp.runs) and len(by_position.data[0].y) == len(exp.runs[0].loss_by_position)


def test_seed_curves_average_the_shared_steps_and_label_the_log_axis_baseline_at_its_line():
    from engine.figures import lab as LF

    a = RS.History((0, 100, 200), (9.0, 6.0, 5.0), (8.0, 6.0, 4.0))
    b = RS.History((0, 100, 200, 300), (9.0, 5.0, 4.0, 3.0), (8.2, 5.0, 3.0, 2.0))  # one evaluation more
    assert LF.mean_val_curve([a, b]) == ((0, 100, 200), pytest.approx((8.1, 5.5, 3.5)))
    assert LF.mean_val_curve([]) == ((), ())
    labels = LF.SeedCurvesLabels(title="T", step="S", loss="L", colon="\u202f: ")
    fig = LF.seed_curves_figure([[a, b], [a]], ["one", "two"], [["s1", "s2"], ["s1"]], labels,
                                baselines={"bigram": 0.05}, log_y=True)
    assert [t.name for t in fig.data] == ["one · s1", "one · s2", "two · s1", "one", "two"]  # seeds behind the means
    assert list(fig.data[3].y) == pytest.approx([8.1, 5.5, 3.5]) and list(fig.data[4].y) == pytest.approx([8, 6, 4])
    assert all(t.showlegend is False and t.legendgroup == t.name.split(" · ")[0] for t in fig.data[:3])
    assert fig.layout.yaxis.type == "log" and "S %{x}\u202f: " in fig.data[3].hovertemplate
    assert [s.y0 for s in fig.layout.shapes] == [0.05]
    assert [a.y for a in fig.layout.annotations if a.text == "bigram"] == pytest.approx([math.log10(0.05)])
    linear = LF.seed_curves_figure([[a]], ["one"], [["s1"]], labels, baselines={"bigram": 5.0})
    assert linear.layout.yaxis.type is None and [a.y for a in linear.layout.annotations if a.text == "bigram"] == [5.0]
    with pytest.raises(ValueError):
        LF.seed_curves_figure([[a, b]], ["one"], [["s1"]], labels)
    with pytest.raises(ValueError):
        LF.seed_curves_figure([[a]], ["one", "two"], [["s1"]], labels)
