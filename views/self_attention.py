"""Page 1: simplified self-attention on the chapter's six 3-d embeddings."""

import pandas as pd
import streamlit as st
import torch

from engine import attention as A
from engine import chapter
from engine.figures import SIGNED_SCALE, attention_heatmap, row_bars, vectors_3d
from engine.sections import self_attention as S
from ui import page
from ui.state import bound
from ui.nav import PAGES

PAGE = "self_attention"
DIMS = ["dim 0", "dim 1", "dim 2"]

page.header("1 · Self-attention without trainable weights", PAGES[1].section, PAGE)

# --- 1. the inputs -------------------------------------------------------------------------------
page.prose(PAGE, "embeddings")
st.session_state.setdefault("sa_editor_version", 0)
if st.button("Reset to the chapter's values", key="sa_reset", icon=":material/restart_alt:"):
    st.session_state["sa_editor_version"] += 1
chapter_df = pd.DataFrame(A.CHAPTER_INPUTS, columns=DIMS)
chapter_df.insert(0, "token", A.CHAPTER_TOKENS)
edited = st.data_editor(
    chapter_df,
    key=f"sa_embeddings_{st.session_state['sa_editor_version']}",
    disabled=["token"],
    hide_index=True,
    num_rows="fixed",
    column_config={d: st.column_config.NumberColumn(d, min_value=-10.0, max_value=10.0, step=0.01, format="%.2f") for d in DIMS},
)
values = edited[DIMS].apply(pd.to_numeric, errors="coerce")
if values.isna().any().any():
    st.warning("Some cells are empty; they use the chapter's value until you fill them in.")
    values = values.fillna(chapter_df[DIMS])
inputs = torch.tensor(values.to_numpy(), dtype=torch.float32)  # (6, 3)
is_chapter_input = chapter.matches(inputs, A.CHAPTER_INPUTS, decimals=6)

# --- 2. one query ----------------------------------------------------------------------------------
page.prose(PAGE, "steps")
query_token = st.selectbox("Query token", A.CHAPTER_TOKENS, key=bound("sa_query", "journey", options=A.CHAPTER_TOKENS))
q = A.CHAPTER_TOKENS.index(query_token)
steps = S.query_walkthrough(inputs, q)
applies = is_chapter_input and q == 1
tokens = list(A.CHAPTER_TOKENS)

left, right = st.columns([3, 2])
with left:
    st.plotly_chart(
        row_bars({"attn_scores (dot products)": steps["attn_scores"]}, tokens, title=f"Step 1 · scores of “{query_token}”"),
        key="sa_scores_chart",
    )
with right:
    st.plotly_chart(
        vectors_3d(inputs, tokens, highlight=q, extra={f"z ({query_token})": steps["context_vec"]},
                   title="Inputs and the context vector", height=360),
        key="sa_vectors",
    )
st.markdown(f"`attn_scores` = {page.fmt_row(steps['attn_scores'])}")
page.chapter_check("scores of “journey”", steps["attn_scores"], chapter.SIMPLE_SCORES_JOURNEY, applies)

st.plotly_chart(
    row_bars({"divide by the sum": steps["naive_weights"], "softmax": steps["attn_weights"]}, tokens,
             title="Step 2 · two ways to turn scores into weights"),
    key="sa_weights_chart",
)
st.markdown(f"naive weights = {page.fmt_row(steps['naive_weights'])}")
page.chapter_check("naive weights", steps["naive_weights"], chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY, applies)
st.markdown(f"`attn_weights` (softmax) = {page.fmt_row(steps['attn_weights'])} · sum = {float(steps['attn_weights'].sum()):.4f}")
page.chapter_check("softmax weights", steps["attn_weights"], chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY, applies)
st.markdown(f"Step 3 · `context_vec` z = {page.fmt_row(steps['context_vec'])}")
page.chapter_check("context vector z", steps["context_vec"], chapter.SIMPLE_CONTEXT_JOURNEY, applies)
page.show_code(S.query_walkthrough, A.dot_scores, A.naive_normalize, A.context_vector)

# --- 3. softmax numerics ----------------------------------------------------------------------------
page.prose(PAGE, "numerics")
c1, c2 = st.columns(2)
scale = c1.slider("Score scale (multiplies the scores above)", -150.0, 150.0, step=0.5,
                  key=bound("sa_scale", 1.0, lo=-150.0, hi=150.0))
dtype_name = c2.selectbox("dtype", list(S.DTYPES), key=bound("sa_dtype", "float32", options=list(S.DTYPES)))
dtype = S.DTYPES[dtype_name]
overflow, underflow = S.exp_limits(dtype)
numerics = S.softmax_numerics(steps["attn_scores"], scale, dtype)
numerics.insert(0, "token", tokens)
st.caption(f"In {dtype_name}, exp(x) is inf above x ≈ {overflow:.2f} and exactly 0 below x ≈ {underflow:.2f}.")
broken = int((~numerics["naive softmax"].apply(lambda v: pd.notna(v) and abs(v) != float("inf"))).sum())
stable_ok = bool(numerics["stable softmax"].apply(lambda v: pd.notna(v) and abs(v) != float("inf")).all())
st.dataframe(
    numerics.style.format({c: "{:.4g}" for c in numerics.columns if c != "token"}, na_rep="nan"),
    hide_index=True,
    key="sa_numerics_table",
)
if broken:
    st.error(f"Naive softmax: {broken} of 6 weights are nan or inf. Stable softmax: {'all finite' if stable_ok else 'not finite'}.")
else:
    st.success(f"Naive softmax: all 6 weights finite. Stable softmax: {'all finite' if stable_ok else 'not finite'}.")
page.show_code(A.softmax_naive, A.softmax_stable)

# --- 4. Jacobian ------------------------------------------------------------------------------------
page.prose(PAGE, "jacobian")
jac = S.jacobian_check(steps["attn_scores"])
st.plotly_chart(
    attention_heatmap(jac["closed_form"], tokens, tokens, title=f"∂w_i/∂x_j for the query “{query_token}”",
                      colorscale=SIGNED_SCALE, row_title="weight w_i", col_title="score x_j"),
    key="sa_jacobian",
)
st.markdown(f"max |closed form − autograd| = {jac['max_abs_diff']:.2e}")
page.verdict(jac["max_abs_diff"] < 1e-12,
             "closed form equals torch.autograd",
             "closed form differs from torch.autograd")
page.show_code(S.jacobian_check, A.softmax_jacobian)

# --- 5. all pairs -----------------------------------------------------------------------------------
page.prose(PAGE, "allpairs")
every = S.loop_vs_matmul(inputs)
c1, c2 = st.columns(2)
c1.plotly_chart(attention_heatmap(every["attn_scores"], tokens, title="attn_scores = inputs @ inputs.T", zmin=None),
                key="sa_all_scores")
c2.plotly_chart(attention_heatmap(every["attn_weights"], tokens, title="attn_weights = softmax(dim=-1)"),
                key="sa_all_weights")
st.plotly_chart(
    attention_heatmap(every["context_vec"], tokens, DIMS, title="context_vec = attn_weights @ inputs",
                      zmin=None, row_title="token", col_title="dimension"),
    key="sa_all_context",
)
st.markdown(f"max |loops − matmul| = {every['max_abs_diff']:.2e}")
page.chapter_check("first two rows of attn_scores", every["attn_scores"][:2], chapter.SIMPLE_SCORES_FIRST_ROWS, is_chapter_input)
page.chapter_check("all context vectors", every["context_vec"], chapter.SIMPLE_ALL_CONTEXT, is_chapter_input)
page.show_code(S.loop_vs_matmul, A.simplified_self_attention)

page.check_yourself(PAGE)
