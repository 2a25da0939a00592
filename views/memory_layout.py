"""Page 6: memory layout — storage, strides, view/transpose/contiguous/reshape, the keys' head split, T² cost."""

import math

import pandas as pd
import streamlit as st
import torch

from engine import chapter
from engine import layout as L
from engine.figures import layout as LF
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "memory_layout"
INFO = next(p for p in PAGES if p.url_path == "memory-layout")
#: Largest starting tensor of the explorer (keeps the walk figure small).
MAX_ELEMENTS = 48
RECIPE_NAMES = list(L.RECIPES)
DTYPE_BYTES = {"float32": 4, "bfloat16 / float16": 2, "float64": 8}
LENGTHS = tuple(2**k for k in range(6, 16))  # T = 64 … 32768


@st.cache_data(show_spinner=False)
def chapter_block() -> tuple[pd.DataFrame, dict, dict]:
    """The chapter's operations as a table, the view/reshape comparison, and the checked values."""
    m = L.chapter_matrix()
    ops = L.chapter_operations(m)
    named = dict(ops)
    mt = named["M.transpose(0, 1)"]
    checks = {
        "view": named["M.view(3, 2)"].tolist(),
        "transposed": mt.tolist(),
        "storage": L.storage_elements(mt).tolist(),
        "reading": L.reading_order_values(mt).tolist(),
    }
    comparison = L.view_versus_reshape(m)
    return L.layout_table(ops), checks, {
        "error": comparison["error"], "table": comparison["table"],
        "reshape": comparison["reshape"].tolist(), "contiguous_view": comparison["contiguous_view"].tolist(),
    }


@st.cache_data(show_spinner=False)
def explorer_cached(shape: tuple[int, ...], recipe: str, new_shape: tuple[int, ...], dims: tuple[int, int]):
    """Run a recipe on 1…n laid out as ``shape``: the steps' codes/errors, the layout table, the walk figure."""
    base = torch.arange(1, math.prod(shape) + 1).view(shape)  # (n,) -> shape, contiguous
    steps = L.run_recipe(base, recipe, new_shape, dims)
    done = [s for s in steps if s.tensor is not None]
    table = L.layout_table([("M", base)] + [(s.code, s.tensor) for s in done])
    shown = done[-1] if done else None
    target, label = (shown.tensor, shown.code) if shown else (base, "M")
    figure = LF.memory_walk_figure(L.memory_walk(target), title=label).to_plotly_json()
    errors = [s.error for s in steps if s.error]
    orders = {"code": label, "order": L.logical_order(target)}
    return [s.code for s in steps], errors, table, figure, orders


@st.cache_data(show_spinner=False)
def head_walk_cached(num_tokens: int, num_heads: int, head_dim: int) -> tuple[pd.DataFrame, dict]:
    """The keys' path through the head split: a table of stages and the slider figure."""
    stages = L.key_head_walk(num_tokens, num_heads, head_dim)
    table = pd.DataFrame([{
        "stage": s.title,
        "shape": str(s.layout.shape),
        "stride": str(s.layout.stride),
        "is_contiguous": s.layout.is_contiguous,
        "storage": "same as the stage before" if s.shares_previous else "new",
    } for s in stages])
    return table, LF.head_walk_figure(stages, num_heads).to_plotly_json()


@st.cache_data(show_spinner=False)
def cost_cached(batch: int, num_heads: int, head_dim: int, element_size: int) -> tuple[pd.DataFrame, dict]:
    """Bytes of the score tensor and of q, k, v over T = 64 … 32768, and the log–log chart."""
    table = L.score_cost_table(batch, num_heads, head_dim, LENGTHS, element_size)
    return table, LF.score_cost_figure(table, f"Bytes against T · B={batch}, H={num_heads}, d_h={head_dim}").to_plotly_json()


page.header("6 · Memory layout", INFO.section, PAGE)

# --- 1. the chapter's matrix ---------------------------------------------------------------------------
page.prose(PAGE, "storage")
summary, checks, comparison = chapter_block()
st.dataframe(summary, hide_index=True, key="ml_chapter_table")
st.markdown(f"M.view(3, 2) = {checks['view']} · M.transpose(0, 1) = {checks['transposed']}")
page.chapter_check("M.view(3, 2)", checks["view"], chapter.LAYOUT_VIEW_3_2)
page.chapter_check("M.transpose(0, 1)", checks["transposed"], chapter.LAYOUT_TRANSPOSED)
st.markdown(f"Memory under the transpose: {checks['storage']} · read in logical order: {checks['reading']}")
page.chapter_check("memory after the transpose (unchanged)", checks["storage"], chapter.LAYOUT_STORAGE)
page.chapter_check("reading order of the transpose", checks["reading"], chapter.LAYOUT_TRANSPOSED_READING_ORDER)
page.show_code(L.chapter_operations, L.index_map, L.layout_table)

# --- 2. explorer ---------------------------------------------------------------------------------------
page.prose(PAGE, "explorer")
c1, c2, c3, c4, c5 = st.columns([2, 4, 2, 1, 1])
base_text = c1.text_input("starting shape", key=bound("ml_base", "2, 3"))
recipe = c2.selectbox("operation", RECIPE_NAMES, key=bound("ml_recipe", RECIPE_NAMES[0], options=RECIPE_NAMES))
new_text = c3.text_input("new shape (view / reshape)", key=bound("ml_new_shape", "3, 2"))
d0 = int(c4.number_input("d0", min_value=-4, max_value=3, step=1, key=bound("ml_d0", 0, lo=-4, hi=3)))
d1 = int(c5.number_input("d1", min_value=-4, max_value=3, step=1, key=bound("ml_d1", 1, lo=-4, hi=3)))

base_shape = (2, 3)
try:
    parsed = L.parse_shape(base_text)
    if -1 in parsed:
        raise ValueError("the starting shape cannot contain -1; give every size")
    if math.prod(parsed) > MAX_ELEMENTS:
        raise ValueError(f"{math.prod(parsed)} elements; at most {MAX_ELEMENTS} here so the picture stays readable")
    base_shape = parsed
except ValueError as err:
    st.error(f"Starting shape: {err}. Using the chapter's (2, 3).")
try:
    new_shape = L.parse_shape(new_text)
except ValueError as err:
    st.error(f"New shape: {err}. Using (-1,), which flattens.")
    new_shape = (-1,)

codes, errors, table, walk_figure, orders = explorer_cached(base_shape, recipe, new_shape, (d0, d1))
st.markdown("Ran: " + " → ".join(f"`{c}`" for c in codes))
for error in errors:
    st.error(f"PyTorch raised, word for word:\n\n```\n{error}\n```")
st.dataframe(table, hide_index=True, key="ml_explorer_table")
st.plotly_chart(walk_figure, key="ml_walk")
st.markdown(f"`{orders['code']}` reads storage cells in the order {orders['order']}")
page.show_code(L.run_recipe, L.memory_walk, L.storage_elements)

# --- 3. view on a transposed tensor ---------------------------------------------------------------------
page.prose(PAGE, "error")
st.code(f"M.transpose(0, 1).view(-1)\n{comparison['error']}", language="text")
st.dataframe(comparison["table"], hide_index=True, key="ml_view_table")
st.markdown(f"`M.transpose(0, 1).reshape(-1)` = {comparison['reshape']} · "
            f"`M.transpose(0, 1).contiguous().view(-1)` = {comparison['contiguous_view']}")
if comparison["reshape"] == comparison["contiguous_view"]:
    st.badge("reshape and contiguous().view give the same values, both from a copy", icon=":material/check_circle:",
             color="green")
page.show_code(L.view_versus_reshape, L.attempt)

# --- 4. the keys of multi-head attention ---------------------------------------------------------------
page.prose(PAGE, "heads")
c1, c2, c3 = st.columns(3)
T = c1.slider("T (tokens)", 1, L.MAX_TOKENS, key=bound("ml_T", 4, lo=1, hi=L.MAX_TOKENS))
H = c2.slider("H (num_heads)", 1, L.MAX_HEADS, key=bound("ml_H", 2, lo=1, hi=L.MAX_HEADS))
d_h = c3.slider("d_h (head_dim)", 1, L.MAX_HEAD_DIM, key=bound("ml_dh", 2, lo=1, hi=L.MAX_HEAD_DIM))
stages_table, heads_figure = head_walk_cached(int(T), int(H), int(d_h))
st.plotly_chart(heads_figure, key="ml_heads_walk")
st.dataframe(stages_table, hide_index=True, key="ml_stages_table")
page.show_code(L.key_head_walk)

# --- 5. T² cost -------------------------------------------------------------------------------------------
page.prose(PAGE, "cost")
c1, c2, c3, c4 = st.columns(4)
batch = int(c1.number_input("B", min_value=1, max_value=512, step=1, key=bound("ml_cost_B", 8, lo=1, hi=512)))
heads = int(c2.number_input("H", min_value=1, max_value=128, step=1, key=bound("ml_cost_H", 12, lo=1, hi=128)))
head_dim = int(c3.number_input("d_h", min_value=1, max_value=512, step=1, key=bound("ml_cost_dh", 64, lo=1, hi=512)))
dtype_names = list(DTYPE_BYTES)
dtype_name = c4.selectbox("dtype", dtype_names, key=bound("ml_cost_dtype", "float32", options=dtype_names))
cost_table, cost_figure = cost_cached(batch, heads, head_dim, DTYPE_BYTES[dtype_name])
st.plotly_chart(cost_figure, key="ml_cost_chart")
at_1024 = cost_table.loc[cost_table["T"] == 1024].iloc[0]
at_8192 = cost_table.loc[cost_table["T"] == 8192].iloc[0]
m1, m2, m3 = st.columns(3)
m1.metric("attn_scores at T = 1024", L.human_bytes(at_1024["attn_scores bytes"]))
m2.metric("attn_scores at T = 8192", L.human_bytes(at_8192["attn_scores bytes"]),
          delta=f"× {at_8192['attn_scores bytes'] / at_1024['attn_scores bytes']:.0f} for × 8 tokens", delta_color="inverse")
m3.metric("q, k, v at T = 8192", L.human_bytes(at_8192["q, k, v bytes"]))
page.show_code(L.score_cost_table, L.score_tensor_bytes)

page.check_yourself(PAGE)
