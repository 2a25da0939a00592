"""Page 3: the causal mask — two masking routes, a live leakage test, triu, register_buffer, the NaN row."""

import functools

import plotly.graph_objects as go
import streamlit as st

import ui.alt as alt
from engine import attention as A
from engine import chapter
from engine.device import pick_device
from engine.diagrams import causal_mask as diagrams
from engine.figures import causal_mask as figures
from engine.sections import causal_mask as sections
from ui import gates, notebook, page, url
from ui.diagram import colour_legend
from ui.i18n import N_, _, current_language, ngettext
from ui.numbers import SLIDER_FORMAT, colon, integer, plotly_separators, sci, seq
from ui.questions import causal_mask as questions

TOKENS = list(A.CHAPTER_TOKENS)
T = len(TOKENS)
#: d_out of the chapter's SelfAttention_v2 behind the two routes, and so the d_k of their 1/√d_k scale.
TWO_WAYS_D_K = 2
#: Radio labels of the guards against a fully masked row (message ids).
GUARD_LABELS = {
    "none": N_("none (-inf)"),
    "finite_min": N_("large finite negative"),
    "nan_to_num": N_("nan_to_num after softmax"),
    "keep_diagonal": N_("keep the diagonal visible"),
}
#: How the buffer table names each way of holding the mask (message ids; code stays code).
HOLDER_LABELS = {
    "buffer": N_("register_buffer (the chapter)"),
    "buffer_nonpersistent": "register_buffer(persistent=False)",
    "plain_attribute": N_("plain attribute self.mask = ..."),
}


@st.cache_data(show_spinner=False)
def two_ways_cached() -> sections.TwoWays:
    """The chapter's two masking routes (fixed inputs, seed 789): the same for every reader."""
    return sections.mask_two_ways(sections.v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=TWO_WAYS_D_K),
                                  d_k=TWO_WAYS_D_K)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def two_ways_figures_cached(panel_titles: tuple[str, ...], separators: str, hover_colon: str) -> list[go.Figure]:
    """The two routes' six panels, one set per language."""
    return figures.two_ways_panels(two_ways_cached(), TOKENS, panel_titles, separators, hover_colon)


@st.cache_data(show_spinner=False, max_entries=8)
def buffer_table(target: str):
    """:func:`engine.sections.causal_mask.buffer_demo` for one device name (a constant per machine)."""
    return sections.buffer_demo(target)


@st.cache_data(show_spinner=False)
def meta_buffers_cached() -> sections.MetaBuffers:
    """The meta table, the recording when this PyTorch made it (:func:`engine.sections.causal_mask.meta_buffers`)."""
    return sections.meta_buffers()


def show_buffers(table, device: str, key: str) -> None:
    """The register_buffer table for one device, in the reader's words, and each forward pass's outcome."""
    holders = [_(HOLDER_LABELS[h]) for h in table["holder"]]
    shown = table.assign(holder=holders).drop(columns=["state_dict_keys", "forward_ok", "forward_result"])
    st.dataframe(shown.rename(columns={
        "holder": _("mask held as"),
        "in_state_dict": _("mask in state_dict()"),
        "in_named_buffers": _("in named_buffers()"),
        "weights_device": _("weights after .to()"),
        "mask_device": _("mask after .to()"),
    }), hide_index=True, key=key)
    outcomes = [_("ok, shape {shape}").format(shape=result) if ok else result
                for ok, result in zip(table["forward_ok"], table["forward_result"], strict=True)]
    st.markdown("\n".join(
        "- " + _("forward after `.to('{device}')`, {holder}: `{outcome}`").format(
            device=device, holder=holder, outcome=outcome)
        for holder, outcome in zip(holders, outcomes, strict=True)))


def routes_diagram(result: sections.TwoWays, d_k: int, route: str | None = None) -> str:
    """Page 3's diagram: both masking routes (or one, ``route``, for a phone), with the shapes of
    :func:`two_ways_cached`'s tensors."""
    return diagrams.causal_mask(
        diagrams.CausalMaskLabels(
            attn_scores="attn_scores", masked_route=_("mask, then softmax"),
            renormalise_route=_("softmax, zero, renormalise"), mask=_("mask above the diagonal"),
            softmax="softmax", zero_future=_("zero the future"), row_sums=_("divide by row sums"),
            attn_weights=_("causal attn_weights"), same=_("equal"),
        ),
        diagrams.CausalMaskShapes(
            attn_scores=tuple(result.attn_scores.shape), mask=tuple(result.mask.shape),
            masked_scores=tuple(result.masked_scores.shape),
            attn_weights_causal=tuple(result.attn_weights_causal.shape),
            attn_weights=tuple(result.attn_weights.shape), masked_simple=tuple(result.masked_simple.shape),
            row_sums=tuple(result.row_sums.shape), masked_simple_norm=tuple(result.masked_simple_norm.shape),
            d_k=d_k,
        ),
        route=route,
    )


page.header()
inputs = A.chapter_inputs()  # (6, 3)
scores = sections.v2_scores(inputs, seed=chapter.SA_V2_SEED, d_out=2)  # (6, 6), the chapter's sa_v2
query_title, key_title = _("query (row)"), _("key (column)")

# --- 1. two routes ------------------------------------------------------------------------------------
page.prose("two_ways")
result = two_ways_cached()
panel_titles = (
    _("1 · softmax of all scores"),
    _("2 · × tril(ones): future weights zeroed"),
    _("3 · ÷ row sums: renormalised"),
    _("1 · scores queries @ keys.T"),
    "2 · masked_fill(triu(diagonal=1), -inf)",
    "3 · softmax(masked / √d_k)",
)
two_ways_figures = two_ways_figures_cached(panel_titles, plotly_separators(), colon())
panel_matrices = (result.attn_weights, result.masked_simple, result.masked_simple_norm, result.attn_scores,
                  result.masked_scores, result.attn_weights_causal)  # in the order of the panels' titles
if gates.gate(questions.FUTURE, result=result):
    # one figure per panel, three columns per route: side by side on a wide screen, stacked on a phone
    for first in (0, 3):
        for i, column in enumerate(st.columns(3), start=first):
            column.plotly_chart(two_ways_figures[i], key=f"cm_two_ways_{i}",
                                alt=alt.heatmap(panel_titles[i], panel_matrices[i], TOKENS, 4))
    page.chapter_check(_("weights before masking (sa_v2, seed 789)"), result.attn_weights, chapter.SA_V2_WEIGHTS)
    st.markdown(_("row sums after zeroing the future = {values}").format(
        values=page.fmt_row(result.row_sums.flatten())))  # (T, 1) -> (T,)
    page.chapter_check(_("renormalised weights (naive approach)"), result.masked_simple_norm, chapter.CAUSAL_WEIGHTS)
    page.chapter_check(_("scores with −inf above the diagonal"), result.masked_scores, chapter.CAUSAL_MASKED_SCORES)
    page.chapter_check(_("softmax of the masked scores (efficient approach)"), result.attn_weights_causal,
                       chapter.CAUSAL_WEIGHTS)
    st.markdown(_("row {row} (“{token}”) = {values}").format(row=1, token=TOKENS[1],
                                                            values=page.fmt_row(result.attn_weights_causal[1])))
    page.chapter_check(_("row {row}").format(row=1), result.attn_weights_causal[1], chapter.CAUSAL_WEIGHTS[1])
    st.markdown(_("max |naive − efficient| = **{diff}**").format(diff=sci(result.max_abs_diff, 2)))
    left, right = st.columns([3, 2])
    with left:
        page.diagram_for_width(
            routes_diagram(result, TWO_WAYS_D_K),
            [routes_diagram(result, TWO_WAYS_D_K, route) for route in diagrams.ROUTES],
            alt=_("Diagram: on the naive route the softmax comes first, the future weights are zeroed and each "
                  "row is divided by its sum; on the efficient route the scores are masked with −∞ above the "
                  "diagonal and go through the softmax. Both give the same weights."), key="routes")
        colour_legend()
    with right:
        page.prose("same_result")
page.show_code(sections.v2_scores, A.SelfAttention_v2, sections.mask_two_ways, A.causal_mask)

# --- 2. leakage test --------------------------------------------------------------------------------------
page.prose("leakage")


def leakage_view(leak: sections.Leakage, leak_token: str, t: int) -> None:
    """Section 2's answer: which output rows the perturbation of token ``t`` changed, with and without the mask,
    and the verdict (grey when the perturbation could not show a leak)."""
    st.plotly_chart(figures.leakage_figure(leak, TOKENS, t, figures.LeakageLabels(
        causal=_("with the causal mask"),
        no_mask=_("without a mask"),
        perturbed=_("perturbed"),
        x_title="max |Δ context_vec|",
        y_title=_("output row (query token)"),
        separators=plotly_separators(), value_format=functools.partial(sci, digits=2, lang=current_language()),
        colon=colon(),
    )), key="cm_leak_chart", alt=_(
        "Bar chart of max |Δ context_vec| for each output row after “{token}” is perturbed, with the causal mask / "
        "without a mask: {values}.").format(token=leak_token, values=alt.paired(
            TOKENS, leak.table["max_diff_causal"], leak.table["max_diff_full"])))
    leak_headers = {
        "token_index": _("token index"),
        "token": _("token"),
        "max_diff_causal": _("max |Δ| causal"),
        "changed_causal": _("changed (causal)"),
        "max_diff_full": _("max |Δ| no mask"),
        "changed_full": _("changed (no mask)"),
    }
    # the cells in the reader's number format (a Styler's display values; sorting keeps the numbers)
    st.dataframe(leak.table.assign(token=TOKENS)[list(leak_headers)].rename(columns=leak_headers).style.format(
        {leak_headers["token_index"]: integer}
        | {leak_headers[c]: lambda v: sci(v, 3) for c in ("max_diff_causal", "max_diff_full")}),
        hide_index=True, key="cm_leak_table")
    if not leak.changed_rows:
        st.info(_("A perturbation of 0 changes nothing; move the slider away from 0."))
    else:
        st.markdown(_("Perturbing “{token}” (row {row}) changed the rows: **{rows}**.").format(
            token=leak_token, row=t, rows=", ".join(TOKENS[i] for i in leak.changed_rows)))
    # a check that could not have failed says so, in grey: no perturbation, or no row before the perturbed one
    if not leak.leaks and not leak.changed_rows:
        st.badge(_("nothing tested: a perturbation of 0 changes no row, so it cannot show a leak"),
                 icon=":material/block:", color="gray")
    elif not leak.leaks and t == 0:
        st.badge(_("nothing tested: no row comes before “{token}”; perturb a later token to test the mask").format(
            token=leak_token), icon=":material/block:", color="gray")
    else:
        page.verdict(not leak.leaks,
                     _("no row before “{token}” changed: nothing leaks from the future").format(token=leak_token),
                     _("an earlier row changed: the mask leaks"))


@st.fragment
def leakage_section() -> None:
    """Section 2: the token and perturbation controls redraw this section only."""
    c1, c2 = st.columns(2)
    leak_token = c1.selectbox(_("Token to perturb"), TOKENS, index=TOKENS.index("starts"), key="cm_leak_token",
                              bind="query-params")
    delta = c2.slider(_("Perturbation added to each coordinate"), -3.0, 3.0, step=0.1,
                      value=1.0, key="cm_leak_delta", bind="query-params", format=SLIDER_FORMAT)
    t = TOKENS.index(leak_token)
    leak = sections.leakage_test(inputs, t, float(delta))
    if gates.gate(questions.LEAKAGE, inputs=inputs, token_index=t, delta=float(delta)):
        leakage_view(leak, leak_token, t)


leakage_section()
page.show_code(sections.leakage_test, A.CausalAttention)

# --- 3. triu explorer -------------------------------------------------------------------------------------
page.prose("triu")
@st.fragment
def triu_section() -> None:
    """Section 3: the diagonal slider redraws this section only."""
    k = int(st.slider(_("diagonal k in torch.triu(torch.ones(6, 6), diagonal=k)"), -T, T, step=1,
                      value=1, key="cm_triu_k", bind="query-params"))
    triu = sections.triu_explorer(T, k)
    c1, c2 = st.columns([3, 2])
    triu_title = _("torch.triu(ones(6, 6), diagonal={k}) — 1 = hidden").format(k=k)
    c1.plotly_chart(figures.mask_heatmap(triu.mask, TOKENS, title=triu_title, row_title=query_title,
                                         col_title=key_title, separators=plotly_separators(), colon=colon()),
                    key="cm_triu_chart", alt=alt.heatmap(triu_title, triu.mask, TOKENS, 0))
    with c2:
        st.markdown(_("visible keys per row = {counts}").format(counts=seq(triu.visible_per_row, 0)))
        if triu.kind == "causal":
            st.success(_("k = 1: the causal mask — each token sees itself and the past."))
        elif triu.kind == "fully_masked_rows":
            st.warning(_("Rows with nothing visible: {rows}. Their softmax would be NaN (see section 5).").format(
                rows=", ".join(TOKENS[i] for i in triu.fully_masked_rows)))
        elif triu.kind == "hides_diagonal":
            st.warning(_("The diagonal is hidden: a token cannot attend to itself."))
        elif triu.kind == "leaks_future":
            st.warning(ngettext("Each token may see up to {n} future token: information leaks.",
                                "Each token may see up to {n} future tokens: information leaks.",
                                triu.future_visible).format(n=triu.future_visible))


triu_section()
page.show_code(sections.triu_explorer)

# --- 4. register_buffer -----------------------------------------------------------------------------------
page.prose("buffer")
meta = meta_buffers_cached()
buffers = meta.table
st.dataframe(buffers[["holder", "state_dict_keys"]].assign(holder=[_(HOLDER_LABELS[h]) for h in buffers["holder"]])
             .rename(columns={"holder": _("mask held as"), "state_dict_keys": _("state_dict() keys")}),
             hide_index=True, key="cm_buffer_keys")
show_buffers(buffers, "meta", "cm_buffer_meta")
if meta.recorded_with is not None:
    with page.technical_details():  # how the server gets the table, not part of the lesson
        st.caption(_("This meta table is a recording of the code below, made with PyTorch {version}: running on the "
                     "meta device loads PyTorch's compiler, a large import, so the server reads the recording and "
                     "the test suite reruns the code to check it.").format(version=meta.recorded_with))
page.prose("buffer_meta")
device = pick_device()
if device.type == "cpu":
    st.caption(_("This machine has no GPU, so the table uses the meta device. On a CUDA machine `.to('cuda')` gives "
                 "the same pattern: the plain attribute stays on the CPU and the forward pass raises a "
                 "device-mismatch error."))
else:
    st.markdown(_("This machine has a **{device}** device; the same experiment with `.to('{device}')`:").format(
        device=device.type))
    show_buffers(buffer_table(str(device)), device.type, "cm_buffer_device")
page.show_code(sections.CausalAttentionPlainMask, sections.CausalAttentionNonPersistent, sections.buffer_demo)

# --- 5. fully masked row ----------------------------------------------------------------------------------
page.prose("nan")
@st.fragment
def fully_masked_row() -> None:
    """Section 5: the row and guard controls redraw this section only."""
    c1, c2 = st.columns(2)
    nan_token = c1.selectbox(_("Hide every position of the row of"), TOKENS,
                             index=TOKENS.index("with"), key="cm_nan_row", bind="query-params")
    # the link holds the guard's own name (finite_min), the radio its label in the reader's language
    guard = url.choice(c2.radio, _("Guard"), sections.GUARDS, key="cm_nan_guard", default=sections.GUARDS[0],
                       format_func=lambda g: _(GUARD_LABELS[g]))
    row = TOKENS.index(nan_token)
    demo = sections.masked_row_demo(scores, row, guard)
    c1, c2 = st.columns([2, 3])
    c1.plotly_chart(figures.mask_heatmap(demo.mask.to(dtype=scores.dtype), TOKENS, title=_("mask (1 = hidden)"),
                                         row_title=query_title, col_title=key_title,
                                         separators=plotly_separators(), colon=colon()), key="cm_nan_mask",
                    alt=alt.heatmap(_("mask (1 = hidden)"), demo.mask.to(dtype=scores.dtype), TOKENS, 0))
    with c2:
        weights_title = _("attn_weights with the guard “{guard}”").format(guard=_(GUARD_LABELS[guard]))
        st.plotly_chart(figures.masked_row_figure(
            demo.attn_weights, TOKENS, demo.nan_rows, title=weights_title,
            nan_label="0/0 = NaN", row_title=query_title, col_title=key_title, separators=plotly_separators(),
            colon=colon(),
        ), key="cm_nan_weights", alt=alt.heatmap(weights_title, demo.attn_weights, TOKENS, 4))
    if demo.nan_rows:
        st.info(_("As intended here: row {row} (“{token}”) has no visible position, so its softmax is "
                  "0/0 = NaN. The figure writes nan in its cells and leaves them uncoloured; pick a guard to fix it.")
                .format(row=row, token=nan_token), icon=":material/science:")
    else:
        st.success(_("No NaN. Row {row} (“{token}”) = {values}").format(row=row, token=nan_token,
                                                                       values=page.fmt_row(demo.row_weights)))


fully_masked_row()
page.show_code(sections.masked_row_demo)

page.check_yourself()
notebook.download_button()
