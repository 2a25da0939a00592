"""Page 5: multi-head attention — wrapper vs weight splits, head by head on a line, cost, speed."""

from pathlib import Path

import pandas as pd
import streamlit as st

from engine import attention as A
from engine import chapter
from engine.bench import attention as bench
from engine.figures import SIGNED_SCALE, attention_heatmap
from engine.figures import multi_head as MF
from engine.layout import human_bytes
from engine.sections import multi_head as M
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "multi_head"
INFO = next(p for p in PAGES if p.url_path == "multi-head")
TOKENS = list(A.CHAPTER_TOKENS)
BENCH_FILE = Path(__file__).resolve().parent.parent / "assets" / "bench_attention.json"
#: Widths offered for the head-by-head block (its heads are the divisors of the width).
N_EMBD_CHOICES = (8, 12, 16, 24, 32, 48, 64)
#: Longest line drawn head by head (keeps the figure small).
MAX_LINE = 12


@st.cache_data(show_spinner=False)
def heads_cached(line: str, n_embd: int, num_heads: int, seed: int) -> tuple[dict, dict]:
    """The lesson layer's run on ``line`` and its head-slider figure as a Plotly dict."""
    run = M.heads_on_line(line, n_embd, num_heads, seed)
    figure = MF.heads_slider(run["attn_weights"], run["tokens"], title="attn_weights of head").to_plotly_json()
    return run, figure


@st.cache_data(show_spinner=False)
def chapter_cached(seed: int) -> tuple[dict, dict, dict, dict]:
    """The chapter's wrapper (and its heatmap as a Plotly dict), exercise 3.2 and split layer for one seed."""
    wrapper = M.wrapper_output(seed)
    out_cols = [f"head {j // 2} · {j % 2}" for j in range(4)]
    figure = attention_heatmap(
        wrapper["context_vec"][0], TOKENS, out_cols, colorscale=SIGNED_SCALE, row_title="token",
        col_title="feature (head · dim)",
        title=f"MultiHeadAttentionWrapper: context_vecs[0], shape {tuple(wrapper['context_vec'].shape)}",
    ).to_plotly_json()
    return wrapper, figure, M.wrapper_output(seed, d_out=1, num_heads=2), M.split_output(seed)


@st.cache_data(show_spinner=False)
def copy_cached(seed: int, head_dim: int, num_heads: int) -> dict:
    """Wrapper vs split layer before and after the weight copy."""
    return M.wrapper_vs_split(seed, head_dim=head_dim, num_heads=num_heads)


@st.cache_data(show_spinner=False)
def cost_cached(n_embd: int, lengths: tuple[int, ...]) -> pd.DataFrame:
    """Parameters and score bytes for every head count of ``n_embd``."""
    return M.cost_table(n_embd, lengths)


@st.cache_data(show_spinner=False)
def bench_view(data: dict) -> list[tuple[pd.DataFrame, dict]]:
    """Per input size: its rows of the results table and the bar chart as a Plotly dict."""
    table = bench.results_table(data)
    views = []
    for size in data["sizes"]:
        rows = table[table["size"] == size["label"]]
        views.append((rows, MF.bench_bars(rows, size["label"]).to_plotly_json()))
    return views


@st.cache_data(show_spinner=False)
def bench_file_cached(path: str, mtime: float) -> dict:
    """The shipped benchmark results (re-read when the file changes)."""
    return bench.load_results(path)


@st.cache_data(show_spinner="Timing the seven variants on the small input …")
def live_bench_cached(batch: int, seq_len: int, n_embd: int, num_heads: int, repeats: int) -> dict:
    """A quick measurement on this server: the small input only, forward and forward+backward."""
    return bench.run_benchmark([bench.BenchSize(batch, seq_len, n_embd, num_heads)], repeats=repeats, warmup=1)


def show_bench(data: dict, key: str) -> None:
    """Table and bar chart of a benchmark results dict, with the machine named."""
    st.caption(f"Measured on **{bench.machine_line(data)}** · median of {data['settings']['repeats']} runs, float32.")
    for i, (size, (rows, figure)) in enumerate(zip(data["sizes"], bench_view(data))):
        st.markdown(f"**Input {size['label']}**" + (f" — {size['note']}" if size.get("note") else ""))
        st.dataframe(
            rows.drop(columns=["size"]), hide_index=True, key=f"{key}_table_{i}",
            column_config={
                "forward ms": st.column_config.NumberColumn(format="%.2f"),
                "forward+backward ms": st.column_config.NumberColumn(format="%.2f"),
                "× fastest (fwd)": st.column_config.NumberColumn(format="%.2f"),
                "× fastest (fwd+bwd)": st.column_config.NumberColumn(format="%.2f"),
                "forward min ms": st.column_config.NumberColumn(format="%.2f"),
                "forward+backward min ms": st.column_config.NumberColumn(format="%.2f"),
                "max |out − split|": st.column_config.NumberColumn(format="%.1e"),
            },
        )
        st.plotly_chart(figure, key=f"{key}_bars_{i}")


page.header("5 · Multi-head attention", INFO.section, PAGE)

# --- 1. the wrapper ---------------------------------------------------------------------------------
page.prose(PAGE, "wrapper")
seed = int(st.number_input("seed for torch.manual_seed", min_value=0, max_value=99_999, step=1,
                           key=bound("mh_seed", chapter.MHA_WRAPPER_SEED, lo=0, hi=99_999)))
applies = seed == chapter.MHA_WRAPPER_SEED
if not applies:
    st.caption("The chapter uses seed 123; with another seed the numbers are expected to differ.")
wrapper, wrapper_figure, exercise, split = chapter_cached(seed)
st.plotly_chart(wrapper_figure, key="mh_wrapper_chart")
st.markdown(f"context_vecs[0][0] = {page.fmt_row(wrapper['context_vec'][0, 0])} · "
            f"shape {tuple(wrapper['context_vec'].shape)}")
page.chapter_check("wrapper output (both sequences)", wrapper["context_vec"][0], chapter.MHA_WRAPPER_OUTPUT, applies)

page.prose(PAGE, "exercise")
ex_shape = tuple(exercise["context_vec"].shape)
st.markdown(f"Exercise 3.2 · `MultiHeadAttentionWrapper(d_in=3, d_out=1, num_heads=2)` → shape {ex_shape}; "
            f"first row {page.fmt_row(exercise['context_vec'][0, 0])}")
if ex_shape[-1] == 2:
    st.badge("two heads of d_out = 1 give 2-dimensional context vectors", icon=":material/check_circle:", color="green")
page.show_code(M.wrapper_output, A.MultiHeadAttentionWrapper)

# --- 2. weight splits -------------------------------------------------------------------------------
page.prose(PAGE, "split")
st.markdown(f"`MultiHeadAttention(d_in=3, d_out=2, num_heads=2)` · context_vecs[0][0] = "
            f"{page.fmt_row(split['context_vec'][0, 0])} · shape {tuple(split['context_vec'].shape)}")
page.chapter_check("split layer, first row", split["context_vec"][0, 0], chapter.MHA_SPLIT_FIRST_ROW, applies)

page.prose(PAGE, "copy")
c1, c2 = st.columns(2)
copy_heads = c1.select_slider("num_heads", options=[1, 2, 3, 4, 6, 8], key=bound("mh_copy_heads", 2, options=[1, 2, 3, 4, 6, 8]))
copy_dim = c2.select_slider("head_dim (the wrapper's d_out)", options=[1, 2, 3, 4], key=bound("mh_copy_dim", 2, options=[1, 2, 3, 4]))
compare = copy_cached(seed, int(copy_dim), int(copy_heads))
st.markdown(f"max |wrapper − split| before the copy: **{compare['max_abs_diff_before']:.4e}** · "
            f"after copying the wrapper's weights (compared before out_proj): **{compare['max_abs_diff']:.2e}**")
page.verdict(compare["max_abs_diff"] < 1e-6,
             "after the copy the split layer's heads equal the wrapper's",
             "after the copy the heads still differ")
page.show_code(M.split_output, M.wrapper_vs_split, A.MultiHeadAttention, A.copy_wrapper_into_split)

# --- 3. head by head ---------------------------------------------------------------------------------
page.prose(PAGE, "heads")
c1, c2, c3 = st.columns([2, 1, 2])
line = c1.text_input(f"Line (up to {MAX_LINE} characters)", key=bound("mh_line", M.LESSON_LINE))
n_embd = int(c2.selectbox("n_embd (= d_out)", N_EMBD_CHOICES,
                          key=bound("mh_n_embd", chapter.LESSON_N_EMBD, options=N_EMBD_CHOICES)))
head_options = M.divisors(n_embd)
bound("mh_heads", 4, options=head_options)
if st.session_state["mh_heads"] not in head_options:
    st.session_state["mh_heads"] = M.nearest_divisors(n_embd, int(st.session_state["mh_heads"]))[0]
num_heads = int(c3.select_slider("num_heads (divisors of n_embd)", options=head_options, key="mh_heads"))

if not line:
    st.warning(f"The line is empty; showing the lesson's line “{M.LESSON_LINE}” until you type one.")
    line = M.LESSON_LINE
elif len(line) > MAX_LINE:
    st.warning(f"The line has {len(line)} characters; only the first {MAX_LINE} are used here.")
    line = line[:MAX_LINE]
run, heads_figure = heads_cached(line, n_embd, num_heads, M.LESSON_SEED)
T = len(run["tokens"])
left, right = st.columns([3, 2])
with left:
    st.plotly_chart(heads_figure, key="mh_heads_chart")
with right:
    st.markdown(f"**Shapes** for a line of {T} characters, n_embd {n_embd}, {num_heads} heads of "
                f"{n_embd // num_heads}:")
    st.dataframe(run["shapes"][["step", "shape", "is_contiguous"]], hide_index=True, key="mh_shapes")
    st.markdown(f"(1, {T}, {n_embd}) → (1, {num_heads}, {T}, {n_embd // num_heads}) → scores "
                f"(1, {num_heads}, {T}, {T})")

page.prose(PAGE, "cost")
m1, m2, m3 = st.columns(3)
m1.metric("qkv parameters", f"{run['params']['qkv']:,}", help="3·n_embd² weights + 3·n_embd biases")
m2.metric("proj parameters", f"{run['params']['proj']:,}", help="n_embd² weights + n_embd biases")
m3.metric(f"score tensor (1, {num_heads}, {T}, {T}), float32", human_bytes(run["score_bytes"]))
is_lesson_width = n_embd == chapter.LESSON_N_EMBD
page.chapter_check(f"qkv parameters with {num_heads} heads", run["params"]["qkv"], chapter.LESSON_QKV_PARAMS, is_lesson_width)
page.chapter_check(f"proj parameters with {num_heads} heads", run["params"]["proj"], chapter.LESSON_PROJ_PARAMS, is_lesson_width)
costs = cost_cached(n_embd, (T, 128, 1024))
st.dataframe(costs, hide_index=True, key="mh_cost_table",
             column_config={c: st.column_config.NumberColumn(format="%d") for c in costs.columns})
page.show_code(M.heads_on_line, M.FusedQKVAttention, M.param_counts)

page.prose(PAGE, "try")
c1, c2 = st.columns(2)
try_d_out = int(c1.number_input("d_out", min_value=1, max_value=4096, step=1, key=bound("mh_try_d_out", 32, lo=1, hi=4096)))
try_heads = int(c2.number_input("num_heads", min_value=1, max_value=256, step=1, key=bound("mh_try_heads", 4, lo=1, hi=256)))
try:
    head_dim = M.check_split(try_d_out, try_heads)
    st.success(f"d_out {try_d_out} splits into {try_heads} heads of head_dim {head_dim}.")
except ValueError as err:
    below, above = M.nearest_divisors(try_d_out, try_heads)
    options = sorted({below, above})
    st.error(f"MultiHeadAttention refuses this: {err}. `view(b, T, {try_heads}, head_dim)` would need "
             f"{try_heads} · head_dim = {try_d_out}, and {try_d_out} / {try_heads} = {try_d_out / try_heads:.3g} is not a whole "
             f"number. Nearest head counts that work: {' or '.join(str(o) for o in options)}.")
page.show_code(M.check_split)

# --- 4. speed -------------------------------------------------------------------------------------------
page.prose(PAGE, "speed")
if BENCH_FILE.is_file():
    show_bench(bench_file_cached(str(BENCH_FILE), BENCH_FILE.stat().st_mtime), "mh_bench")
else:
    st.info("No benchmark results ship with this copy yet: run `python -m engine.bench attention "
            "--json assets/bench_attention.json`.")
st.markdown("Measure again, here and now, on the small input (a few seconds on two idle cores, longer on a busy "
            "machine; the result is cached for this server):")
if st.button("Run a quick measurement", key="mh_bench_rerun", icon=":material/timer:"):
    st.session_state["mh_bench_live"] = True
if st.session_state.get("mh_bench_live"):
    small = bench.SMALL
    show_bench(live_bench_cached(small.batch, small.seq_len, small.n_embd, small.num_heads, 3), "mh_live")
page.show_code(bench.build_variants, bench.bench_size)

page.check_yourself(PAGE)
