"""The "Download as notebook" button of every essay page and the Lab: the page, with the reader's settings and in
the reader's language, as a Jupyter notebook that runs on its own (``engine.notebook`` builds it).

A view calls :func:`download_button` once, as its last line, with the settings it holds outside the session's
widget keys; the controls bound to a widget key are read from the session when the reader clicks, so a control
inside a fragment (redrawn without the rest of the page) is taken at its current value. The file is built only
then, by Streamlit's deferred download (a callable ``data``), on a thread of its own: every word it needs is
translated while the page runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
from collections.abc import Callable, Mapping

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from engine import notebook
from engine.corpus import Corpus
from engine.lab.settings import TrainingPlan
from ui import gates, page, questions
from ui.i18n import N_, _, current_language, translations
from ui.numbers import plotly_separators

#: Per page: recipe parameter -> (widget key, conversion of the widget's value).
SESSION_SETTINGS: dict[str, dict[str, tuple[str, Callable]]] = {
    "self_attention": {"query_token": ("sa_query", str), "scale": ("sa_scale", float), "dtype": ("sa_dtype", str),
                       "jacobian_query": ("sa_jacobian_query", str)},
    "trainable_weights": {"seed": ("tw_seed", int), "d_out": ("tw_d_out", int), "query_token": ("tw_query", str),
                          "seed_v2": ("tw_seed_v2", int)},
    "causal_mask": {"leak_token": ("cm_leak_token", str), "leak_delta": ("cm_leak_delta", float),
                    "triu_k": ("cm_triu_k", int), "nan_row": ("cm_nan_row", str), "guard": ("cm_nan_guard", str)},
    "dropout": {"seed": ("do_seed", int), "mean_p": ("do_mean_p", float), "layer_p": ("do_layer_p", float)},
    "multi_head": {"seed": ("mh_seed", int), "line": ("mh_line", str), "n_embd": ("mh_n_embd", int),
                   "num_heads": ("mh_heads", int), "copy_heads": ("mh_copy_heads", int),
                   "copy_dim": ("mh_copy_dim", int), "try_d_out": ("mh_try_d_out", int),
                   "try_heads": ("mh_try_heads", int)},
    "memory_layout": {"num_tokens": ("ml_T", int), "num_heads": ("ml_H", int), "head_dim": ("ml_dh", int),
                      "start_shape": ("ml_base", str), "operation": ("ml_recipe", str),
                      "new_shape": ("ml_new_shape", str), "d0": ("ml_d0", int), "d1": ("ml_d1", int),
                      "cost_batch": ("ml_cost_B", int), "cost_heads": ("ml_cost_H", int),
                      "cost_head_dim": ("ml_cost_dh", int), "cost_dtype": ("ml_cost_dtype", str)},
    "positional_encodings": {"n_embd": ("pe_n_embd", int), "seed": ("pe_seed", int),
                             "table_block_size": ("pe_block", int), "table_n_embd": ("pe_width", int),
                             "head_dim": ("pe_head_dim", int), "rope_position": ("pe_position", int),
                             "score_encoding": ("pe_score_mode", str), "score_T": ("pe_score_T", int),
                             "shift": ("pe_shift", int)},
    "lab": {"prompt": ("lab_prompt", str), "temperature": ("lab_temp", float), "top_k": ("lab_top_k", int),
            "top_p": ("lab_top_p", float), "length": ("lab_length", int), "sampling_seed": ("lab_gen_seed", int),
            "line_length": ("lab_form_chars", int), "n_lines": ("lab_form_lines", int), "line": ("lab_line", str)},
}
#: Records of the Lab's corpus a Lab notebook carries, drawn evenly through it (a slice: the notebook must stay a
#: file one downloads; with the one-click training's settings on the Tang poems its validation loss falls below
#: the slice's bigram and stays there, or the training stops early).
LAB_RECORDS = 4000


def recipes_module(slug: str) -> types.ModuleType:
    """The notebook recipes of page ``slug``, the module the page registry names (``PageInfo.notebook``).

    Raises:
        KeyError: for a slug the registry does not hold.
    """
    return importlib.import_module(page.page_info(slug).notebook)


def notebook_items(record: tuple[tuple, ...], lang: str) -> list[notebook.Prose | notebook.Listing | notebook.GateMark]:
    """A page's record (``ui.page.recorded``) as notebook items: each prose part in ``lang`` (English where
    ``lang`` lacks it), each listing with its objects, each gate's place."""
    kinds = {"prose": lambda item: notebook.Prose(page.part_text(item[2], item[1], lang)[0]),
             "code": lambda item: notebook.Listing(tuple(item[1])),
             "gate": lambda item: notebook.GateMark(item[1])}
    return [kinds[item[0]](item) for item in record]


def session_settings(slug: str, state: Mapping) -> dict[str, object]:
    """The recipe settings of page ``slug`` found in ``state`` (the session's widget values); a key missing or
    None, or a value its conversion refuses, is left to the recipe's default (the page's)."""
    out: dict[str, object] = {}
    for name, (key, convert) in SESSION_SETTINGS.get(slug, {}).items():
        try:
            value = state[key] if key in state else None
            if value is not None:
                out[name] = convert(value)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def lab_settings(plan: TrainingPlan, corpus: Corpus | None) -> dict[str, object]:
    """The Lab notebook's settings: the model's and the training's configs, and :data:`LAB_RECORDS` records of the
    reader's corpus drawn evenly through it, in its order (all of a smaller corpus; none: the recipe's two
    lines)."""
    model = {k: v for k, v in dataclasses.asdict(plan.model).items() if k != "vocab_size"}  # the slice's, in the cell
    out: dict[str, object] = {"model": model, "training": dataclasses.asdict(plan.train)}
    if corpus is not None:
        n = len(corpus.records)
        picked = range(n) if n <= LAB_RECORDS else (i * n // LAB_RECORDS for i in range(LAB_RECORDS))
        out["corpus_records"] = [corpus.records[i].body for i in picked]
    return out


def page_settings(slug: str, state: Mapping, given: Mapping[str, object]) -> dict[str, object]:
    """The notebook settings of page ``slug``: the widget values in ``state``, then what the view ``given``
    (the Lab's ``plan`` and ``corpus`` turned into its settings by :func:`lab_settings`)."""
    given = dict(given)
    if slug == "lab":
        given = lab_settings(given.pop("plan"), given.pop("corpus", None)) | given
    return session_settings(slug, state) | given


def labels(slug: str, title: str) -> notebook.NotebookLabels:
    """The notebook's own sentences in the reader's language."""
    about = _("This notebook is the page “{title}” of the essay *Attention, step by step*, with your settings. It "
              "runs on its own, with Python 3.11 or newer. Run all cells in order; edit a listing and rerun the cells "
              "below it to see what your change does.").format(title=title)
    if slug == "lab":
        about += "\n\n" + _("The training text is a slice of the page's corpus: {n} records drawn evenly through "
                            "it, in `corpus_records`. The training stops early when the validation loss has risen "
                            "`patience` evaluations in a row, so the model does not learn its slice by heart. To train "
                            "on a whole corpus, set `corpus_records` to a list of its records (for the full Tang "
                            "poetry: the file `assets/corpus/tang.jsonl.xz` of the project, one JSON record a line, "
                            "its `body` fields).").format(n=LAB_RECORDS)
    return notebook.NotebookLabels(
        title=title, about=about,
        install=_("Install what it imports, in a fresh virtual environment (`python -m venv`), with the versions the "
                  "page ran: the first line takes PyTorch's CPU build, the second the other modules and JupyterLab "
                  "to open the notebook."),
        cuda=_("On a machine with an NVIDIA GPU, take PyTorch's CUDA build from PyPI instead of the first line:"),
        engine=_("The engine's modules this notebook uses, as the app ran them, in the next cell (folded: click it "
                 "to read them). Running it registers them, so `from engine import ...` works without installing "
                 "the project."),
        settings=_("Your settings on the page when you downloaded this notebook: change them and run the cells "
                   "below again."),
        data=_("Settings too long to read here (the training text), in the next cell, folded: click it to unfold "
               "it."),
        numbers=_("The numbers the page shows. A line starting with ≈ is the chapter's printed value: ✓ when the "
                  "two agree at 4 decimals, ✗ when they do not (expected when your settings differ from the "
                  "chapter's)."),
        timing=_("Times depend on the machine that runs them (its processor, its load, the PyTorch build), so "
                 "this notebook does not repeat the page's: the next cell shows how to measure them where you run "
                 "it, on a small input. Raise the sizes and the repeats for steadier numbers."),
        method_note=_("A method, shown as text: it runs inside its class, which the engine cell defines."),
    )


#: The words of the exercises, translated in the language the notebook is built for (on the download's thread).
EXERCISE = N_("**Exercise.** {question}")
ANSWER_COMMENT = N_("The answer, computed by the engine this notebook carries, with the settings above")


def recipe_settings(slug: str, settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with every recipe parameter of page ``slug`` it lacks at its default (the settings cell)."""
    defaults: dict[str, object] = {}
    for recipe in notebook.page_recipes(recipes_module(slug)).values():
        for param in inspect.signature(recipe).parameters.values():
            defaults.setdefault(param.name, param.default)
    return defaults | dict(settings)


def gate_controls(gate: questions.Gate, slug: str, settings: Mapping[str, object],
                  names: set[str] | None = None) -> dict[str, object]:
    """The controls the notebook gives ``gate`` (its :attr:`~ui.questions.Gate.exercise` expressions evaluated
    over the notebook's settings and the recipes' names, as its answer cell evaluates them); only those in
    ``names`` when given."""
    namespace = vars(importlib.import_module(gate.answer.__module__)) | vars(recipes_module(slug))
    namespace = namespace | recipe_settings(slug, settings)
    return {param: eval(expression, dict(namespace))  # noqa: S307 (the gate's own expressions, not the reader's)
            for param, expression in gate.exercise if names is None or param in names}


def exercises(slug: str, settings: Mapping[str, object], lang: str) -> list[notebook.Exercise]:
    """The gates of page ``slug`` as the exercises of its notebook in ``lang``: each question with its words
    filled for the notebook's ``settings`` (in the format of ``lang``), its options' labels listed."""
    t = translations(lang)
    out = []
    for gate in questions.by_page(slug):
        if not gate.exercise:
            continue
        wanted = {p.name for p in inspect.signature(gate.words).parameters.values()
                  if p.kind is not inspect.Parameter.VAR_KEYWORD}
        values = gates.words(gate, gate_controls(gate, slug, settings, wanted), lang)
        question = t.gettext(EXERCISE).format(question=t.gettext(gate.question).format(**values))
        labels = {o.key: t.gettext(o.label).format(**values) for o in gate.options}
        if labels:
            question += "\n\n" + "\n".join(f"- {label}" for label in labels.values())
        out.append(notebook.Exercise(question=question, answer=gate.answer, controls=gate.exercise,
                                     comment=t.gettext(ANSWER_COMMENT),
                                     decimals=gate.decimals if gate.kind.typed else None, options=labels,
                                     gate=gate.id))
    return out


def download_button(**settings: object) -> None:
    """The sidebar's "Download as notebook" button for the page being drawn.

    Args:
        settings: the page's settings that are not read from a widget key, by recipe parameter name (see
            ``engine.notebooks``): e.g. page 1's edited ``inputs``; the Lab passes ``plan`` and
            ``corpus``, turned into its settings by :func:`lab_settings`.
    """
    info = page.current()
    lang = current_language()
    items = notebook_items(page.recorded(), lang)
    words = labels(info.slug, info.page_heading())
    given = dict(settings)
    if any("number_separators" in inspect.signature(recipe).parameters
           for recipe in notebook.page_recipes(recipes_module(info.slug)).values()):
        given["number_separators"] = plotly_separators()  # the page's charts' separators, read in the page's run
    ctx = get_script_run_ctx()
    state = ctx.session_state if ctx is not None else {}
    now = page_settings(info.slug, st.session_state, given)

    def build() -> bytes:
        try:
            current = page_settings(info.slug, state, given)
        except RuntimeError:
            current = now
        return notebook.to_bytes(notebook.build(recipes_module(info.slug), items, current, words,
                                                exercises(info.slug, current, lang)))

    st.sidebar.download_button(
        _("Download as notebook"), data=build, file_name=f"{info.slug}.ipynb", mime="application/x-ipynb+json",
        on_click="ignore", icon=":material/download:", key="notebook_download",
        help=_("This page as a Jupyter notebook with your settings, in your language, that runs on its own."))
