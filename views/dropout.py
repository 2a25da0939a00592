"""Page 4: dropout on the attention weights — slider over p, the mean over many masks, train() vs eval()."""

import functools

import plotly.graph_objects as go
import streamlit as st

import ui.alt as alt
from engine import attention as A
from engine import chapter
from engine.device import pick_device
from engine.diagrams import dropout as diagrams
from engine.figures import dropout as figures
from engine.sections import dropout as sections
from ui import gates, notebook, page, url
from ui.diagram import colour_legend, diagram
from ui.i18n import LANGUAGES, _, current_language
from ui.numbers import colon, integer, num, plotly_separators, sci, seq, significant
from ui.questions import dropout as questions

TOKENS = list(A.CHAPTER_TOKENS)
MEAN_P = [p for p in sections.P_VALUES if p > 0]
LAYER_P = list(sections.P_VALUES)
#: The step the slider figure opens on: the chapter's rate. The numbers printed beside the figure are this step's.
SHOWN_P = chapter.DROPOUT_P
N_MASKS = 2000
#: d_out of the CausalAttention layer that ``sections.train_vs_eval`` builds (its result holds the weights, not the
#: values or context vectors, so the diagram's values and context arrows use this size).
LAYER_D_OUT = 2


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def sweep_and_figure(seed: int, labels: figures.SliderLabels) -> tuple[dict[float, sections.DropoutPair], go.Figure]:
    """Dropout at every p of the slider after ``manual_seed(seed)``, and the slider figure."""
    sweep = sections.dropout_sweep(sections.chapter_causal_weights(A.chapter_inputs()), seed)
    return sweep, figures.dropout_slider_figure(sweep, TOKENS, labels, active_p=SHOWN_P)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def expectation_and_figure(p: float, labels: figures.ConvergenceLabels) -> tuple[sections.Expectation, go.Figure]:
    """Running mean over 2,000 masks at rate ``p`` (seed 0) and its log-log chart."""
    weights = sections.chapter_causal_weights(A.chapter_inputs())
    expectation = sections.dropout_expectation(weights, p, n_masks=N_MASKS, seed=0)
    return expectation, figures.convergence_figure(expectation, p, labels)


def dropout_diagram(modes: sections.TrainVsEval, p: float) -> str:
    """Page 4's diagram at the layer's rate ``p``, with the shapes of the train()/eval() weights just computed."""
    T = modes.eval_1.shape[-1]
    return diagrams.dropout(
        diagrams.DropoutLabels(
            attn_weights=_("causal attn_weights"), dropout=_("dropout (training only)"), dropped=_("dropped"),
            kept=_("kept"), training="train()", inference="eval()", values="values",
            weighted_sum=_("weighted sum"), context_vec="context_vec", number=lambda v: significant(v, 4),
        ),
        diagrams.DropoutShapes(attn_weights=tuple(modes.eval_1.shape), dropped=tuple(modes.train_1.shape),
                               values=(T, LAYER_D_OUT), context_vec=(T, LAYER_D_OUT), p=p),
    )


def rate_text():
    """A select slider's ``format_func`` for a rate p: ``0,5`` in French and German (bound to the reader's language
    now: Streamlit may call it outside the script's run)."""
    return functools.partial(num, decimals=1, lang=current_language())


def rate_aliases(p: float) -> set[str]:
    """The texts an older link holds for the rate ``p``: Streamlit's binding wrote the slider's label, ``0,9`` from a
    French or German page, ``0.9`` from an English one. The link now holds the option itself (``0.9``)."""
    return {num(p, 1, lang=code) for code in LANGUAGES}


page.header()
inputs = A.chapter_inputs()  # (6, 3)

# --- 1. slider over p ---------------------------------------------------------------------------------
page.prose("slider")
@st.fragment
def slider_section() -> None:
    """Section 1: the seed redraws this section only (a new seed is a new sweep and figure, never in the cache)."""
    seed = url.int_input(st, _("seed for torch.manual_seed"), min_value=0, max_value=99_999, step=1,
                         value=chapter.DROPOUT_SEED, key="do_seed")
    slider_labels = figures.SliderLabels(
        ones_panel="dropout(ones(6, 6))", weights_panel=_("dropout(causal attn_weights)"), sum_panel=_("row sum"),
        step=_("p = {p}: each weight is dropped with probability {p}; survivors × 1/(1−p) = {scale} "
               "({kept} of {total} kept this time)"),
        slider_prefix=_("dropout p = "), separators=plotly_separators(), colon=colon())
    sweep, slider_figure = sweep_and_figure(seed, slider_labels)
    shown = sweep[SHOWN_P]
    if gates.gate(questions.KEPT, seed=seed) and gates.gate(questions.ROW_SUMS, seed=seed):
        st.plotly_chart(slider_figure, key="do_slider_figure", alt=_(
            "Heatmaps of dropout(ones(6, 6)) and of the causal attn_weights after dropout, beside their row sums, "
            "one p at a time with the slider; at p = {p}, seed {seed}, the weights row by row: {weights}; row sums "
            "of dropout(ones): {ones}.").format(p=num(SHOWN_P, 1), seed=seed,
                                               weights=alt.rows(shown.weights, TOKENS, 2),
                                               ones=alt.vector(shown.ones_row_sums, 1)))
        page.prose("scaling")  # the factor and the row sums: the two gates' answers, said after them
        applies = seed == chapter.DROPOUT_SEED
        st.markdown(_("The figure opens at the chapter's rate, p = {p}. At that step, seed {seed}: row sums of "
                      "dropout(ones) = {ones}; of the dropped-out weights = {weights}. Other steps show their own sums "
                      "in the narrow columns.").format(p=figures.step_label(SHOWN_P, plotly_separators()), seed=seed,
                                                       ones=seq(shown.ones_row_sums, 1),
                                                       weights=seq(shown.weights_row_sums, 2)))
        page.chapter_check(_("dropout(ones(6, 6)), p = {p}").format(p=num(SHOWN_P, 1)), shown.ones,
                           chapter.DROPOUT_ONES, applies)
        page.chapter_check(_("dropout(causal attn_weights), p = {p}").format(p=num(SHOWN_P, 1)), shown.weights,
                           chapter.DROPOUT_CAUSAL, applies)
    page.prose("platforms")
    device = pick_device()
    if device.type != "cpu":
        there = sections.device_mask(sections.chapter_causal_weights(inputs), SHOWN_P, seed, device, shown)
        if there.same_as_cpu:
            st.markdown(_("On this machine's **{device}** device the same seed gives the same mask as the CPU:").format(
                device=there.device))
        else:
            st.markdown(_("On this machine's **{device}** device the same seed gives a different mask from the CPU:")
                        .format(device=there.device))
        st.code(str(there.ones), language="text")


slider_section()
page.show_code(sections.dropout_pair, sections.dropout_sweep)

# --- 2. mean over masks ---------------------------------------------------------------------------------
page.prose("mean")
@st.fragment
def mean_section() -> None:
    """Section 2: the rate of the average redraws this section only."""
    p_mean = url.choice(st.select_slider, _("dropout rate p for the average"), MEAN_P, key="do_mean_p",
                        default=0.5, format_func=rate_text(), aliases=rate_aliases)
    convergence_labels = figures.ConvergenceLabels(
        error=_("max |mean − weights|, p = {p}"), guide=_("σ of the largest weight / √n"),
        hover=_("{n} masks: {value}"), masks_axis=_("number of dropout masks averaged"),
        error_axis=_("largest deviation from the weights"), separators=plotly_separators())
    with st.spinner(_("Averaging {n} dropout masks …").format(n=integer(N_MASKS))):
        expectation, convergence = expectation_and_figure(float(p_mean), convergence_labels)
    st.plotly_chart(convergence, key="do_convergence", alt=_(
        "Line chart of max |mean − weights| against the number of dropout masks averaged, p = {p}, beside σ of the "
        "largest weight / √n: {early} after 10 masks, {error} after {n}.").format(
            p=num(float(p_mean), 1), early=num(expectation.error_after_10, 4), error=num(expectation.final_error, 4),
            n=integer(expectation.masks)))
    st.markdown(_("After {n} masks: max |mean − weights| = **{error}** (σ of the largest weight / √n = "
                  "{sigma}); after 10 masks: {early}.").format(
        n=integer(expectation.masks), error=num(expectation.final_error, 4), sigma=num(expectation.final_sigma, 4),
        early=num(expectation.error_after_10, 4)))


mean_section()
page.show_code(sections.dropout_expectation)

# --- 3. train vs eval -------------------------------------------------------------------------------------
page.prose("modes")
@st.fragment
def modes_section() -> None:
    """Section 3: the layer's rate redraws this section only. The layer is built with the chapter's seed, as the
    prose says, whatever the seed of section 1: that seed redraws section 1 only."""
    p_layer = url.choice(st.select_slider, _("dropout rate of the CausalAttention layer"), LAYER_P,
                         key="do_layer_p", default=0.5, format_func=rate_text(), aliases=rate_aliases)
    modes = sections.train_vs_eval(inputs, float(p_layer), chapter.DROPOUT_SEED)
    mode_labels = figures.TrainEvalLabels(train_1=_("train(), call 1"), train_2=_("train(), call 2"), eval="eval()",
                                          row=_("{token} (Σ {sum})"), separators=plotly_separators(),
                                          colon=colon())
    if gates.gate(questions.WHERE, p=float(p_layer), seed=chapter.DROPOUT_SEED):
        st.plotly_chart(figures.train_eval_figure(modes, TOKENS, mode_labels), key="do_train_eval",
                        alt=alt.heatmaps({mode_labels.train_1: modes.train_1, mode_labels.train_2: modes.train_2,
                                          mode_labels.eval: modes.eval_1}, TOKENS, 2))
        left, right = st.columns([2, 3])
        with left:
            diagram(dropout_diagram(modes, float(p_layer)), width="stretch",
                    alt=_("Diagram: in training, dropout zeroes a fraction p of the attention weights and "
                          "multiplies the others by 1/(1 − p) before the weighted sum of the values; in eval() "
                          "the weights go straight to the sum."))
            st.caption(_("The diagram follows the rate of the CausalAttention layer chosen above."))
            colour_legend()
        with right:
            if modes.train_calls_differ:
                st.badge(_("train(): two calls on the same input give different weights"), icon=":material/shuffle:",
                         color="blue")
            else:
                st.badge(_("train() with p = 0: nothing is dropped, both calls agree"), icon=":material/drag_handle:",
                         color="gray")
            page.verdict(modes.eval_equals_no_dropout and modes.eval_calls_equal,
                         _("eval(): deterministic, and identical to the same layer with p = 0"),
                         _("eval() output differs from the layer without dropout"))
            st.markdown(_("max |eval() output − output with p = 0| = {diff}").format(
                diff=sci(modes.max_abs_diff_eval_vs_p0, 1)))


modes_section()
page.show_code(sections.train_vs_eval, A.CausalAttention, A.causal_mask)

page.prose("gpt")
page.check_yourself()
notebook.download_button()
