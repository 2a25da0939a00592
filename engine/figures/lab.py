"""Figures of the GPT Lab: live loss chart, attention per layer and head, position tables, experiments.

Built on :mod:`engine.figures.core`; no Streamlit. Large matrices (position tables of
block_size x n_embd) are sent as float32 numpy arrays without cell text, which Plotly >= 6
encodes as compact base64. Every title, axis title and trace name comes from the caller in a
frozen ``*Labels`` dataclass, with the reader's number separators (Plotly's ``layout.separators``)
and the colon of the hover texts (``colon``), so translating the page never edits this file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from engine.figures.core import (
    PALETTE,
    SEPARATORS,
    SIGNED_SCALE,
    TITLE_WIDTH,
    WEIGHTS_SCALE,
    add_step_slider,
    app_layout,
    base_layout,
    heatmap_trace,
    matrix_axes,
    to_numpy,
    wrap_text,
)
from engine.lab.results import History

TRAIN_COLOR = PALETTE[0]
VAL_COLOR = PALETTE[1]
BATCH_COLOR = "#bbbbbb"
#: The batch-loss line keeps at most this many points (every k-th step), so the live chart stays small.
MAX_BATCH_POINTS = 400
#: Cells (layers x heads x T x T) the attention figure may hold; the page shortens the line to stay under it.
MAX_ATTENTION_CELLS = 16_000
#: Longest line whose attention weights are written in the cells: 10 px numbers of two decimals fit its cells on a
#: phone with room between them; a longer line's weights stay in the colours and the hover.
ATTENTION_VALUE_POSITIONS = 8
#: Most columns of the attention maps named one by one: past them a phone has under 9 px a column for the names,
#: and every second column is named.
ATTENTION_NAMED_COLUMNS = 16
#: Plotly's own separators (decimal point, comma groups), the default of every ``*Labels``.
DEFAULT_SEPARATORS = SEPARATORS
#: What joins a hover's label to its value, the default of every ``*Labels``; a French caller passes its own, with a
#: narrow no-break space before the colon (``ui.numbers.colon``).
DEFAULT_COLON = ": "


@dataclass(frozen=True)
class LossLabels:
    """Words of :func:`loss_chart`: ``title`` (may be ""), trace names ``batch``, ``train``, ``val``, axis
    titles ``step``, ``loss``; ``crossed``: the name of the marker at the first evaluation below the bigram line;
    ``separators``: Plotly's decimal sign and group separator for the reader."""

    title: str
    batch: str
    train: str
    val: str
    step: str
    loss: str
    crossed: str = ""
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class AttentionLabels:
    """Words of :func:`attention_slider`: ``title`` (each step's title is "title — step"), ``step`` (with
    ``{layer}`` and ``{head}``: each slider step's label), axis titles ``query``, ``key``."""

    title: str
    step: str
    query: str
    key: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class PositionLabels:
    """Words of :func:`position_tables_figures`: the panels' titles ``trained``, ``untrained``, ``sim_trained``,
    ``sim_untrained``, axis titles ``position``, ``dimension``."""

    trained: str
    untrained: str
    sim_trained: str
    sim_untrained: str
    position: str
    dimension: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class CurvesLabels:
    """Words of :func:`experiment_curves`: ``title``, the trace-name suffixes ``val`` and ``train``, axis
    titles ``step``, ``loss``."""

    title: str
    val: str
    train: str
    step: str
    loss: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class ByPositionLabels:
    """Words of :func:`loss_by_position_figure`: ``title``, axis titles ``position``, ``loss``."""

    title: str
    position: str
    loss: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class SeedCurvesLabels:
    """Words of :func:`seed_curves_figure`: ``title``, axis titles ``step`` (also the hover's name of the x value)
    and ``loss``."""

    title: str
    step: str
    loss: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class PositionCurvesLabels:
    """Words of :func:`position_curves_figure`: the panels' titles ``loss_title`` and ``difference_title``, axis
    titles ``position`` (shared), ``loss`` and ``difference``."""

    loss_title: str
    difference_title: str
    position: str
    loss: str
    difference: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class NextCharLabels:
    """Words of :func:`next_char_figure`: ``title``, axis titles ``x`` (probability) and ``y`` (characters),
    the sliders' prefixes ``temperature`` and ``top_k``, ``all`` (the label of top-k 0), ``sampled`` (with
    ``{char}``, written beside the sampled bar), ``temperatures``: the temperature slider's step labels
    (one per temperature, formatted by the caller), ``percent_suffix``: what follows a percentage's digits in the
    reader's language (``"\u00a0%"`` in French and German)."""

    title: str
    x: str
    y: str
    temperature: str
    top_k: str
    all: str
    sampled: str
    temperatures: tuple[str, ...] | None = None
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON
    percent_suffix: str = "%"


@dataclass(frozen=True)
class LastAttentionLabels:
    """Words of :func:`last_attention_figure`: ``title``, axis titles ``layer`` and ``key``, ``mean`` (the
    first step: mean over heads), ``head`` (with ``{head}``), ``layer_label`` (with ``{layer}``)."""

    title: str
    layer: str
    key: str
    mean: str
    head: str
    layer_label: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


@dataclass(frozen=True)
class KvCacheLabels:
    """Words of :func:`kv_cache_figure`: ``title``, trace names ``reused`` and ``computed``, axis titles
    ``step`` and ``keys``, ``slide`` (the label of the line where the window starts to slide; "" for none)."""

    title: str
    reused: str
    computed: str
    step: str
    keys: str
    slide: str
    separators: str = DEFAULT_SEPARATORS
    colon: str = DEFAULT_COLON


def loss_chart(
    history: Sequence[tuple[int, float, float]],
    step_losses: Sequence[float],
    steps: int,
    labels: LossLabels,
    height: int = 340,
    baselines: Mapping[str, float] | None = None,
    crossing: tuple[int, float] | None = None,
) -> go.Figure:
    """Train and validation loss (nats) against the step, with the noisy batch loss behind them.

    Args:
        labels: the figure's words.
        history: evaluations ``(step, train_loss, val_loss)``.
        step_losses: the batch loss of steps 1, 2, ... (drawn thin and grey, thinned to
            :data:`MAX_BATCH_POINTS` points).
        steps: planned steps: the x axis spans [0, steps] from the start, so the curves grow
            from left to right.
        baselines: optional ``{label: nats}`` (e.g. the unigram and bigram validation losses of
            ``engine.baselines``), each drawn as a dashed horizontal line labelled at the right.
        crossing: optional ``(step, val_loss)`` of the first evaluation below the bigram line, marked
            with a star named ``labels.crossed`` (the moment the model beats counting pairs).

    Returns:
        A figure with three traces, named labels.batch, labels.train, labels.val (in that order),
        a fourth named labels.crossed when ``crossing`` is given, and one horizontal line shape per
        baseline.
    """
    fig = go.Figure()
    losses = np.asarray(step_losses, dtype=np.float64)
    stride = max(1, int(np.ceil(len(losses) / MAX_BATCH_POINTS)))
    x_batch = np.arange(1, len(losses) + 1)[::stride]
    fig.add_scatter(x=x_batch, y=losses[::stride], mode="lines", name=labels.batch,
                    line=dict(color=BATCH_COLOR, width=1),
                    hovertemplate="%{x}" + labels.colon + "%{y:.3f}<extra></extra>")
    h = np.asarray(history, dtype=np.float64).reshape(-1, 3)  # (evaluations, 3): step, train, val
    for col, name, color in ((1, labels.train, TRAIN_COLOR), (2, labels.val, VAL_COLOR)):
        fig.add_scatter(x=h[:, 0], y=h[:, col], mode="lines+markers", name=name, line=dict(color=color, width=2),
                        marker=dict(size=6),
                        hovertemplate="%{x}" + labels.colon + "%{y:.4f}<extra>" + name + "</extra>")
    if crossing is not None:
        fig.add_scatter(x=[crossing[0]], y=[crossing[1]], mode="markers", name=labels.crossed,
                        marker=dict(symbol="star", size=16, color=VAL_COLOR, line=dict(color="#000", width=1)),
                        hovertemplate="%{x}" + labels.colon + "%{y:.4f}<extra>" + labels.crossed + "</extra>")
    fig.update_xaxes(title_text=labels.step, range=[0, max(1, steps)], gridcolor="#eee")
    fig.update_yaxes(title_text=labels.loss, gridcolor="#eee", rangemode="tozero")
    fig.update_layout(legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"),
                      separators=labels.separators)
    add_baselines(fig, baselines)
    title = labels.title or None
    return base_layout(fig, title, height, top=60 if title else 30, separators=labels.separators)


BASELINE_COLORS = ("#7f7f7f", "#4d4d4d")


def add_baselines(fig: go.Figure, baselines: Mapping[str, float] | None, log: bool = False, **where) -> go.Figure:
    """Dashed horizontal lines at the given losses, each labelled inside the plot at the right.

    Args:
        baselines: ``{label: nats}``; None or empty adds nothing.
        log: the y axis is logarithmic: each label is placed at the log of its value (Plotly's rule for an
            annotation on a log axis, unlike the line's), values clipped at 1e-4.
        where: ``row``/``col`` for subplots (passed to ``add_hline``; not with ``log``).
    """
    if log:
        for k, (label, value) in enumerate((baselines or {}).items()):
            colour = BASELINE_COLORS[k % 2]
            fig.add_hline(y=float(value), line=dict(color=colour, width=1.5, dash="dash"))
            fig.add_annotation(x=1, xref="x domain", xanchor="right", y=float(np.log10(max(value, 1e-4))), yref="y",
                               yanchor="bottom" if k % 2 == 0 else "top", text=label, showarrow=False,
                               font=dict(size=11, color=colour))
        return fig
    for k, (label, value) in enumerate((baselines or {}).items()):
        fig.add_hline(y=float(value), line=dict(color=BASELINE_COLORS[k % 2], width=1.5, dash="dash"),
                      annotation=dict(text=label, font=dict(size=11, color=BASELINE_COLORS[k % 2])),
                      annotation_position="top right" if k % 2 == 0 else "bottom right", **where)
    return fig


def attention_line_length(n_layer: int, n_head: int, limit: int = 32) -> int:
    """Longest line (characters) whose attention maps for every layer and head fit :data:`MAX_ATTENTION_CELLS`."""
    fit = int((MAX_ATTENTION_CELLS / max(1, n_layer * n_head)) ** 0.5)
    return max(2, min(limit, fit))


def attention_slider(attn_weights, tokens: Sequence[str], labels: AttentionLabels) -> go.Figure:
    """One heatmap per (layer, head) of a model's attention on a line, and a Plotly slider over them.

    Args:
        attn_weights: (n_layer, n_head, T, T) weights in [0, 1], T >= 1 (row i: query i, column j: key j).
        tokens: the T characters (row and column labels).
        labels: the figure's words.

    Returns:
        A figure with n_layer * n_head heatmap traces in (layer, head) order, colour range [0, 1]
        for every head, row 0 on top, the weights written in the cells for at most
        :data:`ATTENTION_VALUE_POSITIONS` characters, every column named up to :data:`ATTENTION_NAMED_COLUMNS`
        (every second past it), and ``layout.sliders[0]`` with one step per (layer, head).

    Raises:
        ValueError: if the weights are not 4-d or T does not match the tokens.
    """
    w = to_numpy(attn_weights)
    if w.ndim != 4 or w.shape[2] != w.shape[3] or w.shape[2] != len(tokens):
        raise ValueError(f"attn_weights must be (n_layer, n_head, T, T) with T = {len(tokens)}, got {w.shape}")
    n_layer, n_head, T, _ = w.shape
    ticks = [f"{i}:{t}" for i, t in enumerate(tokens)]  # position-prefixed, so repeated characters stay apart
    fig = go.Figure()
    step_labels, layouts = [], []
    title = labels.title
    show_values = T <= ATTENTION_VALUE_POSITIONS
    for layer in range(n_layer):
        for head in range(n_head):
            step = labels.step.format(layer=layer, head=head)
            trace = heatmap_trace(w[layer, head], ticks, ticks, colorscale=WEIGHTS_SCALE, zmin=0.0, zmax=1.0,
                                  decimals=2, name=step, separators=labels.separators, show_values=show_values,
                                  colon=labels.colon)
            # the colour bar lies under the matrix, so that the cells take the whole width of a phone
            trace.update(colorbar=dict(orientation="h", thickness=12, len=0.6, x=0, xanchor="left", y=-0.04,
                                       yanchor="top"),
                         textfont=dict(size=10) if show_values else None)
            fig.add_trace(trace)
            step_labels.append(step)
            layouts.append({"title.text": f"{title} — {step}"})
    matrix_axes(fig, ticks, ticks, labels.query, labels.key)
    if T > ATTENTION_NAMED_COLUMNS:  # every second column named; each row keeps its name (and the hover both)
        fig.update_xaxes(tickvals=list(range(0, T, 2)), ticktext=ticks[::2])
    fig.update_layout(separators=labels.separators)
    base_layout(fig, f"{title} — {step_labels[0]}", max(400, 30 * T + 240), top=110, separators=labels.separators)
    add_step_slider(fig, step_labels, 1, "", step_layouts=layouts)
    # under the colour bar, its last label clear of the figure's right edge (the plot area runs to it now)
    fig.layout.sliders[0].update(pad_t=70, len=0.9)
    return fig


def position_tables_figures(trained, untrained, labels: PositionLabels, similarity: bool = True
                            ) -> tuple[go.Figure, ...]:
    """The learned position table after training and the table it started from, one figure per panel.

    One panel per figure, so that the page lays them out two by two in columns on a wide screen and one under
    the other on a phone, each at the width of the screen, instead of four panels squeezed into one figure.

    Args:
        trained, untrained: (block_size, n_embd) tables.
        labels: the figures' words (the similarity titles are used with ``similarity`` only).
        similarity: add each table's cosine similarity between positions (block_size x block_size): a trained
            table makes nearby positions alike (a bright band along the diagonal), a random one does not.

    Returns:
        (trained, untrained) or (trained, untrained, trained similarity, untrained similarity) figures, each
        with one heatmap trace, rows = positions (row 0 on top); both tables on one signed colour scale, both
        similarities on [-1, 1].

    Raises:
        ValueError: if the two tables differ in shape or are not 2-d.
    """
    a, b = to_numpy(trained), to_numpy(untrained)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"both tables must be (block_size, n_embd) of one shape, got {a.shape} and {b.shape}")
    bound = float(max(np.abs(a).max(), np.abs(b).max(), 1e-6))
    panels = [(a, labels.trained, labels.dimension, bound), (b, labels.untrained, labels.dimension, bound)]
    if similarity:
        for table, title in ((a, labels.sim_trained), (b, labels.sim_untrained)):
            unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)  # rows of length 1
            sim = unit @ unit.T  # (block_size, n_embd) @ (n_embd, block_size) -> (block_size, block_size)
            panels.append((sim, title, labels.position, 1.0))
    figures = []
    for z, title, x_title, limit in panels:
        trace = go.Heatmap(z=z.astype(np.float32), colorscale=SIGNED_SCALE, zmin=-limit, zmax=limit,
                           colorbar=dict(thickness=12),
                           hovertemplate="%{y} · %{x}" + labels.colon + "%{z:.3f}<extra></extra>")
        layout = app_layout(title, 380, separators=labels.separators)
        layout.update(xaxis=dict(title=dict(text=x_title)),
                      yaxis=dict(title=dict(text=labels.position), autorange="reversed"))
        figures.append(go.Figure(data=[trace], layout=layout))
    return tuple(figures)


def experiment_curves(histories: Sequence[History], names: Sequence[str], labels: CurvesLabels, height: int = 420,
                      baselines: Mapping[str, float] | None = None) -> go.Figure:
    """Validation loss (solid) and training loss (dotted) against the step for every run of an experiment.

    Args:
        histories: one loss curve per run (``engine.lab.results.RunResult.history``).
        names: one legend name per run.
        labels: the figure's words.
        baselines: optional ``{label: nats}`` drawn as dashed lines (:func:`add_baselines`).

    Returns:
        A figure with two traces per run, "<name> · <val>" then "<name> · <train>", one colour per run.

    Raises:
        ValueError: if ``names`` and ``histories`` differ in length.
    """
    if len(names) != len(histories):
        raise ValueError(f"{len(histories)} runs but {len(names)} names")
    fig = go.Figure()
    for k, (h, name) in enumerate(zip(histories, names, strict=True)):
        color = PALETTE[k % len(PALETTE)]
        for y, suffix, line in ((h.val_loss, labels.val, dict(color=color, width=2)),
                                (h.train_loss, labels.train, dict(color=color, width=1, dash="dot"))):
            label = f"{name} · {suffix}"
            fig.add_scatter(x=list(h.step), y=list(y), mode="lines+markers" if suffix == labels.val else "lines",
                            name=label, line=line, marker=dict(size=5),
                            hovertemplate="%{x}" + labels.colon + "%{y:.4f}<extra>" + label + "</extra>")
    fig.update_xaxes(title_text=labels.step, gridcolor="#eee")
    fig.update_yaxes(title_text=labels.loss, gridcolor="#eee")
    fig.update_layout(legend=dict(orientation="h", y=-0.28, yanchor="top"), separators=labels.separators)
    add_baselines(fig, baselines)
    return base_layout(fig, labels.title or None, height, separators=labels.separators)


def loss_by_position_figure(losses: Sequence[Sequence[float]], names: Sequence[str], labels: ByPositionLabels,
                            height: int = 460, baselines: Mapping[str, float] | None = None) -> go.Figure:
    """Validation loss at each position of the window for several runs (log y axis).

    A causal model's loss falls a little along the window (more context); a model trained
    without the mask is near 0 everywhere except the last position, the only one generation uses.

    Args:
        losses: per run, the validation loss at each position (block_size floats, nats).
        names: one legend name per run.
        labels: the figure's words.
        baselines: optional ``{label: nats}`` drawn as dashed lines, each labelled at the right.

    Returns:
        A figure with one line per run, its legend between the title and the plot, one entry a line.

    Raises:
        ValueError: if ``names`` and ``losses`` differ in length.
    """
    if len(names) != len(losses):
        raise ValueError(f"{len(losses)} runs but {len(names)} names")
    fig = go.Figure()
    for k, (loss, name) in enumerate(zip(losses, names, strict=True)):
        y = np.maximum(np.asarray(loss, dtype=np.float64), 1e-4)
        fig.add_scatter(x=np.arange(len(y)), y=y, mode="lines", name=name,
                        line=dict(color=PALETTE[k % len(PALETTE)], width=2),
                        hovertemplate="%{x}" + labels.colon + "%{y:.4f}<extra>" + name + "</extra>")
    position = wrap_text(labels.position, TITLE_WIDTH)
    fig.update_xaxes(title_text=position, gridcolor="#eee")
    fig.update_yaxes(title_text=labels.loss, type="log", gridcolor="#eee", tickvals=[0.01, 0.1, 1, 10])
    # the legend under the title, one entry a line: a phone's width never pushes it out of the figure
    top = 40 + 20 * len(names)  # base_layout adds the title's extra lines
    fig.update_layout(legend=dict(orientation="v", x=0, y=1.02, yanchor="bottom"), separators=labels.separators)
    add_baselines(fig, baselines, log=True)
    base_layout(fig, labels.title or None, height + 20 * len(names), top=top, separators=labels.separators)
    return fig.update_layout(margin=dict(b=60 + 18 * position.count("<br>")))


def mean_val_curve(histories: Sequence[History]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The validation loss of several runs averaged at each evaluation step they all hold.

    Args:
        histories: the loss curves of one configuration's seeds (``ExerciseRun.history``).

    Returns:
        ``(steps, means)``: the steps at which every history has an evaluation, in the first one's order, and
        the mean over the histories of the validation loss there (nats); two empty tuples without a history.
    """
    if not histories:
        return (), ()
    shared = set(histories[0].step).intersection(*(h.step for h in histories[1:]))
    steps = tuple(s for s in dict.fromkeys(histories[0].step) if s in shared)
    at = [dict(zip(h.step, h.val_loss, strict=True)) for h in histories]  # step -> val loss, per history
    return steps, tuple(sum(a[s] for a in at) / len(at) for s in steps)


#: Width and opacity of one seed's line in :func:`seed_curves_figure`, under the mean's 2.5 px.
SEED_LINE_WIDTH, SEED_LINE_OPACITY = 1.0, 0.35


def seed_curves_figure(histories: Sequence[Sequence[History]], names: Sequence[str],
                       seed_names: Sequence[Sequence[str]], labels: SeedCurvesLabels,
                       baselines: Mapping[str, float] | None = None, log_y: bool = False,
                       height: int = 440) -> go.Figure:
    """Validation loss against the optimizer step for several configurations, each the mean over its seeds.

    Each configuration's mean over its seeds (:func:`mean_val_curve`) is a solid line with markers; each seed's
    own curve a thin, faint line of the same colour behind it, in the mean's legend group (one click on the
    legend hides both). The legend sits under the title, one entry a line, so a phone's width holds it.

    Args:
        histories: per configuration, the loss curves of its seeds (evaluation steps, losses in nats).
        names: one legend name per configuration.
        seed_names: per configuration, one name per seed (its hover names it "<name> · <seed name>").
        labels: the figure's words.
        baselines: optional ``{label: nats}`` drawn as dashed horizontal lines labelled at the right.
        log_y: a logarithmic y axis (losses clipped at 1e-4), for runs that end near 0 (trained without the
            causal mask) beside runs near 5 nats.

    Returns:
        A figure with first one thin trace per seed of every configuration (in ``histories``'s order, named
        "<name> · <seed name>", not in the legend), then one mean trace per configuration named ``names[k]``.

    Raises:
        ValueError: if ``histories``, ``names`` and ``seed_names`` differ in length, or a configuration's seed
            names do not match its histories.
    """
    if not len(histories) == len(names) == len(seed_names):
        raise ValueError(f"{len(histories)} configurations, {len(names)} names and {len(seed_names)} seed names")
    if any(len(h) != len(s) for h, s in zip(histories, seed_names, strict=True)):
        raise ValueError("one seed name per history")
    floor = 1e-4 if log_y else -np.inf

    def y(values: Sequence[float]) -> np.ndarray:
        return np.maximum(np.asarray(values, dtype=np.float64), floor)

    def hover(name: str) -> str:
        return labels.step + " %{x}" + labels.colon + "%{y:.3f}<extra>" + name + "</extra>"

    colours = [PALETTE[k % len(PALETTE)] for k in range(len(names))]
    fig = go.Figure()
    for runs, name, seeds, colour in zip(histories, names, seed_names, colours, strict=True):
        for h, seed in zip(runs, seeds, strict=True):
            label = f"{name} · {seed}"
            fig.add_scatter(x=list(h.step), y=y(h.val_loss), mode="lines", name=label, legendgroup=name,
                            showlegend=False, opacity=SEED_LINE_OPACITY,
                            line=dict(color=colour, width=SEED_LINE_WIDTH), hovertemplate=hover(label))
    for runs, name, colour in zip(histories, names, colours, strict=True):
        steps, means = mean_val_curve(runs)
        fig.add_scatter(x=list(steps), y=y(means), mode="lines+markers", name=name, legendgroup=name,
                        line=dict(color=colour, width=2.5), marker=dict(size=5), hovertemplate=hover(name))
    fig.update_xaxes(title_text=labels.step, gridcolor="#eee")
    if log_y:
        fig.update_yaxes(title_text=labels.loss, type="log", gridcolor="#eee", tickvals=[0.01, 0.1, 1, 10])
    else:
        fig.update_yaxes(title_text=labels.loss, gridcolor="#eee")
    fig.update_layout(legend=dict(orientation="v", x=0, y=1.02, yanchor="bottom"), separators=labels.separators)
    add_baselines(fig, baselines, log=log_y)
    # the legend under the title, about 30 px an entry; base_layout adds 18 px for each extra line of the title
    top = 60 + 30 * len(names)
    return base_layout(fig, labels.title or None, height + 30 * len(names), top=top, separators=labels.separators)


#: Share of a position-curves figure's plotting height taken by its upper panel, and the gap between the panels.
_UPPER, _GAP = 0.56, 0.14


def position_curves_figure(means: Sequence[Sequence[float]], differences: Sequence[Sequence[float] | None],
                           names: Sequence[str], labels: PositionCurvesLabels,
                           baselines: Mapping[str, float] | None = None, height: int = 640) -> go.Figure:
    """Validation loss by position for several configurations, above their difference from a reference.

    The upper panel draws each configuration's loss at positions 0 … T-1 (nats), the lower one its difference
    from the reference (b − reference, nats; below 0: better there), so a lead that grows along the window
    shows as a line moving away from 0. One panel above the other, the legend under both, so that a phone's
    width holds the figure.

    Args:
        means: per configuration, the mean over seeds at each position (T floats).
        differences: per configuration, the difference from the reference at each position (T floats), None
            for the reference itself (it has no line in the lower panel).
        names: one legend name per configuration.
        labels: the figure's words.
        baselines: optional ``{label: nats}`` drawn as dashed lines in the upper panel (:func:`add_baselines`).

    Returns:
        A figure with one upper trace per configuration, then one lower trace per non-None difference, in
        ``names``'s order (the lower ones share the colour and legend entry of their upper line).

    Raises:
        ValueError: if the lengths of ``means``, ``differences`` and ``names`` differ.
    """
    if not len(means) == len(differences) == len(names):
        raise ValueError(f"{len(means)} curves, {len(differences)} differences and {len(names)} names")
    colours = [PALETTE[k % len(PALETTE)] for k in range(len(names))]
    data = [go.Scatter(x=np.arange(len(m)), y=np.asarray(m, dtype=np.float64), mode="lines", name=name,
                       legendgroup=name, line=dict(color=colour, width=2),
                       hovertemplate="%{x}" + labels.colon + "%{y:.3f}<extra>" + name + "</extra>")
            for m, name, colour in zip(means, names, colours, strict=True)]
    data += [go.Scatter(x=np.arange(len(d)), y=np.asarray(d, dtype=np.float64), mode="lines", name=name,
                        legendgroup=name, showlegend=False, line=dict(color=colour, width=2), xaxis="x2",
                        yaxis="y2", hovertemplate="%{x}" + labels.colon + "%{y:+.3f}<extra>" + name + "</extra>")
             for d, name, colour in zip(differences, names, colours, strict=True) if d is not None]
    lower_top = 1 - _UPPER - _GAP
    lower = wrap_text(labels.difference_title, TITLE_WIDTH)
    # the upper panel's title is the figure's; the lower one's sits in the gap between the panels
    title = dict(text=lower, x=0, xref="paper", xanchor="left", y=lower_top, yref="paper", yanchor="bottom",
                 showarrow=False, align="left", font=dict(size=15))
    layout = app_layout(labels.loss_title, height + 18 * lower.count("<br>"), separators=labels.separators)
    layout.update(
        annotations=[title], showlegend=True,
        legend=dict(orientation="h", x=0, y=-0.1, yanchor="top"),
        # the shared positions are written under the lower panel only, clear of its title
        xaxis=dict(domain=[0, 1], anchor="y", gridcolor="#eee", matches="x2", showticklabels=False),
        yaxis=dict(domain=[1 - _UPPER, 1], title_text=labels.loss, gridcolor="#eee"),
        xaxis2=dict(domain=[0, 1], anchor="y2", gridcolor="#eee", title_text=labels.position),
        yaxis2=dict(domain=[0, lower_top - 0.05 - 0.03 * lower.count("<br>")], title_text=labels.difference,
                    gridcolor="#eee", zeroline=True, zerolinecolor="#777", zerolinewidth=1.5),
    )
    layout["margin"]["b"] = 100
    fig = go.Figure(data=data, layout=layout)
    return add_baselines(fig, baselines)


SAMPLED_COLOR = PALETTE[1]
CANDIDATE_COLOR = PALETTE[0]


def next_char_figure(
    candidates: Sequence[str],
    probs,
    sampled: int,
    temperatures: Sequence[float],
    by_temperature,
    top_ks: Sequence[int],
    by_top_k,
    labels: NextCharLabels,
    row_px: int = 22,
) -> go.Figure:
    """The next character's probabilities as horizontal bars, with a temperature slider and a top-k slider.

    One row per candidate, the most likely on top (rows stay readable at phone width). Each slider
    step replaces the bars' lengths with a precomputed distribution (``restyle``, in the browser, no
    rerun): the temperature slider's rows keep the page's top-k, the top-k slider's rows keep the
    page's temperature. The sampled character's bar has its own colour, keyed in a row below the bars.

    Args:
        candidates: the C characters, most likely first.
        probs: (C,) probabilities at the page's settings (the bars drawn first).
        sampled: index of the sampled character in ``candidates``.
        temperatures, by_temperature: the slider's values and (len(temperatures), C) probabilities.
        top_ks, by_top_k: the slider's values (0: all) and (len(top_ks), C) probabilities.
        labels: the figure's words (the temperature steps' labels default to ``f"{t:g}"``).
        row_px: height of one bar's row in pixels.

    Returns:
        A figure with one horizontal bar trace (``x``: probabilities, ``y``: rows 0..C-1 labelled with
        the characters) and ``layout.sliders`` [temperature, top-k].

    Raises:
        ValueError: if the shapes do not match (or the temperature labels do not match the temperatures).
    """
    p = to_numpy(probs).astype(np.float64)
    by_t, by_k = to_numpy(by_temperature).astype(np.float64), to_numpy(by_top_k).astype(np.float64)
    n = len(candidates)
    if (p.shape != (n,) or by_t.shape != (len(temperatures), n) or by_k.shape != (len(top_ks), n)
            or not 0 <= sampled < n):
        raise ValueError(f"shapes do not match {n} candidates: {p.shape}, {by_t.shape}, {by_k.shape}, "
                         f"sampled {sampled}")
    ticks = [repr(c)[1:-1] if not c.isprintable() or c.isspace() else c for c in candidates]  # "\n" for a newline
    rows = list(range(n))
    colors = [SAMPLED_COLOR if i == sampled else CANDIDATE_COLOR for i in rows]
    suffix = labels.percent_suffix

    def percents(row) -> list:  # each bar's (tick, percentage), the templates' customdata: d3's "%" writes no space
        return [[tick, round(100 * float(v), 4)] for tick, v in zip(ticks, row, strict=True)]

    fig = go.Figure(go.Bar(x=np.round(p, 5), y=rows, orientation="h", marker=dict(color=colors),
                           customdata=percents(p), texttemplate="%{customdata[1]:.1f}" + suffix,
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{customdata[0]}" + labels.colon + "%{customdata[1]:.2f}" + suffix
                           + "<extra></extra>"))
    # one row more than the bars, below them, for the sampled character's key: beside its bar, the key met
    # the bar's own percentage whenever the sampled character was the likely one
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=ticks, range=[n + 0.5, -0.5], autorange=False,
                     title_text=labels.y, tickfont=dict(size=14))
    shares = (0.0, 0.25, 0.5, 0.75, 1.0)
    fig.update_xaxes(title_text=labels.x, tickmode="array", tickvals=shares,
                     ticktext=[f"{round(100 * v)}{suffix}" for v in shares], range=[0, 1.15], gridcolor="#eee",
                     side="top")
    fig.add_annotation(x=0, xanchor="left", y=n, text="■ " + labels.sampled.format(char=ticks[sampled]),
                       showarrow=False, font=dict(color=SAMPLED_COLOR, size=12))
    top, bottom = (90 if labels.title else 60), 190
    plot_h = row_px * (n + 1)  # px of the plotting area (the bars and the key's row); the sliders sit below it

    def slider(values, rows_p, prefix, active, px_below):
        steps = [dict(method="restyle", label=str(label),
                      args=[{"x": [np.round(row, 5).tolist()], "customdata": [percents(row)]}, [0]])
                 for label, row in zip(values, rows_p, strict=True)]
        return dict(active=active, currentvalue=dict(prefix=prefix, font=dict(size=12)), pad=dict(t=0, b=0),
                    steps=steps, y=-px_below / plot_h, yanchor="top", len=1.0, x=0, xanchor="left",
                    font=dict(size=10))

    t_labels = list(labels.temperatures) if labels.temperatures is not None else [f"{t:g}" for t in temperatures]
    if len(t_labels) != len(temperatures):
        raise ValueError(f"{len(temperatures)} temperatures but {len(t_labels)} labels")
    k_labels = [labels.all if k == 0 else str(k) for k in top_ks]
    t_active = int(np.argmin([abs(r - p).sum() for r in by_t]))
    k_active = int(np.argmin([abs(r - p).sum() for r in by_k]))
    fig.update_layout(sliders=[slider(t_labels, by_t, labels.temperature, t_active, 15),
                               slider(k_labels, by_k, labels.top_k, k_active, 100)], bargap=0.15,
                      separators=labels.separators)
    # narrower than other titles: this figure's x axis sits on top, under the title, beside the toolbar
    title = wrap_text(labels.title, 34) if labels.title else None
    top += 18 * (title.count("<br>") if title else 0)
    base_layout(fig, title, top + plot_h + bottom, top=top, separators=labels.separators)
    fig.update_layout(margin=dict(b=bottom))
    return fig


def last_attention_figure(attn_weights, tokens: Sequence[str], labels: LastAttentionLabels,
                          height: int | None = None) -> go.Figure:
    """Where each layer's attention looked from the last position: layers x characters, a slider over heads.

    Args:
        attn_weights: (n_layer, n_head, T) weights of the last query (rows sum to 1).
        tokens: the T characters read.
        labels: the figure's words.

    Returns:
        A figure with n_head + 1 heatmap traces (the head mean first), each (n_layer, T), colour
        range [0, the largest weight], and a slider over them.

    Raises:
        ValueError: if the weights are not (n_layer, n_head, T) with T = len(tokens).
    """
    w = to_numpy(attn_weights).astype(np.float32)
    if w.ndim != 3 or w.shape[2] != len(tokens) or w.shape[2] == 0:
        raise ValueError(f"attn_weights must be (n_layer, n_head, T) with T = {len(tokens)} >= 1, got {w.shape}")
    n_layer, n_head, T = w.shape
    rows = [labels.layer_label.format(layer=layer) for layer in range(n_layer)]
    cols = [f"{i}:{t}" if not t.isspace() else f"{i}:{repr(t)[1:-1]}" for i, t in enumerate(tokens)]
    views = [w.mean(axis=1)] + [w[:, h, :] for h in range(n_head)]  # each (n_layer, T)
    steps = [labels.mean] + [labels.head.format(head=h) for h in range(n_head)]
    fig = go.Figure()
    for view, label in zip(views, steps, strict=True):
        fig.add_trace(heatmap_trace(view, rows, cols, colorscale=WEIGHTS_SCALE, zmin=0.0,
                                    zmax=float(max(view.max(), 1e-6)), decimals=2, name=label,
                                    show_values=T <= 24, separators=labels.separators, colon=labels.colon))
    matrix_axes(fig, rows, cols, labels.layer, labels.key)
    fig.update_xaxes(tickangle=0 if T <= 24 else -90)
    fig.update_layout(separators=labels.separators)
    base_layout(fig, labels.title or None, height or max(300, 40 * n_layer + 230), top=100,
                separators=labels.separators)
    return add_step_slider(fig, steps, 1, "")


def kv_cache_figure(steps: Sequence, labels: KvCacheLabels, height: int = 320) -> go.Figure:
    """Keys/values reused from the cache and computed at each generation step, stacked.

    Args:
        steps: ``engine.sampling.kv_cache_steps`` rows (``step``, ``seq_len``, ``window_start``,
            ``reused``, ``computed``).
        labels: the figure's words.

    Returns:
        A stacked bar figure with two traces (reused, then computed), and a vertical dotted line
        at the first step whose window starts past token 0, if any.
    """
    x = [s.step for s in steps]
    fig = go.Figure()
    fig.add_bar(x=x, y=[s.reused for s in steps], name=labels.reused, marker=dict(color=PALETTE[0]),
                hovertemplate="%{x}" + labels.colon + "%{y}<extra>" + labels.reused + "</extra>")
    fig.add_bar(x=x, y=[s.computed for s in steps], name=labels.computed, marker=dict(color=PALETTE[1]),
                hovertemplate="%{x}" + labels.colon + "%{y}<extra>" + labels.computed + "</extra>")
    fig.update_layout(barmode="stack", bargap=0.05, separators=labels.separators,
                      legend=dict(orientation="h", y=1.02, x=1, xanchor="right", yanchor="bottom"))
    fig.update_xaxes(title_text=labels.step)
    fig.update_yaxes(title_text=labels.keys, gridcolor="#eee")
    slid = next((s.step for s in steps if s.window_start > 0), None)
    if slid is not None and labels.slide:
        fig.add_vline(x=slid - 0.5, line=dict(color="#555", width=1.5, dash="dot"),
                      annotation=dict(text=labels.slide, font=dict(size=11)), annotation_position="top left")
    return base_layout(fig, labels.title or None, height, top=70 if labels.title else 40,
                       separators=labels.separators)
