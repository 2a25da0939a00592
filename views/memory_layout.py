"""Page 6: memory layout — storage, strides, view/transpose/contiguous/reshape, the keys' head split, T² cost."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine import chapter, layout
from engine.figures import memory_layout as figures
from engine.sections import memory_layout as sections
from ui import gates, notebook, page, url
from ui.i18n import N_, _, current_language, ngettext
from ui.numbers import byte_size, integer, num, plotly_separators
from ui.questions import memory_layout as questions

#: The explorer's operations, by recipe key (code stays code; the words around it are translated).
RECIPE_LABELS = {
    "view": N_("view(new shape)"),
    "reshape": N_("reshape(new shape)"),
    "transpose": N_("transpose(d0, d1)"),
    "transpose_contiguous": N_("transpose(d0, d1).contiguous()"),
    "transpose_view": N_("transpose(d0, d1).view(new shape)"),
    "transpose_reshape": N_("transpose(d0, d1).reshape(new shape)"),
    "transpose_contiguous_view": N_("transpose(d0, d1).contiguous().view(new shape)"),
    "slice_from_1": N_("[..., 1:] (drop the first column)"),
    "every_other": N_("[..., ::2] (every other column)"),
}
RECIPE_KEYS = list(sections.RECIPES)
#: Why a typed shape was refused, by :data:`engine.sections.memory_layout.SHAPE_ERRORS` key.
SHAPE_MESSAGES = {
    "empty": N_("no shape given"),
    "too_long": N_("at most {limit} characters"),
    "not_a_shape": N_("not a shape; type whole numbers separated by commas, e.g. 3, 2"),
    "too_many_dims": N_("at most {limit} dimensions here, got {count}"),
    "not_positive": N_("sizes must be positive whole numbers"),
    "two_inferred": N_("at most one size may be -1 (it is inferred)"),
    "no_inferred": N_("the starting shape cannot contain -1; give every size"),
    "too_large": N_("at most {limit} elements here, so the picture stays readable"),
}
DEFAULT_START = (2, 3)
DTYPE_NAMES = list(sections.DTYPE_BYTES)
#: The dropout rate of the layer whose saved tensors the cost section counts (the course's rate).
SAVED_DROPOUT = 0.1


def shape_message(err: sections.ShapeError) -> str:
    """The reader's-language reason a typed shape was refused."""
    return _(SHAPE_MESSAGES[err.reason]).format(**err.params)


def table_headers() -> dict[str, str]:
    """Translated headers of the layout tables (:func:`engine.sections.memory_layout.layout_table`,
    ``head_walk_table``), each attribute's code name beside its words."""
    return {"tensor": _("tensor"), "shape": _("shape"), "stride": _("strides (stride)"),
            "storage_offset": _("storage offset (storage_offset)"), "is_contiguous": _("contiguous (is_contiguous)"),
            "storage_cells": _("storage cells"), "memory": _("memory"), "stage": _("stage"),
            "shares_previous": _("storage")}


def layout_frame(table: pd.DataFrame) -> pd.DataFrame:
    """A layout table with its ``memory`` keys worded and its headers translated."""
    memory = {"original": _("original storage"), "shared": _("shares {name}'s storage").format(name="M"),
              "copy": _("own storage (a copy)")}
    return table.assign(memory=table["memory"].map(memory)).rename(columns=table_headers())


@st.cache_data(show_spinner=False)
def chapter_cached() -> tuple[sections.ChapterLayout, sections.ViewVersusReshape]:
    """The chapter's operations on its 2×3 matrix and the view/reshape comparison."""
    return sections.chapter_layout(), sections.view_versus_reshape(sections.chapter_matrix())


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def explorer_cached(shape: tuple[int, ...], recipe: str, new_shape: tuple[int, ...], dims: tuple[int, int],
                    labels: figures.WalkLabels) -> tuple[sections.Exploration, go.Figure]:
    """A recipe on 1…n laid out as ``shape``, and its memory-walk figure."""
    run = sections.explore(shape, recipe, new_shape, dims)
    return run, figures.memory_walk_figure(run.walk, run.shown_code, labels)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def head_walk_cached(num_tokens: int, num_heads: int, head_dim: int,
                     labels: figures.HeadWalkLabels) -> tuple[pd.DataFrame, go.Figure]:
    """The keys' path through the head split: a table of stages and the slider figure."""
    stages = sections.key_head_walk(num_tokens, num_heads, head_dim)
    return sections.head_walk_table(stages), figures.head_walk_figure(stages, num_heads, labels)


@st.cache_data(show_spinner=False)
def saved_cached() -> sections.SavedScores:
    """What autograd keeps of the score-shaped tensors for the backward pass, on a small layer."""
    return sections.saved_score_tensors(dropout=SAVED_DROPOUT)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def cost_cached(batch: int, num_heads: int, head_dim: int, element_size: int, lang: str,
                _labels: figures.CostLabels) -> tuple[sections.ScoreCost, go.Figure]:
    """Bytes of the score tensor and of q, k, v over T = 64 … 32768, and the log–log chart.

    The labels hold the number formatters, which Streamlit cannot hash; they follow from the other arguments
    (the title names B, H and d_h, the words and formats the language), so they are left out of the key."""
    cost = sections.score_cost(batch, num_heads, head_dim, element_size)
    return cost, figures.score_cost_figure(cost.table, _labels)


page.header()

# --- 1. the chapter's matrix ---------------------------------------------------------------------------
page.prose("storage")
matrix, comparison = chapter_cached()
# a static table: its "memory" column, the section's point, is never hidden behind a grid's sideways scroll
page.static_table(layout_frame(matrix.table))
st.markdown(f"M.view(3, 2) = {matrix.view_3_2} · M.transpose(0, 1) = {matrix.transposed}")
page.chapter_check("M.view(3, 2)", matrix.view_3_2, chapter.LAYOUT_VIEW_3_2)
page.chapter_check("M.transpose(0, 1)", matrix.transposed, chapter.LAYOUT_TRANSPOSED)
st.markdown(_("Memory under the transpose: {storage} · read in logical order: {reading}").format(
    storage=matrix.storage, reading=matrix.reading))
page.chapter_check(_("memory after the transpose (unchanged)"), matrix.storage, chapter.LAYOUT_STORAGE)
page.chapter_check(_("reading order of the transpose"), matrix.reading, chapter.LAYOUT_TRANSPOSED_READING_ORDER)
page.show_code(sections.chapter_operations, layout.index_map, sections.layout_table, layout.layout_of,
               layout.shares_storage)

# --- 2. explorer ---------------------------------------------------------------------------------------
page.prose("explorer")
@st.fragment
def explorer_section() -> None:
    """Section 2: the shapes, the operation and the dims redraw this section only."""
    c1, c2, c3, c4, c5 = st.columns([2, 4, 2, 1, 1])
    base_text = c1.text_input(_("starting shape"), value="2, 3", key="ml_base", bind="query-params")
    # the link holds the operation's own name (transpose_view), the selectbox its label in the reader's language
    recipe = url.choice(c2.selectbox, _("operation"), RECIPE_KEYS, key="ml_recipe", default=RECIPE_KEYS[0],
                        format_func=lambda k: _(RECIPE_LABELS[k]))
    new_text = c3.text_input(_("new shape (view / reshape)"),
                             value="3, 2", key="ml_new_shape", bind="query-params")
    d0 = url.int_input(c4, "d0", min_value=-4, max_value=3, step=1, value=0, key="ml_d0")
    d1 = url.int_input(c5, "d1", min_value=-4, max_value=3, step=1, value=1, key="ml_d1")

    base_shape, base_error = sections.shape_or_default(base_text, DEFAULT_START, allow_infer=False)
    new_shape, new_error = sections.shape_or_default(new_text, (-1,))
    with page.slot():
        if base_error is not None:
            st.error(_("Starting shape: {reason}. Using the chapter's (2, 3).").format(
                reason=shape_message(base_error)))
        if new_error is not None:
            st.error(_("New shape: {reason}. Using (-1,), which flattens.").format(reason=shape_message(new_error)))

    walk_labels = figures.WalkLabels(
        storage_title=_("storage: cells in memory order"), row_axis=_("row"), cell_axis=_("storage cell"),
        cell=_("cell {cell}"), grid_hover=_("logical ({row}, {col}): {text}"), storage_hover=_("cell {cell}: {text}"),
        step=_("step {k}: element {where} → cell {cell}"), slider_prefix=_("logical step "))
    run, walk_figure = explorer_cached(base_shape, recipe, new_shape, (d0, d1), walk_labels)
    st.markdown(_("Ran: {codes}").format(codes=" → ".join(f"`{c}`" for c in run.codes)))
    with page.slot():
        for error in run.errors:
            st.error(_("PyTorch raised, word for word:"))
            # wrapped, not scrolled: a scrolling block is a region a keyboard cannot reach (axe-core)
            st.code(error, language=None, wrap_lines=True)
    page.static_table(layout_frame(run.table))
    st.plotly_chart(walk_figure, key="ml_walk", alt=_(
        "The tensor {code} as a grid of its elements above its {n} storage cells; the slider walks the elements in "
        "logical order and lights the cell each is read from: cells {order}.").format(
            code=run.shown_code, n=int(run.walk.storage_values.numel()), order=" · ".join(map(str, run.order))))
    st.markdown(_("`{code}` reads storage cells in the order {order}").format(code=run.shown_code,
                                                                              order=list(run.order)))


explorer_section()
page.show_code(sections.explore, sections.run_recipe, layout.memory_walk, layout.logical_order, layout.storage_elements,
               layout.tensor_index_map, sections.parse_shape)

# --- 3. view on a transposed tensor ---------------------------------------------------------------------
if gates.gate(questions.VIEW, comparison=comparison):
    page.prose("error")
    st.code(f"M.transpose(0, 1).view(-1)\n{comparison.error}", language="text", wrap_lines=True)
    page.static_table(layout_frame(comparison.table))
    st.markdown(f"`M.transpose(0, 1).reshape(-1)` = {comparison.reshape.tolist()} · "
                f"`M.transpose(0, 1).contiguous().view(-1)` = {comparison.contiguous_view.tolist()}")
    page.verdict(comparison.same_values, _("reshape and contiguous().view give the same values, both from a copy"),
                 _("reshape and contiguous().view give different values"))
page.show_code(sections.view_versus_reshape, sections.attempt)

# --- 4. the keys of multi-head attention ---------------------------------------------------------------
page.prose("heads")
@st.fragment
def heads_section() -> None:
    """Section 4: T, H and d_h redraw this section only."""
    c1, c2, c3 = st.columns(3)
    T = c1.slider(_("T (tokens)"), 1, sections.MAX_TOKENS, value=4, key='ml_T', bind="query-params")
    H = c2.slider(_("H (num_heads)"), 1, sections.MAX_HEADS, value=2, key='ml_H', bind="query-params")
    d_h = c3.slider(_("d_h (head_dim)"), 1, sections.MAX_HEAD_DIM, value=2, key="ml_dh", bind="query-params")
    head_labels = figures.HeadWalkLabels(
        storage_title=_("storage in memory order · number = position in reading order"), head=_("head {h}"),
        grid_hover=_("{row}, col {col}: head {head}, storage cell {cell}"),
        storage_hover=_("cell {cell}: head {head}, reading position {position}"),
        stage=_("{title} · shape {shape} · stride {stride} · {contiguity} · {storage}"),
        contiguous=_("contiguous"), not_contiguous=_("NOT contiguous"),
        same_storage=_("same storage as the step before"), new_storage=_("new storage"),
        cells=_("cells {first}–{last}"), cell_axis=_("cell within the row"), slider_prefix=_("stage "))
    stages_table, heads_figure = head_walk_cached(int(T), int(H), int(d_h), head_labels)
    if gates.gate(questions.TRANSPOSE, num_tokens=int(T), num_heads=int(H), head_dim=int(d_h)):
        st.plotly_chart(heads_figure, key="ml_heads_walk", alt=_(
            "The keys at each stage of the head split (T = {T}, H = {H}, d_h = {d_h}), every element coloured by its "
            "head, above the storage in memory order; the slider steps through the stages: {stages}.").format(
                T=int(T), H=int(H), d_h=int(d_h), stages=" · ".join(
                    f"{stage} {shape} {_('contiguous') if contiguous else _('NOT contiguous')}"
                    for stage, shape, contiguous in zip(stages_table["stage"], stages_table["shape"],
                                                        stages_table["is_contiguous"], strict=True))))
        page.static_table(stages_table.assign(shares_previous=stages_table["shares_previous"].map(
            {True: _("same as the stage before"), False: _("new")})).rename(columns=table_headers()))


heads_section()
page.show_code(sections.key_head_walk)

# --- 5. T² cost -------------------------------------------------------------------------------------------
page.prose("cost")
saved = saved_cached()
st.markdown(ngettext(
    "Counted on the chapter's MultiHeadAttention (B = {b}, H = {h}, T = {t}, dropout {p}): a training forward pass "
    "leaves {n} float tensor of shape {shape} for the backward pass; under `torch.no_grad()` it leaves {none}.",
    "Counted on the chapter's MultiHeadAttention (B = {b}, H = {h}, T = {t}, dropout {p}): a training forward pass "
    "leaves {n} float tensors of shape {shape} for the backward pass; under `torch.no_grad()` it leaves {none}.",
    saved.training).format(b=saved.shape[0], h=saved.shape[1], t=saved.shape[2], p=num(SAVED_DROPOUT, 1),
                           n=saved.training, shape=saved.shape, none=saved.inference))
page.show_code(sections.saved_score_tensors)
@st.fragment
def cost_section() -> None:
    """Section 5: B, H, d_h and the dtype redraw this section only."""
    c1, c2, c3, c4 = st.columns(4)
    batch = url.int_input(c1, "B", min_value=1, max_value=512, step=1, value=8, key="ml_cost_B")
    heads = url.int_input(c2, "H", min_value=1, max_value=128, step=1, value=12, key="ml_cost_H")
    head_dim = url.int_input(c3, "d_h", min_value=1, max_value=512, step=1, value=64, key="ml_cost_dh")
    dtype_name = c4.selectbox("dtype", DTYPE_NAMES, index=DTYPE_NAMES.index("float32"), key="ml_cost_dtype",
                              bind="query-params")
    cost_labels = figures.CostLabels(
        title=_("Bytes against T · B={batch}, H={heads}, d_h={head_dim}").format(
            batch=integer(batch), heads=integer(heads), head_dim=integer(head_dim)),
        scores="attn_scores", qkv="q, k, v", length_axis=_("T (tokens)"), bytes_axis=_("bytes"),
        hover=_("T={T}: {size}"), size_text=byte_size, mark=_("T = {T}"), count_text=integer,
        separators=plotly_separators())
    cost, cost_figure = cost_cached(batch, heads, head_dim, sections.DTYPE_BYTES[dtype_name], current_language(),
                                    cost_labels)
    st.plotly_chart(cost_figure, key="ml_cost_chart", alt=_(
        "Log–log chart of the bytes of attn_scores (growing with T²) and of q, k, v (growing with T) for T from "
        "{first} to {last}: at T = {T} the scores take {scores} and q, k, v {qkv}.").format(
            first=integer(int(cost.table["T"].min())), last=integer(int(cost.table["T"].max())),
            T=integer(sections.LONG_T), scores=byte_size(cost.scores_long), qkv=byte_size(cost.qkv_long)))
    m1, m2, m3 = st.columns(3)
    m1.metric(_("attn_scores at T = {T}").format(T=integer(sections.SHORT_T)), byte_size(cost.scores_short))
    m2.metric(_("attn_scores at T = {T}").format(T=integer(sections.LONG_T)), byte_size(cost.scores_long),
              delta=_("{factor} times as much for {tokens} times the tokens").format(
                  factor=num(cost.growth, 0), tokens=integer(cost.token_growth)),
              delta_color="inverse")
    m3.metric(_("q, k, v at T = {T}").format(T=integer(sections.LONG_T)), byte_size(cost.qkv_long))


cost_section()
page.show_code(sections.score_cost, sections.score_cost_table, sections.score_tensor_bytes)

page.check_yourself()
notebook.download_button()
