"""Every page's notebook, built as its button builds it and run on a Jupyter kernel of its own.

Each page runs once under AppTest (English, default controls); its real ``ui.notebook.download_button`` is
wrapped to keep what the page recorded (prose parts, listings) and its settings. The notebooks are then built in
French, German and English, with those settings and with non-default ones, and executed with nbclient on one
fresh ipykernel kernel started for this module (a kernel start costs more than most notebooks): before each
notebook the kernel's namespace is cleared and every ``engine`` module dropped, so a notebook has only what it
carries. The numbers its cells print must equal the page's, computed here by the same engine calls, and the
chapter's printed values at 4 decimals where the page checks them with the chapter's settings.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import json
import shlex
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import streamlit as st
import torch
from hypothesis import given
from hypothesis import strategies as st_
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from playwright.sync_api import sync_playwright
from streamlit.testing.v1 import AppTest

from engine import attention as A
from engine import chapter, notebook
from engine.baselines import corpus_baselines
from engine.corpus import RECORD_SEPARATOR, corpus_from_text
from engine.gpt import GPTConfig
from engine.lab.generation import generate
from engine.lab.internals import attention_maps
from engine.lab.models import LabModel
from engine.lab.poem_forms import PoemForm
from engine.sections import (
    causal_mask,
    dropout,
    memory_layout,
    multi_head,
    positional_encodings,
    self_attention,
    trainable_weights,
)
from engine.training import EarlyStop, TrainConfig, train
from tests.browser.test_browser import CHROMIUM, LAUNCH_ARGS, free_port, start_server, stop_server, wait_ready
from tests.plotly_json import ROOT, decode
from ui import i18n, nav, questions
from ui import notebook as ui_notebook
from ui.i18n import LANGUAGES
from ui.numbers import plotly_separators

SLUGS = ("home", "self_attention", "trainable_weights", "causal_mask", "dropout", "multi_head", "memory_layout",
         "positional_encodings", "lab")
LANGS = tuple(LANGUAGES)
#: The Lab's notebook trains this tiny model a few steps (the page's own settings would train for minutes).
TINY_MODEL = {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": 16, "dropout": 0.0}
TINY_TRAINING = {"steps": 4, "batch_size": 4, "warmup_steps": 1, "eval_interval": 2, "eval_iters": 2}
#: Settings other than the page's defaults, by recipe parameter.
OTHER = {
    "self_attention": {"query_token": "Your", "inputs": [[0.5, 0.1, 0.9], *[list(r) for r in A.CHAPTER_INPUTS[1:]]],
                       "scale": 120.0, "dtype": "float16", "jacobian_query": "starts"},
    "trainable_weights": {"seed": 7, "d_out": 3, "query_token": "step", "seed_v2": 5},
    "causal_mask": {"leak_token": "with", "leak_delta": -2.5, "triu_k": -1, "nan_row": "Your",
                    "guard": "finite_min"},
    "dropout": {"seed": 5, "mean_p": 0.2, "layer_p": 0.3},
    "multi_head": {"seed": 7, "line": "床前明月光照地上", "n_embd": 32, "num_heads": 8, "copy_heads": 3,
                   "copy_dim": 4, "try_d_out": 30, "try_heads": 4},
    "memory_layout": {"num_tokens": 3, "num_heads": 4, "head_dim": 1, "start_shape": "2, 3, 4",
                      "operation": "transpose_view", "new_shape": "-1", "d0": 0, "d1": 2, "cost_batch": 2,
                      "cost_heads": 4, "cost_head_dim": 16, "cost_dtype": "bfloat16 / float16"},
    "positional_encodings": {"n_embd": 16, "seed": 1, "table_block_size": 32, "table_n_embd": 9, "head_dim": 6,
                             "rope_position": 40, "score_encoding": "sinusoidal", "score_T": 5, "shift": 7},
    "lab": {"training": {"seed": 7}, "prompt": "明月", "temperature": 1.3, "top_k": 0, "top_p": 0.9, "length": 12,
            "sampling_seed": 3, "line_length": 5, "n_lines": 2, "line": "床前明月光", "patience": 0},
}
#: The values each page checks against the chapter, by printed name, where the chapter's settings are used.
CHAPTER = {
    "self_attention": {"attn_scores": chapter.SIMPLE_SCORES_JOURNEY,
                       "attn_weights": chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY,
                       "naive_weights": chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY,
                       "attn_scores[:2]": chapter.SIMPLE_SCORES_FIRST_ROWS},
    "trainable_weights": {"query": chapter.TRAINABLE_QUERY_2, "attn_scores": chapter.TRAINABLE_SCORES_2,
                          "attn_weights": chapter.TRAINABLE_WEIGHTS_2, "context_vec": chapter.TRAINABLE_CONTEXT_2,
                          "SelfAttention_v1": chapter.SA_V1_OUTPUT, "SelfAttention_v2": chapter.SA_V2_OUTPUT},
    "causal_mask": {"attn_weights": chapter.SA_V2_WEIGHTS, "masked_simple_norm": chapter.CAUSAL_WEIGHTS,
                    "masked_scores": chapter.CAUSAL_MASKED_SCORES, "attn_weights_causal": chapter.CAUSAL_WEIGHTS},
    "dropout": {"dropout(ones)": chapter.DROPOUT_ONES, "dropout(attn_weights)": chapter.DROPOUT_CAUSAL},
    "multi_head": {"context_vecs[0]": chapter.MHA_WRAPPER_OUTPUT,
                   "split.context_vecs[0][0]": chapter.MHA_SPLIT_FIRST_ROW},
    "memory_layout": {"M.view(3, 2)": chapter.LAYOUT_VIEW_3_2, "M.transpose(0, 1)": chapter.LAYOUT_TRANSPOSED,
                      "storage": chapter.LAYOUT_STORAGE, "reading_order": chapter.LAYOUT_TRANSPOSED_READING_ORDER},
}


#: Values the notebook prints at fewer than 4 decimals (as the page shows them), by printed name.
DECIMALS = {"overflow": 2, "underflow": 2, "angle_deg": 1}


def same(name: str, printed, expected) -> bool:
    """``printed`` (read back from JSON) equals the page's ``expected``: text, truth values and None exactly,
    numbers at the decimals the notebook prints (NaN where the page has NaN)."""
    if expected is None or isinstance(expected, str | bool) or (
            isinstance(expected, list) and expected and isinstance(expected[0], str | bool)):
        return printed == expected
    got = torch.as_tensor(printed, dtype=torch.float64)
    want = torch.as_tensor(expected, dtype=torch.float64)
    if got.shape != want.shape or not torch.equal(got.isnan(), want.isnan()):
        return False
    keep = ~want.isnan()
    return chapter.matches(got[keep], want[keep], DECIMALS.get(name, 4))


def tokens() -> list[str]:
    return list(A.CHAPTER_TOKENS)


def page_values(slug: str, s: dict) -> dict[str, object]:
    """What page ``slug`` shows with settings ``s`` (the recipes' parameters, defaults filled), by printed name."""
    x = A.chapter_inputs()
    if slug == "home":
        return {"inputs": x}
    if slug == "self_attention":
        inputs = torch.tensor(s["inputs"], dtype=torch.float32)
        steps = self_attention.query_walkthrough(inputs, tokens().index(s["query_token"]))
        every = self_attention.loop_vs_matmul(inputs)
        numerics = self_attention.softmax_numerics(steps.attn_scores, s["scale"], self_attention.DTYPES[s["dtype"]])
        scores = A.dot_scores(inputs, inputs[tokens().index(s["jacobian_query"])])  # (6,)
        naive_jac = self_attention.naive_jacobian_check(scores)
        return {"attn_scores": steps.attn_scores, "naive_weights": steps.naive_weights,
                "attn_weights": steps.attn_weights, "attn_scores[:2]": every.attn_scores[:2],
                "context_vec": every.context_vec, "naive_broken": numerics.naive_broken,
                "stable_finite": numerics.stable_finite,
                "overflow": numerics.overflow, "underflow": numerics.underflow,
                **{c: numerics.table[c].tolist() for c in self_attention.NUMERICS_COLUMNS},
                "softmax_jacobian": self_attention.jacobian_check(scores).closed_form,
                "naive_jacobian": None if naive_jac is None else naive_jac.closed_form}
    if slug == "trainable_weights":
        steps = trainable_weights.trainable_walkthrough(x, s["seed"], s["d_out"], tokens().index(s["query_token"]))
        outputs = trainable_weights.v1_v2_outputs(x, s["d_out"], s["seed"], s["seed_v2"])
        exercise = trainable_weights.exercise_3_1(x, s["d_out"], s["seed"], s["seed_v2"])
        init = trainable_weights.init_comparison()
        sweep = trainable_weights.dk_sweep()
        return {"query": steps.query, "attn_scores": steps.attn_scores, "attn_weights": steps.attn_weights,
                "context_vec": steps.context_vec, "SelfAttention_v1": outputs.v1, "SelfAttention_v2": outputs.v2,
                "max_abs_diff_before": exercise.max_abs_diff_before, "equal_after": exercise.equal_after,
                **{f"dk.{c}": sweep.stats[c].tolist() for c in ("var_scaled", "w_max_unscaled")},
                **{f"{i}.var_xw": rows["var_xw"].tolist() for i, rows in init.groupby("init", sort=False)}}
    if slug == "causal_mask":
        two = causal_mask.mask_two_ways(causal_mask.v2_scores(x, seed=chapter.SA_V2_SEED, d_out=2), d_k=2)
        leak = causal_mask.leakage_test(x, tokens().index(s["leak_token"]), s["leak_delta"])
        triu = causal_mask.triu_explorer(6, s["triu_k"])
        row = causal_mask.masked_row_demo(causal_mask.v2_scores(x), tokens().index(s["nan_row"]), s["guard"])
        buffers = causal_mask.buffer_demo("meta")
        return {"attn_weights": two.attn_weights, "masked_simple_norm": two.masked_simple_norm,
                "masked_scores": two.masked_scores, "attn_weights_causal": two.attn_weights_causal,
                "changed_rows": list(leak.changed_rows), "triu_mask": triu.mask,
                "visible_per_row": list(triu.visible_per_row), "kind": triu.kind,
                "masked_row.attn_weights": row.attn_weights, "nan_rows": list(row.nan_rows),
                "buffer.mask_device": list(buffers["mask_device"]), "buffer.forward_ok": list(buffers["forward_ok"])}
    if slug == "dropout":
        weights = dropout.chapter_causal_weights(x)
        pair = dropout.dropout_pair(weights, chapter.DROPOUT_P, s["seed"])
        mean = dropout.dropout_expectation(weights, s["mean_p"], n_masks=2000, seed=0)
        modes = dropout.train_vs_eval(x, s["layer_p"], chapter.DROPOUT_SEED)
        return {"dropout(ones)": pair.ones, "dropout(attn_weights)": pair.weights, "final_error": mean.final_error,
                "error_after_10": mean.error_after_10, "train_1": modes.train_1, "eval_1": modes.eval_1}
    if slug == "multi_head":
        used = multi_head.page_line(s["line"], s["max_line"])
        run = multi_head.heads_on_line(used.line, s["n_embd"], s["num_heads"], multi_head.LESSON_SEED)
        check = multi_head.split_check(s["try_d_out"], s["try_heads"])
        compare = multi_head.wrapper_vs_split(s["seed"], head_dim=s["copy_dim"], num_heads=s["copy_heads"])
        return {"context_vecs[0]": multi_head.wrapper_output(s["seed"]).context_vec[0],
                "attn_weights": run.attn_weights,
                "split.context_vecs[0][0]": multi_head.split_output(s["seed"]).context_vec[0, 0],
                "copy.max_abs_diff_before": compare.max_abs_diff_before,
                "copy.equal_after": compare.max_abs_diff < 1e-6,
                "split.head_dim": check.head_dim, "split.error": check.error, "split.nearest": list(check.nearest)}
    if slug == "memory_layout":
        layout = memory_layout.chapter_layout()
        out = {"M.view(3, 2)": layout.view_3_2, "M.transpose(0, 1)": layout.transposed, "storage": layout.storage,
               "reading_order": layout.reading}
        for stage in memory_layout.key_head_walk(s["num_tokens"], s["num_heads"], s["head_dim"]):
            out[f"{stage.title} shape"] = list(stage.layout.shape)
        base, _error = memory_layout.shape_or_default(s["start_shape"], (2, 3), allow_infer=False)
        target, _error = memory_layout.shape_or_default(s["new_shape"], (-1,))
        run = memory_layout.explore(base, s["operation"], target, (s["d0"], s["d1"]))
        cost = memory_layout.score_cost(s["cost_batch"], s["cost_heads"], s["cost_head_dim"],
                                        memory_layout.DTYPE_BYTES[s["cost_dtype"]])
        return out | {"explorer.ran": list(run.codes), "explorer.errors": list(run.errors),
                      "explorer.reading_order": list(run.order)} | {
            "scores_bytes": cost.table["scores_bytes"].tolist(), "qkv_bytes": cost.table["qkv_bytes"].tolist(),
            "scores_long": cost.scores_long, "growth": cost.growth}
    if slug == "positional_encodings":
        sweep = positional_encodings.permutation_by_layers(n_embd=s["n_embd"], n_head=4, seed=s["seed"])
        untrained = positional_encodings.untrained_table(s["table_block_size"], s["table_n_embd"], 0)
        sinusoidal = positional_encodings.sinusoidal_position_table(s["table_block_size"], s["table_n_embd"])
        out = {f"n_layer {n}": sweep.by_layer.loc[n].tolist() for n in sweep.by_layer.index} | {
            "untrained.std": untrained.std, "sinusoidal.table[0][:8]": sinusoidal.table[0, :8]}
        if positional_encodings.rope_supported(s["head_dim"]):
            rotation = positional_encodings.seeded_rope_rotation(s["head_dim"], 0)
            pairs = positional_encodings.rope_pair_table(rotation, s["rope_position"])
            out |= {"angle_deg": pairs["angle_deg"].tolist(),
                    "rotation.norms[position]": rotation.norms[s["rope_position"]]}
        else:
            out["rope_supported"] = False
        scores = positional_encodings.position_scores(s["score_encoding"], s["head_dim"], s["score_T"], s["shift"], 0)
        return out | {"scores": scores.attn_scores, "shifted": scores.shifted,
                      "distance_only": scores.distance_only}
    if slug == "lab":
        corpus = corpus_from_text(RECORD_SEPARATOR.join(s["corpus_records"]), "slice")
        baselines = corpus_baselines(corpus)
        model = s["model"]
        config = GPTConfig(**{**model, "vocab_size": corpus.vocab_size,
                              "block_size": min(model["block_size"], corpus.max_block_size)})
        watch = EarlyStop(s["patience"])
        result = train(config, corpus, TrainConfig(**s["training"]), callbacks=watch, stop=watch)
        lab_model = LabModel.from_result(result)
        form = PoemForm(s["line_length"] or None, s["n_lines"] or None) if s["line_length"] or s["n_lines"] else None
        generation = generate(lab_model, s["prompt"], s["length"], s["temperature"],
                              s["top_k"] or None, s["sampling_seed"], top_p=s["top_p"], form=form)
        maps = attention_maps(lab_model, s["line"])
        return {"unigram.val_loss": baselines.unigram.val_nats, "bigram.val_loss": baselines.bigram.val_nats,
                "steps": result.history["step"].tolist(), "train_loss": result.history["train_loss"].tolist(),
                "val_loss": result.history["val_loss"].tolist(), "best_val_loss": watch.best,
                "stopped_early_at": watch.stopped_at, "generated": generation.new, "row_sum": maps.row_sum,
                "tokens": list(maps.tokens)}
    raise KeyError(slug)


@pytest.fixture(scope="module")
def pages():
    """Each page run once under AppTest in English: ``{slug: (record, settings)}`` from its real button call."""
    captured: dict[str, tuple] = {}
    original = ui_notebook.download_button

    def wrapped(**settings):
        original(**settings)
        slug = ui_notebook.page.current().slug
        captured[slug] = (ui_notebook.page.recorded(), ui_notebook.page_settings(slug, st.session_state, settings))

    ui_notebook.download_button = wrapped
    try:
        for slug in SLUGS:
            script = "app.py" if slug == "home" else f"views/{slug}.py"  # Home's page links need the navigation
            app = AppTest.from_file(str(ROOT / script), default_timeout=180)
            app.session_state["lang"] = "en"
            app.run()
            assert not app.exception, [e.value for e in app.exception]
            assert app.sidebar.get("download_button"), slug
    finally:
        ui_notebook.download_button = original
    return captured


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One ipykernel kernel of this interpreter, in an empty folder (no project file in reach)."""
    km = KernelManager(kernel_name="python3")
    km.kernel_spec.argv[0] = sys.executable
    km.start_kernel(cwd=str(tmp_path_factory.mktemp("kernel")))
    yield km
    km.shutdown_kernel(now=True)


PLOTLY_MIME = "application/vnd.plotly.v1+json"
RESET = ("%reset -f\nimport sys\nfor _name in [m for m in sys.modules if m == 'engine' or m.startswith('engine.')]:\n"
         "    del sys.modules[_name]\n")
WHERE = "import engine, engine.chapter\nprint(engine.__file__, engine.chapter.__file__)"


def execute(km, nb) -> tuple[list[str], list[dict]]:
    """Run ``nb`` (a copy, after a cell that clears the kernel) on ``km``; the output lines of its numbers cells
    and the Plotly figures they display (their JSON); the output lines of its exercises' answer cells are kept in
    :data:`ANSWERS`."""
    run = copy.deepcopy(nb)
    run.cells.insert(0, nbformat.v4.new_code_cell(RESET))
    run.cells.append(nbformat.v4.new_code_cell(WHERE))
    NotebookClient(run, km=km, timeout=240).execute()
    where = "".join(o.get("text", "") for o in run.cells[-1].outputs if o.get("name") == "stdout")
    assert where.split() == ["engine/__init__.py", "engine/chapter.py"]  # the notebook's modules, no file
    lines, figures = [], []
    for cell in run.cells:
        if cell.cell_type == "code" and notebook.NUMBERS_TAG in cell.metadata.get("tags", []):
            lines += "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout").splitlines()
            figures += [o["data"][PLOTLY_MIME] for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]
    ANSWERS[:] = ["".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout").splitlines()
                  for cell in run.cells if notebook.EXERCISE_TAG in cell.metadata.get("tags", [])]
    return lines, figures


#: The output lines of each answer cell of the notebook :func:`execute` ran last.
ANSWERS: list[list[str]] = []


def printed(lines: list[str]) -> tuple[dict[str, object], list[tuple[str, bool]]]:
    """``{name: value}`` of the ``name = value`` lines, and ``(name, ✓)`` of the chapter lines under them."""
    values, marks, last = {}, [], None
    for line in lines:
        if line.lstrip().startswith("≈"):
            marks.append((last, line.rstrip().endswith("✓")))
        elif " = " in line:
            last, _sep, text = line.rpartition(" = ")
            values[last] = json.loads(text)
    return values, marks


def settings_for(slug: str, base: dict, variant: str) -> dict:
    s = dict(base)
    if slug == "lab":
        s["model"] = {**s["model"], **TINY_MODEL}
        s["training"] = {**s["training"], **TINY_TRAINING}
    if variant == "other":
        for key, value in OTHER[slug].items():
            s[key] = {**s[key], **value} if isinstance(value, dict) and isinstance(s.get(key), dict) else value
    return s


def full_settings(slug: str, s: dict) -> dict:
    """``s`` with every recipe parameter it lacks at its default (the notebook's settings cell)."""
    ns: dict = {}
    exec(notebook.settings_cell(list(notebook.page_recipes(ui_notebook.recipes_module(slug)).values()), s),  # noqa: S102
         ns)
    return {k: v for k, v in ns.items() if not k.startswith("__")}


VARIANTS = ("default", "other")
#: (slug, variant, the language the notebook runs in): each page runs in two of the three languages, each
#: language as often as the others; the notebooks of the other languages have the same code cells (checked).
CASES = [(slug, variant, LANGS[(i + j) % len(LANGS)]) for i, slug in enumerate(SLUGS)
         for j, variant in enumerate(VARIANTS) if variant == "default" or slug in OTHER]


@pytest.mark.parametrize(("slug", "variant", "run_lang"), CASES)
def test_notebook_prints_the_pages_numbers(pages, kernel, slug, variant, run_lang):
    record, base = pages[slug]
    s = settings_for(slug, base, variant)
    if slug in ("self_attention", "lab"):  # the button adds the page's separators (ui.notebook.download_button)
        s["number_separators"] = plotly_separators(run_lang)
    built = {lang: notebook.build(ui_notebook.recipes_module(slug), ui_notebook.notebook_items(record, lang), s,
                                  _labels(slug, lang), ui_notebook.exercises(slug, s, lang)) for lang in LANGS}
    for lang, nb in built.items():
        nbformat.validate(nb)
        prose = [c.source for c in nb.cells if c.cell_type == "markdown"]
        assert ui_notebook.page.part_text(slug, "intro", lang)[0] in prose
        assert _labels(slug, lang).numbers in prose
        assert code_cells(nb) == code_cells(built["en"])
    assert len({built[lang].cells[0].source for lang in LANGS}) == len(LANGS)  # the title cell in each language
    lines, figures = execute(kernel, built[run_lang])
    values, marks = printed(lines)
    expected = page_values(slug, full_settings(slug, s))
    if slug == "self_attention":  # the page's heatmap of attn_weights, in the reader's number format
        (figure,) = figures
        every = self_attention.loop_vs_matmul(torch.tensor(full_settings(slug, s)["inputs"]))
        assert chapter.matches(figure["data"][0]["z"], every.attn_weights, 4)
        assert figure["layout"]["separators"] == plotly_separators(run_lang)
    if slug == "lab":  # the loss chart with its two baselines, then the attention map of every head
        loss, attention = figures
        assert [t["name"] for t in loss["data"][:3]] == ["step_losses", "train_loss", "val_loss"]
        assert chapter.matches(decode(dict(loss["data"][2]["y"])), expected["val_loss"], 4)
        assert sorted(shape["y0"] for shape in loss["layout"]["shapes"]) == pytest.approx(
            sorted([expected["unigram.val_loss"], expected["bigram.val_loss"]]))
        assert len(attention["data"]) == s["model"]["n_layer"] * s["model"]["n_head"]
    assert set(expected) <= set(values), sorted(set(expected) - set(values))
    for name, value in expected.items():
        assert same(name, values[name], value), (name, values[name], value)
    if variant == "default" and slug in CHAPTER:
        for name, value in CHAPTER[slug].items():
            assert chapter.matches(values[name], value, 4), name
        checked = {name for name, _ok in marks}
        assert all(ok for name, ok in marks if name in CHAPTER[slug]) and set(CHAPTER[slug]) <= checked
    if variant == "other" and slug == "self_attention":
        assert dict(marks)["attn_weights"] is False
        assert values["naive_broken"] > 0 and values["stable_finite"]  # float16 at scale 120: naive overflows
    check_exercises(slug, variant, s, built[run_lang], run_lang, record)
    timing = [i for i, c in enumerate(built[run_lang].cells) if c.source == _labels(slug, run_lang).timing]
    assert len(timing) == (1 if slug == "multi_head" else 0)
    for i in timing:  # the cell that shows how to time the variants is no numbers cell
        assert notebook.NUMBERS_TAG not in built[run_lang].cells[i + 1].metadata.get("tags", [])


def check_exercises(slug: str, variant: str, s: dict, nb, lang: str, record: tuple) -> None:
    """Each gate of the page that has an exercise is in the notebook as its question, an empty cell and a folded
    answer cell, in that order, where the page asks it (before the page's next part, not after the page); run
    (:data:`ANSWERS`), the answer cell prints the gate's answer for the notebook's settings, and with the page's
    default settings the page's own answer (its option's key, or its number within the gate's tolerance)."""
    gated = [g for g in questions.by_page(slug) if g.exercise]
    shown = ui_notebook.exercises(slug, s, lang)
    assert bool(gated) == (slug != "home")
    at = [i for i, c in enumerate(nb.cells) if notebook.EXERCISE_TAG in c.metadata.get("tags", [])]
    assert len(at) == len(ANSWERS) == len(gated)
    marked = [item[1] for item in record if item[0] == "gate"]
    assert [g.id for g in gated] == [m for m in marked if m in {g.id for g in gated}]  # every gate, in order
    exercise_cells = {j for i in at for j in (i - 2, i - 1, i)}
    for i, gate in zip(at, gated, strict=True):
        if gate.id in marked:  # asked where the page asks it: some of the page's own cells come after it
            assert any(j not in exercise_cells for j in range(i + 1, len(nb.cells))), gate.id
    for i, gate, lines in zip(at, gated, ANSWERS, strict=True):
        question, empty, answer = nb.cells[i - 2:i + 1]
        assert question.cell_type == "markdown" and question.source == shown[gated.index(gate)].question
        assert empty.cell_type == "code" and empty.source == ""
        assert answer.metadata["jupyter"] == {"source_hidden": True} and answer.metadata["collapsed"] is True
        got = printed(lines[:1])[0][notebook.ANSWER]  # the label under it may hold " = "
        wanted = gate.answer(**ui_notebook.gate_controls(gate, slug, s))
        page_value = gate.answer(**gate.defaults())
        for value in (wanted, page_value) if variant == "default" else (wanted,):
            if gate.kind.typed:
                assert abs(got - value) <= max(gate.tolerance, 0.5 * 10 ** -gate.decimals), (gate.id, got, value)
            else:
                assert got == value, (gate.id, got, value)
                assert lines[1] == shown[gated.index(gate)].options[got]  # its label, in the notebook's language


def code_cells(nb) -> list[str]:
    """The sources of the code cells, the exercises' answer cells excepted (their comment and option labels are in
    the notebook's language)."""
    return [c.source for c in nb.cells
            if c.cell_type == "code" and notebook.EXERCISE_TAG not in c.metadata.get("tags", [])]


def _labels(slug: str, lang: str) -> notebook.NotebookLabels:
    """The notebook's own sentences in ``lang``, as a reader's session would translate them."""
    before = i18n.current_language
    i18n.current_language = lambda: lang
    try:
        words = ui_notebook.labels(slug, ui_notebook.page.page_info(slug).page_heading())
    finally:
        i18n.current_language = before
    return words


@pytest.mark.browser
def test_served_button_gives_the_notebook_with_a_fragments_current_value(tmp_path):
    """In a served page, in Chromium: change page 1's query token (a control inside a fragment, so the button,
    drawn by the last full run, is not drawn again), click the sidebar's button; the file is the page's notebook
    in the reader's language, with the new token in its settings cell."""
    if CHROMIUM is None:
        pytest.fail("Chromium is not installed: run `make test` (apt-get install chromium)")
    port = free_port()
    proc = start_server(port)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page.goto(f"http://127.0.0.1:{port}/self-attention?lang=de", wait_until="commit")
            wait_ready(page, 300_000)
            page.locator('[data-testid="stMain"] [data-testid="stSelectbox"]').first.click()
            page.keyboard.type("Your")
            page.keyboard.press("Enter")
            page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
                                   timeout=120_000)
            button = page.locator('[data-testid="stSidebar"] [data-testid="stDownloadButton"] button:visible').first
            with page.expect_download(timeout=120_000) as download:
                button.click()
            assert download.value.suggested_filename == "self_attention.ipynb"
            nb = nbformat.read(download.value.path(), as_version=4)
            browser.close()
    finally:
        stop_server(proc)
    nbformat.validate(nb)
    assert "query_token = 'Your'" in code_cells(nb)[0].splitlines()
    assert nb.cells[0].source == _labels_heading("self_attention", "de")


def _labels_heading(slug: str, lang: str) -> str:
    words = _labels(slug, lang)
    return f"# {words.title}\n\n{words.about}"


#: What the notebook's install line names only to open it: the test needs only the kernel it brings.
OPENERS = {notebook.JUPYTER: "ipykernel"}


def install_commands(nb) -> list[list[str]]:
    """The ``pip install`` commands of the notebook's install cell (its first code block), split into words."""
    text = nb.cells[1].source
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    return [shlex.split(line) for line in block.strip().splitlines()]


def offline_venv(commands: list[list[str]], where: Path) -> Path:
    """A fresh virtual environment (``python -m venv``: the standard library and nothing else) holding exactly the
    distributions ``commands`` install, with their dependencies, linked from this interpreter's environment: the
    machine cannot reach PyTorch's index, so the CPU-index line is mapped to the CPU build installed here, whose
    version must be the one named (as every other version); the Jupyter front end is mapped to its kernel.

    Returns:
        The environment's python.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    (site,) = where.glob("lib/python*/site-packages")
    named = []
    for words in commands:
        assert words[:2] == ["pip", "install"], words
        args = words[2:]
        if "--index-url" in args:
            at = args.index("--index-url")
            assert args[at + 1] == notebook.TORCH_CPU_INDEX and all(a.startswith("torch==") for a in args[:at]), words
            del args[at:at + 2]
        for arg in args:
            req = Requirement(OPENERS.get(arg, arg))
            installed = importlib.metadata.version(req.name)
            assert not req.specifier or Version(installed).public in req.specifier, (arg, installed)
            named.append(req.name)
    seen: set[str] = set()
    todo = list(named)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        dist = importlib.metadata.distribution(name)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            if not (site / top).exists() and not top.endswith(".pth"):
                (site / top).symlink_to(dist.locate_file(top))
    return where / "bin" / "python"


def modules_of(requirement: str) -> list[str]:
    """The top-level modules the distribution of a requirement provides."""
    name = canonicalize_name(Requirement(requirement).name)
    return sorted(module for module, dists in importlib.metadata.packages_distributions().items()
                  if name in {canonicalize_name(d) for d in dists} and not module.startswith("_"))


@contextlib.contextmanager
def venv_kernel(python: Path, cwd: Path):
    km = KernelManager(kernel_name="python3")
    km.kernel_spec.argv[0] = str(python)
    km.start_kernel(cwd=str(cwd))
    try:
        yield km
    finally:
        km.shutdown_kernel(now=True)


#: The Lab notebook's training in the fresh environment: the one-click model, fewer steps (the page's 2 300 take
#: minutes on two cores; the run time and losses of the page's own settings are in the report of issue 37).
VENV_TRAINING = {"steps": 60, "batch_size": 8, "eval_interval": 20, "eval_iters": 4, "warmup_steps": 6}


def test_lab_notebook_installs_from_its_own_line_and_learns(pages, tmp_path):
    """The Lab's notebook, built as its button builds it (French), names every module it imports on its install
    line; a fresh environment holding only what that line installs runs it top to bottom: the validation loss
    falls, the loss chart with the slice's two baselines and the attention map are drawn, and it generates."""
    record, base = pages["lab"]
    s = {**base, "training": {**base["training"], **VENV_TRAINING}, "number_separators": plotly_separators("fr")}
    nb = notebook.build(ui_notebook.recipes_module("lab"), ui_notebook.notebook_items(record, "fr"), s,
                        _labels("lab", "fr"))
    commands = install_commands(nb)
    assert commands[0][:3] == ["pip", "install", "torch==2.13.0"]
    assert {Requirement(w).name for c in commands for w in c[2:] if not w.startswith("-") and "://" not in w} >= {
        "torch", "numpy", "pandas", "plotly", "safetensors", "nbformat", notebook.JUPYTER}
    python = offline_venv(commands, tmp_path / "venv")
    named = [w for c in commands for w in c[2:] if not w.startswith("-") and "://" not in w and w != notebook.JUPYTER]
    modules = [m for req in named for m in modules_of(req)]
    probe = subprocess.run([str(python), "-c", f"import sys, {', '.join(modules)}; print(sys.prefix)"],
                           capture_output=True, text=True, timeout=300)
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()) == tmp_path / "venv"
    lone = subprocess.run([str(python), "-c", "import streamlit"], capture_output=True, timeout=60)
    assert lone.returncode != 0  # the environment holds only what the line names
    run = copy.deepcopy(nb)
    run.cells.append(nbformat.v4.new_code_cell("import sys, torch\nprint(sys.prefix)\nprint(torch.__file__)"))
    (tmp_path / "empty").mkdir()
    with venv_kernel(python, tmp_path / "empty") as km:
        NotebookClient(run, km=km, timeout=600).execute()
    where = "".join(o.get("text", "") for o in run.cells[-1].outputs if o.get("name") == "stdout").split()
    assert where[0] == str(tmp_path / "venv") and where[1].startswith(str(tmp_path / "venv"))
    lines, figures = [], []
    for cell in run.cells:
        if cell.cell_type == "code" and notebook.NUMBERS_TAG in cell.metadata.get("tags", []):
            lines += "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout").splitlines()
            figures += [o["data"][PLOTLY_MIME] for o in cell.outputs if PLOTLY_MIME in o.get("data", {})]
    values, _marks = printed(lines)
    val = values["val_loss"]
    assert len(val) == VENV_TRAINING["steps"] // VENV_TRAINING["eval_interval"] + 1
    assert val[-1] < val[0] - 1.0, val  # from about ln(V) = 8.6 nats: it learns
    assert values["bigram.val_loss"] < values["unigram.val_loss"] < val[0]
    assert len(figures) == 2 and values["generated"]
    assert [t["name"] for t in figures[0]["data"][:3]] == ["step_losses", "train_loss", "val_loss"]


def test_a_line_without_a_module_fails_the_notebook(pages, tmp_path):
    """The control: the Lab's notebook in an environment from its install line less safetensors stops in its
    engine cell on ``No module named 'safetensors'``, the failure of the notebook the review installed."""
    record, base = pages["lab"]
    nb = notebook.build(ui_notebook.recipes_module("lab"), ui_notebook.notebook_items(record, "en"),
                        settings_for("lab", base, "default"), _labels("lab", "en"))
    commands = [[w for w in c if not w.startswith("safetensors")] for c in install_commands(nb)]
    python = offline_venv(commands, tmp_path / "venv")
    (tmp_path / "empty").mkdir()
    with venv_kernel(python, tmp_path / "empty") as km, pytest.raises(CellExecutionError, match="safetensors"):
        NotebookClient(copy.deepcopy(nb), km=km, timeout=600).execute()


def test_the_notebook_opens_on_its_title_install_and_settings():
    """What a reader sees first: the title, the install commands, the settings; the engine's source comes after, in
    one folded cell, and a long setting (the Lab's training text) in a folded cell of its own."""
    words = _labels("lab", "de")
    records = ["春眠不觉晓\n处处闻啼鸟"] * 400
    nb = notebook.build(ui_notebook.recipes_module("lab"), [], {"corpus_records": records}, words)
    kinds = [(c.cell_type, c.metadata.get("jupyter", {}).get("source_hidden", False)) for c in nb.cells[:8]]
    assert kinds[:4] == [("markdown", False)] * 3 + [("code", False)]
    assert nb.cells[1].source.startswith(words.install) and words.cuda in nb.cells[1].source
    assert len(nb.cells[3].source) < notebook.BULKY_SETTING_CHARS * 4 and "corpus_records" not in nb.cells[3].source
    assert nb.cells[4].source == words.data and nb.cells[5].source.startswith("corpus_records = ")
    assert nb.cells[6].source == words.engine and "ENGINE_SOURCES" in nb.cells[7].source
    assert kinds[5] == kinds[7] == ("code", True)
    assert sum("ENGINE_SOURCES = " in c.source for c in nb.cells) == 1


@given(st_.floats(width=32, allow_nan=False, allow_infinity=False))
def test_settings_are_written_as_the_reader_set_them(x):
    """A float32 value widened to float64 (a tensor's ``tolist()``) is written as its shortest decimal that reads
    back as the same float32 (0.43, not 0.4300000071525574); a float64 that is no float32 is written as it is."""
    written = notebook.plain([x, {"p": x}])
    assert torch.tensor(written[0], dtype=torch.float32).item() == x
    assert written[1]["p"] == written[0] and len(repr(written[0])) <= len(repr(x))
    assert notebook.plain(0.4300000071525574) == 0.43 and notebook.plain(0.1) == 0.1
    assert notebook.settings_cell([ui_notebook.recipes_module("self_attention").self_attention_query],
                                  {"inputs": torch.tensor(A.CHAPTER_INPUTS).tolist()}).startswith(
        "inputs = [[0.43, 0.15, 0.89], ")


def test_every_page_with_a_button_has_its_recipes_module():
    """The page registry names each page's recipes module; each page whose view draws the notebook button has one
    with recipes, and engine/notebooks holds no module of a page that is not in the registry."""
    with_button = {p.slug for p in nav.PAGES if "notebook.download_button(" in (ROOT / p.script).read_text()}
    assert with_button == set(SLUGS)
    for slug in with_button:
        assert notebook.page_recipes(ui_notebook.recipes_module(slug))
    modules = {p.stem for p in (ROOT / "engine" / "notebooks").glob("*.py")} - {"__init__", "core"}
    assert modules == with_button


def _recipe_that_sets_steps(inputs: list = A.CHAPTER_INPUTS, query_token: str = "journey"):
    """A recipe whose cell sets ``steps`` for later cells (declared ``global``, as the notebook builder reads it)."""
    global steps
    steps = self_attention.query_walkthrough(torch.tensor(inputs), list(A.CHAPTER_TOKENS).index(query_token))


def test_an_exercise_waits_past_its_mark_for_the_names_its_answer_reads():
    """A gate marked before the cell that defines what its answer reads (``steps``, set by the recipe of
    query_walkthrough) gets its exercise right after that cell, not at the mark, where running it would raise
    NameError; an exercise whose answer needs no name of the page stays at its mark."""
    from engine.notebooks import self_attention as home

    late = notebook.Exercise(question="LATE?", answer=A.dot_scores, comment="late", decimals=4, gate="late",
                             controls=(("inputs", "steps.attn_scores[:, None]"), ("query", "torch.ones(1)")))
    early = notebook.Exercise(question="EARLY?", answer=A.dot_scores, comment="early", decimals=4, gate="early",
                              controls=(("inputs", "torch.ones(6, 1)"), ("query", "torch.ones(1)")))
    items = [notebook.GateMark("late"), notebook.GateMark("early"), notebook.Prose("PROSE"),
             notebook.Listing((self_attention.query_walkthrough,)), notebook.Prose("AFTER")]
    cells = notebook._page_cells(home, items, _labels("self_attention", "en"), [late, early],
                                 {"query_walkthrough": _recipe_that_sets_steps}, frozenset(), {"show", "say"},
                                 notebook._Imports())
    sources = [c.source for c in cells]
    numbers = next(i for i, c in enumerate(cells) if notebook.NUMBERS_TAG in c.metadata.get("tags", []))
    assert "steps = self_attention.query_walkthrough(" in sources[numbers]
    assert sources.index("EARLY?") < sources.index("PROSE")  # at its mark
    assert numbers < sources.index("LATE?") < sources.index("AFTER")  # right after the cell that sets steps
    assert "answer = dot_scores(inputs=steps.attn_scores[:, None], query=torch.ones(1))" in sources[
        sources.index("LATE?") + 2]
    unmarked = notebook._page_cells(home, items[2:], _labels("self_attention", "en"), [late, early],
                                    {"query_walkthrough": _recipe_that_sets_steps}, frozenset(), {"show", "say"},
                                    notebook._Imports())
    assert [c.source for c in unmarked][-6::3] == ["LATE?", "EARLY?"]  # no marks: after the page, in their order
