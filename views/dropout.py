"""Page 4: dropout on the attention weights — slider over p, the mean over many masks, train() vs eval()."""

import streamlit as st

from engine import attention as A
from engine import chapter
from engine.device import pick_device
from engine.figures import dropout as DF
from engine.sections import dropout as D
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "dropout"
INFO = next(p for p in PAGES if p.url_path == "dropout")
TOKENS = list(A.CHAPTER_TOKENS)
MEAN_P = [p for p in D.P_VALUES if p > 0]


@st.cache_data(show_spinner=False)
def sweep_and_figure(seed: int) -> tuple[dict, dict]:
    """Dropout at every p of the slider after ``manual_seed(seed)``, and the slider figure (Plotly dict)."""
    sweep = D.dropout_sweep(D.chapter_causal_weights(A.chapter_inputs()), seed)
    return sweep, DF.dropout_slider_figure(sweep, TOKENS, active_p=0.5).to_plotly_json()


@st.cache_data(show_spinner="Averaging 2,000 dropout masks …")
def expectation_and_figure(p: float) -> tuple:
    """Running mean over 2,000 masks at rate ``p`` (seed 0) and its log-log chart (Plotly dict)."""
    table = D.dropout_expectation(D.chapter_causal_weights(A.chapter_inputs()), p, n_masks=2000, seed=0)
    return table, DF.convergence_figure(table, p).to_plotly_json()


page.header("4 · Dropout on the attention weights", INFO.section, PAGE)
inputs = A.chapter_inputs()  # (6, 3)

# --- 1. slider over p ---------------------------------------------------------------------------------
page.prose(PAGE, "slider")
seed = int(st.number_input("seed for torch.manual_seed", min_value=0, max_value=99_999, step=1,
                           key=bound("do_seed", chapter.DROPOUT_SEED, lo=0, hi=99_999)))
sweep, slider_figure = sweep_and_figure(seed)
st.plotly_chart(slider_figure, key="do_slider_figure")
half = sweep[chapter.DROPOUT_P]
applies = seed == chapter.DROPOUT_SEED
st.markdown(f"At p = 0.5, seed {seed}: row sums of dropout(ones) = {page.fmt_row(half['ones_row_sums'], 1)}; "
            f"of the dropped-out weights = {page.fmt_row(half['weights_row_sums'])}")
page.chapter_check("dropout(ones(6, 6)), p = 0.5", half["ones"], chapter.DROPOUT_ONES, applies)
page.chapter_check("dropout(causal attn_weights), p = 0.5", half["weights"], chapter.DROPOUT_CAUSAL, applies)
page.prose(PAGE, "platforms")
device = pick_device()
if device.type != "cpu":
    on_device = D.dropout_pair(D.chapter_causal_weights(inputs), chapter.DROPOUT_P, seed, device=device)
    same = chapter.matches(on_device["ones"], half["ones"])
    st.markdown(f"On this machine's **{device.type}** device the same seed gives "
                f"{'the same mask as' if same else 'a different mask from'} the CPU:")
    st.code(str(on_device["ones"]), language="text")
page.show_code(D.dropout_pair, D.dropout_sweep)

# --- 2. mean over masks ---------------------------------------------------------------------------------
page.prose(PAGE, "mean")
p_mean = st.select_slider("dropout rate p for the average", MEAN_P, key=bound("do_mean_p", 0.5, options=MEAN_P))
table, convergence = expectation_and_figure(float(p_mean))
st.plotly_chart(convergence, key="do_convergence")
last = table.iloc[-1]
st.markdown(f"After {int(last['masks']):,} masks: max |mean − weights| = **{last['max |mean - weights|']:.4f}** "
            f"(σ of the largest weight / √n = {last['σ_max / √n']:.4f}); after 10 masks: "
            f"{table['max |mean - weights|'].iloc[9]:.4f}.")
page.show_code(D.dropout_expectation)

# --- 3. train vs eval -------------------------------------------------------------------------------------
page.prose(PAGE, "modes")
p_layer = st.select_slider("dropout rate of the CausalAttention layer", list(D.P_VALUES),
                           key=bound("do_layer_p", 0.5, options=list(D.P_VALUES)))
modes = D.train_vs_eval(inputs, float(p_layer), seed)
st.plotly_chart(DF.train_eval_figure(modes, TOKENS), key="do_train_eval")
if modes["train_calls_differ"]:
    st.badge("train(): two calls on the same input give different weights", icon=":material/shuffle:", color="blue")
else:
    st.badge("train() with p = 0: nothing is dropped, both calls agree", icon=":material/drag_handle:", color="gray")
page.verdict(modes["eval_equals_no_dropout"] and modes["eval_calls_equal"],
             "eval(): deterministic, and identical to the same layer with p = 0",
             "eval() output differs from the layer without dropout")
st.markdown(f"max |eval() output − output with p = 0| = {modes['max_abs_diff_eval_vs_p0']:.1e}")
page.show_code(D.train_vs_eval, A.CausalAttention)

page.prose(PAGE, "gpt")
page.check_yourself(PAGE)
