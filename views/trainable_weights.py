"""Page 2: self-attention with trainable weights, the 1/sqrt(d_k) scale, SelfAttention_v1/v2, inits, exercise 3.1."""

import plotly.graph_objects as go
import streamlit as st

import ui.alt as alt
from engine import attention as A
from engine import chapter, palette
from engine.diagrams import trainable_weights as diagrams
from engine.figures import SIGNED_SCALE, step_bars
from engine.figures import trainable_weights as figures
from engine.sections import trainable_weights as sections
from ui import gates, notebook, page, url
from ui.diagram import colour_legend, diagram
from ui.i18n import _, ngettext
from ui.numbers import colon, integer, num, plotly_separators, sci, significant
from ui.questions import trainable_weights as questions

TOKENS = list(A.CHAPTER_TOKENS)


@st.cache_data(show_spinner=False)
def dk_sweep_cached() -> sections.DkSweep:
    """The d_k sweep (seeded, 10,000 samples per d_k): the same for every reader."""
    return sections.dk_sweep()


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def dk_figure_cached(labels: figures.DkSweepLabels) -> go.Figure:
    """The d_k sweep's slider figure, one per language."""
    return figures.dk_sweep_figure(dk_sweep_cached(), labels)


@st.cache_data(show_spinner=False)
def init_comparison_cached():
    """The initialisation measurements (seeded): the same for every reader."""
    return sections.init_comparison()


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def init_figure_cached(labels: figures.InitLabels) -> go.Figure:
    """The initialisation chart, one per language."""
    return figures.init_figure(init_comparison_cached(), labels)


def projection_diagram(inputs, steps: sections.TrainableWalkthrough, show_scale: bool) -> str:
    """Page 2's diagram, with the shapes of the walkthrough just run (they follow d_out); the scale's divisor is
    written once the scale's gate is answered, skipped or off (``show_scale``)."""
    w = steps.projections
    return diagrams.trainable_weights(
        diagrams.TrainableWeightsLabels(
            inputs=_("inputs x"), W_query="W_query", W_key="W_key", W_value="W_value", query="query",
            keys="keys", values="values", dot_products=_("dot products"), scale=_("scale"), softmax="softmax",
            weighted_sum=_("weighted sum"), context_vec="context_vec", attn_scores="attn_scores",
            attn_weights="attn_weights",
        ),
        diagrams.TrainableWeightsShapes(
            inputs=tuple(inputs.shape), W_query=tuple(w.W_query.shape), W_key=tuple(w.W_key.shape),
            W_value=tuple(w.W_value.shape), query=tuple(steps.query.shape), keys=tuple(steps.keys.shape),
            values=tuple(steps.values.shape), attn_scores=tuple(steps.attn_scores.shape),
            attn_weights=tuple(steps.attn_weights.shape), context_vec=tuple(steps.context_vec.shape),
            d_k=int(steps.keys.shape[-1]),
        ),
        show_scale=show_scale,
    )


page.header()
inputs = A.chapter_inputs()  # (6, 3)
dims_in = [_("dim {i}").format(i=i) for i in range(inputs.shape[1])]


def projection_matrices(d_out: int, w: sections.Projections, out_cols: list[str]) -> None:
    """Section 1's matrices W_query, W_key and W_value (d_in × d_out), stacked in one chart."""
    weights = {f"{name} ({inputs.shape[1]}×{d_out})": matrix
               for name, matrix in (("W_query", w.W_query), ("W_key", w.W_key), ("W_value", w.W_value))}
    st.plotly_chart(figures.matrices_stacked(
        weights, dims_in, out_cols, row_title=_("input dim"), separators=plotly_separators(), colon=colon()),
        key="tw_projections", alt=alt.heatmaps(weights, dims_in, 4))


def query_view(d_out: int, seed: int) -> tuple[str, int, sections.TrainableWalkthrough, bool]:
    """Section 1's query: the token's query row against the chapter's, and the diagram of the steps it takes.

    Returns:
        The query token, its index q, the walkthrough run for it, and whether the chapter's numbers apply.
    """
    query_token = st.selectbox(_("Query token"), TOKENS, index=TOKENS.index("journey"), key="tw_query",
                               bind="query-params")
    q = TOKENS.index(query_token)
    steps = sections.trainable_walkthrough(inputs, seed, d_out, q)
    applies = sections.chapter_setup(seed, d_out, q).query
    st.markdown(f"`query` = x[{q}] @ W_query = {page.fmt_row(steps.query)}")
    # the chapter's name for journey's query; another token's query is named by its token
    query_label = "query_2" if q == 1 else _("query of “{token}”").format(token=query_token)
    page.chapter_check(query_label, steps.query, chapter.TRAINABLE_QUERY_2, applies)
    # the box and the alt text name the scale only once the scale's gate below is answered, skipped or off
    revealed = gates.revealed(questions.SCALE)
    diagram(projection_diagram(inputs, steps, revealed), width="content",
            alt=_("Diagram: x goes through W_query, W_key and W_value; the scores q · kᵀ are divided by "
                  "√d_k, turned into weights by the softmax and used to sum the values.")
            if revealed else
            _("Diagram: x goes through W_query, W_key and W_value; the scores q · kᵀ are divided by a "
              "number (the question below asks which), turned into weights by the softmax and used to sum the "
              "values."))
    colour_legend()
    return query_token, q, steps, applies


def scaled_steps(query_token: str, d_out: int, steps: sections.TrainableWalkthrough, applies: bool) -> None:
    """The query's three steps: its scores, its weights with and without the scale, and its context vector."""
    left, right = st.columns([3, 2])
    with left:
        scaled, unscaled = _("softmax(scores / √d_k)"), _("softmax(scores), no scale")
        panels = [(_("Step 1 · scores of “{token}”").format(token=query_token),
                   {"attn_scores = keys @ query": steps.attn_scores}),
                  (_("Step 2 · weights with d_k = {d_k}: the scale flattens them").format(d_k=d_out),
                   {scaled: steps.attn_weights, unscaled: steps.unscaled_weights})]
        st.plotly_chart(
            step_bars(panels, TOKENS, colors={"attn_scores = keys @ query": palette.ATTN_SCORES,
                                              scaled: palette.ATTN_WEIGHTS, unscaled: palette.ALTERNATIVE},
                      separators=plotly_separators()),
            key="tw_steps_chart", alt=alt.bars(panels, TOKENS, 4),
        )
    with right:
        st.markdown(f"`attn_scores` = {page.fmt_row(steps.attn_scores)}")
        st.markdown(f"`attn_weights` = softmax(attn_scores / √{d_out}) = {page.fmt_row(steps.attn_weights)}")
        st.markdown(_("Step 3 · `context_vec` = attn_weights @ values = {values}").format(
            values=page.fmt_row(steps.context_vec)))
    # the checks at full width: a badge in a narrow column is cut short
    page.chapter_check(_("attention scores"), steps.attn_scores, chapter.TRAINABLE_SCORES_2, applies)
    page.chapter_check(_("scaled attention weights"), steps.attn_weights, chapter.TRAINABLE_WEIGHTS_2, applies)
    page.chapter_check(_("context vector"), steps.context_vec, chapter.TRAINABLE_CONTEXT_2, applies)


@st.fragment
def query_steps(d_out: int, seed: int, w: sections.Projections, out_cols: list[str]) -> None:
    """The projections and the query's three steps: the query token redraws this part only (d_out and the seed
    above rerun sections 1-5). The matrices sit here, beside the query that uses them first; the query does not
    change them, so their chart stays as it is when the token changes."""
    left, right = st.columns(2)
    with left:
        projection_matrices(d_out, w, out_cols)
    with right:
        query_token, q, steps, applies = query_view(d_out, seed)
    if gates.gate(questions.SCALE, inputs=inputs, seed=seed, d_out=d_out, q=q):
        scaled_steps(query_token, d_out, steps, applies)
    page.show_code(sections.trainable_walkthrough, sections.chapter_projections, A.scaled_dot_product_step)


def classes_view(d_out: int, seed: int, seed_v2: int, projections_apply: bool, out_cols: list[str]) -> None:
    """Section 3: SelfAttention_v1's and v2's outputs side by side, each against the chapter's."""
    outputs = sections.v1_v2_outputs(inputs, d_out, seed, seed_v2)
    left, right = st.columns(2)
    with left:
        compared = {_("SelfAttention_v1 (seed {seed})").format(seed=seed): outputs.v1,
                    _("SelfAttention_v2 (seed {seed})").format(seed=seed_v2): outputs.v2}
        st.plotly_chart(figures.matrices_stacked(
            compared, TOKENS, out_cols, colorscale=SIGNED_SCALE, zmin=None, row_title=_("token"),
            separators=plotly_separators(), colon=colon()), key="tw_v1_v2", alt=alt.heatmaps(compared, TOKENS, 4))
    with right:
        page.chapter_check(_("SelfAttention_v1 output"), outputs.v1, chapter.SA_V1_OUTPUT, projections_apply)
        page.chapter_check(_("SelfAttention_v2 output"), outputs.v2, chapter.SA_V2_OUTPUT,
                           sections.v2_is_chapter(seed_v2, d_out))
        page.show_code(sections.v1_v2_outputs, sections._seeded_v1_v2, A.SelfAttention_v1, A.SelfAttention_v2)


def init_section() -> None:
    """Section 4: the variance of the weights and of x·W by d_in, for each initialisation, measured and in theory."""
    page.prose("init")
    init_table = init_comparison_cached()
    init_labels = figures.InitLabels(
        weights_panel=_("variance of the weights W"),
        projection_panel=_("variance of the projection x·W"),
        measured=_("{init} (measured)"),
        theory=_("{init} (theory)"),
        theory_hover=_("theory"),
        separators=plotly_separators(),
        colon=colon(),
    )
    by_init = list(init_table.groupby("init", sort=False))
    st.plotly_chart(init_figure_cached(init_labels), key="tw_init_chart", alt=_(
        "Line charts against d_in ({d_ins}), measured: “{weights}”: {var_w}; “{projection}”: {var_xw}.").format(
            d_ins=" / ".join(integer(d) for d in init_table["d_in"].unique()),
            weights=init_labels.weights_panel, projection=init_labels.projection_panel,
            var_w=alt.series({init: rows["var_w"] for init, rows in by_init}),
            var_xw=alt.series({init: rows["var_xw"] for init, rows in by_init})))
    init_headers = {
        "d_in": "d_in",
        "init": _("init"),
        "share_negative": _("share negative"),
        "var_w": _("var(W) measured"),
        "var_w_theory": _("var(W) theory"),
        "var_xw": _("var(x·W) measured"),
        "var_xw_theory": _("var(x·W) theory"),
    }
    # the cells in the reader's number format (a Styler's display values; sorting keeps the numbers)
    st.dataframe(init_table.rename(columns=init_headers).style.format(
        {init_headers["d_in"]: integer} | {init_headers[c]: lambda v: significant(v, 4)
                                          for c in sections.INIT_COLUMNS if c not in ("d_in", "init")}),
        hide_index=True, key="tw_init_table")
    page.show_code(sections.init_comparison)


def exercise_section(d_out: int, seed: int, seed_v2: int) -> None:
    """Section 5, exercise 3.1: v2's weights copied (transposed) into v1 make their outputs equal."""
    page.prose("exercise")
    exercise = sections.exercise_3_1(inputs, d_out, seed, seed_v2)
    st.markdown(_("max |v1 − v2| before the copy: **{diff}**").format(diff=sci(exercise.max_abs_diff_before, 4)))
    st.markdown(_("max |v1 − v2| after copying v2's weights (transposed) into v1: **{diff}**").format(
        diff=sci(exercise.max_abs_diff_after, 4)))
    if exercise.exactly_equal:
        passed = _("after the copy, SelfAttention_v1 computes the same outputs as SelfAttention_v2: the difference "
                   "is 0")
    else:
        passed = _("after the copy, SelfAttention_v1 computes the same outputs as SelfAttention_v2, equal up to float "
                   "rounding (max |difference| = {diff})").format(diff=sci(exercise.max_abs_diff_after, 1))
    page.verdict(exercise.equal_after, passed, _("after the copy the outputs still differ"))
    if exercise.equal_after and not exercise.exactly_equal:
        st.caption(_("Float rounding: v1 computes x @ W and v2 runs nn.Linear, which may add the same products in "
                     "another order; float32 keeps about 7 significant digits, so the last bits can differ."))
    page.show_code(sections.exercise_3_1, A.copy_v2_into_v1)


@st.fragment
def classes_and_exercise(d_out: int, seed: int, projections_apply: bool, out_cols: list[str]) -> None:
    """Sections 3-5: the seed of SelfAttention_v2 redraws these sections only (d_out and the seed above rerun
    sections 1-5)."""
    seed_v2 = url.int_input(st, _("seed for SelfAttention_v2"), min_value=0, max_value=99_999, step=1,
                            value=chapter.SA_V2_SEED, key="tw_seed_v2")
    classes_view(d_out, seed, seed_v2, projections_apply, out_cols)
    init_section()
    exercise_section(d_out, seed, seed_v2)


def projection_controls() -> tuple[int, int, bool]:
    """Section 1's controls: d_out and the seed, and whether the chapter's numbers apply to them."""
    c1, c2 = st.columns(2)
    d_out = c1.slider(_("d_out (size of queries, keys and values)"), 1, 8, value=2, key="tw_d_out", bind="query-params")
    seed = url.int_input(c2, _("seed for torch.manual_seed"), min_value=0, max_value=99_999, step=1,
                         value=chapter.TRAINABLE_SEED, key="tw_seed")
    projections_apply = sections.projections_are_chapter(seed, d_out)
    with page.slot():
        if not projections_apply:
            st.caption(_("The chapter uses seed {seed} and d_out 2; with your settings the numbers are expected to "
                         "differ.").format(seed=chapter.TRAINABLE_SEED))
    return d_out, seed, projections_apply


def scale_section() -> None:
    """Section 2, why 1/√d_k: the scores' spread, the largest softmax weight and its gradient factor by d_k."""
    page.prose("scale")
    with st.spinner(_("Sampling {n} random query–key pairs per d_k …").format(n=integer(sections.DK_SAMPLES))):
        sweep = dk_sweep_cached()
        rows = integer(sweep.n_samples // sweep.num_keys)
        dk_figure = dk_figure_cached(figures.DkSweepLabels(
            spread_panel=_("spread of the scores (box: quartiles, whiskers: 1–99%)"),
            # each bar is a mean over the sweep's rows (one query against num_keys keys each), as computed
            w_max_panel=ngettext("largest of {n} softmax weight, mean over {rows} rows",
                                 "largest of {n} softmax weights, mean over {rows} rows",
                                 sweep.num_keys).format(n=integer(sweep.num_keys), rows=rows),
            grad_panel=_("its gradient factor w(1−w), mean over {rows} rows").format(rows=rows),
            without_scale=_("without scale"),
            with_scale=_("with 1/√d_k"),
            score_axis=_("score"),
            step_title=_("d_k = {d_k}: var(q·k) = {var} (theory {d_k}), var(q·k/√d_k) = {var_scaled} "
                         "(theory 1), {n} samples"),
            separators=plotly_separators(),
            colon=colon(),
        ))
    if gates.gate(questions.LARGEST_WEIGHT, sweep=sweep):
        dk_view(sweep, dk_figure)
    page.show_code(sections.dk_sweep, sections.vecdot_of_draws)


def dk_view(sweep: sections.DkSweep, dk_figure: go.Figure) -> None:
    """Section 2's answer: the d_k sweep's chart and its table of variances and weights."""
    st.plotly_chart(dk_figure, key="tw_dk_figure", alt=ngettext(
        "Box plots of the scores q·k without and with the 1/√d_k scale, one d_k at a time with the slider; the "
        "largest of {n} softmax weight on average, without / with the scale: {values}.",
        "Box plots of the scores q·k without and with the 1/√d_k scale, one d_k at a time with the slider; the "
        "largest of {n} softmax weights on average, without / with the scale: {values}.", sweep.num_keys).format(
            n=integer(sweep.num_keys),
            values=" · ".join(f"d_k {integer(int(r.d_k))}: {num(r.w_max_unscaled, 2)} / {num(r.w_max_scaled, 2)}"
                              for r in sweep.stats.itertuples())))
    dk_headers = {
        "d_k": "d_k",
        "var_scores": "var(q·k)",
        "var_scaled": "var(q·k/√d_k)",
        "w_max_unscaled": _("mean w_max, unscaled"),
        "w_max_scaled": _("mean w_max, scaled"),
        "grad_unscaled": _("mean w_max(1-w_max), unscaled"),
        "grad_scaled": _("mean w_max(1-w_max), scaled"),
    }
    st.dataframe(sweep.stats.rename(columns=dk_headers).style.format(
        {dk_headers["d_k"]: integer}
        | {dk_headers[c]: lambda v: num(v, 4) for c in sections.DK_COLUMNS if c != "d_k"}),
        hide_index=True, key="tw_dk_table",
        # Fixed widths keep all seven columns in the frame at 1400 px (the French and German headers are
        # wider than their numbers); a header cut short shows its whole name in the tooltip.
        column_config={header: st.column_config.Column(width=60 if column == "d_k" else 125, help=header)
                       for column, header in dk_headers.items()})


@st.fragment
def projections_to_exercise() -> None:
    """Sections 1-5, everything d_out and the seed drive: they rerun these sections only, not the page's header,
    introduction, closing prose and quiz, nor the sidebar."""
    page.prose("projections")
    d_out, seed, projections_apply = projection_controls()
    out_cols = [_("out {j}").format(j=j) for j in range(d_out)]
    w = sections.chapter_projections(seed, inputs.shape[1], d_out)
    query_steps(d_out, seed, w, out_cols)
    scale_section()
    page.prose("classes")
    classes_and_exercise(d_out, seed, projections_apply, out_cols)


projections_to_exercise()

page.prose("two_weights")
page.check_yourself()
notebook.download_button()
