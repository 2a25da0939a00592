"""Page 3: the causal mask — two masking routes, a live leakage test, triu, register_buffer, the NaN row."""

import pandas as pd
import streamlit as st
import torch

from engine import attention as A
from engine import chapter
from engine.device import pick_device
from engine.figures import attention_heatmap
from engine.figures.core import format_value
from engine.figures import causal_mask as CF
from engine.sections import causal_mask as M
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "causal_mask"
INFO = next(p for p in PAGES if p.url_path == "causal-mask")
TOKENS = list(A.CHAPTER_TOKENS)
T = len(TOKENS)


@st.cache_data(show_spinner=False)
def two_ways_cached() -> tuple[dict, dict]:
    """The chapter's two masking routes (fixed inputs, seed 789) and their figure as a Plotly dict."""
    result = M.mask_two_ways(M.v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2), d_k=2)
    return result, CF.two_ways_figure(result, TOKENS).to_plotly_json()


@st.cache_data(show_spinner=False)
def buffer_table(target: str):
    """:func:`engine.sections.causal_mask.buffer_demo` for one device name (a constant per machine)."""
    return M.buffer_demo(target)


page.header("3 · Hiding the future: causal attention", INFO.section, PAGE)
inputs = A.chapter_inputs()  # (6, 3)
scores = M.v2_scores(inputs, seed=chapter.SA_V2_SEED, d_out=2)  # (6, 6), the chapter's sa_v2

# --- 1. two routes ------------------------------------------------------------------------------------
page.prose(PAGE, "two_ways")
result, two_ways_figure = two_ways_cached()
st.plotly_chart(two_ways_figure, key="cm_two_ways")
page.chapter_check("weights before masking (sa_v2, seed 789)", result["attn_weights"], chapter.SA_V2_WEIGHTS)
st.markdown(f"row sums after zeroing the future = {page.fmt_row(result['row_sums'])}")
page.chapter_check("renormalised weights (route 1)", result["masked_simple_norm"], chapter.CAUSAL_WEIGHTS)
page.chapter_check("scores with −inf above the diagonal", result["masked_scores"], chapter.CAUSAL_MASKED_SCORES)
page.chapter_check("softmax of the masked scores (route 2)", result["attn_weights_causal"], chapter.CAUSAL_WEIGHTS)
st.markdown(f"row 2 (“journey”) = {page.fmt_row(result['attn_weights_causal'][1])}")
page.chapter_check("row 2", result["attn_weights_causal"][1], chapter.CAUSAL_WEIGHTS[1])
st.markdown(f"max |route 1 − route 2| = **{result['max_abs_diff']:.2e}**")
page.prose(PAGE, "same_result")
page.show_code(M.v2_scores, M.mask_two_ways, A.causal_mask)

# --- 2. leakage test --------------------------------------------------------------------------------------
page.prose(PAGE, "leakage")
c1, c2 = st.columns(2)
leak_token = c1.selectbox("Token to perturb", TOKENS, key=bound("cm_leak_token", "starts", options=TOKENS))
delta = c2.slider("Perturbation added to each coordinate", -3.0, 3.0, step=0.1,
                  key=bound("cm_leak_delta", 1.0, lo=-3.0, hi=3.0))
t = TOKENS.index(leak_token)
leak = M.leakage_test(inputs, t, float(delta))
st.plotly_chart(CF.leakage_figure(leak, TOKENS, t), key="cm_leak_chart")
shown = leak.assign(token=TOKENS)[["token index", "token", "max |Δ| causal", "changed (causal)", "max |Δ| no mask", "changed (no mask)"]]
st.dataframe(shown, hide_index=True, key="cm_leak_table",
             column_config={c: st.column_config.NumberColumn(format="%.3e") for c in ("max |Δ| causal", "max |Δ| no mask")})
changed_rows = [TOKENS[i] for i in leak.index[leak["changed (causal)"]]]
earlier_changed = bool(leak["changed (causal)"].iloc[:t].any())
if not changed_rows:
    st.info("A perturbation of 0 changes nothing; move the slider away from 0.")
else:
    st.markdown(f"Perturbing “{leak_token}” (row {t}) changed the rows: **{', '.join(changed_rows)}**.")
if earlier_changed:
    st.badge("an earlier row changed: the mask leaks", icon=":material/error:", color="red")
else:
    st.badge(f"no row before “{leak_token}” changed: nothing leaks from the future", icon=":material/check_circle:", color="green")
page.show_code(M.leakage_test, A.CausalAttention)

# --- 3. triu explorer -------------------------------------------------------------------------------------
page.prose(PAGE, "triu")
k = st.slider("diagonal k in torch.triu(torch.ones(6, 6), diagonal=k)", -T, T, step=1, key=bound("cm_triu_k", 1, lo=-T, hi=T))
triu = M.triu_explorer(T, int(k))
c1, c2 = st.columns([3, 2])
c1.plotly_chart(CF.mask_heatmap(triu["mask"], TOKENS, title=f"torch.triu(ones(6, 6), diagonal={k}) — 1 = hidden"),
                key="cm_triu_chart")
with c2:
    st.markdown(f"visible keys per row = {triu['visible_per_row']}")
    if triu["is_causal"]:
        st.success("k = 1: the causal mask — each token sees itself and the past.")
    elif triu["fully_masked_rows"]:
        rows = ", ".join(TOKENS[i] for i in triu["fully_masked_rows"])
        st.warning(f"Rows with nothing visible: {rows}. Their softmax would be NaN (see section 5).")
    elif triu["hides_diagonal"]:
        st.warning("The diagonal is hidden: a token cannot attend to itself.")
    elif triu["future_visible"] > 0:
        st.warning(f"Each token may see up to {triu['future_visible']} future token(s): information leaks.")
page.show_code(M.triu_explorer)

# --- 4. register_buffer -----------------------------------------------------------------------------------
page.prose(PAGE, "buffer")
buffers = buffer_table("meta")
st.dataframe(buffers[["mask held as", "state_dict() keys"]], hide_index=True, key="cm_buffer_keys")
st.dataframe(buffers.drop(columns=["state_dict() keys", "forward after .to()"]), hide_index=True, key="cm_buffer_meta")
st.markdown("\n".join(f"- forward after `.to('meta')`, {held}: `{outcome}`"
                       for held, outcome in zip(buffers["mask held as"], buffers["forward after .to()"])))
page.prose(PAGE, "buffer_meta")
device = pick_device()
if device.type == "cpu":
    st.caption("This machine has no GPU, so the table uses the meta device. On a CUDA machine `.to('cuda')` gives "
               "the same pattern: the plain attribute stays on the CPU and the forward pass raises a device-mismatch error.")
else:
    st.markdown(f"This machine has a **{device.type}** device; the same experiment with `.to('{device.type}')`:")
    on_device = buffer_table(str(device))
    st.dataframe(on_device.drop(columns=["state_dict() keys", "forward after .to()"]), hide_index=True, key="cm_buffer_device")
    st.markdown("\n".join(f"- forward after `.to('{device.type}')`, {held}: `{outcome}`"
                           for held, outcome in zip(on_device["mask held as"], on_device["forward after .to()"])))
page.show_code(M.CausalAttentionPlainMask, M.CausalAttentionNonPersistent, M.buffer_demo)

# --- 5. fully masked row ----------------------------------------------------------------------------------
page.prose(PAGE, "nan")
c1, c2 = st.columns(2)
nan_token = c1.selectbox("Hide every position of the row of", TOKENS, key=bound("cm_nan_row", "with", options=TOKENS))
guard = c2.radio("Guard", M.GUARDS, key=bound("cm_nan_guard", M.GUARDS[0], options=M.GUARDS))
row = TOKENS.index(nan_token)
demo = M.masked_row_demo(scores, row, guard)
c1, c2 = st.columns([2, 3])
c1.plotly_chart(CF.mask_heatmap(demo["mask"].to(torch.float32), TOKENS, title="mask (1 = hidden)"), key="cm_nan_mask")
with c2:
    if demo["nan_rows"]:
        st.error(f"Row {row} (“{nan_token}”) has no visible position: softmax of all −inf is 0/0 = NaN. "
                 "A chart cannot draw it, so here are the weights as numbers:")
        weights_df = pd.DataFrame([[format_value(float(v)) for v in r] for r in demo["attn_weights"]], columns=TOKENS)
        weights_df.insert(0, "query", TOKENS)
        st.dataframe(weights_df, hide_index=True, key="cm_nan_table")
    else:
        st.plotly_chart(attention_heatmap(demo["attn_weights"], TOKENS, title=f"attn_weights with the guard “{guard}”"),
                        key="cm_nan_weights")
        st.success(f"No NaN. Row {row} (“{nan_token}”) = {page.fmt_row(demo['row_weights'])}")
page.show_code(M.masked_row_demo)

page.check_yourself(PAGE)
