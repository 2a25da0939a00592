"""AppTest: page 8 (views/lab.py) trains, stops, generates, draws attention, handles bad uploads, keeps readers apart."""

import time

import numpy as np
import pytest

from engine import budget
from engine.baselines import corpus_baselines
from engine.checkpoint import SHIPPED_MODEL, checkpoint_to_bytes
from engine.corpus import DEFAULT_CORPUS, load_corpus
from engine.lab import experiments as X
from engine.lab import models
from engine.lab import settings as rules
from tests.plotly_json import captions, figures, open_page, texts

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "views/lab.py"
#: The "tiny" preset's sizes on the 313 Tang poems (a small corpus: tests that train pick it), and a short run.
TINY = {"lab_corpus": "tang300", "lab_n_layer": 2, "lab_n_embd": 32, "lab_n_head": 4, "lab_block": 16, "lab_dropout": 0.0, "lab_steps": 24,
        "lab_batch": 8, "lab_lr": 3e-3}
DEADLINE_S = 90


def progress_text(at):
    return " ".join(p.proto.text for p in at.get("progress"))


def set_controls(at, values):
    for key, value in values.items():
        widget = next((w for kind in ("radio", "slider", "selectbox", "number_input", "select_slider", "checkbox")
                       for w in getattr(at, kind) if w.key == key), None)
        assert widget is not None, key
        widget.set_value(value)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def train_until(at, word, deadline_s=DEADLINE_S):
    """Reruns the page (as the polling fragment would) until the progress bar's text holds ``word``."""
    deadline = time.monotonic() + deadline_s
    while word not in progress_text(at):
        assert time.monotonic() < deadline, f"no '{word}' after {deadline_s} s: {progress_text(at)!r}"
        time.sleep(0.2)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def model_caption(at):
    return next(c for c in captions(at) if c.startswith(("Your model", "Shipped model")))


@pytest.fixture(scope="module")
def trained():
    """One session that trained the tiny model to the end (other sessions reuse it from the registry)."""
    at = set_controls(open_page(PAGE), TINY)
    at.button(key="lab_train").click().run()
    return train_until(at.run(), "done")


@pytest.fixture(scope="module")
def default_corpus():
    return load_corpus(DEFAULT_CORPUS)


def test_first_visit_shows_the_corpus_and_the_shipped_model_or_says_why_not(default_corpus):
    at = open_page(PAGE)
    assert not at.exception
    assert at.radio(key="lab_corpus").value == DEFAULT_CORPUS
    metrics = {m.label: m.value for m in at.metric}
    stats = default_corpus.vocab_stats
    assert metrics["vocabulary (tokens)"] == f"{default_corpus.vocab_size:,}"
    assert metrics["characters"] == f"{len(default_corpus.text):,}"
    assert metrics["distinct characters"] == f"{stats.distinct_chars:,}"
    assert metrics["validation coverage"] == f"{stats.val_coverage:.2%}"
    assert metrics["unknown tokens (val)"] == f"{stats.val_unk_rate:.2%}"
    base = corpus_baselines(default_corpus)
    counting = next(t for t in texts(at) if t.startswith("**What counting alone scores"))
    assert f"{base.unigram.val_nats:.3f} nats" in counting and f"{base.bigram.val_nats:.3f} nats" in counting
    assert any("Training runs on **CPU" in c or "Training runs on **CUDA" in c for c in captions(at))
    if SHIPPED_MODEL.exists():
        assert at.radio(key="lab_use").value == "shipped"
        assert model_caption(at).startswith("Shipped model (shipped)")
        poem = next(t for t in texts(at) if t.startswith("**白日**"))
        assert len(poem) > len("**白日**") + 20  # generation works without training
        assert any(f["layout"].get("sliders") for f in figures(at))
        # the shipped model beside the counting baselines of its corpus, its diagram, the next-character view
        assert any(c.startswith("val ") and "bigram" in c for c in captions(at))
        assert at.get("graphviz_chart") and "parameters" in at.get("graphviz_chart")[0].proto.spec
        bars = next(f for f in figures(at) if f["layout"].get("title", {}).get("text") ==
                    "What the model predicts after your prompt")
        assert len(bars["layout"]["sliders"]) == 2
        assert any(f["layout"].get("title", {}).get("text") == "Where attention looked from the last character"
                   for f in figures(at))
        assert any("keys/values reused from the cache" == t["name"] for f in figures(at) for t in f["data"])
    else:
        assert any("No model yet" in i.value for i in at.info)


def test_short_training_runs_to_the_end(trained):
    at = trained
    assert "done: 24 steps" in progress_text(at)
    assert at.radio(key="lab_use").value == "own"
    caption = model_caption(at)
    assert caption.startswith("Your model (trained)") and "24 steps on tang300" in caption
    assert "(stopped)" not in caption
    live = next(f for f in figures(at) if f["layout"]["title"]["text"] == "Loss while training")
    names = [t["name"] for t in live["data"]]
    assert names == ["batch loss", "train loss", "val loss"]
    small = load_corpus("tang300")
    base = corpus_baselines(small)
    lines = sorted(shape["y0"] for shape in live["layout"]["shapes"])
    assert lines == pytest.approx(sorted([base.unigram.val_nats, base.bigram.val_nats]))
    assert any(c.startswith("val ") and f"{base.bigram.val_nats:.3f} nats" in c for c in captions(at))
    assert len(live["data"][0]["y"]) == 24 and list(live["data"][2]["x"])[-1] == 24
    val = np.asarray(live["data"][2]["y"], dtype=float)
    assert np.all(np.isfinite(val)) and val[-1] < val[0]
    assert any(t.startswith("last evaluation (step 24)") for t in texts(at))
    assert not at.button(key="lab_train").disabled and not [b for b in at.button if b.key == "lab_stop"]


def generate(at, **values):
    """Sets the generation form's controls and presses Generate."""
    for key, value in values.items():
        widget = next(w for kind in ("slider", "number_input", "text_input") for w in getattr(at, kind) if w.key == key)
        widget.set_value(value)
    at.button(key="lab_generate").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_generate_and_heatmaps_use_the_trained_model(trained):
    at = trained
    generate(at, lab_temp=0.0)
    poem = next(t for t in texts(at) if t.startswith("**白日**"))
    at.run()
    assert next(t for t in texts(at) if t.startswith("**白日**")) == poem  # greedy: the same text every time
    assert any(c.startswith("greedy · top-k 20 · seed 0 · 64 new characters") for c in captions(at))
    attention = next(f for f in figures(at)
                     if f["layout"].get("title", {}).get("text", "").startswith("attn_weights"))
    steps = attention["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [f"layer {l} · head {h}" for l in range(2) for h in range(4)]
    for trace in attention["data"]:
        z = np.asarray(trace["z"], dtype=float)
        assert z.shape == (12, 12)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)
        assert np.all(np.triu(z, 1) == 0)
    assert list(attention["layout"]["yaxis"]["ticktext"])[:2] == ["0:白", "1:日"]
    positions = next(f for f in figures(at) if any("pos_emb after training" in a["text"]
                                                   for a in f["layout"].get("annotations", [])))
    assert np.asarray(positions["data"][0]["z"]).shape == (16, 32)
    assert any(t.startswith("mean cosine similarity of neighbouring positions") for t in texts(at))
    # the next character: greedy, so the highlighted bar is the most likely one and the first character written
    bars = next(f for f in figures(at) if f["layout"].get("title", {}).get("text") ==
                "What the model predicts after your prompt")
    y = np.asarray(bars["data"][0]["x"], dtype=float)  # horizontal bars: probabilities on x
    first = models.generate(at.session_state["lab_own"], "白日", 1, temperature=0).new
    label = repr(first)[1:-1] if first.isspace() else first
    assert y[0] == 1.0 and y[1:].sum() == 0.0 and bars["layout"]["annotations"][0]["text"] == "sampled: " + label
    looked = next(f for f in figures(at) if f["layout"].get("title", {}).get("text") ==
                  "Where attention looked from the last character")
    mean = np.asarray(looked["data"][0]["z"], dtype=float)
    assert mean.shape == (2, 2) and np.allclose(mean.sum(axis=1), 1.0, atol=1e-3)  # 2 layers over "白日"


def test_prompt_notes_for_unknown_and_long_prompts(trained):
    at = trained
    generate(at, lab_prompt="白日XYZ")
    assert any("left out of the prompt: X Y Z" in w.value for w in at.warning)
    generate(at, lab_prompt="ABC")
    assert any("starts from a newline" in i.value for i in at.info)
    generate(at, lab_prompt="白日依山尽，黄河入海流。" * 3)
    assert any("reads only the last 16 (its block_size), so the first 20 do not influence it" in i.value for i in at.info)
    generate(at, lab_prompt="", lab_temp=2.0, lab_top_k=0, lab_length=300, lab_gen_seed=99_999)
    assert any(c.startswith("temperature 2 · all characters · seed 99999 · 300 new characters") for c in captions(at))
    assert not any(t.startswith("****") for t in texts(at))  # no empty bold prompt before the text
    at.text_input(key="lab_line").set_value("QQQ").run()
    assert any("nothing to draw" in w.value for w in at.warning)
    assert not at.exception


def test_stop_mid_training_keeps_a_model():
    at = set_controls(open_page(PAGE), {**TINY, "lab_steps": 5000, "lab_seed": 7})
    at.button(key="lab_train").click().run()
    deadline = time.monotonic() + DEADLINE_S
    while not [b for b in at.button if b.key == "lab_stop"] or "step 0 " in progress_text(at):
        assert time.monotonic() < deadline, progress_text(at)
        time.sleep(0.2)
        at.run()
    assert at.button(key="lab_train").disabled  # one training per reader at a time
    at.button(key="lab_stop").click().run()
    train_until(at, "stopped after")
    caption = model_caption(at)
    assert caption.startswith("Your model (trained)") and "(stopped)" in caption
    assert any(t.startswith("**白日**") for t in texts(at))
    generate(at, lab_length=5)
    assert any(c.endswith("· 5 new characters") for c in captions(at))  # generation works with the stopped model


def test_two_readers_never_see_each_others_models(trained):
    other = open_page(PAGE)
    assert "your model" not in [o for r in other.radio if r.key == "lab_use" for o in r.options]
    assert "lab_own" not in other.session_state
    assert not any(c.startswith("Your model") for c in captions(other))
    # the same settings on the same text: the model comes from the registry, trained by no one else's choices
    set_controls(other, TINY)
    other.button(key="lab_train").click().run()
    assert any("reusing it" in s.value for s in other.success)
    assert model_caption(other) == model_caption(trained)
    # a different seed is a different model, and the first reader keeps hers
    set_controls(other, {"lab_seed": 99})
    other.button(key="lab_train").click().run()
    train_until(other, "done")
    first_id = trained.session_state["lab_own"].model_id
    assert other.session_state["lab_own"].model_id != first_id
    trained.run()
    assert trained.session_state["lab_own"].model_id == first_id


def upload_page():
    at = open_page(PAGE)
    at.radio(key="lab_corpus").set_value("upload").run()
    assert not at.exception
    assert at.button(key="lab_train").disabled and any("no usable training text" in e.value for e in at.error)
    return at


@pytest.mark.parametrize("data, message", [
    (b"", "the file is empty"),
    (b"\x00\x01\x02binary", "looks binary"),
    ("白日依山尽".encode("gbk"), "not UTF-8"),
    (b"a" * (budget.MAX_TEXT_BYTES + 1), "over this server's limit of 2 MB"),
    ("".join(chr(0x4E00 + i) for i in range(7000)).encode("utf-8"), "7,000 distinct characters"),
])
def test_bad_uploads_give_a_clear_message(data, message):
    at = upload_page()
    at.file_uploader(key="lab_upload").set_value(("poems.txt", data, "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(message in e.value and e.value.startswith("This file cannot be used") for e in at.error)
    assert at.button(key="lab_train").disabled
    assert any(t.startswith("### 4. Generate") for t in texts(at))  # the rest of the page still runs


def test_good_upload_becomes_the_corpus():
    text = "\n\n".join(["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"] * 15)
    at = upload_page()
    at.file_uploader(key="lab_upload").set_value(("moon.txt", text.encode("utf-8"), "text/plain")).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["records"] == "30" and metrics["vocabulary (tokens)"] == str(len(set(text)))
    assert metrics["distinct characters"] == str(len(set(text))) and metrics["validation coverage"] == "100.00%"
    # 3 validation records of 12 characters (+ 2 blank-line separators): block_size 64 is too long
    assert any("block_size 64 is longer than this text allows" in e.value and "at most 39" in e.value for e in at.error)
    assert at.button(key="lab_train").disabled
    at.selectbox(key="lab_block").set_value(32).run()
    assert not at.error and not at.button(key="lab_train").disabled


def test_checkpoint_upload(trained):
    at = open_page(PAGE)
    at.file_uploader(key="lab_ckpt_upload").set_value(("broken.safetensors", b"not a checkpoint", "application/octet-stream")).run()
    assert not at.exception
    assert any(e.value.startswith("This checkpoint cannot be loaded: the file is damaged") for e in at.error)
    own = trained.session_state["lab_own"]
    data = checkpoint_to_bytes(own.model, own.tokenizer, own.summary)
    at.file_uploader(key="lab_ckpt_upload").set_value(("mine.safetensors", data, "application/octet-stream")).run()
    assert not at.exception
    assert at.radio(key="lab_use").value == "own"
    assert model_caption(at).startswith("Your model (uploaded)")
    assert at.session_state["lab_own"].model_id == own.model_id
    assert [b for b in at.get("download_button") if b.proto.label.startswith("Download this model")]


def test_presets_and_head_choices():
    at = open_page(PAGE)
    at.button(key="lab_preset_course").click().run()
    assert (at.selectbox(key="lab_n_embd").value, at.selectbox(key="lab_n_head").value,
            at.slider(key="lab_n_layer").value, at.selectbox(key="lab_block").value) == (128, 4, 4, 128)
    course = rules.PRESET_TRAINING["course"]
    assert at.number_input(key="lab_steps").value == course["steps"]
    assert at.selectbox(key="lab_batch").value == course["batch_size"]
    assert not at.button(key="lab_train").disabled  # it fits the caps
    at.button(key="lab_preset_quick").click().run()
    assert (at.selectbox(key="lab_n_embd").value, at.number_input(key="lab_steps").value) == (64, 400)
    at.selectbox(key="lab_n_embd").set_value(48).run()
    assert at.selectbox(key="lab_n_head").options == [str(h) for h in (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)]
    at.selectbox(key="lab_pos").set_value("rope").run()
    assert at.selectbox(key="lab_n_head").options == [str(h) for h in (1, 2, 3, 4, 6, 8, 12, 24)]
    at.selectbox(key="lab_n_head").set_value(24).run()
    at.selectbox(key="lab_n_embd").set_value(16).run()
    assert at.selectbox(key="lab_n_head").value == 4  # 24 does not divide 16: back to the default
    assert not at.exception


def test_experiment_results_are_shown_at_once():
    at = open_page(PAGE)
    if X.load_results() is None:
        assert any("No precomputed results" in i.value for i in at.info)
        return
    curves = [f for f in figures(at) if f["layout"].get("title", {}).get("text") == "val loss (solid) and train loss (dotted)"]
    assert [len(f["data"]) for f in curves] == [2 * len(e.runs) for e in X.EXPERIMENTS.values()]
    tables = [d.value for d in at.dataframe if "val, last pos." in d.value.columns]
    assert len(tables) == 3
    assert list(tables[0]["run"]) == ["1 head of 128", "4 heads of 32 (course)", "8 heads of 16",
                                      "unigram (counting)", "bigram (counting)"]
    results = X.load_results()
    base = corpus_baselines(load_corpus(results["corpus"]["name"]))
    assert list(tables[0]["val"])[-2:] == pytest.approx([base.unigram.val_nats, base.bigram.val_nats])
    for table, name in zip(tables, X.EXPERIMENTS, strict=True):
        runs = results["experiments"][name]["runs"]
        assert list(table["val"])[:len(runs)] == pytest.approx([r.get("fixed_val_loss_mean", r["final_val_loss"])
                                                                 for r in runs])
        assert list(table["val perplexity"]) == pytest.approx(np.exp(table["val"].to_numpy()).tolist())
    if any(c["exceeds_noise"] is not None for e in results["experiments"].values() for c in e.get("comparisons", [])):
        assert any("seed noise" in t for t in texts(at))
    assert any("same parameter count for every head count" in t for t in texts(at))
    assert any(c.startswith("Shipped results: `python -m engine.lab") for c in captions(at))


def test_live_rerun_of_an_experiment_runs_in_the_background_and_is_cached():
    at = open_page(PAGE)
    at.radio(key="lab_corpus").set_value("tang300").run()
    at.number_input(key="lab_rerun_steps").set_value(10).run()
    at.button(key="lab_rerun_experiment_causal").click().run()
    assert at.button(key="lab_rerun_experiment_causal").disabled  # while it runs
    deadline = time.monotonic() + DEADLINE_S
    while "causal" not in (at.session_state["lab_exp_live"] if "lab_exp_live" in at.session_state else {}):
        assert time.monotonic() < deadline, progress_text(at)
        time.sleep(0.5)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    assert "Your live rerun: 10 steps of batch 8 on tang300." in captions(at)
    lines = [t for t in texts(at) if "at the last position" in t]
    assert [t.split(":")[0] for t in lines] == ["causal mask (course)", "no causal mask", "no causal mask, RoPE"]
    other = open_page(PAGE)
    other.radio(key="lab_corpus").set_value("tang300").run()
    other.number_input(key="lab_rerun_steps").set_value(10).run()
    other.button(key="lab_rerun_experiment_causal").click().run()
    assert "Your live rerun: 10 steps of batch 8 on tang300." in captions(other)  # from the cache, at once


def test_largest_settings_are_refused_with_the_reason_and_the_estimate():
    at = set_controls(open_page(PAGE), {"lab_n_layer": 8, "lab_n_embd": 256, "lab_n_head": 8, "lab_block": 256,
                                        "lab_batch": 64, "lab_steps": 5000})
    errors = [e.value for e in at.error]
    assert any("would need about" in e and "at most 240 MB" in e for e in errors), errors
    assert any("would take about" in e for e in errors), errors
    assert any("MB of memory (limit 240 MB)" in c for c in captions(at))
    assert at.button(key="lab_train").disabled
    set_controls(at, {"lab_n_layer": 2, "lab_n_embd": 64, "lab_n_head": 4, "lab_block": 64, "lab_batch": 16,
                      "lab_steps": 400})
    assert not at.error and not at.button(key="lab_train").disabled  # the quick preset's size fits


def test_a_prompt_from_a_link_is_shown_as_text_not_markdown(trained):
    at = trained
    generate(at, lab_prompt="白日![x](http://evil.example/a.png)[link](http://evil.example)", lab_length=3)
    warning = next(w.value for w in at.warning if "left out of the prompt" in w.value)
    assert "[" in warning and "(" in warning  # the dropped characters are listed ...
    assert all(warning[i - 1] == "\\" for i, c in enumerate(warning) if c in "[]()!")  # ... each escaped
