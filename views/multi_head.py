"""Page 5: multi-head attention — wrapper vs weight splits, head by head on a line, cost, speed."""

import ast
import datetime
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from babel.lists import format_list

from engine import attention as A
from engine import chapter, gpt, positions
from engine.bench import attention as bench
from engine.diagrams import multi_head as diagrams
from engine.figures import SIGNED_SCALE, attention_heatmap
from engine.figures import multi_head as figures
from engine.sections import multi_head as sections
from ui import gates, notebook, page, url
from ui.diagram import colour_legend, diagram
from ui.i18n import _, current_language
from ui.numbers import byte_size, colon, integer, num, num_or_sci, plotly_separators, sci
from ui.numbers import day as numbers_day
from ui.questions import multi_head as questions

TOKENS = list(A.CHAPTER_TOKENS)
BENCH_FILE = Path(__file__).resolve().parent.parent / "assets" / "bench_attention.json"
#: Widths offered for the head-by-head block (its heads are the divisors of the width).
N_EMBD_CHOICES = (8, 12, 16, 24, 32, 48, 64)
#: Longest line drawn head by head (keeps the figure small).
MAX_LINE = 12
COPY_HEADS, COPY_DIMS = [1, 2, 3, 4, 6, 8], [1, 2, 3, 4]
#: The command that writes the shipped benchmark file (it measures a size again while a forward time is not below
#: its forward+backward time, and exits with status 1 if that persists).
BENCH_COMMAND = "python -m engine.bench attention --json assets/bench_attention.json"


def shape_steps() -> dict[str, str]:
    """Translated names of the shape table's steps (:data:`engine.sections.multi_head.SHAPE_STEPS`)."""
    return {
        "input": _("input x"), "qkv": _("q, k, v together"), "q_split": _("q after split"),
        "q_heads": _("q cut into heads"), "attn_scores": _("attention scores"),
        "attn_weights": _("attention weights"), "context_heads": _("context per head"),
        "merged": _("heads joined"), "context_vec": _("after proj"),
    }


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def heads_cached(line: str, n_embd: int, num_heads: int, seed: int,
                 labels: figures.HeadsLabels) -> tuple[sections.HeadsOnLine, go.Figure]:
    """The lesson layer's run on ``line`` and its head-slider figure."""
    run = sections.heads_on_line(line, n_embd, num_heads, seed)
    return run, figures.heads_slider(run.attn_weights, run.tokens, labels)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def chapter_cached(seed: int, title: str, row_title: str, col_title: str, head_col: str, separators: str,
                   hover_colon: str) -> tuple:
    """The chapter's wrapper (and its heatmap), exercise 3.2 and split layer for one seed."""
    wrapper = sections.wrapper_output(seed)
    out_cols = [head_col.format(h=j // 2, d=j % 2) for j in range(4)]
    figure = attention_heatmap(
        wrapper.context_vec[0], TOKENS, out_cols, colorscale=SIGNED_SCALE, row_title=row_title,
        col_title=col_title, title=title.format(shape=tuple(wrapper.context_vec.shape)), separators=separators,
        colon=hover_colon,
    )
    return wrapper, figure, sections.wrapper_output(seed, d_out=1, num_heads=2), sections.split_output(seed)


@st.cache_data(show_spinner=False, max_entries=32)
def copy_cached(seed: int, head_dim: int, num_heads: int) -> sections.CopyComparison:
    """Wrapper vs split layer before and after the weight copy."""
    return sections.wrapper_vs_split(seed, head_dim=head_dim, num_heads=num_heads)


@st.cache_data(show_spinner=False, max_entries=16)
def cost_cached(n_embd: int, lengths: tuple[int, ...]) -> pd.DataFrame:
    """Parameters and score bytes for every head count of ``n_embd``."""
    return sections.cost_table(n_embd, lengths)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def bench_view(data: dict, labels: tuple[str, str, str, str, str], sizes: tuple[str, ...],
               separators: str) -> list[tuple[pd.DataFrame, go.Figure]]:
    """Per input size: its rows of the results table and the bar chart (``sizes``: the sizes' names)."""
    title, forward, forward_backward, time_axis, hover = labels
    table = bench.results_table(data)
    views = []
    for size, name in zip(data["sizes"], sizes, strict=True):
        rows = sections.bench_rows(table, size["label"], size["results"])
        bar_labels = figures.BenchLabels(title.format(size=name), forward, forward_backward, time_axis, hover,
                                         separators=separators)
        views.append((rows, figures.bench_bars(rows, bar_labels)))
    return views


def values_text(pairs, decimals: int = 2) -> str:
    """Named values for a chart's text alternative: "wrapper 2,27 · split 1,90" (no comma between them, which a
    French or German reader would take for a decimal sign)."""
    return " · ".join(f"{name} {num(value, decimals)}" for name, value in pairs)


def two_decimals(value: float) -> str:
    """A time or ratio of the benchmark table in the reader's format."""
    return num(value, 2)


def interval_text(iqr: tuple[float, float] | None) -> str:
    """An interquartile range of the benchmark table in the reader's format, "2,14–117,16" (word joiners around
    the dash keep it on one line in a narrow column), or "—" for a variant without recorded runs."""
    if iqr is None:
        return "—"
    return f"{two_decimals(iqr[0])}\u2060–\u2060{two_decimals(iqr[1])}"


def size_name(size: dict) -> str:
    """An input size of the benchmark file in the reader's words and number format."""
    batch, seq_len, n_embd, heads = (int(size[k]) for k in ("batch", "seq_len", "n_embd", "num_heads"))
    return _("B = {batch} × T = {T} × C = {C}, H = {H} (head_dim {head_dim})").format(
        batch=integer(batch), T=integer(seq_len), C=integer(n_embd), H=heads, head_dim=integer(n_embd // heads))


def machine_text(data: dict) -> str:
    """The benchmark file's machine line in the reader's language (the CPU and torch names stay as recorded)."""
    m = data.get("machine", {})
    text = _("{cpu} · {cores} cores (torch {threads} threads) · torch {torch}").format(
        cpu=m.get("cpu", "?"), cores=m.get("cores", "?"), threads=m.get("torch_threads", "?"),
        torch=m.get("torch", "?"))
    start, end = m.get("load_average_1min"), m.get("load_average_1min_end")
    if isinstance(start, int | float):
        text += _(" · load {start} → {end}").format(
            start=num(start, 1), end=num(end, 1) if isinstance(end, int | float) else "?")
    try:
        day = numbers_day(datetime.date.fromisoformat(str(data.get("created", ""))[:10]))
    except ValueError:
        return text
    return text + _(" · measured on {day}").format(day=day)


def fastest_text(verdict: sections.BenchVerdict) -> str:
    """The verdict's last sentence: the fastest variant of all, or the variants within its noise, with the rule
    of :func:`engine.sections.multi_head.within_noise_of` stated on the table's numbers: the lowest median, its
    interquartile range (the table's IQR column) and which median lies inside which range."""
    ms = two_decimals(verdict.fastest_ms)
    rivals = format_list(list(verdict.fastest_rivals), locale=current_language())
    if verdict.fastest_iqr is None:  # a file without per-run times: judged by the medians alone
        if verdict.fastest_rivals:
            return _("Lowest median: {variant}, {ms} ms, but within this run's noise of {rivals}: for each of them "
                     "one median lies inside the other's interquartile range, so the file cannot name the fastest "
                     "variant at this size.").format(variant=verdict.fastest, ms=ms, rivals=rivals)
        return _("Fastest of all: {variant}, {ms} ms.").format(variant=verdict.fastest, ms=ms)
    words = {"variant": verdict.fastest, "ms": ms, "iqr": interval_text(verdict.fastest_iqr),
             "column": _("interquartile range, forward ms")}
    if verdict.fastest_rivals:
        return _("Lowest median: {variant}, {ms} ms, but within this run's noise of {rivals}: for each of them, "
                 "its median lies inside the interquartile range of {variant} ({iqr} ms, column “{column}”) or "
                 "{ms} ms lies inside its own, so the file cannot name the fastest variant at this size.").format(
            rivals=rivals, **words)
    return _("Fastest of all: {variant}, {ms} ms: no other median lies inside its interquartile range ({iqr} ms, "
             "column “{column}”), and {ms} ms lies inside no other variant's.").format(**words)


def bench_verdict_text(size: dict) -> str | None:
    """The sentence that says which of the chapter's constructions this file found faster at ``size``, or that
    the gap between them is within the run's noise (``sections.bench_verdict``'s ``within_noise``), then
    :func:`fastest_text`. Its times have the table's two decimals, so that the reader finds them there."""
    verdict = sections.bench_verdict(size)
    if verdict is None:
        return None
    wrapper, split = two_decimals(verdict.wrapper_ms), two_decimals(verdict.split_ms)
    if verdict.within_noise:
        text = _("Here the wrapper and the split layer took about the same time: {wrapper} ms against {split} ms "
                 "(median forward). At least one median lies inside the other's interquartile range, the middle half "
                 "of its runs (wrapper {wrapper_q1}–{wrapper_q3} ms, split {split_q1}–{split_q3} ms): the gap is "
                 "within this run's noise, so the file cannot say which is faster.").format(
            wrapper=wrapper, split=split,
            wrapper_q1=two_decimals(verdict.wrapper_iqr[0]), wrapper_q3=two_decimals(verdict.wrapper_iqr[1]),
            split_q1=two_decimals(verdict.split_iqr[0]), split_q3=two_decimals(verdict.split_iqr[1]))
    elif verdict.wrapper_faster:
        text = _("Here the wrapper was faster than the split layer: {wrapper} ms against {split} ms (median "
                 "forward). The split layer's score tensor (B, H, T, T) holds {scores}; the wrapper handles one "
                 "head's {head} at a time.").format(
            wrapper=wrapper, split=split,
            scores=byte_size(verdict.score_bytes, 0), head=byte_size(verdict.head_bytes, 0))
    else:
        text = _("Here the split layer was {ratio}× faster than the wrapper: {split} ms against {wrapper} ms "
                 "(median forward).").format(ratio=num(verdict.ratio, 2), split=split, wrapper=wrapper)
    return text + " " + fastest_text(verdict)


@st.cache_data(show_spinner=False, max_entries=4)
def bench_file_cached(path: str, mtime: float) -> dict:
    """The shipped benchmark results (re-read when the file changes)."""
    return bench.load_results(path)


@st.cache_data(show_spinner=False, max_entries=16)
def live_bench_cached(batch: int, seq_len: int, n_embd: int, num_heads: int, repeats: int) -> dict:
    """A quick measurement on this server: the small input only, forward and forward+backward."""
    return bench.run_benchmark([bench.BenchSize(batch, seq_len, n_embd, num_heads)], repeats=repeats, warmup=1)


def variant_words() -> dict[str, str]:
    """One line per benchmark variant (the keys of ``engine.bench.attention.VARIANTS``), in the reader's language."""
    return {
        "wrapper": _("the chapter's MultiHeadAttentionWrapper (one causal-attention head after the other, their "
                     "outputs concatenated; the chapter's class has no output projection), timed here with one added "
                     "so that it does the same work as the other variants"),
        "split": _("the chapter's MultiHeadAttention: one projection per role, cut into heads by view and transpose"),
        "split_folded": _("the same layer with the scale 1/√head_dim applied to the queries before the product, "
                          "instead of to the scores after it"),
        "fused_qkv": _("one linear layer computes q, k and v together (the lesson's qkv); attention written out "
                       "step by step"),
        "einsum": _("the same fused layer, its two products written with torch.einsum"),
        "sdpa_causal": _("PyTorch's fused attention routine F.scaled_dot_product_attention, told that the mask is "
                         "causal (is_causal=True)"),
        "sdpa_mask": _("the same routine, given the causal mask as a tensor of booleans"),
        "nn_mha": _("PyTorch's own layer nn.MultiheadAttention, asked not to return the weights"),
    }


def show_variant_names() -> None:
    """The benchmark's variant names, each explained in one line (the tables use the names as the code does)."""
    st.markdown("\n".join(f"- `{name}`{colon()}{words}" for name, words in variant_words().items()))


def stability_text(rows: pd.DataFrame) -> str:
    """Which variants' times this size can be trusted for, and which forward+backward times are left out."""
    stable = [str(v) for v, ok in zip(rows["variant"], rows["stable"], strict=True) if ok is True]
    unordered = [str(v) for v, ok in zip(rows["variant"], rows["ordered"], strict=True) if not ok]
    lang = current_language()
    if not stable:
        text = _("No median of this size is stable: each is more than {ratio} times its variant's fastest run, so "
                 "the machine's load, not the code, set these times.").format(ratio=num(bench.STABLE_RATIO, 1))
    elif len(stable) == len(rows):
        text = _("Every median of this size is stable: within {ratio} times its variant's fastest run.").format(
            ratio=num(bench.STABLE_RATIO, 1))
    else:
        text = _("Stable (median within {ratio} times the fastest run): {stable}. The other medians are more than "
                 "that, so the machine's load weighs on them more than the code.").format(
            ratio=num(bench.STABLE_RATIO, 1), stable=format_list(stable, locale=lang))
    if unordered:
        text += " " + _("For {variants} this run timed forward+backward below forward alone, which cannot be (the "
                        "backward pass only adds work): their forward+backward time is left out (—) until the "
                        "measurement is repeated on a quiet machine.").format(
            variants=format_list(unordered, locale=lang))
    return text


def bench_headers() -> dict[str, str]:
    """Translated headers of the benchmark table, by :func:`engine.sections.multi_head.bench_rows` column."""
    return {"variant": _("variant"), "forward_ms": _("forward ms"),
            "forward_iqr": _("interquartile range, forward ms"), "forward_ratio": _("× fastest"),
            "forward_backward_ms": _("fwd+bwd ms"), "forward_min_ms": _("fastest run, forward ms"),
            "stable": _("stable"), "max_abs_diff": _("max |out − split|")}


def show_bench_table(rows: pd.DataFrame, verdict: sections.BenchVerdict | None) -> None:
    """One size's table, in the reader's number format. Beside each median its interquartile range, the interval
    the verdict compares medians with; the "× fastest" column only where the verdict names a fastest variant (the
    ratio to the lowest median, 1 on that variant's row)."""
    headers = bench_headers()
    shown = rows.drop(columns=["ordered"])
    if verdict is None or verdict.fastest_rivals:
        shown = shown.drop(columns=["forward_ratio"])  # no fastest variant named: no ratio to it either
    if shown["forward_iqr"].isna().all():
        shown = shown.drop(columns=["forward_iqr"])  # a file that did not record its runs
    else:
        shown = shown.assign(forward_iqr=shown["forward_iqr"].map(interval_text))
    shown = shown.rename(columns=headers)
    page.static_table(shown, formats={
        headers[k]: two_decimals for k in ("forward_ms", "forward_ratio", "forward_backward_ms", "forward_min_ms")
        if headers[k] in shown.columns} | {headers["max_abs_diff"]: sci}, missing="—")


def show_bench(data: dict, key: str) -> None:
    """Per input size: a table (it scrolls sideways inside its frame on a phone), a bar chart, the file's verdict and
    which of its numbers are stable (:func:`show_bench_table`); the machine and its load go in the section's
    technical details."""
    labels = (_("Time per call · {size}"), _("forward"), _("forward+backward"), _("milliseconds (median)"),
              _("{variant}: {ms} ms"))
    names = [size_name(size) for size in data["sizes"]]
    largest_batch = max(int(size["batch"]) for size in data["sizes"])
    views = bench_view(data, labels, tuple(names), plotly_separators())
    for i, (size, name, (rows, figure)) in enumerate(zip(data["sizes"], names, views, strict=True)):
        if size.get("note") and int(size["batch"]) < largest_batch:
            st.markdown(_("**Input {size}** — batch reduced from {full} to {batch} to keep the default run short; "
                          "ratios can shift with the batch size").format(size=name, full=largest_batch,
                                                                         batch=size["batch"]))
        else:
            st.markdown(_("**Input {size}**").format(size=name))
        show_bench_table(rows, sections.bench_verdict(size))
        st.plotly_chart(figure, key=f"{key}_bars_{i}", alt=_(
            "Bar chart of the median time per call at {size}, forward and forward+backward, in milliseconds: "
            "{values}.").format(size=name, values=values_text(
                (str(r.variant), r.forward_ms) for r in rows.itertuples())))
        text = bench_verdict_text(size)
        if text:
            st.markdown(text)
        st.markdown(stability_text(rows))


def run_shape(run: sections.HeadsOnLine, step: str) -> tuple[int, ...]:
    """The shape the run printed for ``step`` (a key of ``SHAPE_STEPS``), e.g. "(1, 4, 5, 8)" -> (1, 4, 5, 8)."""
    return tuple(ast.literal_eval(run.shapes.set_index("step").at[step, "shape"]))


def heads_diagram(run: sections.HeadsOnLine, half: str) -> str:
    """One half of page 5's diagram (wrapper or weight splits), with the sizes of the head-by-head run."""
    b, T, d_in = run_shape(run, "input")  # x: (b, T, n_embd)
    _b, num_heads, _T, head_dim = run_shape(run, "q_heads")  # (b, H, T, head_dim)
    d_out = run_shape(run, "context_vec")[-1]  # (b, T, d_out)
    return diagrams.multi_head(
        diagrams.MultiHeadLabels(
            # the run's module names the box: the lesson's layer computes q, k and v in one Linear (fused), the
            # chapter's MultiHeadAttention in three
            inputs=_("inputs x"), wrapper="MultiHeadAttentionWrapper",
            split=_("the lesson's layer: one qkv Linear") if run.layers.fused
            else _("MultiHeadAttention (weight splits)"),
            head=lambda h: _("head {h}").format(h=h), concat=_("concatenate"),
            projections=_("one projection for all heads"), split_qkv=_("split into q, k, v"),
            view_heads=_("cut into heads"), transpose=_("heads before tokens"),
            attend=_("causal attention, each head"), transpose_back=_("tokens before heads"),
            merge=_("join the heads"), out_proj=_("mix the heads"), context_vec="context_vec",
        ),
        diagrams.MultiHeadShapes(b=b, num_tokens=T, d_in=d_in, d_out=d_out, num_heads=num_heads, head_dim=head_dim),
        run.layers, halves=(half,),
    )


page.header()

# --- 1. the wrapper ---------------------------------------------------------------------------------
page.prose("wrapper")
seed = url.int_input(st, _("seed for torch.manual_seed"), min_value=0, max_value=99_999, step=1,
                     value=chapter.MHA_WRAPPER_SEED, key="mh_seed")
applies = seed == chapter.MHA_WRAPPER_SEED
with page.slot():
    if not applies:
        st.caption(_("The chapter uses seed {seed}; with another seed the numbers are expected to differ.").format(
            seed=chapter.MHA_WRAPPER_SEED))
wrapper, wrapper_figure, exercise, split = chapter_cached(
    seed, _("MultiHeadAttentionWrapper: context_vecs[0], shape {shape}"), _("token"), _("feature (head · dim)"),
    _("head {h} · {d}"), plotly_separators(), colon())
st.plotly_chart(wrapper_figure, key="mh_wrapper_chart", alt=_(
    "Heatmap of the wrapper's context vectors for the {T} tokens of the chapter's sentence, {d} features (two "
    "heads of two); the first token's row: {row}.").format(
        T=len(TOKENS), d=wrapper.context_vec.shape[-1],
        row=" · ".join(num(float(v), 4) for v in wrapper.context_vec[0, 0])))
st.markdown(_("context_vecs[0][0] = {row} · shape {shape}").format(
    row=page.fmt_row(wrapper.context_vec[0, 0]), shape=tuple(wrapper.context_vec.shape)))
page.chapter_check(_("wrapper output (both sequences)"), wrapper.context_vec[0], chapter.MHA_WRAPPER_OUTPUT, applies)

page.prose("exercise")
ex_shape = tuple(exercise.context_vec.shape)
st.markdown(_("The chapter's Exercise 3.2 · `{code}` → shape {shape}; first row {row}").format(
    code="MultiHeadAttentionWrapper(d_in=3, d_out=1, num_heads=2)", shape=ex_shape,
    row=page.fmt_row(exercise.context_vec[0, 0])))
page.verdict(ex_shape[-1] == 2, _("two heads of d_out = 1 give 2-dimensional context vectors"),
             _("two heads of d_out = 1 should give 2-dimensional context vectors"))
page.show_code(sections.wrapper_output, A.MultiHeadAttentionWrapper)

# --- 2. weight splits -------------------------------------------------------------------------------
page.prose("split")
st.markdown(_("`{code}` · context_vecs[0][0] = {row} · shape {shape}").format(
    code="MultiHeadAttention(d_in=3, d_out=2, num_heads=2)", row=page.fmt_row(split.context_vec[0, 0]),
    shape=tuple(split.context_vec.shape)))
split_ok = chapter.matches(split.context_vec[0, 0], chapter.MHA_SPLIT_FIRST_ROW)
if applies:
    page.verdict(split_ok,
                 _("split layer, first row: equals {row}, what the book's own code prints for these settings (the "
                   "chapter's text stops before printing it), to {decimals} decimals").format(
                     row=page.fmt_row(chapter.MHA_SPLIT_FIRST_ROW), decimals=chapter.DECIMALS),
                 _("split layer, first row: differs from {row}, what the book's own code prints").format(
                     row=page.fmt_row(chapter.MHA_SPLIT_FIRST_ROW)))
else:
    st.badge(_("split layer, first row: differs from the book's value, as expected with your seed"),
             icon=":material/tune:", color="gray")

page.prose("copy")
@st.fragment
def copy_section() -> None:
    """The copy check: num_heads and head_dim redraw this block only (the seed above reruns the page)."""
    c1, c2 = st.columns(2)
    copy_heads = c1.select_slider("num_heads", options=COPY_HEADS, value=2, key="mh_copy_heads", bind="query-params")
    copy_dim = c2.select_slider(_("head_dim (the wrapper's d_out)"), options=COPY_DIMS,
                                value=2, key="mh_copy_dim", bind="query-params")
    compare = copy_cached(seed, int(copy_dim), int(copy_heads))
    st.markdown(_("max |wrapper − split| before the copy: **{before}** · after copying the wrapper's weights "
                  "(compared before out_proj): **{after}**").format(before=num_or_sci(compare.max_abs_diff_before, 4),
                                                                     after=sci(compare.max_abs_diff, 2)))
    page.verdict(compare.max_abs_diff < 1e-6,
                 _("after the copy the split layer's heads equal the wrapper's"),
                 _("after the copy the heads still differ"))


copy_section()
page.show_code(sections.split_output, sections.wrapper_vs_split, A.MultiHeadAttention, A.copy_wrapper_into_split)

# --- 3. head by head ---------------------------------------------------------------------------------
page.prose("heads")
def heads_controls() -> tuple[sections.PageLine, int, int]:
    """Section 3's controls: the line (and a note when it was empty or cut), n_embd and a num_heads that divides
    it."""
    c1, c2, c3 = st.columns([2, 1, 2])
    typed = c1.text_input(_("Line (up to {n} characters)").format(n=MAX_LINE), value=chapter.LESSON_LINE,
                          key="mh_line", bind="query-params")
    n_embd = int(c2.selectbox(_("n_embd (= d_out)"), N_EMBD_CHOICES,
                              index=N_EMBD_CHOICES.index(chapter.LESSON_N_EMBD), key="mh_n_embd", bind="query-params"))
    head_options = sections.divisors(n_embd)
    kept_heads = st.session_state.get("mh_heads", 4)
    # a new n_embd that the kept head count does not divide: take the nearest divisor
    if kept_heads not in head_options:
        st.session_state["mh_heads"] = sections.nearest_divisors(n_embd, int(kept_heads))[0]
    num_heads = int(c3.select_slider(_("num_heads (divisors of n_embd)"), options=head_options,
                                     value=sections.nearest_divisors(n_embd, 4)[0], key="mh_heads",
                                     bind="query-params"))
    used = sections.page_line(typed, MAX_LINE)
    with page.slot():
        if used.issue == "empty":
            st.warning(_("The line is empty; showing the lesson's line “{line}” until you type one.").format(
                line=chapter.LESSON_LINE))
        elif used.issue == "too_long":
            st.warning(_("The line has {n} characters; only the first {limit} are used here.").format(
                n=used.typed_length, limit=MAX_LINE))
    return used, n_embd, num_heads


def heads_weights_and_shapes(run: sections.HeadsOnLine, heads_figure: go.Figure, line: str, n_embd: int,
                             num_heads: int) -> None:
    """Section 3's first row: every head's attn_weights on the line, beside the shapes each step gives."""
    T, head_dim = len(run.tokens), n_embd // num_heads
    left, right = st.columns([3, 2])
    with left:
        st.plotly_chart(heads_figure, key="mh_heads_chart", alt=_(
            "Heatmaps of attn_weights, one per head of {H} (the slider steps through them), on the line “{line}”: "
            "each row is a query character, its weights on the characters up to it sum to 1, and the cells above "
            "the diagonal are 0 (the causal mask). Head 0's last row: {row}.").format(
                H=num_heads, line=line, row=" · ".join(num(float(v), 3) for v in run.attn_weights[0, -1])))
    with right:
        st.markdown(_("**Shapes** for a line of {T} characters, n_embd {n_embd}, {heads} heads of {head_dim}:").format(
            T=T, n_embd=n_embd, heads=num_heads, head_dim=head_dim))
        shapes = run.shapes.assign(step=run.shapes["step"].map(shape_steps()))
        shapes = shapes[["step", "shape", "is_contiguous"]].rename(
            columns={"step": _("step"), "shape": _("shape"), "is_contiguous": _("contiguous (is_contiguous)")})
        page.static_table(shapes)
        st.markdown(_("{x} → {heads} → scores {scores}").format(
            x=(1, T, n_embd), heads=(1, num_heads, T, head_dim), scores=(1, num_heads, T, T)))


def heads_diagrams(run: sections.HeadsOnLine, n_embd: int, num_heads: int) -> None:
    """Section 3's second row: the wrapper's and the weight-split layer's diagrams, drawn from the run."""
    T, head_dim = len(run.tokens), n_embd // num_heads
    wrapper_column, split_column = st.columns(2)
    with wrapper_column:
        diagram(heads_diagram(run, "wrapper"), width="content",
                alt=_("Diagram: the wrapper runs each of the {H} heads in turn on x {x} and concatenates their "
                      "outputs into {out}.").format(H=num_heads, x=(1, T, n_embd), out=(1, T, n_embd)))
    with split_column:
        diagram(heads_diagram(run, "split"), width="content",
                alt=_("Diagram: the weight-split layer projects x {x} once, cuts the result into heads {heads}, "
                      "attends with scores {scores}, joins the heads back into {x} and applies out_proj.").format(
                    x=(1, T, n_embd), heads=(1, num_heads, T, head_dim), scores=(1, num_heads, T, T)))
    st.caption(_("The shapes follow the line, n_embd and num_heads above (a batch of one line)."))
    colour_legend()


def cost_view(run: sections.HeadsOnLine, n_embd: int, num_heads: int) -> None:
    """Section 3's cost: the layer's parameters against the lesson's counts, and the score tensor's size by T."""
    T = len(run.tokens)
    m1, m2, m3 = st.columns(3)
    m1.metric(_("qkv parameters"), integer(run.params.qkv), help=_("3·n_embd² weights + 3·n_embd biases"))
    m2.metric(_("proj parameters"), integer(run.params.proj), help=_("n_embd² weights + n_embd biases"))
    m3.metric(_("score tensor ({shape}), float32").format(shape=f"1, {num_heads}, {T}, {T}"),
              byte_size(run.score_bytes))
    is_lesson_width = n_embd == chapter.LESSON_N_EMBD
    for what, count, lesson in ((_("qkv parameters with {n} heads").format(n=num_heads), run.params.qkv,
                                 chapter.LESSON_QKV_PARAMS),
                                (_("proj parameters with {n} heads").format(n=num_heads), run.params.proj,
                                 chapter.LESSON_PROJ_PARAMS)):
        if is_lesson_width:
            page.verdict(count == lesson,
                         _("{what}: {count}, exactly the lesson's count").format(what=what, count=integer(count)),
                         _("{what}: {count}, NOT the lesson's {lesson}").format(what=what, count=integer(count),
                                                                              lesson=integer(lesson)))
        else:
            st.badge(_("{what}: {count}; the lesson counts n_embd {width}, where it prints {lesson}").format(
                what=what, count=integer(count), width=chapter.LESSON_N_EMBD, lesson=integer(lesson)),
                icon=":material/tune:", color="gray")
    lengths = (T, 128, 1024)
    costs = cost_cached(n_embd, lengths)
    cost_headers = {"num_heads": "num_heads", "head_dim": "head_dim", "qkv_params": _("qkv params"),
                    "proj_params": _("proj params")}
    cost_headers.update({f"scores_bytes_{n}": _("attn_scores at T = {T}").format(T=integer(n)) for n in lengths})
    # cells written in the reader's number format (the grid's own formats follow the browser's locale)
    cells = costs.copy()
    for column in cells.columns:
        cells[column] = cells[column].map(byte_size if column.startswith("scores_bytes_") else integer)
    st.dataframe(cells.rename(columns=cost_headers), hide_index=True, key="mh_cost_table")


@st.fragment
def heads_section() -> None:
    """Section 3: the line, n_embd and num_heads redraw this section and its cost table only."""
    used, n_embd, num_heads = heads_controls()
    heads_labels = figures.HeadsLabels(title=_("attn_weights of head {h} / {H}"), head=_("head {h}"),
                                       query_axis=_("query"), key_axis=_("key"), slider_prefix=_("head "),
                                       separators=plotly_separators(), colon=colon())
    run, heads_figure = heads_cached(used.line, n_embd, num_heads, sections.LESSON_SEED, heads_labels)
    heads_weights_and_shapes(run, heads_figure, used.line, n_embd, num_heads)
    heads_diagrams(run, n_embd, num_heads)
    if (gates.gate(questions.QKV, n_embd=n_embd, num_heads=num_heads)
            and gates.gate(questions.MORE_HEADS, n_embd=n_embd)):
        page.prose("cost")
        cost_view(run, n_embd, num_heads)


heads_section()
page.show_code(sections.heads_on_line, sections.attention_steps, gpt.CausalSelfAttention, sections.param_counts,
               gpt.attention_shapes, diagrams.split_layers, positions.alibi_bias, positions.alibi_slopes)

page.prose("try")
@st.fragment
def try_section() -> None:
    """The d_out / num_heads check: its two inputs redraw this block only."""
    c1, c2 = st.columns(2)
    try_d_out = url.int_input(c1, "d_out", min_value=1, max_value=4096, step=1, value=32, key="mh_try_d_out")
    try_heads = url.int_input(c2, "num_heads", min_value=1, max_value=256, step=1, value=4, key="mh_try_heads")
    check = sections.split_check(try_d_out, try_heads)
    if check.error is None:
        st.success(_("d_out {d_out} splits into {heads} heads of head_dim {head_dim}.").format(
            d_out=integer(try_d_out), heads=integer(try_heads), head_dim=integer(check.head_dim)))
    else:
        st.error(_("MultiHeadAttention refuses this (its error is below). `view(b, T, {heads}, head_dim)` would need "
                   "{heads} · head_dim = {d_out}, and {d_out} / {heads} = {ratio} is not a whole number. "
                   "Nearest head counts that work: {nearest}.").format(
            heads=integer(try_heads), d_out=integer(try_d_out), ratio=num(check.ratio, 3),
            nearest=format_list([integer(n) for n in check.nearest], style="or", locale=current_language())))
        st.code(f"ValueError: {check.error}", language=None, wrap_lines=True)


try_section()
page.show_code(sections.split_check, sections.check_split)

# --- 4. speed -------------------------------------------------------------------------------------------
page.prose("speed")
show_variant_names()
shipped = bench_file_cached(str(BENCH_FILE), BENCH_FILE.stat().st_mtime) if BENCH_FILE.is_file() else None
if shipped is not None:
    show_bench(shipped, "mh_bench")
else:
    st.info(_("No benchmark results ship with this copy yet."))
with page.technical_details():
    if shipped is not None:
        st.caption(_("Measured on **{machine}** · median of {repeats} runs, float32.").format(
            machine=machine_text(shipped), repeats=shipped["settings"]["repeats"]))
    page.prose("speed_details")
    st.code(BENCH_COMMAND, language="bash")
    st.markdown(_("Measure again, here and now, on the small input (it takes longer on a busy machine; the result "
                  "is kept for this server):"))
    if st.button(_("Run a quick measurement"), key="mh_bench_rerun", icon=":material/timer:"):
        st.session_state["mh_bench_live"] = True
    if st.session_state.get("mh_bench_live"):
        small = bench.SMALL
        with st.spinner(_("Timing every variant on the small input …")):
            live = live_bench_cached(small.batch, small.seq_len, small.n_embd, small.num_heads, 3)
        st.caption(_("Measured on **{machine}** · median of {repeats} runs, float32.").format(
            machine=machine_text(live), repeats=live["settings"]["repeats"]))
        show_bench(live, "mh_live")
page.show_code(bench.build_variants, bench.bench_size)

page.check_yourself()
notebook.download_button(max_line=MAX_LINE)
