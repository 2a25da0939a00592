"""Page 2: self-attention with trainable weights, the 1/sqrt(d_k) scale, SelfAttention_v1/v2, inits, exercise 3.1."""

import streamlit as st

from engine import attention as A
from engine import chapter
from engine.figures import SIGNED_SCALE, row_bars
from engine.figures import trainable_weights as TF
from engine.sections import trainable_weights as T
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "trainable_weights"
INFO = next(p for p in PAGES if p.url_path == "trainable-weights")
TOKENS = list(A.CHAPTER_TOKENS)
DIMS_IN = ["dim 0", "dim 1", "dim 2"]


@st.cache_data(show_spinner="Sampling 10,000 random query–key pairs per d_k …")
def dk_sweep_figure_cached() -> tuple[dict, dict]:
    """The d_k sweep (seeded, 10,000 samples per d_k) and its slider figure as a Plotly dict."""
    sweep = T.dk_sweep()
    return sweep, TF.dk_sweep_figure(sweep).to_plotly_json()


@st.cache_data(show_spinner=False)
def init_comparison_cached():
    """The initialisation measurements and their chart (Plotly dict)."""
    table = T.init_comparison()
    return table, TF.init_figure(table).to_plotly_json()


page.header("2 · Self-attention with trainable weights", INFO.section, PAGE)
inputs = A.chapter_inputs()  # (6, 3)

# --- 1. projections, one query ------------------------------------------------------------------
page.prose(PAGE, "projections")
c1, c2, c3 = st.columns(3)
d_out = c1.slider("d_out (size of queries, keys and values)", 1, 8, key=bound("tw_d_out", 2, lo=1, hi=8))
seed = c2.number_input("seed for torch.manual_seed", min_value=0, max_value=99_999, step=1,
                       key=bound("tw_seed", chapter.TRAINABLE_SEED, lo=0, hi=99_999))
query_token = c3.selectbox("Query token", TOKENS, key=bound("tw_query", "journey", options=TOKENS))
q = TOKENS.index(query_token)
seed = int(seed)
steps = T.trainable_walkthrough(inputs, seed, d_out, q)
is_chapter_setup = seed == chapter.TRAINABLE_SEED and d_out == 2
applies = is_chapter_setup and q == 1
if not is_chapter_setup:
    st.caption("The chapter uses seed 123 and d_out 2; with your settings the numbers are expected to differ.")

out_cols = [f"out {j}" for j in range(d_out)]
st.plotly_chart(
    TF.matrices_side_by_side({f"{name}  ({inputs.shape[1]}×{d_out})": steps[name] for name in ("W_query", "W_key", "W_value")},
                             DIMS_IN, out_cols, row_title="input dim", height=280),
    key="tw_projections",
)
st.markdown(f"`query` = x[{q}] @ W_query = {page.fmt_row(steps['query'])}")
page.chapter_check("query_2", steps["query"], chapter.TRAINABLE_QUERY_2, applies)

st.plotly_chart(
    row_bars({"attn_scores = keys @ query": steps["attn_scores"]}, TOKENS, title=f"Step 1 · scores of “{query_token}”"),
    key="tw_scores_chart",
)
st.markdown(f"`attn_scores` = {page.fmt_row(steps['attn_scores'])}")
page.chapter_check("attention scores", steps["attn_scores"], chapter.TRAINABLE_SCORES_2, applies)

st.plotly_chart(
    row_bars({"softmax(scores / √d_k)": steps["attn_weights"], "softmax(scores), no scale": steps["unscaled_weights"]},
             TOKENS, title=f"Step 2 · weights with d_k = {d_out}: the scale flattens them"),
    key="tw_weights_chart",
)
st.markdown(f"`attn_weights` = softmax(attn_scores / √{d_out}) = {page.fmt_row(steps['attn_weights'])}")
page.chapter_check("scaled attention weights", steps["attn_weights"], chapter.TRAINABLE_WEIGHTS_2, applies)
st.markdown(f"Step 3 · `context_vec` = attn_weights @ values = {page.fmt_row(steps['context_vec'])}")
page.chapter_check("context vector", steps["context_vec"], chapter.TRAINABLE_CONTEXT_2, applies)
page.show_code(T.trainable_walkthrough, T.chapter_projections, A.scaled_dot_product_step)

# --- 2. why 1/sqrt(d_k) -----------------------------------------------------------------------------
page.prose(PAGE, "scale")
sweep, dk_figure = dk_sweep_figure_cached()
st.plotly_chart(dk_figure, key="tw_dk_figure")
st.dataframe(sweep["stats"], hide_index=True, key="tw_dk_table",
             column_config={c: st.column_config.NumberColumn(format="%.4f") for c in sweep["stats"].columns if c != "d_k"})
page.show_code(T.dk_sweep)

# --- 3. the two classes -----------------------------------------------------------------------------
page.prose(PAGE, "classes")
seed_v2 = int(st.number_input("seed for SelfAttention_v2", min_value=0, max_value=99_999, step=1,
                              key=bound("tw_seed_v2", chapter.SA_V2_SEED, lo=0, hi=99_999)))
outputs = T.v1_v2_outputs(inputs, d_out, seed, seed_v2)
st.plotly_chart(
    TF.matrices_side_by_side({f"SelfAttention_v1 (seed {seed})": outputs["v1"], f"SelfAttention_v2 (seed {seed_v2})": outputs["v2"]},
                             TOKENS, out_cols, colorscale=SIGNED_SCALE, zmin=None, row_title="token", height=380),
    key="tw_v1_v2",
)
c1, c2 = st.columns(2)
with c1:
    page.chapter_check("SelfAttention_v1 output", outputs["v1"], chapter.SA_V1_OUTPUT, is_chapter_setup)
with c2:
    page.chapter_check("SelfAttention_v2 output", outputs["v2"], chapter.SA_V2_OUTPUT,
                       seed_v2 == chapter.SA_V2_SEED and d_out == 2)
page.show_code(T.v1_v2_outputs, A.SelfAttention_v1, A.SelfAttention_v2)

# --- 4. initialisations -----------------------------------------------------------------------------
page.prose(PAGE, "init")
init_table, init_chart = init_comparison_cached()
st.plotly_chart(init_chart, key="tw_init_chart")
st.dataframe(init_table, hide_index=True, key="tw_init_table",
             column_config={c: st.column_config.NumberColumn(format="%.4g") for c in init_table.columns if c not in ("d_in", "init")})
page.show_code(T.init_comparison)

# --- 5. exercise 3.1 ----------------------------------------------------------------------------------
page.prose(PAGE, "exercise")
exercise = T.exercise_3_1(inputs, d_out, seed, seed_v2)
st.markdown(f"max |v1 − v2| before the copy: **{exercise['max_abs_diff_before']:.4e}**")
st.markdown(f"max |v1 − v2| after copying v2's weights (transposed) into v1: **{exercise['max_abs_diff_after']:.4e}**")
page.verdict(exercise["max_abs_diff_after"] < 1e-6,
             "after the copy, SelfAttention_v1 computes the same outputs as SelfAttention_v2",
             "after the copy the outputs still differ")
page.show_code(T.exercise_3_1, A.copy_v2_into_v1)

page.prose(PAGE, "two_weights")
page.check_yourself(PAGE)
