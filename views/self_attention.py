"""Page 1: simplified self-attention on the chapter's six 3-d embeddings."""

import streamlit as st
import torch

import ui.alt as alt
from engine import attention as A
from engine import chapter, palette
from engine.diagrams import self_attention as diagrams
from engine.figures import SIGNED_SCALE, attention_heatmap, step_bars, vectors_3d, weighted_sum_bars
from engine.sections import self_attention as sections
from ui import gates, notebook, page
from ui.diagram import colour_legend, diagram
from ui.i18n import _, ngettext
from ui.numbers import GRID_FORMAT, SLIDER_FORMAT, colon, list_separator, num, plotly_separators, sci, seq
from ui.questions import self_attention as questions

TOKENS = list(A.CHAPTER_TOKENS)


def dim_labels() -> list[str]:
    """The translated headers of the embedding dimensions ("dim 0", ...)."""
    return [_("dim {i}").format(i=i) for i in range(len(sections.DIM_KEYS))]


def short_number(value: float) -> str:
    """A table cell of the numerics table in the reader's format: 4 decimals, or scientific notation for a value
    too large or too small for them (exp of a scaled score)."""
    if value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-3):
        return sci(value, 3)
    return num(value, 4)


def query_diagram(inputs, q: int, token: str, steps: sections.QueryWalkthrough) -> str:
    """Page 1's diagram for the selected query, with the shapes of the walkthrough just run."""
    return diagrams.self_attention(
        diagrams.SelfAttentionLabels(
            inputs=_("inputs x"), query=_("query x[{i}] “{token}”").format(i=q, token=token),
            dot_products=_("dot products"), softmax="softmax", weighted_sum=_("weighted sum"),
            context_vec=_("context vector z"), attn_scores="attn_scores", attn_weights="attn_weights",
        ),
        diagrams.SelfAttentionShapes(
            inputs=tuple(inputs.shape), query=tuple(inputs[q].shape), attn_scores=tuple(steps.attn_scores.shape),
            attn_weights=tuple(steps.attn_weights.shape), context_vec=tuple(steps.context_vec.shape),
        ),
    )


page.header()

def jacobian_panel(jac: sections.JacobianCheck, title: str, key: str, caption: str, passed: str, failed: str) -> None:
    """One Jacobian: its heatmap, what it depends on, and its distance to torch.autograd."""
    # 3 decimals: six signed values such as -0.0330 fit their cells on a phone (the chapter prints no Jacobian)
    st.plotly_chart(attention_heatmap(jac.closed_form, TOKENS, TOKENS, title=title, colorscale=SIGNED_SCALE,
                                      decimals=3, row_title=_("weight w_i"), col_title=_("score x_j"),
                                      separators=plotly_separators(), colon=colon()), key=key,
                    alt=alt.heatmap(title, jac.closed_form, TOKENS, 3))
    st.caption(caption)
    st.markdown(_("max |closed form − autograd| = {diff}").format(diff=sci(jac.max_abs_diff, 2)))
    page.verdict(jac.max_abs_diff < 1e-12, passed, failed)


# --- 1. the inputs -------------------------------------------------------------------------------
page.prose("embeddings")
st.session_state.setdefault("sa_editor_version", 0)
if st.button(_("Reset to the chapter's values"), key="sa_reset", icon=":material/restart_alt:"):
    st.session_state["sa_editor_version"] += 1
DIMS = dim_labels()
edited = st.data_editor(
    sections.chapter_table(),
    key=f"sa_embeddings_{st.session_state['sa_editor_version']}",
    disabled=["token"],
    hide_index=True,
    num_rows="fixed",
    column_config={
        "token": st.column_config.TextColumn(_("token")),
        **{key: st.column_config.NumberColumn(label, min_value=-sections.EMBEDDING_BOUND,
                                              max_value=sections.EMBEDDING_BOUND, step=0.01, format=GRID_FORMAT)
           for key, label in zip(sections.DIM_KEYS, DIMS, strict=True)},
    },
)
edit = sections.inputs_from_table(edited)
with page.slot():
    if edit.empty_cells:
        st.warning(ngettext("{n} cell is empty; it uses the chapter's value until you fill it in.",
                            "{n} cells are empty; they use the chapter's value until you fill them in.",
                            edit.empty_cells).format(n=edit.empty_cells))
inputs = edit.inputs  # (6, 3)


@st.fragment
def numerics_section(steps: sections.QueryWalkthrough) -> None:
    """Section 3: the scale and dtype redraw this section only (a fragment within the query's fragment)."""
    c1, c2 = st.columns(2)
    scale = c1.slider(_("Score scale (multiplies the scores above)"), -150.0, 150.0, step=0.5,
                      value=1.0, key="sa_scale", bind="query-params", format=SLIDER_FORMAT)
    dtype_name = c2.selectbox("dtype", list(sections.DTYPES),
                              index=list(sections.DTYPES).index("float32"), key="sa_dtype", bind="query-params")
    numerics = sections.softmax_numerics(steps.attn_scores, scale, sections.DTYPES[dtype_name])
    st.caption(_("In {dtype}, exp(x) is inf above x ≈ {overflow} and exactly 0 below x ≈ {underflow}.").format(
        dtype=dtype_name, overflow=num(numerics.overflow, 2), underflow=num(numerics.underflow, 2)))
    if gates.gate(questions.SOFTMAX_OUTCOME, attn_scores=steps.attn_scores, scale=scale, dtype_name=dtype_name):
        NUMERICS_HEADERS = {
            "token": _("token"),
            "scaled_score": _("scaled score"),
            "exp_score": _("exp(score)"),
            "naive_softmax": _("naive softmax"),
            "stable_softmax": _("stable softmax"),
            "torch_softmax": "torch.softmax",
        }
        table = (numerics.table.assign(token=TOKENS)[["token", *sections.NUMERICS_COLUMNS]]
                 .rename(columns=NUMERICS_HEADERS))
        page.static_table(table, {NUMERICS_HEADERS[c]: short_number for c in sections.NUMERICS_COLUMNS})
        if numerics.naive_broken:
            st.error(ngettext("Naive softmax: {broken} of {total} weights is nan or inf.",
                              "Naive softmax: {broken} of {total} weights are nan or inf.",
                              numerics.naive_broken).format(broken=numerics.naive_broken, total=len(TOKENS)))
        elif numerics.naive_underflowed:
            # finite is not right: exp underflowed to 0 where the stable softmax keeps a positive weight
            st.warning(ngettext("Naive softmax: all {total} weights are finite, but {n} of them fell to exactly 0 "
                                "(exp underflowed) where the stable softmax gives a positive weight.",
                                "Naive softmax: all {total} weights are finite, but {n} of them fell to exactly 0 "
                                "(exp underflowed) where the stable softmax gives a positive weight.",
                                numerics.naive_underflowed).format(total=len(TOKENS), n=numerics.naive_underflowed))
        else:
            st.success(_("Naive softmax: all {total} weights finite.").format(total=len(TOKENS)))
        st.caption(_("Stable softmax: all weights finite.") if numerics.stable_finite
                   else _("Stable softmax: some weights are not finite."))
        if sections.DTYPES[dtype_name] in (torch.float16, torch.bfloat16):
            eps = torch.finfo(sections.DTYPES[dtype_name]).eps
            st.markdown(_("Why the stable column and torch.softmax can differ in the 4th decimal: the stable column "
                          "rounds every exp, their sum and each ratio to {dtype}, whose numbers near 1 lie {eps} "
                          "apart, while torch.softmax computes in float32 and rounds only its result to {dtype}. "
                          "Here they differ by up to {diff}.").format(dtype=dtype_name, eps=sci(eps, 2),
                                                                      diff=sci(numerics.stable_vs_torch, 2)))


# --- 2. one query ----------------------------------------------------------------------------------
def query_steps_view(inputs, query_token: str, steps: sections.QueryWalkthrough, applies: bool) -> None:
    """Section 2's answer: the query's scores, its naive and softmax weights and its context vector z, each
    against the chapter's numbers where they apply."""
    q = TOKENS.index(query_token)
    left, right = st.columns([3, 2])
    with left:
        naive_name = _("divide by the sum")
        panels = [(_("Step 1 · scores of “{token}”").format(token=query_token), {"attn_scores": steps.attn_scores}),
                  (_("Step 2 · two ways to turn scores into weights"),
                   {naive_name: steps.naive_weights, "softmax": steps.attn_weights})]
        st.plotly_chart(
            step_bars(panels, TOKENS, colors={"attn_scores": palette.ATTN_SCORES, naive_name: palette.ALTERNATIVE,
                                              "softmax": palette.ATTN_WEIGHTS}, separators=plotly_separators()),
            key="sa_steps_chart", alt=alt.bars(panels, TOKENS, 4),
        )
    with right:
        diagram(query_diagram(inputs, q, query_token, steps), width="stretch",
                alt=_("Diagram: the inputs, their dot products with the query, the softmax and the weighted "
                      "sum that gives the context vector."))
        colour_legend()
    st.markdown(f"`attn_scores` = {page.fmt_row(steps.attn_scores)}")
    page.chapter_check(_("scores of “journey”"), steps.attn_scores, chapter.SIMPLE_SCORES_JOURNEY, applies)
    st.markdown(_("naive weights = {values}").format(values=page.fmt_row(steps.naive_weights)))
    page.chapter_check(_("naive weights"), steps.naive_weights, chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY, applies)
    st.markdown(_("`attn_weights` (softmax) = {values} · sum = {total}").format(
        values=page.fmt_row(steps.attn_weights), total=num(float(steps.attn_weights.sum()), 4)))
    page.chapter_check(_("softmax weights"), steps.attn_weights, chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY, applies)
    # step 3 waits with steps 1-2: its chart's bars and its alt text are the weights times the inputs
    sum_title = _("Step 3 · z of “{token}”: each token adds w_i · x_i to every dimension").format(token=query_token)
    st.plotly_chart(
        weighted_sum_bars(inputs, steps.attn_weights, TOKENS, DIMS, title=sum_title,
                          total_name=_("context vector z"), separators=plotly_separators(), colon=colon()),
        key="sa_context_chart",
        alt=_("Stacked bar chart “{title}”: the weights {weights} times the inputs, summed per dimension "
              "({dims}): z = {z}.").format(title=sum_title, weights=alt.named(TOKENS, steps.attn_weights, 4),
                                            dims=" / ".join(DIMS), z=alt.vector(steps.context_vec, 4)),
    )
    st.markdown(_("Step 3 · `context_vec` z = {values}").format(values=page.fmt_row(steps.context_vec)))
    page.chapter_check(_("context vector z"), steps.context_vec, chapter.SIMPLE_CONTEXT_JOURNEY, applies)


@st.fragment
def query_sections(inputs, is_chapter: bool) -> None:
    """Sections 2-3: the query token redraws these sections only (the inputs above rerun the page)."""
    page.prose("steps")
    query_token = st.selectbox(_("Query token"), TOKENS, index=TOKENS.index("journey"), key="sa_query",
                               bind="query-params")
    q = TOKENS.index(query_token)
    steps = sections.query_walkthrough(inputs, q)
    applies = is_chapter and q == 1

    if gates.gate(questions.SELF_WEIGHT, inputs=inputs, q=q):
        query_steps_view(inputs, query_token, steps, applies)
    page.show_code(sections.query_walkthrough, A.dot_scores, A.naive_normalize, A.context_vector)

    # --- 3. softmax numerics ----------------------------------------------------------------------------
    page.prose("numerics")
    numerics_section(steps)
    page.show_code(sections.softmax_numerics, sections.exp_limits, A.softmax_naive, A.softmax_stable)


def naive_row_text(attn_scores, naive_jac: sections.JacobianCheck, softmax_jac: sections.JacobianCheck,
                   token: str) -> str:
    """The query's row of both Jacobians in the reader's words, its numbers read from the matrices just drawn."""
    q = TOKENS.index(token)
    other = 0 if q else 1  # every entry off the diagonal of row q is the same, -w_q / S
    return _("For the scores of “{token}” (all positive, $S$ ≈ {S}) both work: with $w_{q}$ the weight of "
             "“{token}”, its row is $(1 - w_{q})/S$ ≈ {diag} on the diagonal and $-w_{q}/S$ ≈ {off} everywhere "
             "else, against {softmax_diag} on the softmax's diagonal.").format(
        token=token, q=q, S=num(float(attn_scores.sum()), 2), diag=num(float(naive_jac.closed_form[q, q]), 3),
        off=num(float(naive_jac.closed_form[q, other]), 3), softmax_diag=num(float(softmax_jac.closed_form[q, q]), 3))


@st.fragment
def jacobian_section(inputs) -> None:
    """Section 4: its own query token, next to the two Jacobians it redraws (and nothing else)."""
    page.prose("jacobian")
    query_token = st.selectbox(_("Query token of the Jacobians"), TOKENS, index=TOKENS.index("journey"),
                               key="sa_jacobian_query", bind="query-params")
    attn_scores = A.dot_scores(inputs, inputs[TOKENS.index(query_token)])  # (6, 3), (3,) -> (6,)
    softmax_jac = sections.jacobian_check(attn_scores)
    naive_jac = sections.naive_jacobian_check(attn_scores)
    c1, c2 = st.columns(2)
    with c1:
        jacobian_panel(softmax_jac, _("softmax: ∂w_i/∂x_j for the query “{token}”").format(token=query_token),
                       "sa_jacobian", _("w_i (δ_ij − w_j): depends only on the weights."),
                       _("softmax: closed form equals torch.autograd"),
                       _("softmax: closed form differs from torch.autograd"))
    with c2:
        if naive_jac is None:
            st.info(_("Some scores of “{token}” are 0 or negative: dividing by the sum gives no weights there, "
                      "so its Jacobian is not shown.").format(token=query_token))
        else:
            jacobian_panel(naive_jac, _("divide by the sum: ∂w_i/∂x_j for “{token}”").format(token=query_token),
                           "sa_naive_jacobian", _("(δ_ij − w_i) / Σx: depends on the sum of the scores, and needs them "
                                                  "positive."),
                           _("divide by the sum: closed form equals torch.autograd"),
                           _("divide by the sum: closed form differs from torch.autograd"))
    page.prose("naive_jacobian")
    example = sections.negative_score_example()
    st.markdown(_("For example, the scores {scores} add up to {total}; divided by it they give the “weights” "
                  "{weights}: one is negative, and the positive ones add up to {positive}, more than 1.").format(
        scores=seq(example.attn_scores, 1), total=num(example.total, 1), weights=seq(example.naive_weights, 4),
        positive=num(example.positive_sum, 4)))
    if naive_jac is not None:
        st.markdown(naive_row_text(attn_scores, naive_jac, softmax_jac, query_token))
    page.show_code(A.dot_scores, sections.jacobian_check, A.softmax_jacobian, sections.naive_jacobian_check,
                   sections.naive_jacobian)


query_sections(inputs, edit.is_chapter)

# --- 4. Jacobians -------------------------------------------------------------------------------------
jacobian_section(inputs)

# --- 5. all pairs -----------------------------------------------------------------------------------
page.prose("allpairs")
every = sections.loop_vs_matmul(inputs)
c1, c2 = st.columns(2)
# scores in the scores' vermillion (the colour key's, as on page 3), weights in the weights' blue
c1.plotly_chart(attention_heatmap(every.attn_scores, TOKENS, title="attn_scores = inputs @ inputs.T", zmin=None,
                                  colorscale=SIGNED_SCALE, separators=plotly_separators(), colon=colon()),
                key="sa_all_scores",
                alt=alt.heatmap("attn_scores = inputs @ inputs.T", every.attn_scores, TOKENS, 4))
c2.plotly_chart(attention_heatmap(every.attn_weights, TOKENS, title="attn_weights = softmax(dim=-1)",
                                  separators=plotly_separators(), colon=colon()), key="sa_all_weights",
                alt=alt.heatmap("attn_weights = softmax(dim=-1)", every.attn_weights, TOKENS, 4))
st.plotly_chart(
    attention_heatmap(every.context_vec, TOKENS, DIMS, title="context_vec = attn_weights @ inputs",
                      zmin=None, row_title=_("token"), col_title=_("dimension"), separators=plotly_separators(),
                      colon=colon()),
    key="sa_all_context", alt=alt.heatmap("context_vec = attn_weights @ inputs", every.context_vec, TOKENS, 4),
)
context_vectors = {f"z ({token})": z for token, z in zip(TOKENS, every.context_vec, strict=True)}
vectors_title = _("The inputs (solid) and their context vectors (dashed)")
st.plotly_chart(
    vectors_3d(inputs, TOKENS, extra=context_vectors, title=vectors_title, height=460, extra_text=False,
               axis_titles=DIMS, separators=plotly_separators(), between=list_separator()),
    key="sa_vectors", alt=alt.vectors(vectors_title, dict(zip(TOKENS, inputs, strict=True)) | context_vectors),
)
st.caption(_("Softmax weights are positive and sum to 1, so every context vector is a weighted average of the "
             "inputs: the six z lie between them, closer together than the inputs. Hover a dashed tip to see "
             "whose it is."))
st.markdown(_("max |loops − matmul| = {diff}").format(diff=sci(every.max_abs_diff, 2)))
page.chapter_check(_("first two rows of attn_scores"), every.attn_scores[:2], chapter.SIMPLE_SCORES_FIRST_ROWS,
                   edit.is_chapter)
page.chapter_check(_("all context vectors"), every.context_vec, chapter.SIMPLE_ALL_CONTEXT, edit.is_chapter)
page.show_code(sections.loop_vs_matmul, A.simplified_self_attention, A.all_dot_scores, A.all_context_vectors)

page.check_yourself()
notebook.download_button(inputs=edit.inputs.tolist())
