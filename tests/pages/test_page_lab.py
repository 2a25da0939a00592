"""AppTest: page 8 (views/lab.py) trains, stops, generates, draws attention, handles bad uploads, keeps readers apart.

The page's words are compared through the message catalog (:func:`msg`, :func:`pattern`): each
assertion names the message id the page passes to ``_()`` and the values it fills in.
"""

import dataclasses
import json
import math
import re
import string
import time

import numpy as np
import pytest
import torch
from babel.lists import format_list
from hypothesis import example, given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine import budget
from engine.baselines import corpus_baselines
from engine.checkpoint import SHIPPED_MODEL, checkpoint_to_bytes
from engine.corpus import DEFAULT_CORPUS, TANG_MIN_COUNT, TANG_RECORDS, VAL_EVERY, corpus_from_bytes, load_corpus
from engine.device import describe_device, pick_device
from engine.gpt import GPT
from engine.lab import experiments as lab_experiments
from engine.lab import generation, internals, loops, models, poem_forms
from engine.lab import results as lab_results
from engine.lab import settings as rules
from engine.lab.experiments import rerun as lab_rerun
from engine.lab.experiments import stats as STATS
from engine.presets import PRESETS, preset
from tests.plotly_json import ROOT, captions, figures, open_page, texts
from ui import numbers, page
from ui.i18n import LANGUAGES, TRANSLATED, translations
from ui.lab import experiments as E
from ui.lab import shipped as shipped_files
from ui.lab.words import fill, plain
from ui.numbers import integer, num, percent, plotly_separators

pytestmark = pytest.mark.usefixtures("one_thread")

PAGE = "views/lab.py"
#: The "tiny" preset's sizes on the 313 Tang poems (a small corpus: tests that train pick it), and a short run.
TINY = {"lab_corpus": "tang300", "lab_n_layer": 2, "lab_n_embd": 32, "lab_n_head": 4, "lab_block": 16,
        "lab_dropout": 0.0, "lab_steps": 24, "lab_batch": 8, "lab_lr": 3e-3}
DEADLINE_S = 90
MB = budget.MB

# The message ids of views/lab.py and ui/lab/ that the tests read back.
SHIPPED_CAPTION = "The model shipped with the app"
YOUR_MODEL = "Your model ({origin})"
DONE = "done: {step} steps in {seconds:.1f} s"
STOPPED = "stopped after {step} of {steps} steps ({seconds:.1f} s)"
RUNNING = "step {step} / {steps} · {rate:,.0f} tokens/s · {eta}"
NATS = "{nats:.3f} nats (perplexity {ppl:,.1f})"
VERSUS = "val {val} · unigram {uni} · bigram {bi}: {verdict}."
COUNTING = ("**What counting alone scores on this split** (a model must go below these to have learned "
            "anything): unigram (character frequency) {uni}; bigram (the previous character) {bi}.")
DEVICE = ("Training runs on **{device}**, the first this server has of CUDA, Apple MPS and the CPU, one training at a "
          "time.")
CONFIG = "n_layer {n_layer}, n_head {n_head}, n_embd {n_embd}, block_size {block}, {pos}"
STEPS_ON = "{steps} steps on {corpus}"
STOPPED_STEPS_ON = "{steps} steps (stopped) on {corpus}"
GENERATED = "{mode} · {k} · seed {seed} · {n} new characters"
NEXT_CHAR_TITLE = "What the model predicts after your prompt"
LOOKED_TITLE = "Where attention looked from the last character"
LAST_EVAL = "last evaluation (step {step}): train loss **{train:.4f}**, val loss **{val:.4f}**"
UNKNOWN_PROMPT = "Not in this model's vocabulary, so left out of the prompt: {chars}"
CROPPED = ("The prompt has {counts}; the model reads only the last {block} (its block_size), so the first {cropped} "
           "character does not influence it.", "The prompt has {counts}; the model reads only the last {block} (its "
           "block_size), so the first {cropped} characters do not influence it.")
KNOWN_CHARS = ("{n} known character", "{n} known characters")
READ_AS_UNK = ("{n} read as the unknown token", "{n} read as the unknown token")
UNKNOWN_AS_UNK = ("Not in this model's vocabulary, so the model reads each as its unknown token, the one its rare "
                  "characters share: {chars}")
LAST_RERUN = ("Your last rerun: {run} against {reference}, {steps} steps of batch {batch} per run on {corpus}, "
              "{windows} windows measured.")
MEASURE_VAL = "Validation loss over every position of the measured windows, in nats."
YOUR_RERUN = "**Your rerun** · "
AT_LAST_POSITION = "At the window's last position: "
SHIPPED_RERUN = "**The shipped runs** ({steps} steps of batch {batch}) · "
BEFORE_LAST = ("Over the positions before the last, {run} scores {loss:.3f} nats and {reference} {ref_loss:.3f}: "
               "there, without the mask, the target is in view.")
SHIPPED_HIDDEN = "Answer the question above to see the shipped runs' verdict beside yours."
VERDICTS_AGREE = "Both reach the same verdict."
VERDICTS_DIFFER = ("The verdicts differ: your runs saw {share:.0%} of the shipped runs' windows, so they compare the "
                   "two models earlier in their training (and on fewer windows).")
RERUN_OVER_CAP = ("The cautious count puts these {runs} runs over the limit of {limit}: on a busy server the rerun may "
                  "stop before its last seed.")
DROPOUT_CELL = "{loss:.3f} ± {std:.3f} nats at {rate:,.0f} tokens/s"
DROPOUT_MEASURED = ("Validation loss after the course preset's training ({steps} steps of batch {batch}, peak learning "
                    "rate {lr:g}, {corpus}), mean ± standard deviation over the seeds {seeds}, with the tokens/s of "
                    "the training steps ({cpu}, threads: {threads}): no dropout {none}; residual dropout {resid:g} "
                    "only {resid_only}; dropout {both:g} everywhere {everywhere}.")
DROPOUT_HELPS = ("Dropout lowers the validation loss by more than the seed noise within this budget; the course "
                 "preset trains with attention dropout {attn:g} and residual dropout {resid:g}.")
DROPOUT_DOES_NOT_HELP = ("No dropout setting lowers the validation loss by more than the seed noise within this "
                         "budget, so the course preset trains with attention dropout {attn:g} and residual dropout "
                         "{resid:g}: {speedup:.2f}× the tokens/s of dropout {both:g} everywhere.")
DROPOUT_UNREADABLE = "The shipped measurements of dropout's effect on the validation loss cannot be read."
SHIPPED_EXERCISES = ("Shipped results: `{command}` · {steps} steps of batch {batch} × block_size {block} per run, "
                     "peak learning rate {lr:g} after {warmup} warm-up steps, dropout {dropout} · {corpus}, validation "
                     "over the whole split ({val_tokens:,} characters) · seeds {seeds} · {runs} runs on {devices} "
                     "({cpu}; threads per run: {threads}) · {hours:.1f} h of run time added up")
INCOMPLETE = " · INCOMPLETE: {done} of {planned} runs so far"
EXERCISE_TITLES = ("The lesson's exercise 2 · 1, 4 or 8 heads at n_embd 128",
                   "The lesson's exercise 3 · position information: {encodings}",
                   "Beyond the lesson's exercises · training without the causal mask")
#: The message ids of the exercises' configurations; the course model is named by what its exercise varies.
EXERCISE_NAMES = {"heads_1": "1 head of 128", "heads_8": "8 heads of 16", ("heads", "course"): "4 heads of 32 (course)",
                  "pos_none": "none", "pos_sinusoidal": "sinusoidal", "pos_rope": "RoPE", "pos_alibi": "ALiBi",
                  ("positions", "course"): "learned (course)", ("no_mask", "course"): "causal mask (course)",
                  "no_mask_learned": "no causal mask", "no_mask_rope": "no causal mask, RoPE"}
VERDICT_MSGIDS = {
    "b_beats_a": ("**{run}** is better than {reference}: its validation loss is lower by {effect:.3f} nats on average "
                  "over the seeds {seeds} ({level:.0%} interval of the difference {low:+.3f} … {high:+.3f})."),
    "a_beats_b": ("**{run}** is worse than {reference}: its validation loss is higher by {effect:.3f} nats on average "
                  "over the seeds {seeds} ({level:.0%} interval of the difference {low:+.3f} … {high:+.3f})."),
    "no_detectable_difference": (
        "**{run}** and {reference}: no difference these seeds can detect ({mean:+.3f} nats on average over the seeds "
        "{seeds}, {level:.0%} interval {low:+.3f} … {high:+.3f}, which holds 0); the smallest difference {n} seeds "
        "with this spread could have detected is {detectable:.3f} nats."),
    "too_few_seeds": ("**{run}** against {reference}: {mean:+.3f} nats with the seed {seeds} only; one seed cannot "
                      "tell a difference from the seed-to-seed spread."),
}
ALONG_GROWS = ("Along the window, the gap between {run} and {reference} grows: {early:+.3f} nats on average at "
               "positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; it widens by {growth:+.3f} nats "
               "over the seeds {seeds} ({level:.0%} interval {low:+.3f} … {high:+.3f}).")
ALONG_SHRINKS = ("Along the window, the gap between {run} and {reference} shrinks: {early:+.3f} nats on average at "
                 "positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; it narrows by {growth:+.3f} "
                 "nats over the seeds {seeds} ({level:.0%} interval {low:+.3f} … {high:+.3f}).")
ALONG_NO_TREND = ("Along the window, the gap between {run} and {reference} shows no trend these seeds can detect: "
                  "{early:+.3f} nats on average at positions 0 … {split_last}, {late:+.3f} at positions {split} … "
                  "{last}; its change, {growth:+.3f} nats over the seeds {seeds}, has a {level:.0%} interval "
                  "{low:+.3f} … {high:+.3f}, which holds 0.")
ALONG_ONE_SEED = ("Along the window, the gap between {run} and {reference}: {early:+.3f} nats on average at "
                  "positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; one seed cannot tell a "
                  "trend from the seed-to-seed spread.")
UPLOAD_HELP = ("Drop the file on the box or choose it with the box's button. Streamlit writes that button and the line "
               "under it in English: “Upload” opens the file chooser, and the size before “per file” is the largest "
               "file it takes ({mb} MB).")
ALONG_SIGNS = "(Each difference is the validation loss of {run} minus that of {reference}.)"
ALONG_CHANGE_SIGNS = ("(Each difference is the validation loss of {run} minus that of {reference}; the change is the "
                      "size of the later difference minus the size of the first one, |late| − |early|, seed by seed, "
                      "so a positive change is a widening gap.)")
ALL_BELOW = ("Every run ends below the bigram's {bigram:.3f} nats on the whole validation split: the highest, {run} "
             "with the seed {seed}, at {val:.3f} nats.")
SOME_ABOVE = ("{count} of {total} runs ends at or above the bigram's {bigram:.3f} nats, so it has learned no more "
              "than counting: {runs}.")
NO_MASK_COPIES = ("**{run}**: {other:.3f} nats on average at positions 0 … {second_last} (with the mask: "
                  "{masked:.3f}), {final:.3f} at the last position (with the mask: {masked_final:.3f}): it copies the "
                  "next character wherever it can see it, and cannot at the last position, the one generation uses.")
NO_MASK_NO_COPY = ("**{run}**: {other:.3f} nats on average at positions 0 … {second_last} (with the mask: "
                   "{masked:.3f}), {final:.3f} at the last position (with the mask: {masked_final:.3f}): no copy "
                   "shows at this budget.")
LAST_WORSE = ("At the last position the runs without the mask do worse than the bigram's {bigram:.3f} nats "
              "({finals}): for generation they are worse than counting.")
LAST_NOT_WORSE = ("At the last position not every run without the mask does worse than the bigram's {bigram:.3f} "
                  "nats ({finals}).")
#: The message ids of the position encodings' names (the ones page 7 uses).
POSITION_NAMES = {"none": "none", "learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE"}
CORPUS_METRICS = ("characters", "records", "distinct characters", "train / val tokens", "vocabulary (tokens)",
                  "validation coverage", "unknown tokens (val)", "unknown tokens (train)")


def msg(msgid: str, lang: str = "en", **values) -> str:
    """A message of the page as the reader sees it in ``lang``, its numbers in that language's format."""
    return fill(translations(lang).gettext(msgid), lang, **values)


def msg_n(msgids: tuple[str, str], count: int, lang: str = "en", **values) -> str:
    """A plural message (``ngettext``) for ``count`` as the reader sees it in ``lang``."""
    return fill(translations(lang).ngettext(*msgids, count), lang, **values)


def cropped_note(known: int, unk: int, block: int, cropped: int, lang: str = "en") -> str:
    """The note on a prompt longer than block_size: its known characters and those read as the unknown token."""
    counts = msg_n(KNOWN_CHARS, known, lang, n=known)
    if unk:
        counts = format_list([counts, msg_n(READ_AS_UNK, unk, lang, n=unk)], locale=lang)
    return msg_n(CROPPED, cropped, lang, counts=counts, block=block, cropped=cropped)


def pattern(msgid: str, lang: str = "en", **values) -> re.Pattern:
    """``msgid`` in ``lang`` as a regular expression: the given placeholders filled in, the others captured.

    For messages holding a value the test cannot know (a time, a loss); the first occurrence of each
    unknown placeholder becomes a named group.
    """
    parts, seen = [], set()
    for literal, field, spec, _conversion in string.Formatter().parse(translations(lang).gettext(msgid)):
        parts.append(re.escape(literal))
        if field is None:
            continue
        if field in values:
            parts.append(re.escape(fill("{v" + (":" + spec if spec else "") + "}", lang, v=values[field])))
        elif field in seen:
            parts.append(".*?")
        else:
            seen.add(field)
            parts.append(f"(?P<{field}>.*?)")
    return re.compile("".join(parts), re.DOTALL)


def matching(items, msgid: str, lang: str = "en", **values) -> list[re.Match]:
    """The matches of :func:`pattern` that cover a whole item of ``items``."""
    rx = pattern(msgid, lang, **values)
    return [m for m in map(rx.fullmatch, items) if m]


def nats(value: float, lang: str = "en") -> str:
    return msg(NATS, lang, nats=value, ppl=math.exp(min(value, 50.0)))


def progress_texts(at) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


def set_controls(at, values):
    for key, value in values.items():
        widget = next((w for kind in ("radio", "slider", "selectbox", "number_input", "select_slider", "checkbox")
                       for w in getattr(at, kind) if w.key == key), None)
        assert widget is not None, key
        widget.set_value(value)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def train_until(at, msgid, deadline_s=DEADLINE_S):
    """Reruns the page (as the polling fragment would) until a progress bar's text is the message ``msgid``."""
    deadline = time.monotonic() + deadline_s
    while not matching(progress_texts(at), msgid):
        assert time.monotonic() < deadline, f"no '{msgid}' after {deadline_s} s: {progress_texts(at)!r}"
        time.sleep(0.2)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def caption_prefixes(lang: str = "en", origins=("trained", "uploaded"), shipped=True) -> tuple[str, ...]:
    """How the caption of the model in use begins: whose model it is, then the language's colon (French: " : ")."""
    whose = [msg(YOUR_MODEL, lang, origin=msg(o, lang)) for o in origins] + ([msg(SHIPPED_CAPTION, lang)] * shipped)
    return tuple(w + numbers.colon(lang) for w in whose)


def model_caption(at, lang: str = "en"):
    return next(c for c in captions(at) if c.startswith(caption_prefixes(lang)))


def caption_parts(at, origin: str) -> list[str]:
    """The " · "-separated parts of the caption of the reader's own model (``origin``: trained, uploaded)."""
    caption = model_caption(at)
    prefix = caption_prefixes(origins=(origin,), shipped=False)[0]
    assert caption.startswith(prefix), caption
    return caption.removeprefix(prefix).split(" · ")


def shipped_caption(model: models.LabModel, lang: str = "en") -> str:
    """The caption of the shipped model, from its config and summary."""
    c, s = model.config, model.summary
    parts = [msg(CONFIG, lang, n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, block=c.block_size,
                 pos=msg(POSITION_NAMES[c.pos_encoding], lang)),
             msg("{params:,} parameters", lang, params=model.params),
             msg("vocabulary {size}", lang, size=integer(model.tokenizer.vocab_size, lang)),
             msg(STEPS_ON, lang, steps=integer(s["steps_done"], lang), corpus=s["corpus"]),
             msg("validation loss over the whole validation split {val:.3f} ({windows:,} windows)", lang,
                 val=shipped_files.whole_split().val_loss, windows=shipped_files.whole_split().windows)]
    return msg(SHIPPED_CAPTION, lang) + numbers.colon(lang) + " · ".join(parts)


def versus_captions(at, base, lang: str = "en") -> list[re.Match]:
    """The captions that put a validation loss beside the counting baselines ``base``."""
    return matching(captions(at), VERSUS, lang, uni=nats(base.unigram.val_nats, lang),
                    bi=nats(base.bigram.val_nats, lang))


def title(figure: dict) -> str:
    """A figure's title as one line (long titles are wrapped with <br> for phones)."""
    return figure["layout"].get("title", {}).get("text", "").replace("<br>", " ")


@pytest.fixture(scope="module")
def trained():
    """One session that trained the tiny model to the end (other sessions reuse it from the registry)."""
    at = set_controls(open_page(PAGE), TINY)
    at.button(key="lab_train").click().run()
    return train_until(at.run(), DONE)


@pytest.fixture(scope="module")
def default_corpus():
    return load_corpus(DEFAULT_CORPUS)


@pytest.fixture(scope="module")
def shipped():
    return models.load_shipped(SHIPPED_MODEL) if SHIPPED_MODEL.exists() else None


def expected_metrics(corpus, lang: str = "en") -> dict[str, str]:
    """The corpus metrics the page should show, from the corpus, in ``lang``'s number format."""
    stats = corpus.vocab_stats
    return {"characters": integer(len(corpus.text), lang=lang), "records": integer(len(corpus.records), lang=lang),
            "distinct characters": integer(stats.distinct_chars, lang=lang),
            "vocabulary (tokens)": integer(stats.vocab_size, lang=lang),
            "validation coverage": percent(stats.val_coverage, 2, lang=lang),
            "unknown tokens (val)": percent(stats.val_unk_rate, 2, lang=lang),
            "unknown tokens (train)": percent(stats.train_unk_rate, 2, lang=lang)}


def corpus_metrics(at, lang: str = "en") -> dict[str, str]:
    """The corpus section's metrics, keyed by their English message id."""
    shown = {m.label: m.value for m in at.metric}
    return {msgid: shown[msg(msgid, lang)] for msgid in CORPUS_METRICS}


def test_first_visit_shows_the_corpus_and_the_shipped_model_or_says_why_not(default_corpus, shipped):
    at = open_page(PAGE)
    assert not at.exception
    assert at.radio(key="lab_corpus").value == DEFAULT_CORPUS
    metrics = corpus_metrics(at)
    stats = default_corpus.vocab_stats
    assert metrics["vocabulary (tokens)"] == f"{default_corpus.vocab_size:,}"
    assert metrics["characters"] == f"{len(default_corpus.text):,}"
    assert metrics["distinct characters"] == f"{stats.distinct_chars:,}"
    assert metrics["validation coverage"] == f"{stats.val_coverage:.2%}"
    assert metrics["unknown tokens (val)"] == f"{stats.val_unk_rate:.2%}"
    assert {k: metrics[k] for k in expected_metrics(default_corpus)} == expected_metrics(default_corpus)
    base = corpus_baselines(default_corpus)
    assert msg(COUNTING, uni=nats(base.unigram.val_nats), bi=nats(base.bigram.val_nats)) in texts(at)
    assert msg(DEVICE, device=describe_device(pick_device())) in captions(at)
    if shipped is not None:
        assert at.radio(key="lab_use").value == "shipped"
        assert model_caption(at) == shipped_caption(shipped)
        poem = next(t for t in texts(at) if t.startswith("**白日**"))
        assert len(poem) > len("**白日**") + 20  # generation works without training
        assert any(f["layout"].get("sliders") for f in figures(at))
        # the shipped model beside the counting baselines of its corpus, its diagram, the next-character view
        versus = versus_captions(at, base)
        # the whole split's loss, not the training's 10-batch estimate (issue 36)
        assert [m["val"] for m in versus] == [nats(shipped_files.whole_split().val_loss)]
        total = translations("en").ngettext("{n:,} parameter in all", "{n:,} parameters in all", shipped.params)
        assert at.get("graphviz_chart") and total.format(n=shipped.params) in at.get("graphviz_chart")[0].proto.spec
        bars = next(f for f in figures(at) if title(f) == msg(NEXT_CHAR_TITLE))
        assert len(bars["layout"]["sliders"]) == 2
        assert any(title(f) == msg(LOOKED_TITLE) for f in figures(at))
        assert any(msg("keys/values reused from the cache") == t["name"] for f in figures(at) for t in f["data"])
    else:
        assert any(i.value == msg("No model yet: no trained model ships with this copy of the app. Train one above "
                                  "(the quick preset is the smallest) or load a checkpoint.") for i in at.info)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_lab_opens_in_french_and_german_with_the_same_numbers(default_corpus, shipped, lang):
    english = corpus_metrics(open_page(PAGE))
    at = open_page(PAGE, 60, lang=lang)
    assert not at.exception, [e.value for e in at.exception]
    shown = corpus_metrics(at, lang)
    assert {k: shown[k] for k in expected_metrics(default_corpus, lang)} == expected_metrics(default_corpus, lang)
    assert shown != english  # the same numbers, written the reader's way
    base = corpus_baselines(default_corpus)
    counting = msg(COUNTING, lang, uni=nats(base.unigram.val_nats, lang), bi=nats(base.bigram.val_nats, lang))
    assert counting in texts(at)
    if shipped is not None:
        assert model_caption(at, lang) == shipped_caption(shipped, lang)
        assert [m["val"] for m in versus_captions(at, base, lang)] == [nats(shipped_files.whole_split().val_loss,
                                                                            lang)]
        assert any(title(f) == msg(NEXT_CHAR_TITLE, lang) for f in figures(at))
    # issue 36: the learning rate in the reader's format, the token counts in the language's short form (the full
    # counts in the tile's help), the uploader's English button and size line said in the reader's language
    assert list(at.select_slider(key="lab_lr").options) == [numbers.significant(r, 1, lang=lang)
                                                           for r in rules.LEARNING_RATES]
    assert "0,01" in at.select_slider(key="lab_lr").options and "0.01" not in at.select_slider(key="lab_lr").options
    tokens = next(m for m in at.metric if m.label == msg("train / val tokens", lang))
    train, val = len(default_corpus.train_ids), len(default_corpus.val_ids)
    short = {"fr": "3,27\u00a0M / 357,48\u00a0k", "de": "3,27\u00a0Mio. / 357.482"}[lang]
    assert tokens.value == short or train < 10**6
    assert tokens.proto.help == msg("{train:,} training tokens, {val:,} validation tokens.", lang, train=train, val=val)
    uploader = next(u for u in at.get("file_uploader") if u.proto.id.endswith("lab_ckpt_upload"))
    assert "Upload" in uploader.proto.help and "per file" in uploader.proto.help
    assert uploader.proto.help == msg(UPLOAD_HELP, lang, mb=budget.upload_widget_mb(budget.MAX_CHECKPOINT_BYTES))


def test_short_training_runs_to_the_end(trained):
    at = trained
    assert matching(progress_texts(at), DONE, step=24)
    assert at.radio(key="lab_use").value == "own"
    parts = caption_parts(at, "trained")
    assert msg(STEPS_ON, steps=24, corpus="tang300") in parts
    assert not matching(parts, STOPPED_STEPS_ON)
    live = next(f for f in figures(at) if title(f) == msg("Loss while training"))
    names = [t["name"] for t in live["data"]]
    assert names == [msg("batch loss"), msg("train loss"), msg("val loss")]
    small = load_corpus("tang300")
    base = corpus_baselines(small)
    lines = sorted(shape["y0"] for shape in live["layout"]["shapes"])
    assert lines == pytest.approx(sorted([base.unigram.val_nats, base.bigram.val_nats]))
    assert versus_captions(at, base)
    assert len(live["data"][0]["y"]) == 24 and list(live["data"][2]["x"])[-1] == 24
    val = np.asarray(live["data"][2]["y"], dtype=float)
    assert np.all(np.isfinite(val)) and val[-1] < val[0]
    assert matching(texts(at), LAST_EVAL, step=24)
    assert not at.button(key="lab_train").disabled and not [b for b in at.button if b.key == "lab_stop"]


def generate(at, **values):
    """Sets the generation form's controls and presses Generate."""
    for key, value in values.items():
        widget = next(w for kind in ("slider", "number_input", "text_input") for w in getattr(at, kind)
                      if w.key == key)
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
    assert msg(GENERATED, mode=msg("greedy"), k=msg("top-k {k}", k=20), seed=0, n=64) in captions(at)
    attention = next(f for f in figures(at) if title(f).startswith("attn_weights"))
    steps = attention["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [msg("layer {layer} · head {head}", layer=layer, head=head)
                                           for layer in range(2) for head in range(4)]
    for trace in attention["data"]:
        z = np.asarray(trace["z"], dtype=float)
        assert z.shape == (12, 12)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=5e-4)  # cells are sent with 4 decimals
        assert np.all(np.triu(z, 1) == 0)
    assert list(attention["layout"]["yaxis"]["ticktext"])[:2] == ["0:白", "1:日"]
    positions = next(f for f in figures(at) if title(f) == msg("pos_emb after training"))  # one figure a panel
    assert np.asarray(positions["data"][0]["z"]).shape == (16, 32)
    assert matching(texts(at), "mean cosine similarity of neighbouring positions: trained **{trained:.3f}**, "
                               "before training **{untrained:.3f}** (seed {seed})")
    # the next character: greedy, so the highlighted bar is the most likely one and the first character written
    bars = next(f for f in figures(at) if title(f) == msg(NEXT_CHAR_TITLE))
    y = np.asarray(bars["data"][0]["x"], dtype=float)  # horizontal bars: probabilities on x
    first = generation.generate(at.session_state["lab_own"], "白日", 1, temperature=0).new
    label = repr(first)[1:-1] if first.isspace() else first
    assert y[0] == 1.0 and y[1:].sum() == 0.0
    assert bars["layout"]["annotations"][0]["text"] == "■ " + msg("sampled: {char}", char=label)
    looked = next(f for f in figures(at) if title(f) == msg(LOOKED_TITLE))
    mean = np.asarray(looked["data"][0]["z"], dtype=float)
    assert mean.shape == (2, 2) and np.allclose(mean.sum(axis=1), 1.0, atol=1e-3)  # 2 layers over "白日"


def test_prompt_notes_for_unknown_and_long_prompts(trained):
    at = trained
    generate(at, lab_prompt="白日XYZ")
    assert msg(UNKNOWN_PROMPT, chars=plain("X Y Z")) in [w.value for w in at.warning]
    assert any(t.startswith("**白日XYZ**") for t in texts(at))  # the prompt as typed, though the model dropped XYZ
    generate(at, lab_prompt="ABC")
    assert msg("Nothing of the prompt is in the vocabulary: the model starts from a {start}.",
               start=msg("newline")) in [i.value for i in at.info]
    generate(at, lab_prompt="白日依山尽，黄河入海流。" * 3)
    cropped = cropped_note(known=36, unk=0, block=16, cropped=20)  # the tiny model's vocabulary has no unknown token
    assert cropped in [i.value for i in at.info]
    generate(at, lab_prompt="", lab_temp=2.0, lab_top_k=0, lab_length=300, lab_gen_seed=99_999)
    assert msg(GENERATED, mode=msg("temperature {t:g}", t=2.0), k=msg("all characters"), seed=99_999,
               n=300) in captions(at)
    assert not any(t.startswith("****") for t in texts(at))  # no empty bold prompt before the text
    at.text_input(key="lab_line").set_value("QQQ").run()
    assert msg("No character of this line is in the model's vocabulary: nothing to draw.") in [w.value
                                                                                               for w in at.warning]
    assert not at.exception


def test_stop_mid_training_keeps_a_model():
    at = set_controls(open_page(PAGE), {**TINY, "lab_steps": 5000, "lab_seed": 7})
    at.button(key="lab_train").click().run()
    deadline = time.monotonic() + DEADLINE_S
    while not [b for b in at.button if b.key == "lab_stop"] or not [
            m for m in matching(progress_texts(at), RUNNING, steps=5000) if int(m["step"]) > 0]:
        assert time.monotonic() < deadline, progress_texts(at)
        time.sleep(0.2)
        at.run()
    assert at.button(key="lab_train").disabled  # one training per reader at a time
    at.button(key="lab_stop").click().run()
    train_until(at, STOPPED)
    assert matching(caption_parts(at, "trained"), STOPPED_STEPS_ON, corpus="tang300")
    assert any(t.startswith("**白日**") for t in texts(at))
    generate(at, lab_length=5)
    # generation works with the stopped model
    assert msg(GENERATED, mode=msg("temperature {t:g}", t=0.8), k=msg("top-k {k}", k=20), seed=0,
               n=5) in captions(at)


FOLLOWERS = ("{n} other reader follows this training: they asked for exactly these settings on this text, so the "
             "server trains it once for you all. Stop takes you out of it; it goes on for them.",
             "{n} other readers follow this training: they asked for exactly these settings on this text, so the "
             "server trains it once for you all. Stop takes you out of it; it goes on for them.")


def test_two_readers_asking_for_the_same_training_follow_one_job(monkeypatch):
    """The second reader's click follows the first reader's running training (the page says so in both); the
    second's Stop takes only them out of it, the first's training goes on."""
    from ui.lab import session

    who = {"browser": "first"}
    monkeypatch.setattr(session, "browser_id", lambda: who["browser"])

    def run_as(at, browser):
        who["browser"] = browser
        at.run()
        assert not at.exception, [e.value for e in at.exception]

    settings = {**TINY, "lab_steps": 5000, "lab_seed": 11}
    first = set_controls(open_page(PAGE), settings)
    first.button(key="lab_train").click()
    run_as(first, "first")
    who["browser"] = "second"
    second = set_controls(open_page(PAGE), settings)
    second.button(key="lab_train").click()
    run_as(second, "second")
    job = second.session_state["lab_job"]
    assert job is first.session_state["lab_job"] and job.browser_ids == ("first", "second")
    assert msg("Another reader's training with exactly these settings on this text is already queued or running: "
               "you follow it, and its model becomes yours too when it ends.") in [i.value for i in second.info]
    run_as(first, "first")
    assert msg_n(FOLLOWERS, 1, n=1) in captions(first) and msg_n(FOLLOWERS, 1, n=1) in captions(second)
    assert second.button(key="lab_train").disabled
    second.button(key="lab_stop").click()
    run_as(second, "second")
    assert msg("You left the training; it goes on for the other readers who follow it. Train again to follow it "
               "once more, or change a setting to train your own.") in [i.value for i in second.info]
    assert "lab_job" not in second.session_state and not second.button(key="lab_train").disabled
    assert not job.stop_event.is_set() and job.browser_ids == ("first",)
    run_as(first, "first")
    assert msg_n(FOLLOWERS, 1, n=1) not in captions(first) and first.button(key="lab_train").disabled
    first.button(key="lab_stop").click()
    run_as(first, "first")
    assert job.stop_event.is_set() and first.session_state["lab_job"] is job


def test_two_readers_never_see_each_others_models(trained):
    other = open_page(PAGE)
    assert msg("your model") not in [o for r in other.radio if r.key == "lab_use" for o in r.options]
    assert "lab_own" not in other.session_state
    assert not any(c.startswith(caption_prefixes(shipped=False)) for c in captions(other))
    # the same settings on the same text: the model comes from the registry, trained by no one else's choices
    set_controls(other, TINY)
    other.button(key="lab_train").click().run()
    assert msg("A model with exactly these settings on this text was trained before on this server: "
               "reusing it.") in [s.value for s in other.success]
    assert model_caption(other) == model_caption(trained)
    # a different seed is a different model, and the first reader keeps hers
    set_controls(other, {"lab_seed": 99})
    other.button(key="lab_train").click().run()
    train_until(other, DONE)
    first_id = trained.session_state["lab_own"].model_id
    assert other.session_state["lab_own"].model_id != first_id
    trained.run()
    assert trained.session_state["lab_own"].model_id == first_id


def upload_page():
    at = open_page(PAGE)
    at.radio(key="lab_corpus").set_value("upload").run()
    assert not at.exception
    assert at.button(key="lab_train").disabled
    assert msg("There is no usable training text yet.") in [e.value for e in at.error]
    return at


@pytest.mark.parametrize("data, reason, values", [
    (b"", "the file is empty.", {}),
    (b"\x00\x01\x02binary", "the file holds NUL bytes, so it looks binary, not text.", {}),
    ("白日依山尽".encode("gbk"), "it is not UTF-8 text; save it as UTF-8 and try again.", {}),
    (b"a" * (budget.MAX_TEXT_BYTES + 1), "{value} bytes is over this server's limit of {limit} bytes ({mb} MB).",
     {"value": numbers.integer(budget.MAX_TEXT_BYTES + 1, "en"), "limit": numbers.integer(budget.MAX_TEXT_BYTES, "en"),
      "mb": numbers.integer(budget.upload_widget_mb(budget.MAX_TEXT_BYTES), "en")}),
    ("".join(chr(0x4E00 + i) for i in range(7000)).encode("utf-8"),
     "it has {value:,} distinct characters; a model here may have at most {limit:,} (each one adds a row to the "
     "embedding and a column to every prediction).", {"value": 7000, "limit": budget.MAX_VOCAB}),
])
def test_bad_uploads_give_a_clear_message(data, reason, values):
    at = upload_page()
    at.file_uploader(key="lab_upload").set_value(("poems.txt", data, "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    expected = msg("This file cannot be used: {reason}", reason=msg(reason, **values))
    assert expected in [e.value for e in at.error]
    assert at.button(key="lab_train").disabled
    assert [b for b in at.button if b.key == "lab_rerun_experiment_no_mask"]  # the rest of the page still runs


def test_good_upload_becomes_the_corpus():
    text = "\n\n".join(["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"] * 15)
    at = upload_page()
    at.file_uploader(key="lab_upload").set_value(("moon.txt", text.encode("utf-8"), "text/plain")).run()
    assert not at.exception
    metrics = corpus_metrics(at)
    assert metrics["records"] == "30" and metrics["vocabulary (tokens)"] == str(len(set(text)))
    assert metrics["distinct characters"] == str(len(set(text))) and metrics["validation coverage"] == "100.00%"
    # 3 validation records of 12 characters (+ 2 blank-line separators): block_size 64 is too long
    assert msg("block_size {value} is longer than this text allows: its shorter split allows at most {limit}.",
               value=64, limit=39) in [e.value for e in at.error]
    assert at.button(key="lab_train").disabled
    at.selectbox(key="lab_block").set_value(32).run()
    assert not at.error and not at.button(key="lab_train").disabled


def test_upload_widget_states_the_engines_limit_and_a_utf16_text_is_read():
    at = upload_page()
    widget = at.file_uploader(key="lab_upload")
    assert widget.proto.max_upload_size_mb * budget.UPLOAD_UNIT == budget.MAX_TEXT_BYTES
    assert widget.proto.label == msg("A text file: UTF-8, or UTF-16 with a byte-order mark (at most {mb} MB)",
                                     mb=numbers.integer(budget.MAX_TEXT_BYTES // budget.UPLOAD_UNIT, "en"))
    text = "\n\n".join(["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"] * 15)
    widget.set_value(("notepad.txt", text.encode("utf-16"), "text/plain")).run()  # Notepad's "Unicode"
    assert not at.exception and not [e.value for e in at.error if "NUL" in e.value]
    assert corpus_metrics(at)["records"] == "30"


def test_a_checkpoint_with_a_crafted_summary_is_refused_with_a_message(trained):
    import json
    import struct

    own = trained.session_state["lab_own"]
    data = checkpoint_to_bytes(own.model, own.tokenizer, own.summary)
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header["__metadata__"]["checkpoint"] = header["__metadata__"]["checkpoint"].replace(
        '"final_val_loss": ', '"final_val_loss": 1e400, "x": ')  # JSON's infinity
    blob = json.dumps(header).encode()
    crafted = struct.pack("<Q", len(blob)) + blob + data[8 + length:]
    at = open_page(PAGE)
    at.file_uploader(key="lab_ckpt_upload").set_value(("crafted.safetensors", crafted, "application/octet-stream"))
    at.run()
    assert not at.exception
    assert msg("This checkpoint cannot be loaded: {reason}",
               reason=msg("its training summary (losses, steps, seed) is invalid.")) in [e.value for e in at.error]


def test_checkpoint_upload(trained):
    at = open_page(PAGE)
    broken = ("broken.safetensors", b"not a checkpoint", "application/octet-stream")
    at.file_uploader(key="lab_ckpt_upload").set_value(broken).run()
    assert not at.exception
    assert msg("This checkpoint cannot be loaded: {reason}",
               reason=msg("the file is damaged or not a checkpoint.")) in [e.value for e in at.error]
    own = trained.session_state["lab_own"]
    data = checkpoint_to_bytes(own.model, own.tokenizer, own.summary)
    at.file_uploader(key="lab_ckpt_upload").set_value(("mine.safetensors", data, "application/octet-stream")).run()
    assert not at.exception
    assert at.radio(key="lab_use").value == "own"
    assert msg(STEPS_ON, steps=24, corpus="tang300") in caption_parts(at, "uploaded")
    assert at.session_state["lab_own"].model_id == own.model_id
    assert [b for b in at.get("download_button") if b.proto.label == msg("Download this model (.safetensors)")]


def test_presets_and_head_choices():
    at = open_page(PAGE)
    assert at.slider(key="lab_dropout").value == PRESETS["quick"].model.dropout  # the slider's default
    at.slider(key="lab_dropout").set_value(0.3).run()
    at.button(key="lab_preset_course").click().run()
    assert (at.selectbox(key="lab_n_embd").value, at.selectbox(key="lab_n_head").value,
            at.slider(key="lab_n_layer").value, at.selectbox(key="lab_block").value) == (128, 4, 4, 128)
    course = PRESETS["course"].training
    assert at.number_input(key="lab_steps").value == course.steps
    assert at.selectbox(key="lab_batch").value == course.batch_size
    assert at.slider(key="lab_dropout").value == PRESETS["course"].model.dropout
    assert not at.button(key="lab_train").disabled  # it fits the caps
    at.button(key="lab_preset_quick").click().run()
    assert (at.selectbox(key="lab_n_embd").value, at.number_input(key="lab_steps").value) == (
        PRESETS["quick"].model.n_embd, PRESETS["quick"].training.steps)
    at.selectbox(key="lab_n_embd").set_value(48).run()
    assert at.selectbox(key="lab_n_head").options == [str(h) for h in (1, 2, 3, 4, 6, 8, 12, 16, 24, 48)]
    at.selectbox(key="lab_pos").set_value("rope").run()
    assert at.selectbox(key="lab_n_head").options == [str(h) for h in (1, 2, 3, 4, 6, 8, 12, 24)]
    at.selectbox(key="lab_n_head").set_value(24).run()
    at.selectbox(key="lab_n_embd").set_value(16).run()
    assert at.selectbox(key="lab_n_head").value == 4  # 24 does not divide 16: back to the default
    assert not at.exception


#: The message ids of the encodings' names (ui.positions.NAMES).
POSITION_WORDS = {"none": "none", "learned": "learned", "sinusoidal": "sinusoidal", "rope": "RoPE", "alibi": "ALiBi"}


def exercise_title(msgid: str, lang: str = "en") -> str:
    """An exercise's heading; the positions exercise's names the encodings of its runs, in its runs' order."""
    runs = lab_experiments.EXERCISES["positions"].runs
    names = [msg(POSITION_WORDS[lab_experiments.EXERCISE_RUNS[k].config().pos_encoding], lang) for k in runs]
    return msg(msgid, lang, encodings=format_list(names, locale=lang)) if "{encodings}" in msgid else msg(msgid, lang)


def exercise_name(exercise: str, key: str, lang: str = "en") -> str:
    """A configuration's name as the exercises' tables and sentences write it."""
    return msg(EXERCISE_NAMES.get(key, EXERCISE_NAMES.get((exercise, key), key)), lang)


def verdict_line(c, exercise: str, reference: str, lang: str = "en") -> str:
    low, high = c.t_interval or (math.nan, math.nan)
    return msg(VERDICT_MSGIDS[c.verdict], lang, run=exercise_name(exercise, c.b, lang), reference=reference,
               seeds=", ".join(integer(s, lang=lang) for s in c.seeds), n=len(c.seeds), mean=c.mean,
               effect=abs(c.mean), low=low, high=high, level=1 - STATS.ALPHA,
               detectable=math.nan if c.detectable is None else c.detectable)


@pytest.fixture(scope="module")
def exercises():
    data = lab_results.read_exercises()
    assert data is not None, "assets/lab_exercises.json is missing"
    return data


@pytest.fixture(scope="module")
def tang_bigram(exercises):
    return corpus_baselines(load_corpus(exercises.corpus)).bigram.val_nats


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_exercises_are_shown_from_the_shipped_file(exercises, tang_bigram, lang):
    data = exercises
    at = open_page(PAGE, lang=lang)
    assert not at.exception
    assert {f["layout"].get("separators") for f in figures(at)} == {plotly_separators(lang)}  # every chart
    headings = [m.value for m in at.markdown if m.value.startswith("#### ")]
    titles = ["#### " + exercise_title(t, lang) for t in EXERCISE_TITLES]
    assert [h for h in headings if h in set(titles)] == titles
    tables = [t.value for t in at.table]
    run, val = msg("run", lang), msg("val loss (mean)", lang)
    runs_tables = [t for t in tables if val in t.columns]
    pairs_tables = [t for t in tables if msg("Δ per seed", lang) in t.columns]
    assert len(runs_tables) == 3 and len(pairs_tables) == 2  # without the mask a lower loss is no "better"
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    verdicts = {"b_beats_a": "better", "a_beats_b": "worse", "no_detectable_difference": "no detectable difference",
                "too_few_seeds": "too few seeds"}
    for exercise, runs_table in zip(data.exercises, runs_tables, strict=True):
        assert list(runs_table[run]) == [exercise_name(exercise.name, k, lang) for k in exercise.runs]
        means = [sum(r.val_loss for r in data.runs_of(k)) / len(data.runs_of(k)) for k in exercise.runs]
        assert list(runs_table[val]) == [num(v, 3, lang=lang) for v in means]  # the reader's number format
        assert list(runs_table[msg("val loss per seed", lang)]) == [
            " · ".join(num(r.val_loss, 3, lang=lang) for r in data.runs_of(k)) for k in exercise.runs]
        assert list(runs_table[msg("params", lang)]) == [integer(data.runs_of(k)[0].params, lang=lang)
                                                         for k in exercise.runs]
    for exercise, pairs in zip(data.exercises[:2], pairs_tables, strict=True):
        reference = exercise_name(exercise.name, exercise.reference, lang)
        assert list(pairs[msg("Δ mean ({level:.0%} interval)", lang, level=1 - STATS.ALPHA)]) == [
            fill("{d:+.3f} ({low:+.3f} … {high:+.3f})", lang, d=c.mean, low=c.t_interval[0], high=c.t_interval[1])
            for c in exercise.comparisons]
        assert list(pairs[msg("Δ per seed", lang)]) == [" · ".join(fill("{d:+.3f}", lang, d=d) for d in c.differences)
                                                        for c in exercise.comparisons]
        assert list(pairs[msg("verdict", lang)]) == [msg(verdicts[c.verdict], lang) for c in exercise.comparisons]
        assert list(pairs[msg("smallest detectable", lang)]) == [num(c.detectable, 3, lang=lang)
                                                                 for c in exercise.comparisons]
        for c in exercise.comparisons:
            assert verdict_line(c, exercise.name, reference, lang) in lines, c.b
        shown = [(exercise_name(exercise.name, k, lang), r) for k in exercise.runs for r in data.runs_of(k)]
        highest = max(shown, key=lambda item: item[1].val_loss)
        if highest[1].val_loss < tang_bigram:
            assert msg(ALL_BELOW, lang, bigram=tang_bigram, run=highest[0], seed=highest[1].seed,
                       val=highest[1].val_loss) in lines
    positions = data.exercise("positions")
    chart = next(f for f in figures(at) if [t.get("name") for t in f["data"]][:len(positions.runs)] == [
        exercise_name("positions", k, lang) for k in positions.runs])
    curves = {c.key: c for c in positions.by_position}
    assert [list(t["y"]) for t in chart["data"][:len(positions.runs)]] == [
        pytest.approx(curves[k].mean) for k in positions.runs]
    differences = chart["data"][len(positions.runs):]  # one per run but the reference, in the runs' order
    assert [t["yaxis"] for t in differences] == ["y2"] * (len(positions.runs) - 1)
    assert [list(t["y"]) for t in differences] == [
        pytest.approx(curves[k].difference) for k in positions.runs if k != positions.reference]
    assert [s["y0"] for s in chart["layout"]["shapes"]] == pytest.approx([tang_bigram])  # the bigram line
    assert any(msg("same parameter count for every head count", lang) in t for t in texts(at))
    expected = msg(SHIPPED_EXERCISES, lang, command=E.repository_paths(data.commands[-1]),
                   steps=integer(data.steps, lang),
                   batch=data.batch_size,
                   block=data.block_size, lr=data.learning_rate, warmup=data.warmup_steps, dropout="0",
                   corpus=data.corpus, val_tokens=data.val_tokens,
                   seeds=", ".join(integer(s, lang=lang) for s in data.seeds), runs=len(data.runs),
                   devices=", ".join(data.devices), cpu=", ".join(dict.fromkeys(r.cpu for r in data.runs)),
                   threads=", ".join(sorted({str(r.torch_threads) for r in data.runs})), hours=data.wall_s / 3600)
    assert expected + ("" if data.complete else msg(INCOMPLETE, lang, done=len(data.runs),
                                                    planned=data.planned)) in captions(at)


def test_a_changed_file_changes_the_sentences_the_page_chooses(exercises, tmp_path, monkeypatch):
    raw = json.loads(lab_results.EXERCISES_FILE.read_text(encoding="utf-8"))
    heads_8 = next(c for c in raw["exercises"]["heads"]["comparisons"] if c["b"] == "heads_8")
    assert heads_8["verdict"] == "no_detectable_difference"
    heads_8.update(mean=0.06, t_interval=[0.01, 0.11], verdict="a_beats_b")  # as if 8 heads had done worse
    (tmp_path / "x.json").write_text(json.dumps(raw), encoding="utf-8")
    monkeypatch.setattr(lab_results, "EXERCISES_FILE", tmp_path / "x.json")
    at = open_page(PAGE)
    assert not at.exception
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    changed = lab_results.read_exercises(tmp_path / "x.json").exercise("heads").comparison("heads_8")
    original = exercises.exercise("heads").comparison("heads_8")
    reference = exercise_name("heads", "course")
    assert verdict_line(changed, "heads", reference) in lines
    assert verdict_line(original, "heads", reference) not in lines
    assert any(matching(lines, template, run=exercise_name("heads", "heads_8"))  # a detected difference: where
               for template in (t + " " + ALONG_CHANGE_SIGNS for t in (ALONG_GROWS, ALONG_SHRINKS, ALONG_NO_TREND)))


def rerun_until_done(at, exercise: str):
    """Polls the page until this reader's rerun of ``exercise`` has a result; returns it."""
    deadline = time.monotonic() + DEADLINE_S
    while exercise not in (at.session_state["lab_exp_live"] if "lab_exp_live" in at.session_state else {}):
        assert time.monotonic() < deadline, progress_texts(at)
        time.sleep(0.5)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
    return at.session_state["lab_exp_live"][exercise]


def test_a_paired_rerun_gives_its_verdict_beside_the_shipped_one_and_is_cached(monkeypatch, exercises):
    monkeypatch.setattr(lab_rerun, "RERUN_SEEDS", (1, 2))  # four runs, not six: the same code, a shorter test
    monkeypatch.setattr(lab_rerun, "RERUN_VAL_WINDOWS", 4)
    at = open_page(PAGE)
    at.radio(key="lab_corpus").set_value("tang300").run()
    at.number_input(key="lab_rerun_steps").set_value(100).run()
    at.selectbox(key="lab_rerun_heads_run").set_value("heads_8").run()
    at.button(key="lab_rerun_experiment_heads").click().run()
    assert at.button(key="lab_rerun_experiment_heads").disabled  # while it runs
    result = rerun_until_done(at, "heads")
    assert (result.key, result.reference, result.seeds, result.steps, result.batch_size) == (
        "heads_8", "course", (1, 2), 100, lab_rerun.RERUN_BATCH)
    run, reference = exercise_name("heads", "heads_8"), exercise_name("heads", "course")
    assert msg(LAST_RERUN, run=run, reference=reference, steps=100, batch=lab_rerun.RERUN_BATCH, corpus="tang300",
               windows=result.val_windows) + " " + msg(MEASURE_VAL) in captions(at)
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    assert msg(YOUR_RERUN) + verdict_line(result.comparison, "heads", reference) in lines
    shipped = exercises.exercise("heads").comparison("heads_8")
    assert msg(SHIPPED_RERUN, steps=integer(exercises.steps), batch=exercises.batch_size) + verdict_line(
        shipped, "heads", reference) in lines
    if shipped.verdict == result.comparison.verdict:
        assert msg(VERDICTS_AGREE) in lines
    else:
        share = 100 * lab_rerun.RERUN_BATCH / (exercises.steps * exercises.batch_size)
        assert msg(VERDICTS_DIFFER, share=share) in lines
    table = next(t.value for t in at.table if "Δ" in t.value.columns)
    assert list(table["Δ"]) == [fill("{d:+.3f}", "en", d=d) for d in result.comparison.differences]
    assert list(table[run]) == [num(result.run("heads_8", s).val_loss, 3) for s in (1, 2)]
    other = open_page(PAGE)  # another reader asks for the same rerun: the server's result, at once
    other.radio(key="lab_corpus").set_value("tang300").run()
    other.number_input(key="lab_rerun_steps").set_value(100).run()
    other.selectbox(key="lab_rerun_heads_run").set_value("heads_8").run()
    other.button(key="lab_rerun_experiment_heads").click().run()
    assert other.session_state["lab_exp_live"]["heads"] is result


def test_the_shipped_verdict_waits_for_the_exercise_question_and_no_mask_compares_the_last_position(monkeypatch):
    monkeypatch.setattr(lab_rerun, "RERUN_SEEDS", (1, 2))
    monkeypatch.setattr(lab_rerun, "RERUN_VAL_WINDOWS", 4)
    at = open_page(PAGE, state={"predict": "on"})
    at.radio(key="lab_corpus").set_value("tang300").run()
    at.number_input(key="lab_rerun_steps").set_value(100).run()
    at.button(key="lab_rerun_experiment_positions").click().run()
    assert rerun_until_done(at, "positions").key == lab_experiments.EXERCISES["positions"].runs[0]
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    shipped_prefix = msg(SHIPPED_RERUN, steps=integer(1000), batch=16)
    assert msg(SHIPPED_HIDDEN) in lines and not [line for line in lines if line.startswith(shipped_prefix)]
    at.button(key="lab_rerun_experiment_no_mask").click().run()  # an exercise without a question
    result = rerun_until_done(at, "no_mask")
    assert result.measure == "last_position" and result.key == "no_mask_learned"
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    last = msg(AT_LAST_POSITION)
    assert [line for line in lines if line.startswith(msg(YOUR_RERUN) + last)]
    assert [line for line in lines if line.startswith(shipped_prefix + last)]
    others = {k: sum(r.other_positions_loss for r in result.runs if r.key == k) / 2
              for k in ("course", "no_mask_learned")}
    assert msg(BEFORE_LAST, run=exercise_name("no_mask", "no_mask_learned"), loss=others["no_mask_learned"],
               reference=exercise_name("no_mask", "course"), ref_loss=others["course"]) in lines


def test_a_rerun_over_the_time_cap_is_said_before_it_starts(monkeypatch):
    monkeypatch.setattr(budget, "MAX_JOB_WALL_S", 60)
    at = open_page(PAGE)
    at.radio(key="lab_corpus").set_value("tang300").run()
    assert not at.button(key="lab_rerun_experiment_heads").disabled  # no refusal: it keeps the seeds it finishes
    budget_lines = [c for c in captions(at) if c.endswith(msg(RERUN_OVER_CAP, runs=2 * len(lab_rerun.RERUN_SEEDS),
                                                              limit="60 s"))]
    assert len(budget_lines) == 3  # said in each exercise's budget, before the click


def test_largest_settings_are_refused_with_the_reason_and_the_estimate():
    at = set_controls(open_page(PAGE), {"lab_n_layer": 8, "lab_n_embd": 256, "lab_n_head": 8, "lab_block": 256,
                                        "lab_batch": 64, "lab_steps": 5000})
    errors = [e.value for e in at.error]
    assert matching(errors, "This training would need about {value:,.0f} MB of memory; one reader's training may use "
                            "at most {limit:,.0f} MB on this server. Lower the batch size, block_size, n_embd or "
                            "n_layer.", limit=240), errors
    assert matching(errors, "This training would take about {value}; a training may run at most {limit}. Lower the "
                            "steps or the model's size."), errors
    assert matching(captions(at), "{params:,} parameters · head_dim {head_dim} · {tokens:,} tokens per step · "
                                  "evaluation every {every} steps · about {memory:,.0f} MB of memory (limit "
                                  "{limit:,.0f} MB) and about {time} of training on a server that is not busy: not an "
                                  "upper bound, a busier server takes longer, and a training stops at {cap} at the "
                                  "latest, keeping what it learned", limit=240)
    assert at.button(key="lab_train").disabled
    set_controls(at, {"lab_n_layer": 2, "lab_n_embd": 64, "lab_n_head": 4, "lab_block": 64, "lab_batch": 16,
                      "lab_steps": 400})
    assert not at.error and not at.button(key="lab_train").disabled  # the quick preset's size fits


def test_a_prompt_from_a_link_is_shown_as_text_not_markdown(trained):
    at = trained
    generate(at, lab_prompt="白日![x](http://evil.example/a.png)[link](http://evil.example)", lab_length=3)
    warning = matching([w.value for w in at.warning], UNKNOWN_PROMPT)[0]["chars"]
    assert "[" in warning and "(" in warning  # the dropped characters are listed ...
    assert all(warning[i - 1] == "\\" for i, c in enumerate(warning) if c in "[]()!")  # ... each escaped
    poem = next(t for t in texts(at) if t.startswith("**白日"))  # the prompt as typed, escaped: shown, not rendered
    assert poem.startswith("**" + plain("白日![x](http://evil.example/a.png)[link](http://evil.example)") + "**")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_prompt_with_characters_the_shipped_model_lacks_is_shown_as_typed(shipped, lang):
    assert shipped is not None, "the shipped model is part of the app"
    prompt = "明月☃x"  # crafted: the snowman and the Latin letter are outside the Tang vocabulary
    at = page_with(lang, lab_temp="0.0", lab_prompt=prompt, lab_length="12")
    out = generation.generate(shipped, prompt, 12, temperature=0)
    assert out.prompt.as_unk and out.prompt.unknown == ("☃", "x")
    poem = next(t for t in texts(at) if t.startswith("**明月"))
    assert poem.replace("  \n", "\n") == f"**{plain(prompt)}**" + plain(out.new)
    assert shipped.tokenizer.unk not in poem  # no U+FFFD where the reader's characters were
    assert msg(UNKNOWN_AS_UNK, lang, chars=plain("☃ x")) in warnings(at)  # which characters the model does not know
    assert not matching(warnings(at), UNKNOWN_PROMPT, lang)  # and they were not left out


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_links_over_long_prompt_and_line_are_cut_at_the_engines_bound(shipped, lang):
    limit = rules.MAX_PROMPT_CHARS
    crafted = "白日依山尽，黄河入海流。" * (limit // 12 + 40)  # longer than the bound, as a link may be
    at = page_with(lang, lab_prompt=crafted, lab_line=crafted, lab_temp="0.0", lab_length="4")
    assert at.text_input(key="lab_prompt").value == crafted[:limit] and at.text_input(key="lab_line").value == \
        crafted[:limit]
    assert at.query_params["lab_prompt"] == crafted[:limit]  # Streamlit corrected the link too
    assert cropped_note(limit, 0, shipped.config.block_size, limit - shipped.config.block_size, lang) in [
        i.value for i in at.info]  # what the model reads of it
    out = generation.generate(shipped, crafted[:limit], 4, temperature=0)
    poem = next(t for t in texts(at) if t.startswith("**白日"))
    assert poem.replace("  \n", "\n").rstrip() == (f"**{plain(crafted[:limit])}**" + plain(out.new)).rstrip()


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_long_prompt_counts_the_characters_read_as_the_unknown_token_apart(shipped, lang):
    prompt = "明月☃x" * 40  # crafted: 160 characters, half of them outside the Tang vocabulary
    block = shipped.config.block_size
    unk = sum(c not in shipped.tokenizer.stoi for c in prompt)
    known = len(prompt) - unk
    assert unk and known and len(prompt) > block
    at = page_with(lang, lab_prompt=prompt, lab_temp="0.0", lab_length="4")
    infos = [i.value for i in at.info]
    assert cropped_note(known, unk, block, len(prompt) - block, lang) in infos
    assert cropped_note(len(prompt), 0, block, len(prompt) - block, lang) not in infos  # the old count, all "known"
    one = page_with(lang, lab_prompt="明" * block + "☃", lab_temp="0.0", lab_length="4")  # one character cropped
    assert cropped_note(block, 1, block, 1, lang) in [i.value for i in one.info]

LEFT_OUT_OF_LINE = "Not in the vocabulary, left out: {chars}"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_section_5_reads_a_line_with_unknown_characters_as_the_prompt_and_names_them_as_typed(shipped, lang):
    assert shipped is not None, "the shipped model is part of the app"
    line = "明月☃x"  # crafted: the snowman and the Latin letter are outside the Tang vocabulary
    at = page_with(lang, lab_line=line, lab_prompt=line, lab_temp="0.0", lab_length="12")
    maps = internals.attention_maps(shipped, line)
    assert maps.as_unk and maps.tokens == tuple(line)
    said = [w for w in warnings(at) if w == msg(UNKNOWN_AS_UNK, lang, chars=plain("☃ x"))]
    assert len(said) == 2  # the generation's note and section 5's: the same rule, the same words
    assert not matching(warnings(at), LEFT_OUT_OF_LINE, lang) and not matching(warnings(at), UNKNOWN_PROMPT, lang)
    ticks = [f"{i}:{c}" for i, c in enumerate(line)]
    attention = next(f for f in figures(at) if title(f).startswith("attn_weights"))
    assert attention["layout"]["xaxis"]["ticktext"] == ticks and attention["layout"]["yaxis"]["ticktext"] == ticks
    assert all(pair == [ticks[i], ticks[j]] for trace in attention["data"] for i, row in enumerate(trace["customdata"])
               for j, pair in enumerate(row))  # the hover names each cell's query and key as typed
    looked = next(f for f in figures(at) if title(f) == msg(LOOKED_TITLE, lang))
    assert looked["layout"]["xaxis"]["ticktext"] == ticks
    assert shipped.tokenizer.unk not in json.dumps([attention, looked], ensure_ascii=False)  # no U+FFFD on an axis
    z = np.asarray(attention["data"][0]["z"], dtype=float)
    expected = internals.attention_maps(shipped, "明月" + shipped.tokenizer.unk * 2).attn_weights[0, 0].numpy()
    np.testing.assert_allclose(z, expected, atol=5e-5)  # what the model read: its unknown token in their place


def test_section_5_still_leaves_out_what_a_vocabulary_without_an_unknown_token_lacks(trained):
    at = trained
    at.text_input(key="lab_line").set_value("白日☃依").run()
    assert msg(LEFT_OUT_OF_LINE, chars=plain("☃")) in warnings(at)
    attention = next(f for f in figures(at) if title(f).startswith("attn_weights"))
    assert attention["layout"]["xaxis"]["ticktext"] == ["0:白", "1:日", "2:依"]

@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_dropout_caption_states_the_shipped_trade_off_and_the_choice(lang):
    data = lab_results.load_results(lab_results.DROPOUT_RESULTS_FILE)
    assert data is not None
    exp = data["experiments"]["dropout"]
    runs = {r["key"]: r for r in exp["runs"]}
    at = open_page(PAGE, lang=lang)
    cell = {key: msg(DROPOUT_CELL, lang, loss=r["fixed_val_loss_mean"], std=r["fixed_val_loss_std"],
                     rate=r["step_tokens_per_s_mean"]) for key, r in runs.items()}
    measured = msg(DROPOUT_MEASURED, lang, steps=integer(exp["steps"], lang), batch=exp["batch_size"],
                   lr=data["settings"]["learning_rate"], corpus=exp["corpus"], seeds=", ".join(map(str, exp["seeds"])),
                   cpu=data["machine"]["cpu"], threads=data["machine"]["torch_threads"], none=cell["dropout_0"],
                   resid=0.1, resid_only=cell["dropout_resid"], both=0.1, everywhere=cell["dropout_both"])
    course = PRESETS["course"].model
    rates = {"attn": course.attn_dropout_rate, "resid": course.resid_dropout_rate}
    helps = any(c["exceeds_noise"] and c["delta_mean"] < 0 for c in exp["comparisons"] if c["a"] == "dropout_0")
    if helps:
        choice = msg(DROPOUT_HELPS, lang, **rates)
    else:
        chosen = next(key for key, r in runs.items()
                      if (r["config"]["attn_dropout"], r["config"]["resid_dropout"]) == tuple(rates.values()))
        choice = msg(DROPOUT_DOES_NOT_HELP, lang, **rates, both=0.1,
                     speedup=runs[chosen]["step_tokens_per_s_mean"] / runs["dropout_both"]["step_tokens_per_s_mean"])
    assert f"{measured} {choice}" in captions(at)
    assert not at.exception


def test_a_malformed_dropout_file_gives_a_note_not_a_traceback(tmp_path, monkeypatch):
    bad = tmp_path / "lab_dropout.json"
    bad.write_text('{"format": "lab-experiments/3", "experiments": {"dropout": {"runs": []}}}', encoding="utf-8")
    monkeypatch.setattr(lab_results, "DROPOUT_RESULTS_FILE", bad)
    at = open_page(PAGE)
    assert not at.exception
    assert msg(DROPOUT_UNREADABLE) in captions(at)
    assert not matching(captions(at), DROPOUT_MEASURED)


@pytest.mark.parametrize("content", ["{not json", '{"format": "lab-exercises/0"}'])
def test_an_unreadable_exercises_file_gives_a_warning_not_a_traceback(tmp_path, monkeypatch, content):
    bad = tmp_path / "lab_exercises.json"
    bad.write_text(content, encoding="utf-8")
    monkeypatch.setattr(lab_results, "EXERCISES_FILE", bad)
    at = open_page(PAGE)
    assert not at.exception
    assert [w.value for w in at.warning] == [msg("The shipped results file cannot be read.")]


def test_a_missing_exercises_file_says_how_to_make_one(tmp_path, monkeypatch):
    monkeypatch.setattr(lab_results, "EXERCISES_FILE", tmp_path / "absent.json")
    at = open_page(PAGE)
    assert not at.exception and not at.warning
    assert msg("No precomputed results ship with this copy: run `python -m engine.lab.experiments`, or rerun a "
               "comparison below.") in [i.value for i in at.info]


#: The placeholders of section 1's prose, filled by the page from the code's constants.
PROSE_VALUES = ("poems", "min_count", "upload_mb", "val_every")
UNK_SAMPLES = ("Where a sample shows {unk}, its model wrote the unknown token: the command that made these "
               "samples let it; generation on this page leaves it out.")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_corpus_prose_takes_its_numbers_from_the_code(lang):
    from ui.page import load_parts

    body = load_parts("lab", lang)["corpus"]
    assert all(body.count("{" + name + "}") == 1 for name in PROSE_VALUES), body
    at = open_page(PAGE, lang=lang)
    assert not at.exception
    shown = next(t for t in texts(at) if integer(TANG_RECORDS, lang=lang) in t)
    assert f"{integer(budget.upload_widget_mb(budget.MAX_TEXT_BYTES), lang=lang)} M" in shown
    assert str(TANG_MIN_COUNT) in shown
    assert integer(VAL_EVERY, lang=lang) in shown and not any("{" + n + "}" in shown for n in PROSE_VALUES)


def _other(losses) -> float:
    return sum(losses[:-1]) / len(losses[:-1])


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_no_mask_outcome_is_chosen_by_the_shipped_numbers(exercises, tang_bigram, lang):
    exercise = exercises.exercise("no_mask")
    curves = {c.key: c for c in exercise.by_position}
    masked = curves["course"]
    at = open_page(PAGE, lang=lang)
    lines = [line.removeprefix("- ") for t in texts(at) for line in t.split("\n")]
    finals = []
    for key in ("no_mask_learned", "no_mask_rope"):
        free = curves[key]
        values = {"run": exercise_name("no_mask", key, lang), "other": _other(free.mean),
                  "masked": _other(masked.mean), "final": free.mean[-1], "masked_final": masked.mean[-1],
                  "second_last": len(free.mean) - 2}
        copies = values["other"] < values["masked"] and values["final"] >= values["masked_final"]
        assert msg(NO_MASK_COPIES if copies else NO_MASK_NO_COPY, lang, **values) in lines
        assert msg(NO_MASK_NO_COPY if copies else NO_MASK_COPIES, lang, **values) not in lines
        finals.append(msg("{run}: {final:.3f}", lang, run=values["run"], final=free.mean[-1]))
    worse = all(curves[k].mean[-1] > tang_bigram for k in ("no_mask_learned", "no_mask_rope"))
    joined = numbers.semicolon(lang).join(finals)  # "; ", with French's narrow no-break space before it
    assert msg(LAST_WORSE if worse else LAST_NOT_WORSE, lang, bigram=tang_bigram, finals=joined) in lines
    seed = exercise.seeds_complete[0]
    for key in exercise.runs:
        sample = next(r.samples for r in exercises.runs_of(key) if r.seed == seed)
        assert any(t.startswith(f"**{exercise_name('no_mask', key, lang)}**") and sample.greedy.split("\n")[0] in t
                   for t in texts(at)), key
    has_unk = any("\ufffd" in r.samples.greedy + r.samples.sampled for k in exercise.runs
                  for r in exercises.runs_of(k) if r.seed == seed)
    assert (msg(UNK_SAMPLES, lang, unk="\ufffd") in captions(at)) == has_unk


def _pair(verdict: str, interval, mean: float, detectable: float | None = 0.05):
    seeds = (1, 2, 3) if interval is not None else (1,)
    return lab_results.PairedDifference("course", "heads_8", seeds, (mean,) * len(seeds), mean,
                                        None if interval is None else 0.01, interval, interval,
                                        detectable if interval is not None else None, verdict)


@pytest.mark.parametrize(("verdict", "interval", "mean"), [
    ("b_beats_a", (-0.3, -0.1), -0.2), ("a_beats_b", (0.1, 0.3), 0.2), ("no_detectable_difference", (-0.1, 0.2), 0.05),
    ("too_few_seeds", None, 0.07)])
def test_each_verdict_sentence_follows_the_data(verdict, interval, mean):
    from ui.lab import experiments as E

    c = _pair(verdict, interval, mean)
    assert E.verdict_sentence(c, "8 heads", "4 heads") == verdict_line(c, "heads", "4 heads").replace(
        exercise_name("heads", "heads_8"), "8 heads")
    others = {E.verdict_sentence(_pair(v, i, m), "8 heads", "4 heads") for v, i, m in (
        ("b_beats_a", (-0.3, -0.1), -0.2), ("a_beats_b", (0.1, 0.3), 0.2),
        ("no_detectable_difference", (-0.1, 0.2), 0.05), ("too_few_seeds", None, 0.07)) if v != verdict}
    assert E.verdict_sentence(c, "8 heads", "4 heads") not in others and len(others) == 3
    changed = E.verdict_sentence(dataclasses.replace(c, mean=mean + 0.01), "8 heads", "4 heads")
    assert changed != E.verdict_sentence(c, "8 heads", "4 heads")  # the number comes from the data


def test_where_along_the_window_and_the_bigram_line_follow_the_data():
    from ui.lab import experiments as E

    c = _pair("b_beats_a", (-0.3, -0.1), -0.2)
    growing = lab_results.PositionCurve("heads_8", (1, 2, 3), (5.0,) * 16, (-0.1, -0.1) + (-0.3,) * 14)
    values = {"run": "R", "reference": "C", "split_last": 1, "split": 2, "last": 15, "seeds": "1, 2, 3",
              "level": 0.95}
    # "grows" and "shrinks" only where the seeds' growth interval leaves out 0, whatever the mean curve shows
    for interval, template in (((0.01, 0.2), ALONG_GROWS), ((-0.2, -0.01), ALONG_SHRINKS), ((-0.02, 0.2),
                                                                                            ALONG_NO_TREND)):
        growth = dataclasses.replace(_pair("a_beats_b", interval, 0.1), a="early", b="late")
        assert E.along_window_sentence(c, growing, "R", "C", growth) == msg(
            template, early=-0.1, late=-0.3, growth=0.1, low=interval[0], high=interval[1], **values
        ) + " " + msg(ALONG_CHANGE_SIGNS, run="R", reference="C")
    assert E.along_window_sentence(c, growing, "R", "C") == msg(ALONG_ONE_SEED, early=-0.1, late=-0.3, **values
                                                                ) + " " + msg(ALONG_SIGNS, run="R", reference="C")
    assert E.along_window_sentence(_pair("no_detectable_difference", (-0.1, 0.2), 0.05), growing, "R", "C") is None
    run = next(iter(lab_results.read_exercises().runs))
    low, high = dataclasses.replace(run, val_loss=4.9, seed=1), dataclasses.replace(run, val_loss=5.3, seed=2)
    assert E.bigram_sentence([("A", low), ("B", dataclasses.replace(low, val_loss=5.0))], 5.17) == msg(
        ALL_BELOW, bigram=5.17, run="B", seed=1, val=5.0)
    assert E.bigram_sentence([("A", low), ("B", high)], 5.17) == msg(
        SOME_ABOVE, count=1, total=2, bigram=5.17, runs=msg("{run}, seed {seed}: {val:.3f}", run="B", seed=2,
                                                              val=5.3))


SPECS = ("", ",", ".3f", ",.0f", ",.1f", ".2%", "g", "+.3f", "02d")


@example(value=0.5, spec=",.0f")  # Python writes 0, a reader would read an exact zero
@given(value=st.one_of(st.integers(-10**9, 10**9), st.floats(-1e9, 1e9, allow_nan=False)),
       spec=st.sampled_from(SPECS))
def test_fill_writes_english_as_python_and_french_with_its_own_signs(value, spec):
    if spec == "02d" and not isinstance(value, int) or spec == "," and isinstance(value, float):
        return  # specs the page gives only integers, or only floats with a precision
    if spec.endswith("%"):
        value = abs(value) / (1 + abs(value))  # the page's percentages are shares, in [0, 1)
    template = "{v" + (":" + spec if spec else "") + "}"
    # English is Python's format, with the minus sign U+2212 every language writes (ui.numbers); an exponent keeps
    # its hyphen (1e-05)
    python = template.format(v=value)
    if value and "f" in spec and float(python.replace(",", "")) == 0:
        # a value that is not 0 is never written as a zero: it takes the digits it needs (ui.numbers), two
        # significant ones at least, as decimals (0.50) or, below 0.001, in scientific notation (1.0E-5)
        written = fill(template, "en", v=value)
        back = float(written.replace("\u2212", "-").replace(",", "").rstrip("%")) / (100 if spec.endswith("%") else 1)
        assert back != 0 and math.isclose(back, value, rel_tol=0.05), written
        return
    assert fill(template, "en", v=value) == ("\u2212" + python[1:] if python.startswith("-") else python)
    french = fill(template, "fr", v=value)
    if "." in template.format(v=value) and "e" not in template.format(v=value):
        assert "," in french and "." not in french
    assert fill("{v}", "fr", v="a.b") == "a.b"  # text is left as it is


def test_top_p_reaches_the_generation_and_its_caption(trained):
    at = generate(trained, lab_top_p=0.5, lab_temp=0.8, lab_length=5, lab_prompt="白日", lab_top_k=20, lab_gen_seed=0)
    k = msg("top-k {k}", k=20) + " · " + msg("top-p {p:g}", p=0.5)
    assert msg(GENERATED, mode=msg("temperature {t:g}", t=0.8), k=k, seed=0, n=5) in captions(at)
    expected = generation.generate(at.session_state["lab_own"], "白日", 5, temperature=0.8, top_k=20, seed=0, top_p=0.5)
    poem = next(t for t in texts(at) if t.startswith("**白日**"))
    assert poem.replace("  \n", "\n").replace("\n", "") == ("**白日**" + plain(expected.new)).replace("\n", "")
    generate(at, lab_top_p=1.0)
    assert not [c for c in captions(at) if msg("top-p {p:g}", p=0.5) in c]


# --- the poem's form and greedy loops -----------------------------------------------------------------------------
LOOP_NOTE = ("The text falls into a loop: from new character {start} on, it writes “{span}” {copies} times over, "
             "{covered} of its {n} new characters ({share}).")
WHY_LOOPS = "Why greedy decoding loops"
FORM_PROMPT = ("The prompt does not start a poem of the form {form}: each line needs exactly its number of characters "
               "before its mark (，or 。), only characters, marks and newlines, and fewer lines than the poem has. "
               "Change the prompt or the form.")
FORM_LENGTH = ("The form {form} needs up to {needed} new characters, and new characters is set to {length}: raise it, "
               "or ask for fewer lines.")
FORM_VOCABULARY = ("This model cannot write the form {form}: its vocabulary lacks the marks that end the lines "
                   "(，and 。) or the newline, as a model trained on an English text does. Choose free lines and a "
                   "free number of lines.")


def set_form(at, line_length: int, n_lines: int, **values):
    """Chooses the poem's form (0: free) and the other generation controls, then presses Generate."""
    at.radio(key="lab_form_chars").set_value(line_length)
    at.selectbox(key="lab_form_lines").set_value(n_lines)
    return generate(at, **values)


def form_name(line_length: int, n_lines: int, lang: str = "en") -> str:
    chars = {5: "五言", 7: "七言"}.get(line_length) or msg("lines of any length", lang)
    if not n_lines:
        return chars
    return chars + ", " + fill(translations(lang).ngettext("{n} line", "{n} lines", n_lines), lang, n=n_lines)


def verse_lines(text: str) -> list[str]:
    """The lines of a poem: the characters between line marks and newlines."""
    return re.findall(f"[^{poem_forms.ODD_LINE_ENDS}{poem_forms.EVEN_LINE_ENDS}\n]+", text)


def warnings(at) -> list[str]:
    return [w.value for w in at.warning]


@pytest.mark.parametrize(("line_length", "n_lines"), [(5, 4), (7, 2), (0, 4)])
def test_the_poem_form_reaches_the_generation(trained, line_length, n_lines):
    at = set_form(trained, line_length, n_lines, lab_prompt="白日", lab_temp=0.8, lab_top_k=20, lab_top_p=1.0,
                  lab_length=120, lab_gen_seed=3)
    form = poem_forms.PoemForm(line_length or None, n_lines or None)
    expected = generation.generate(at.session_state["lab_own"], "白日", 120, temperature=0.8, top_k=20, seed=3,
                                   form=form)
    poem = next(t for t in texts(at) if t.startswith("**白日**"))
    assert poem.replace("  \n", "\n") == "**白日**" + plain(expected.new)
    lines = verse_lines(expected.text)
    assert len(lines) == n_lines
    low, high = rules.POEM_FREE_LINE
    assert all(len(line) == line_length if line_length else low <= len(line) <= high for line in lines), lines
    k = msg("top-k {k}", k=20) + " · " + form_name(line_length, n_lines)
    assert msg(GENERATED, mode=msg("temperature {t:g}", t=0.8), k=k, seed=3, n=len(expected.new)) in captions(at)
    bars = next(f for f in figures(at) if title(f) == msg(NEXT_CHAR_TITLE))  # the view draws as the form does
    assert bars["layout"]["annotations"][0]["text"] == "■ " + msg("sampled: {char}", char=expected.new[0])
    kv = next(f for f in figures(at) if any(t["name"] == msg("keys/values reused from the cache") for t in f["data"]))
    assert max(len(t["x"]) for t in kv["data"] if "x" in t) == len(expected.new)  # one step per character written
    set_form(at, 0, 0)
    assert not [c for c in captions(at) if form_name(line_length, n_lines) in c]


def page_with(lang: str, state: dict | None = None, **params: str) -> AppTest:
    """The Lab opened once in ``lang`` from a link with ``params``, with ``state`` in the session (no rerun: the
    test's copies of the widgets would format their options in English)."""
    at = open_page(PAGE, 60, lang, state, params)
    assert not at.exception, [e.value for e in at.exception]
    return at


def english_model(seed: int = 0) -> models.LabModel:
    """An untrained tiny model of an English text: its vocabulary has no line marks. Its weights come from ``seed``
    (the global generator is left as it was), so that what it writes does not depend on the tests run before."""
    english = corpus_from_bytes(b"the cat sat on the mat\n\n" * 40, "cats.txt")
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        tiny = GPT(preset("tiny", vocab_size=english.vocab_size)).eval()
    return models.LabModel(tiny, english.tokenizer, {}, "uploaded", models.weights_id(tiny, english.tokenizer))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_form_that_cannot_be_written_gets_its_reason_not_a_traceback(trained, lang):
    own = {"lab_own": trained.session_state["lab_own"], "lab_use": "own"}
    at = page_with(lang, own, lab_prompt="白日，", lab_form_chars="5", lab_form_lines="4")
    assert msg(FORM_PROMPT, lang, form=form_name(5, 4, lang)) in warnings(at)
    assert not [t for t in texts(at) if t.startswith("**白日")]  # nothing written
    with pytest.raises(poem_forms.FormError) as error:
        generation.generate(own["lab_own"], "白日", 10, form=poem_forms.PoemForm(7, 8))
    at = page_with(lang, own, lab_prompt="白日", lab_length="10", lab_form_chars="7", lab_form_lines="8")
    assert msg(FORM_LENGTH, lang, form=form_name(7, 8, lang), needed=integer(error.value.needed, lang=lang),
               length=integer(10, lang=lang)) in warnings(at)
    cats = {"lab_own": english_model(), "lab_use": "own"}
    at = page_with(lang, cats, lab_prompt="the", lab_form_chars="5")
    assert msg(FORM_VOCABULARY, lang, form=form_name(5, 0, lang)) in warnings(at)
    assert not matching(warnings(page_with(lang, cats, lab_prompt="the")), FORM_VOCABULARY, lang)


#: A prompt from which the shipped model's greedy text falls into a loop within the page's longest generation.
LOOP_PROMPT = "明月"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_greedy_loop_is_shown_with_the_span_find_loop_finds(shipped, lang):
    assert shipped is not None, "the shipped model is part of the app"
    longest = rules.GENERATE_LENGTH[1]
    at = page_with(lang, lab_temp="0.0", lab_prompt=LOOP_PROMPT, lab_length=str(longest))
    new = generation.generate(shipped, LOOP_PROMPT, longest, temperature=0).new
    loop = loops.find_loop(new)
    assert loop is not None  # the page's longest greedy text from 明月 shows the reader a loop
    note = msg(LOOP_NOTE, lang, start=integer(loop.start + 1, lang=lang), span=plain(loop.span.replace("\n", "↵")),
               copies=integer(loop.copies, lang=lang), covered=integer(loop.covered, lang=lang),
               n=integer(len(new), lang=lang), share=percent(loop.covered / len(new), lang=lang))
    assert note in [i.value for i in at.info]
    assert msg(WHY_LOOPS, lang) in [e.label for e in at.expander]
    body, fell_back = page.part_text("lab", "loops", lang)
    assert not fell_back and body.strip() in [t.strip() for t in texts(at)]


LOOP_EXAMPLE = ("Greedy decoding from {prompt}, {n} new characters: from new character {start} on, this model "
                "writes one span of {span} again and again, {copies} times over, {covered} of the {n} new characters "
                "({share}). Each copy of the span is shaded in turn.")
NO_LOOP_EXAMPLE = ("Greedy decoding from {prompts}, {n} new characters each: this model falls into no loop there (no "
                   "span written back to back over {least} characters or more).")
#: A shaded stretch of the loop example: a Markdown background directive around escaped text.
SHADED = re.compile(r":(orange|blue)-background\[((?:\\.|[^\]\\])*)\]")


def unescaped(text: str) -> str:
    """Markdown text escaped by ``plain`` back as the reader reads it."""
    return re.sub(r"\\(.)", r"\1", text)


def assert_loop_example(at, lang: str, found: loops.LoopSearch) -> None:
    """The loop example of ``found`` is on the page in ``lang``: its sentence, its text, its shaded copies."""
    out, loop = found.generation, found.loop
    prompt = msg("“{text}”", lang, text=plain(out.prompt.given)) if out.prompt.given else msg("an empty prompt", lang)
    span = fill(translations(lang).ngettext("{n} character", "{n} characters", loop.period), lang, n=loop.period)
    sentence = msg(LOOP_EXAMPLE, lang, prompt=prompt, n=len(out.new), start=loop.start + 1, span=span,
                   copies=loop.copies, covered=loop.covered, share=percent(loop.covered / len(out.new), lang=lang))
    assert sentence in texts(at)
    bold = f"**{plain(out.prompt.given)}**" if out.prompt.given else ""
    shaded = next(t for t in texts(at) if t.startswith(bold) and SHADED.search(t))
    body = shaded[len(bold):]
    shown = unescaped(SHADED.sub(lambda m: m.group(2), body).replace("  \n", "\n"))
    # the whole text; Markdown drops line breaks at the very start and end (an empty prompt starts from a newline)
    assert shown.strip("\n ") == out.new.strip("\n ")
    colours = ("orange", "blue")
    expected = [colours[(i - loop.start) // loop.period % 2] for i in range(loop.start, loop.end) if out.new[i] != "\n"]
    seen = [colour for colour, piece in SHADED.findall(body) for _char in unescaped(piece)]
    assert seen == expected  # the loop's characters, and only they, shaded, each copy of the span in turn


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_loops_box_shows_a_greedy_loop_of_the_shipped_model(shipped, lang):
    assert shipped is not None, "the shipped model is part of the app"
    if lang == "en":
        closed = page_with(lang)
        assert msg(WHY_LOOPS, lang) in [e.label for e in closed.expander]  # offered whatever the reader's text
        assert not matching(texts(closed), LOOP_EXAMPLE, lang)  # and searched only once it is opened
    at = page_with(lang, {"lab_loops": True})
    found = loops.greedy_loop(shipped)
    assert found.loop is not None  # the shipped model loops from one of the sample prompts
    assert_loop_example(at, lang, found)
    body, fell_back = page.part_text("lab", "loops", lang)
    assert not fell_back and body.strip() in [t.strip() for t in texts(at)]


def test_the_loops_box_searches_the_model_in_use():
    model = english_model()
    at = page_with("en", {"lab_own": model, "lab_use": "own", "lab_loops": True})
    found = loops.greedy_loop(model)
    assert found.tried == ("",)  # none of the Tang prompts is in its vocabulary: it starts from a newline
    assert found.loop is not None and "\n" in found.loop.span  # an untrained model loops at once, line breaks too
    assert_loop_example(at, "en", found)


def test_the_loops_box_says_when_no_greedy_text_loops(monkeypatch):
    model = english_model(seed=1)  # a model of its own: the search is cached by model id
    found = loops.greedy_loop(model)
    monkeypatch.setattr(loops, "greedy_loop", lambda _m: dataclasses.replace(found, generation=None, loop=None))
    at = page_with("en", {"lab_own": model, "lab_use": "own", "lab_loops": True})
    assert msg(NO_LOOP_EXAMPLE, prompts=msg("an empty prompt"), n=found.length,
               least=loops.LOOP_MIN_CHARS) in [i.value for i in at.info]
    assert not matching(texts(at), LOOP_EXAMPLE)

@pytest.mark.parametrize(("chars", "lines"), [("[click](https://attacker.example/x)", "<img src=x onerror=alert(1)>"),
                                             ("3", "3"), ("五言 · 7", "18"), ("6", "five"), ("nan", "-2"),
                                             ("", "1e309")])
def test_crafted_form_values_in_the_link_are_ignored(chars, lines):
    at = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    at.query_params.update({"lab_form_chars": chars, "lab_form_lines": lines})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="lab_form_chars").value == 0 and at.selectbox(key="lab_form_lines").value == 0
    assert "attacker.example" not in "\n".join(texts(at) + captions(at))


def test_a_form_in_the_link_is_read():
    at = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    at.query_params.update({"lab_form_chars": "7", "lab_form_lines": "4"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="lab_form_chars").value == 7 and at.selectbox(key="lab_form_lines").value == 4


def test_exercise_budget_caption_names_both_trainings_from_their_files(monkeypatch):
    """The exercises' table says its runs' budget, and why the shipped model (same sizes, longer training) ends lower:
    both budgets are read from the files that hold them, so a retrained asset changes the sentence."""
    data = lab_results.read_exercises()
    exercise = data.exercises[0]
    header = json.loads(shipped_files.CHECKPOINT_FILE.read_text(encoding="utf-8"))["summary"]
    steps, batch = header["steps_done"], header["train_config"]["batch_size"]
    assert steps * batch > data.steps * data.batch_size  # the shipped model saw more windows than each exercise run
    text = E.budget_caption(data, exercise)
    assert numbers.integer(data.steps, lang="en") in text and f"batch {data.batch_size} per run" in text
    assert msg("The shipped model has the course model's sizes but trained {steps} steps of batch {batch}, {factor} "
               "times as many windows, so its loss is lower.", steps=numbers.integer(steps, lang="en"), batch=batch,
               factor=numbers.integer(round(steps * batch / (data.steps * data.batch_size)), lang="en")) in text
    monkeypatch.setattr(shipped_files, "training_budget", lambda: None)  # no header: only the exercises' budget
    assert "shipped model" not in E.budget_caption(data, exercise)


TRAINING_TITLE = "Validation loss during training, mean over the seeds"
TRAINING_CAPTION = ("How the runs trained: each point is the trainer's estimate of the validation loss on a few "
                    "validation batches at that evaluation, so it differs slightly from the table's loss over the "
                    "whole validation split. Thick line: the mean over the seeds; thin lines: each seed.")
TRAINING_ALT = ("Chart of the validation loss against the optimizer step during training, mean over the seeds "
                "{seeds}: {items}.")
TRAINING_ITEM = "{run}: {first:.3f} at step {first_step}, {last:.3f} at step {last_step}"
TRAINING_BIGRAM = "The dashed line is the bigram's {bigram:.3f} nats."


def training_charts(at) -> dict[str, tuple[dict, str]]:
    """Each exercise's training chart (decoded figure) and its text alternative, by exercise name."""
    from tests.plotly_json import decode

    found = {}
    for element in at.get("plotly_chart"):
        key = re.search(r"lab_exercise_(\w+?)_training$", element.proto.id)
        if key:
            found[key.group(1)] = (decode(json.loads(element.proto.spec)), element.proto.alt)
    return found


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_exercises_training_curves_are_the_shipped_histories_averaged_over_the_seeds(exercises, tang_bigram,
                                                                                        lang):
    """Section 6 draws, per exercise, each configuration's validation loss during training: the mean over the seeds
    of the file's histories (recomputed here), each seed faint behind it, the bigram's line at the corpus's value, a
    log axis without the mask; its alternative states the first and last means, in the reader's language."""
    data = exercises
    at = open_page(PAGE, lang=lang)
    assert not at.exception, [e.value for e in at.exception]
    charts = training_charts(at)
    assert sorted(charts) == sorted(e.name for e in data.exercises)
    for exercise in data.exercises:
        fig, alt = charts[exercise.name]
        names = [exercise_name(exercise.name, k, lang) for k in exercise.runs]
        means = [t for t in fig["data"] if t["name"] in names]
        assert [t["name"] for t in means] == names
        items = []
        for key, name, trace in zip(exercise.runs, names, means, strict=True):
            runs = data.runs_of(key)
            assert len(runs) >= 2 and all(r.history.step == runs[0].history.step for r in runs)
            mean = np.array([r.history.val_loss for r in runs]).mean(axis=0)  # (seeds, evaluations) -> evaluations
            assert list(trace["x"]) == list(runs[0].history.step)
            assert list(trace["y"]) == pytest.approx(mean.tolist())
            seeds = [t for t in fig["data"] if t.get("legendgroup") == name and t is not trace]
            assert [list(t["y"]) for t in seeds] == [pytest.approx(r.history.val_loss) for r in runs]
            assert all(t["showlegend"] is False and t["line"]["width"] < trace["line"]["width"] for t in seeds)
            steps = runs[0].history.step
            items.append(msg(TRAINING_ITEM, lang, run=name, first=float(mean[0]), last=float(mean[-1]),
                             first_step=integer(steps[0], lang=lang), last_step=integer(steps[-1], lang=lang)))
        assert [s["y0"] for s in fig["layout"]["shapes"]] == pytest.approx([tang_bigram])  # the bigram, dashed
        assert all(s["line"]["dash"] == "dash" for s in fig["layout"]["shapes"])
        assert fig["layout"]["yaxis"].get("type") == ("log" if exercise.name == "no_mask" else None)
        assert title(fig) == msg(TRAINING_TITLE, lang)
        assert fig["layout"]["xaxis"]["title"]["text"] == msg("step", lang)
        assert fig["layout"]["separators"] == plotly_separators(lang)
        seeds = sorted({r.seed for k in exercise.runs for r in data.runs_of(k)})
        assert alt == (msg(TRAINING_ALT, lang, seeds=", ".join(integer(s, lang=lang) for s in seeds),
                           items=numbers.semicolon(lang).join(items))
                       + " " + msg(TRAINING_BIGRAM, lang, bigram=tang_bigram))
        if exercise.name == "no_mask":  # the bigram's label sits at its line on the log axis
            assert [a["y"] for a in fig["layout"]["annotations"] if a.get("yref") == "y"] == pytest.approx(
                [math.log10(tang_bigram)])
    assert msg(TRAINING_CAPTION, lang) in captions(at)
    if lang != "en":  # every word of the chart and its caption translated
        for msgid in (TRAINING_TITLE, TRAINING_CAPTION, TRAINING_ALT, TRAINING_ITEM, TRAINING_BIGRAM, "seed {seed}",
                      "step"):
            assert translations(lang).gettext(msgid) != msgid, msgid
        assert not [alt for _fig, alt in charts.values() if alt.startswith("Chart of")]
