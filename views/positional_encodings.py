"""Page 7: positional encodings — none, learned absolute, sinusoidal, RoPE, ALiBi — on the course's GPT."""

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
import torch
from babel.lists import format_list

from engine import chapter, positions
from engine import gpt as G
from engine.diagrams import positional_encodings as diagrams
from engine.figures import positional_encodings as figures
from engine.sections import positional_encodings as sections
from ui import gates, notebook, page, url
from ui import positions as words
from ui.diagram import colour_legend, diagram
from ui.i18n import N_, _, current_language, ngettext
from ui.numbers import colon, integer, num, percent, plotly_separators, sci, seq
from ui.questions import positional_encodings as questions

N_EMBD_CHOICES = [32, 64, 128]
BLOCK_CHOICES = [16, 32, 64, 128, 256]
SEEDS = [0, 1, 2, 3, 4]
#: Seed of the untrained table of sections 3-4, of the random vector rotated in section 5 and of q, k in
#: section 6: what they show (no structure at init, lengths kept, only m − n matters) holds for any draw, so the
#: permutation experiment's seed redraws that experiment only.
VECTOR_SEED = 0
#: Heads of the permutation experiment's models (and of the diagrams drawn beside it).
N_HEAD = 4
#: The keys of the registry's records the page's sentences name (``engine.positions``): no key is spelled here.
#: Sections 3-5 and ALiBi's part of section 6 are the page's content parts named by these keys.
NONE, LEARNED, SINUSOIDAL, ROPE, ALIBI = (positions.NONE.key, positions.LEARNED.key, positions.SINUSOIDAL.key,
                                          positions.ROPE.key, positions.ALIBI.key)
#: Entry diagrams per row.
DIAGRAMS_PER_ROW = 2
SCORE_LABELS = {positions.ROPE.key: N_("RoPE (rotate q and k)"),
                positions.SINUSOIDAL.key: N_("sinusoidal table added to q and k")}
TABLE_TITLES = {"untrained": N_("untrained pos_emb, seed {seed}"), "trained": N_("trained pos_emb, shipped model"),
                SINUSOIDAL: N_("sinusoidal table")}
#: What the sinusoidal similarity's largest diagonal spread says, by ``sections.spread_kind``.
SPREAD_VERDICTS = {
    "rounding": N_("its diagonals are constant up to float32 rounding: only the distance between two positions "
                   "matters"),
    "small": N_("a small dependence on the positions themselves (at most {limit}, a hundredth of a similarity's "
                "range)"),
    "large": N_("a large dependence on the positions themselves (more than {limit}, a hundredth of a similarity's "
                "range)"),
}
SIMILARITY_TITLES = {"untrained": N_("similarity, untrained pos_emb, seed {seed}"),
                     "trained": N_("similarity, trained pos_emb, shipped model"),
                     SINUSOIDAL: N_("similarity, sinusoidal table")}


@st.cache_data(show_spinner=False, max_entries=64)
def permutation(n_embd: int, seed: int) -> sections.PermutationSweep:
    return sections.permutation_by_layers(n_embd=n_embd, n_head=N_HEAD, seed=seed)


@st.cache_resource(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)
def permutation_chart(n_embd: int, seed: int, labels: figures.PermutationLabels) -> go.Figure:
    """The permutation experiment's slider figure, per model size, seed and language (readers share it)."""
    return figures.permutation_figure(permutation(n_embd, seed).table, labels, active_layers=1)


@st.cache_data(show_spinner=False, max_entries=32)
def zeroed_sweep(n_embd: int, seed: int) -> sections.PermutationSweep:
    return sections.zeroed_table_sweep(n_embd=n_embd, n_head=N_HEAD, seed=seed)


@st.cache_data(show_spinner=False, max_entries=32)
def first_layer(n_embd: int, seed: int) -> torch.Tensor:
    return sections.first_layer_differences(n_embd=n_embd, n_head=N_HEAD, seed=seed)


def encoding_names() -> dict[str, str]:
    """The encodings' names in the reader's language, by key, in the registry's order (``ui.positions``)."""
    return words.names()


def encoding_values(sweep: sections.PermutationSweep, n_layer: int) -> str:
    """One layer count of the sweep for a text alternative: "none 5.6E-9 · learned 3.1E-3 · …"."""
    return " · ".join(f"{name} {sci(sweep.diff(n_layer, key))}" for key, name in encoding_names().items())


def theta_text(theta: float) -> str:
    """θ_i in the reader's format: 4 significant digits, in scientific notation below 0.001 (the slowest pairs)."""
    return sci(theta, 3)


def positions_text(items) -> str:
    """Positions as a list in the reader's language ("0, 1 and 2", "0, 1 et 2"), by Babel's list patterns."""
    return format_list([str(i) for i in items], locale=current_language())


def at_positions(items) -> str:
    """"at position 4", "at positions 0, 1 and 2" with the language's preposition and article ("aux positions")."""
    return ngettext("at position {items}", "at positions {items}", len(items)).format(items=positions_text(items))


@st.cache_data(show_spinner=False, max_entries=16)
def entry_shapes(n_embd: int, line: str = chapter.LESSON_LINE) -> dict[str, diagrams.PositionalEncodingsShapes]:
    """Shapes of a one-layer model of each encoding run on ``line`` (the permutation experiment's sizes)."""
    return sections.entry_shapes(n_embd, N_HEAD, line, sections.ENCODING_KEYS)


def entry_diagram(encoding: str, shapes: diagrams.PositionalEncodingsShapes) -> str:
    """Page 7's diagram for one encoding."""
    return diagrams.positional_encodings(
        diagrams.PositionalEncodingsLabels(
            tokens=_("token ids"), tok_emb=_("token embedding"), learned=_("learned table pos_emb"),
            sinusoidal=_("sinusoidal table"), rope=_("RoPE angles"), alibi=_("ALiBi bias"),
            none=_("no position information"),
            projections=_("projections"), rotate=_("rotate"), dot_products=_("dot products"),
        ),
        shapes, encoding,
    )


@st.cache_data(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)  # a table per size: the figures' bound
def untrained_table(block_size: int, n_embd: int, seed: int) -> sections.PositionTable:
    return sections.untrained_table(block_size, n_embd, seed)


@st.cache_data(show_spinner=False, max_entries=4)
def shipped_table(path: str) -> sections.ShippedTable | None:
    return sections.shipped_learned_table(path)


@st.cache_data(show_spinner=False, max_entries=page.FIGURE_CACHE_ENTRIES)  # a table per size: the figures' bound
def sinusoidal_table(block_size: int, n_embd: int) -> sections.PositionTable:
    return sections.sinusoidal_position_table(block_size, n_embd)


@st.cache_data(show_spinner=False, max_entries=64)
def rope_rotation(head_dim: int, seed: int) -> sections.RopeRotation:
    return sections.seeded_rope_rotation(head_dim, seed)


@st.cache_data(show_spinner=False, max_entries=64)
def score_matrices(encoding: str, head_dim: int, T: int, shift: int, seed: int) -> sections.ScoreMatrices:
    return sections.position_scores(encoding, head_dim, T, shift, seed)


def past_error(past: sections.PastBlockSize) -> str:
    """The learned model's error past its table, in the reader's language: its English msgid is, word for word, the
    message ``engine.gpt.GPT.forward`` raises (tests/test_page_positional_encodings.py holds them equal)."""
    return _("sequence of {T} tokens is longer than block_size {block_size}: the learned position table has no row "
             "for positions {first}..{last}; keep the last {block_size} tokens (generate crops the prompt this "
             "way)").format(T=past.T, block_size=past.block_size, first=past.missing_positions.start,
                            last=past.missing_positions.stop - 1)


def alike_caption(by_layer: pd.DataFrame) -> None:
    """Under the permutation table: where two cells of one layer count read alike at the table's precision, that
    they are different models' measurements, and the precision that tells them apart (computed, not typed)."""
    rows = [[float(v) for v in row] for row in by_layer.to_numpy()]
    alike = [n for n, row in zip(by_layer.index, rows, strict=True) if len({sci(v) for v in row}) < len(row)]
    if not alike:
        return
    digits = sections.telling_digits(rows)
    if digits >= sections.MOST_DIGITS:  # some cells are equal beyond any precision a table shows: say nothing false
        return
    st.caption(_("Cells written alike in one row ({layers} layers) are different models whose differences agree to "
                 "two significant digits; with {digits} they read apart.").format(
        layers=", ".join(integer(n) for n in alike), digits=integer(digits + 1)))


@st.cache_data(show_spinner=False, max_entries=16)
def past_block(T: int) -> sections.PastBlockSize:
    return sections.run_past_block_size(T)


page.header()

# --- 1. the permutation experiment ---------------------------------------------------------------
page.prose("permutation")
c1, c2 = st.columns(2)
n_embd = int(c1.selectbox(_("n_embd (4 heads)"), N_EMBD_CHOICES, index=N_EMBD_CHOICES.index(32), key="pe_n_embd",
                          bind="query-params"))
seed = int(c2.selectbox(_("seed of the untrained models"), SEEDS, index=SEEDS.index(0), key="pe_seed",
                        bind="query-params"))
with st.spinner(_("Running the permutation experiment for 1 … 6 layers …")):
    sweep = permutation(n_embd, seed)
names = encoding_names()
layers = list(sweep.by_layer.index)
if gates.gate(questions.DEPTH, sweep=sweep) and gates.gate(questions.BLIND, sweep=sweep):
    titles = [ngettext("“{line}” vs “{permuted}”, last position, {n} layer; none: {none}",
                       "“{line}” vs “{permuted}”, last position, {n} layers; none: {none}", n).format(
                  line=chapter.LESSON_LINE, permuted=chapter.PERMUTED_LINE, n=n, none=sci(sweep.diff(n, NONE)))
              for n in layers]
    st.plotly_chart(permutation_chart(n_embd, seed, figures.PermutationLabels(
        titles=titles, yaxis=_("max |logits(line) − logits(permuted)|"), xaxis=_("position encoding (pos_encoding)"),
        rounding=[_("largest float32 rounding: {level}").format(level=sci(sweep.rounding_level(n))) for n in layers],
        exact_zero=_("0 (exact)"), value=_("max |Δ logits|: {value}"),
        slider_prefix="n_layer = ", encodings=names, separators=plotly_separators(),
        value_texts={float(d): sci(float(d)) for d in sweep.by_layer.to_numpy().ravel()},
    )), key="pe_perm_chart", alt=_(
        "Bar chart of max |Δ logits| between “{line}” and “{permuted}” at the last position, one bar per position "
        "encoding, on a log scale; its slider picks the number of layers (1 to {layers}). One layer: {one}. Two "
        "layers: {two}.").format(line=chapter.LESSON_LINE, permuted=chapter.PERMUTED_LINE, layers=max(layers),
                         one=encoding_values(sweep, 1), two=encoding_values(sweep, 2)))
    page.static_table(sweep.by_layer.rename(columns=names).rename_axis("n_layer").reset_index(),
                      {names[e]: sci for e in sweep.by_layer.columns})
    alike_caption(sweep.by_layer)
    st.markdown(_("Each encoding's float32 rounding level is ε × max|logits| of its own two logit vectors, with "
                  "ε = 2⁻²³ ≈ {eps}, the spacing of float32 numbers near 1; the dotted line is the largest of these "
                  "levels at each layer count, and each badge below measures a difference against its own "
                  "encoding's level, which can lie a little under the line. A difference within {factor} times "
                  "its level is counted as rounding (the same terms added in another order), one above {real} "
                  "times it as real.").format(eps=sci(sections.FLOAT32_EPS), factor=integer(sections.ROUNDING_FACTOR),
                                  real=integer(sections.DIFFERENCE_FACTOR)))
    page.verdict(sweep.is_rounding(1, NONE),
                 _("1 layer without positions: {diff}, {ratio} × the rounding level of its logits ({level}): float "
                   "rounding, as in the lesson").format(diff=sci(sweep.diff(1, NONE)),
                                                       ratio=sci(sweep.ratio(1, NONE)),
                                                       level=sci(sweep.rounding_level(1, NONE))),
                 _("1 layer without positions: {diff}, {ratio} × the rounding level of its logits: NOT float "
                   "rounding").format(diff=sci(sweep.diff(1, NONE)), ratio=sci(sweep.ratio(1, NONE))))
    page.verdict(sweep.differs(2, NONE),
                 _("2 layers without positions: {diff}, {ratio} × the rounding level of its logits: clearly non-zero, "
                   "as in the lesson").format(diff=sci(sweep.diff(2, NONE)), ratio=sci(sweep.ratio(2, NONE))),
                 _("2 layers without positions: {diff}, {ratio} × the rounding level of its logits: not clearly "
                   "non-zero").format(diff=sci(sweep.diff(2, NONE)), ratio=sci(sweep.ratio(2, NONE))))
    explicit = {key: sweep.diff(1, key) for key in sections.EXPLICIT_KEYS}
    others = " · ".join(f"{names[k]} {sci(v)}" for k, v in explicit.items() if k != ROPE)
    if explicit[ROPE] < min(v for k, v in explicit.items() if k != ROPE):
        st.markdown(_("At one layer RoPE's difference is the smallest of the explicit encodings here: {rope} "
                      "against {others}.").format(rope=sci(explicit[ROPE]), others=others))
    else:
        st.markdown(_("At one layer RoPE's difference is not the smallest of the explicit encodings here: {rope} "
                      "against {others}.").format(rope=sci(explicit[ROPE]), others=others))

page.prose("lesson_numbers")
comparison = sections.lesson_comparison(sweep)
here_digits = sections.comparison_digits(comparison)  # a layer count's different values never read alike
zeroed = zeroed_sweep(n_embd, seed)
# short headers and cells: the table stays whole on a phone; what they mean is in the caption under it
page.static_table(pd.DataFrame({
    "n_layer": [c.n_layer for c in comparison],
    _("encoding"): [names[c.pos_encoding] for c in comparison],
    _("lesson"): [sci(c.lesson) for c in comparison],
    _("here"): [sci(c.app, here_digits) for c in comparison],
    # the verdict beside the ratio, not a column of its own: the table keeps within a phone's width in German too
    _("here / lesson"): [f"{sci(c.factor)} {'✓' if c.same_order else '✗'}" for c in comparison],
}))
st.caption(_("lesson: its own model, “{none}” being its learned table zeroed (`pos_emb.weight.zero_()`) · here: the "
             "chart's models (n_embd {n_embd}, seed {seed}), to {digits} significant digits, as many as tell apart "
             "the values of one layer count · ✓: of the same order, within a factor of {factor} either way").format(
    none=names[NONE], n_embd=n_embd, seed=seed, digits=integer(here_digits + 1),
    factor=integer(sections.ORDER_FACTOR)))
same_order = sum(c.same_order for c in comparison)
if same_order == len(comparison):
    st.badge(_("all {n} of the lesson's numbers: the app's value is of the same order of magnitude (within a factor "
               "of {factor} either way), not the same digits").format(n=len(comparison),
                                                                      factor=integer(sections.ORDER_FACTOR)),
             icon=":material/check_circle:", color="green")
else:
    st.badge(_("{k} of the lesson's {n} numbers are within a factor of {factor} of the app's: another initialisation "
               "moves these numbers").format(k=same_order, n=len(comparison), factor=integer(sections.ORDER_FACTOR)),
             icon=":material/info:", color="gray")
st.markdown(_("The lesson's way, `model.pos_emb.weight.zero_()`, on the learned model of the same seed: 1 layer "
              "{one}, {one_ratio} × this model's own rounding level ({one_level}); 2 layers {two}, {two_ratio} × "
              "its level ({two_level}). These levels are ε × max|logits| of this model's own two logit vectors; it "
              "is not one of the chart's {n} models, whose dotted line ({line} at 1 layer) is the largest of their "
              "levels. Its other weights are another random draw than the “none” model's, so the numbers differ, "
              "but both models have no position information.").format(
    one=sci(zeroed.diff(1, LEARNED)), one_ratio=sci(zeroed.ratio(1, LEARNED)),
    one_level=sci(zeroed.rounding_level(1, LEARNED)), two=sci(zeroed.diff(2, LEARNED)),
    two_ratio=sci(zeroed.ratio(2, LEARNED)), two_level=sci(zeroed.rounding_level(2, LEARNED)),
    n=len(sweep.by_layer.columns), line=sci(sweep.rounding_level(1))))
page.verdict(zeroed.is_rounding(1, LEARNED) and zeroed.differs(2, LEARNED),
             _("the zeroed table behaves as “none”: rounding at 1 layer, clearly non-zero at 2"),
             _("the zeroed table does NOT behave as “none”"))
shapes_by_encoding = entry_shapes(n_embd)
st.markdown(_("**Where position information enters** (a one-layer model of each kind on “{line}”, n_embd {n_embd}, "
              "{heads} heads):").format(line=chapter.LESSON_LINE, n_embd=n_embd, heads=N_HEAD))
keys = sections.ENCODING_KEYS
for row in (keys[i:i + DIAGRAMS_PER_ROW] for i in range(0, len(keys), DIAGRAMS_PER_ROW)):
    for column, encoding in zip(st.columns(DIAGRAMS_PER_ROW), row, strict=False):
        with column:
            st.markdown(f"**{words.title(encoding)}**")
            diagram(entry_diagram(encoding, shapes_by_encoding[encoding]), width="content",
                    alt=_("Diagram: where the {encoding} encoding brings position information into attention, "
                          "from the token ids {idx} to the attention scores {scores}.").format(
                        encoding=names[encoding], idx=shapes_by_encoding[encoding].idx,
                        scores=shapes_by_encoding[encoding].attn_scores))
colour_legend()
page.show_code(sections.permutation_by_layers, sections.permutation_experiment, sections.last_logits_difference,
               sections.sweep_of, positions.encoding, sections.zeroed_table_sweep, sections.lesson_comparison)

# --- 2. why: the causal mask ------------------------------------------------------------------------
page.prose("why")
vis = sections.causal_visibility(chapter.LESSON_LINE, chapter.PERMUTED_LINE)
st.plotly_chart(figures.visibility_figure(vis, figures.VisibilityLabels(
    mask_title=_("key positions each query sees (character in line / in permuted)"),
    count_title=_("tokens visible = t + 1"), count_axis=_("count"), same_inputs=_("same inputs"),
    cell_hover=_("query %{y} sees key %{x}: %{text}"), count_hover=_("position %{y}: %{x} tokens"),
    separators=plotly_separators(),
)), key="pe_visibility", alt=_(
    "Grid of the key positions each query position sees under the causal mask, each visible cell naming the "
    "character of both lines there, and bars of how many tokens each position sees ({counts}); marked ✓, with the "
    "same inputs in both lines: {same}.").format(counts=" · ".join(map(str, vis.counts.tolist())),
                                                 same=positions_text(vis.same_positions) if vis.same_positions
                                                 else _("no position")))
layer_one = first_layer(n_embd, seed)
differ = [t for t in range(len(vis.line)) if not bool(vis.same_inputs[t])]
same = list(vis.same_positions)
st.markdown(_("visible tokens per position = {counts} · the same own character and the same visible characters in "
              "both lines {where}").format(counts=seq(vis.counts.tolist(), 0),
                                           where=at_positions(same) if same else _("at no position")))
if differ:
    st.markdown(_("After the first layer without positions (n_embd {n_embd}, seed {seed}), the two lines' outputs "
                  "differ by {low} to {high} {positions}").format(
        n_embd=n_embd, seed=seed, low=sci(float(layer_one.diff[differ].min())),
        high=sci(float(layer_one.diff[differ].max())), positions=at_positions(differ))
        + (_("; {positions} they agree to {diff}, float rounding.").format(
            positions=at_positions(same), diff=sci(float(layer_one.diff[same].max()))) if same else "."))
    lesson = [p - 1 for p in sections.LESSON_FIRST_LAYER_DIFFER]
    extra = [t for t in differ if t not in lesson]
    if extra:
        st.markdown(_("The lesson counts positions from 1 and names {lesson}, here {ours} (counted from 0). The first "
                      "layer's output also differs {extra}, where the two lines hold different characters ({pairs}): "
                      "there the inputs themselves differ, whatever their order.").format(
            lesson=positions_text(sections.LESSON_FIRST_LAYER_DIFFER), ours=positions_text(lesson),
            extra=at_positions(extra), pairs=", ".join(f"{vis.line[t]}/{vis.permuted[t]}" for t in extra)))
page.verdict(bool((layer_one.agrees == vis.same_inputs).all()),
             _("the first layer's outputs agree exactly where the inputs are the same"),
             _("the first layer's outputs do NOT agree only where the inputs are the same"))
page.show_code(sections.causal_visibility, positions.visible_token_counts, sections.first_layer_differences)

# --- 3-4. learned and sinusoidal tables ---------------------------------------------------------------
page.prose(LEARNED)
page.prose(SINUSOIDAL)


def tables_charts(panels: dict[str, sections.PositionTable]) -> None:
    """Sections 3-4's charts: per table, the table on top and its similarity under it, one figure per column."""
    # one column per table, one chart each: the table on top, its similarity under it, stacked in one figure (a
    # control redraws two charts, not four: each replaced chart is a full new Plotly plot in the browser). Side by
    # side on a wide screen, stacked on a phone; a control redraws only the tables it changes (the shipped
    # model's stays as it is)
    stacks = {name: [
        figures.TablePanel(f"{_(TABLE_TITLES[name]).format(seed=VECTOR_SEED)} ({integer(p.table.shape[0])} × "
                           f"{integer(p.table.shape[1])})", p.table, _("position"), _("dimension"),
                           _("rows: position · columns: dimension")),
        figures.TablePanel(_(SIMILARITY_TITLES[name]).format(seed=VECTOR_SEED), p.similarity, _("position m"),
                           _("position n"), _("rows: position m · columns: position n"), zmax=1.0),
    ] for name, p in panels.items()}
    # room for as many title lines as the longest title of each row, so the columns' panels line up (the counts
    # do not depend on the tables' shapes, so the shipped model's chart stays as it is when a slider moves)
    lines = [max(figures.title_lines(stack[i]) for stack in stacks.values()) for i in range(2)]
    for column, (name, stack) in zip(st.columns(len(stacks)), stacks.items(), strict=True):
        table = panels[name]
        column.plotly_chart(figures.stacked_tables_figure(stack, lines=lines, separators=plotly_separators(),
                                                          colon=colon()),
                            key=f"pe_tables_{name}", alt=_(
            "Heatmap of the {title}, {rows} positions × {cols} dimensions (std {std}), and under it the cosine "
            "similarity of every pair of positions (largest spread along a diagonal {spread}).").format(
                title=stack[0].title, rows=integer(table.table.shape[0]), cols=integer(table.table.shape[1]),
                std=num(table.std, 4), spread=sci(table.diagonal_spread)))


def tables_numbers(untrained: sections.PositionTable, shipped: sections.ShippedTable | None) -> None:
    """Sections 3-4's numbers: the untrained and trained tables' spreads, or why the trained one is missing."""
    trained = shipped.table if shipped is not None else None
    if shipped is None:
        st.info(_("No trained model ships with this copy of the app ({name}), so only the untrained table is "
                  "shown. Train one in the GPT lab with learned positions to compare.").format(
            name=sections.SHIPPED_MODEL.name))
    elif shipped.error is not None:
        st.warning(_("The shipped model could not be read, so only the untrained table is shown."))
        st.code(shipped.error, language=None, wrap_lines=True)
    elif trained is None:
        st.info(_("The shipped model uses pos_encoding “{encoding}”, so it has no learned table.").format(
            encoding=shipped.pos_encoding))
    st.markdown(_("untrained table: std = {std} (init std {init})").format(std=num(untrained.std, 4),
                                                                          init=num(0.02, 2)))
    if trained is not None and trained.neighbour_similarity is not None:
        st.markdown(_("trained table: std = {std}, shape {shape} · mean similarity of neighbouring positions = "
                      "{near}, of positions {far} apart = {far_similarity}").format(
            std=num(trained.std, 4), shape=tuple(trained.table.shape), near=num(trained.neighbour_similarity, 3),
            far=trained.far_distance, far_similarity=num(trained.far_similarity, 3)))
    elif trained is not None:
        st.markdown(_("trained table: std = {std}, shape {shape}").format(std=num(trained.std, 4),
                                                                         shape=tuple(trained.table.shape)))


@st.fragment
def tables_section() -> None:
    """Sections 3-4: block_size and n_embd redraw the tables only."""
    c1, c2 = st.columns(2)
    block_size = int(c1.select_slider(_("block_size (rows)"), options=BLOCK_CHOICES,
                                      value=128, key="pe_block", bind="query-params"))
    width = int(c2.slider(_("n_embd (columns; odd works too)"), 1, 256, step=1, value=128, key="pe_width",
                          bind="query-params"))
    untrained = untrained_table(block_size, width, VECTOR_SEED)
    sin = sinusoidal_table(block_size, width)
    shipped = shipped_table(str(sections.SHIPPED_MODEL))
    trained = shipped.table if shipped is not None else None
    tables_charts({"untrained": untrained, **({"trained": trained} if trained is not None else {}), SINUSOIDAL: sin})
    with page.slot():
        tables_numbers(untrained, shipped)
    st.markdown(_("sinusoidal row 0 = {row}{more} · largest spread along a diagonal of its similarity = "
                  "{spread}: {verdict}").format(row=seq(sin.table[0, :8].tolist(), 1), more=" …" if width > 8 else "",
                                               spread=sci(sin.diagonal_spread),
                                               verdict=_(SPREAD_VERDICTS[sections.spread_kind(sin.diagonal_spread)])
                                               .format(limit=num(sections.SMALL_SPREAD, 2))))


tables_section()
page.show_code(sections.untrained_table, sections.learned_table, sections.shipped_learned_table,
               positions.sinusoidal_encoding, positions.sinusoidal_table, sections.describe_table,
               sections.position_similarity)

# --- 5. RoPE rotation ----------------------------------------------------------------------------------
page.prose(ROPE)


def rope_controls() -> tuple[int, int, bool]:
    """Section 5's controls: head_dim and the position m, and whether RoPE can rotate that head_dim (odd: not)."""
    c1, c2 = st.columns(2)
    head_dim = int(c1.slider("head_dim", 1, 64, step=1, value=16, key="pe_head_dim", bind="query-params",
                             help=_("RoPE turns pairs of dimensions, so it needs an even head_dim.")))
    rope_ok = sections.rope_supported(head_dim)
    position = int(c2.slider(_("position m"), 0, 127, step=1, value=3, key="pe_position", bind="query-params",
                             disabled=not rope_ok))
    if not rope_ok:  # at the end of its column: nothing after it moves
        c1.warning(_("head_dim {head_dim} is odd: RoPE rotates pairs of dimensions, so it needs an even head_dim. "
                     "The rotation below and RoPE's score matrix wait for an even value; the sinusoidal score "
                     "matrix works with any head_dim.").format(head_dim=head_dim), icon=":material/tune:")
    return head_dim, position, rope_ok


@st.cache_resource(show_spinner=False, max_entries=page.SMALL_FIGURE_ENTRIES)
def rope_pairs_chart(head_dim: int, position: int, lang: str, _labels: figures.RopePairLabels) -> go.Figure:
    """Section 5's figure of one vector's pairs at ``position``, built once per value and language.

    The labels hold formatters, which Streamlit cannot hash; they follow from ``lang``, so they stay out of the key."""
    rotation = rope_rotation(head_dim, VECTOR_SEED)
    return figures.rope_pairs_figure(rotation, position, sections.shown_pairs(rotation.n_pairs), _labels)


def rope_rotation_view(head_dim: int, position: int) -> None:
    """Section 5: one vector's pairs of dimensions turned to position m, with their angles and the norm kept."""
    rotation = rope_rotation(head_dim, VECTOR_SEED)
    drawn = sections.shown_pairs(rotation.n_pairs)
    st.plotly_chart(rope_pairs_chart(head_dim, position, current_language(), figures.RopePairLabels(
        panel=_("pair {pair} (dims {dim_a}, {dim_b})<br>θ = {theta} rad/pos · {angle}°"),
        earlier=_("earlier positions"), position=_("position {position}: "), pair=_("pair {pair}"),
        point=_("(%{x:.3f}, %{y:.3f})"), theta_text=theta_text, angle_text=lambda a: num(a, 1),
        separators=plotly_separators(),
    )), key="pe_rope_pairs", alt=_(
        "{drawn} pairs of dimensions of one vector, each on its own circle, rotated by RoPE to position "
        "{position} with its trail of earlier positions; angles m·θ_i in degrees: {angles}.").format(
            drawn=len(drawn), position=position, angles=" · ".join(
                f"{i}: {num(float(rotation.angles[position, i].rad2deg().remainder(360)), 1)}" for i in drawn)))
    if len(drawn) < rotation.n_pairs:
        st.caption(_("The figure draws {drawn} of the {n} pairs, spread evenly from the fastest to the slowest "
                     "(pairs {pairs}); the table lists all {n}.").format(
            drawn=len(drawn), n=rotation.n_pairs, pairs=positions_text(drawn)))
    # short headers, so that no word is broken in a cell on a phone; the units are in the caption under it
    pair_columns = {"pair": "i", "dims": _("dims"), "theta": "θ_i", "angle_deg": "m·θ_i", "wavelength": "2π/θ_i"}
    pairs = sections.rope_pair_table(rotation, position).rename(columns=pair_columns)
    page.static_table(pairs, {pair_columns["theta"]: theta_text, pair_columns["angle_deg"]: lambda a: num(a, 1),
                              pair_columns["wavelength"]: lambda w: num(w, 1)})
    st.caption(_("i: the pair of dimensions (2i, 2i + 1) · θ_i: its angle per position, in radians · "
                 "m·θ_i: its angle at position m, in degrees, mod 360 · 2π/θ_i: its wavelength, in positions"))
    st.markdown(_("‖v‖ at position 0 = {first} · at position {position} = {norm}").format(
        first=num(float(rotation.norms[0]), 4), position=position, norm=num(float(rotation.norms[position]), 4)))


def score_controls(rope_ok: bool) -> tuple[str, int, int, bool]:
    """Section 6's controls: the encoding, T and the shift, and whether that encoding can run at this head_dim."""
    c1, c2, c3 = st.columns(3)
    # the link holds the encoding's own name (sinusoidal), the radio its label in the reader's language
    encoding = url.choice(c1.radio, _("encoding"), sections.SCORE_ENCODINGS, key="pe_score_mode", default=ROPE,
                          format_func=lambda k: _(SCORE_LABELS[k]))
    scores_ok = not positions.encoding(encoding).rotates_qk or rope_ok
    T = int(c2.slider(_("positions T"), 2, 16, step=1, value=8, key='pe_score_T', bind="query-params",
                      disabled=not scores_ok))
    shift = int(c3.slider(_("shift both positions by"), 0, 1000, step=1, value=100, key="pe_shift", bind="query-params",
                          disabled=not scores_ok))
    return encoding, T, shift, scores_ok


@st.cache_resource(show_spinner=False, max_entries=page.SMALL_FIGURE_ENTRIES)
def score_chart(inputs: tuple, title: str, position_labels: tuple[str, ...], row_title: str, hover: str,
                decimals: int, limit: float, separators: str, show_values: bool | None, *,
                _matrix: torch.Tensor) -> go.Figure:
    """One panel of section 6's score matrices (:func:`figures.score_matrices_figure`), built once per value.

    ``inputs`` names what the (T, T) ``_matrix`` was computed from (the matrix itself, which Streamlit would hash
    byte by byte on every rerun, stays out of the key); the words and formats are in the key, so each language has
    its own figure."""
    return figures.score_matrices_figure({title: _matrix}, {title: list(position_labels)}, row_title, hover,
                                         decimals=decimals, limit=limit, separators=separators,
                                         show_values=show_values)


def score_matrices_view(encoding: str, head_dim: int, T: int, shift: int) -> None:
    """Section 6: the score matrix q·k at positions 0 … T − 1 and shifted, with what their diagonals say."""
    scores = score_matrices(encoding, head_dim, T, shift, VECTOR_SEED)
    labels = {_("positions 0 … {last} (columns: key position n)").format(last=T - 1): [str(t) for t in range(T)],
              _("shifted by {shift}: positions {first} … {last}").format(shift=shift, first=shift,
                                                                         last=shift + T - 1):
                  [str(t + shift) for t in range(T)]}
    # one figure per matrix, each in its own column: side by side on a wide screen, stacked on a phone
    matrices = (scores.attn_scores, scores.shifted)
    limit = figures.score_limit(matrices)
    for i, (column, title, matrix) in enumerate(zip(st.columns(2), labels, matrices, strict=True)):
        column.plotly_chart(score_chart(
            ("scores", encoding, head_dim, T, shift, i), title, tuple(labels[title]), _("query position m"),
            _("query %{customdata[0]} · key %{customdata[1]}: %{text}"), 2, limit, plotly_separators(), None,
            _matrix=matrix), key=f"pe_scores_{i}", alt=_(
            "Score matrix q·k of {encoding}, {title}: query position m in rows, key position n in columns; "
            "largest spread along a diagonal {spread}.").format(
                encoding=_(SCORE_LABELS[encoding]), title=title, spread=sci(sections.diagonal_spread(matrix))))
    st.markdown(_("largest spread along a diagonal = {spread} · max |scores − shifted scores| = {diff} · "
                  "float32 rounding of these scores (ε × largest |q|·|k|) = {level}").format(
        spread=sci(scores.max_diagonal_spread), diff=sci(scores.max_shift_diff), level=sci(scores.rounding_level)))
    score_badges(scores, shift)


def score_badges(scores: sections.ScoreMatrices, shift: int) -> None:
    """Section 6's verdicts, each from the matrices with its tolerance: distance only, and unchanged by the shift
    (grey "nothing tested" for a shift of 0)."""
    factor = integer(sections.ROUNDING_FACTOR)
    if scores.constant_diagonals:
        st.badge(_("constant along every diagonal, within {factor} × the rounding level: a score depends on "
                   "m − n only").format(factor=factor), icon=":material/check_circle:", color="green")
    else:
        st.badge(_("not constant along its diagonals: the scores depend on the absolute positions"),
                 icon=":material/info:", color="gray")
    if not scores.shift_tested:
        st.badge(_("nothing tested by the shift: a shift of 0 compares the matrix with itself"),
                 icon=":material/remove:", color="gray")
    elif scores.shift_invariant:
        st.badge(_("unchanged by the shift of {shift}, within {factor} × the rounding level").format(
            shift=integer(shift), factor=factor), icon=":material/check_circle:", color="green")
    else:
        st.badge(_("changed by the shift of {shift}: the scores depend on the absolute positions").format(
            shift=integer(shift)), icon=":material/info:", color="gray")


@st.fragment
def rope_and_scores() -> None:
    """Sections 5-6: head_dim and the position redraw these sections only; section 6's controls, its own."""
    head_dim, position, rope_ok = rope_controls()
    with page.slot():
        if rope_ok:
            rope_rotation_view(head_dim, position)
    page.show_code(sections.rope_rotation, positions.apply_rope, positions.rotate_pairs, positions.rope_cos_sin,
                   positions.rope_frequencies)

    scores_section(head_dim, rope_ok)


@st.fragment
def scores_section(head_dim: int, rope_ok: bool) -> None:
    """Section 6: its own controls redraw it alone (and ALiBi's); head_dim, above, redraws it with section 5."""
    # --- 6. scores depend on the distance -----------------------------------------------------------------
    page.prose("scores")
    encoding, T, shift, scores_ok = score_controls(rope_ok)
    with page.slot():
        if not scores_ok:
            st.caption(_("RoPE needs an even head_dim (the head_dim control above); choose an even value, or the "
                         "sinusoidal encoding."))
        else:
            score_matrices_view(encoding, head_dim, T, shift)
    alibi_section(T, shift)


def slope_text(slope: float) -> str:
    """An ALiBi slope, a power of two, as the fraction the paper writes (1/4, 1/256) and in the reader's format."""
    return f"1/{integer(round(1 / slope))} = {sci(slope, 2)}"


def alibi_section(T: int, shift: int) -> None:
    """Section 6, ALiBi: its bias on the scores, one heatmap per head, beside RoPE's distance-only scores."""
    page.prose(ALIBI)
    bias = sections.alibi_score_bias(N_HEAD, T, shift)
    causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T): the keys j <= i a query reads
    shown = bias.bias.masked_fill(~causal, float("-inf"))  # (nh, T, T): -inf where the causal mask writes it
    limit = figures.score_limit(list(shown))  # every head's largest finite |bias|: no drawn cell clipped
    # short titles (the fraction only): two panels side by side keep them apart on a phone; s, not RoPE's m
    heads = [_("head {h} · s = {slope}").format(h=h, slope=f"1/{integer(round(1 / float(s)))}")
             for h, s in enumerate(bias.slopes)]
    # one figure per head, two side by side on a wide screen, stacked on a phone (two panels in one figure crowd
    # their titles there)
    for row in range(0, N_HEAD, 2):
        for column, h in zip(st.columns(2), range(row, min(row + 2, N_HEAD)), strict=False):
            column.plotly_chart(score_chart(
                (ALIBI, T, shift, h), heads[h], tuple(str(t) for t in range(T)), _("query position i"),
                _("query %{customdata[0]} · key %{customdata[1]}: %{text}"), 4, limit, plotly_separators(), False,
                _matrix=shown[h]), key=f"pe_alibi_{h}", alt=_(
                "ALiBi's bias −s·(i − j) on the scores of head {head}, query position i in rows, key position j in "
                "columns; above the diagonal the causal mask's −∞; slope s = {slope}; colours from −{limit} to "
                "{limit}.").format(head=h, slope=slope_text(float(bias.slopes[h])), limit=sci(limit, 2)))
    st.markdown(_("ALiBi's slopes for {n} heads: {slopes} · largest spread along a diagonal = {spread} · "
                  "max |bias − bias shifted by {shift}| = {diff}").format(
        n=N_HEAD, slopes=" · ".join(slope_text(float(s)) for s in bias.slopes), spread=sci(bias.max_diagonal_spread),
        shift=integer(shift), diff=sci(bias.max_shift_diff)))
    if not bias.shift_tested:
        st.badge(_("nothing tested by the shift: a shift of 0 compares the bias with itself"),
                 icon=":material/remove:", color="gray")
    elif bias.distance_only:
        st.badge(_("ALiBi's bias is the same at positions {first} … {last}: it depends on i − j only").format(
            first=integer(shift), last=integer(shift + T - 1)), icon=":material/check_circle:", color="green")
    else:
        st.badge(_("ALiBi's bias changed with the shift"), icon=":material/error:", color="red")

rope_and_scores()
page.show_code(sections.position_scores, sections.rope_score_matrix, sections.additive_score_matrix,
               sections.scores_and_bound,
               sections.alibi_score_bias, positions.alibi_slopes, positions.alibi_bias)

# --- 7. past block_size ----------------------------------------------------------------------------------
page.prose("past")
@st.fragment
def past_section() -> None:
    """Section 7: the sequence length redraws this section only."""
    past_T = int(st.slider(_("sequence length (block_size {block_size})").format(block_size=sections.PAST_BLOCK_SIZE),
                           1, 64, step=1, value=24, key='pe_past_T', bind="query-params"))
    past = past_block(past_T)
    missing = past.missing_positions
    names = encoding_names()
    page.static_table(pd.DataFrame({
        _("position encoding (pos_encoding)"): [names.get(run.pos_encoding, run.pos_encoding) for run in past.runs],
        _("ran"): [run.ran for run in past.runs],
        _("logits shape"): [str(run.logits_shape) if run.ran else "" for run in past.runs],
        _("what happened"): [
            _("ran on {T} tokens").format(T=past.T) if run.ran else
            _("no row for positions {first} … {last}: the learned table has {rows} rows").format(
                first=missing.start, last=missing.stop - 1, rows=past.block_size)
            for run in past.runs],
    }))
    if past.all_ran:
        st.success(_("All {n} encodings ran on {T} tokens (within block_size {block_size}).").format(
            n=len(past.runs), T=past.T, block_size=past.block_size))
    else:
        st.info(_("This is the demonstration: {T} tokens need positions up to {last}, and a learned table of "
                  "block_size "
                  "{block_size} has no row past {end}. The model refuses the sequence with this error:").format(
            T=past.T, last=past.T - 1, block_size=past.block_size, end=past.block_size - 1), icon=":material/school:")
        st.code("\n".join(f"ValueError: {past_error(past)}" for run in past.runs if not run.ran), language=None,
                wrap_lines=True)
    alibi, plain = past.run(ALIBI), past.run(NONE)
    if alibi.far_weight is not None and plain.far_weight is not None:
        slopes = positions.alibi_slopes(sections.PAST_N_HEAD)
        steep, gentle = int(slopes.argmax()), int(slopes.argmin())
        st.markdown(_("**Past the trained length.** The last query reads {far} keys that lie {block_size} or more "
                      "positions back, farther than any distance inside block_size. The untrained ALiBi model gives "
                      "them {steep} of the weight of its steepest head (s = {s_steep}) and {gentle} of its gentlest "
                      "(s = {s_gentle}); the model without position information gives them {plain} on average, "
                      "about their share of the {T} keys ({share}).").format(
            far=integer(past.T - past.block_size), block_size=integer(past.block_size),
            steep=percent(float(alibi.far_weight[steep]), 1), s_steep=slope_text(float(slopes[steep])),
            gentle=percent(float(alibi.far_weight[gentle]), 1), s_gentle=slope_text(float(slopes[gentle])),
            plain=percent(float(plain.far_weight.mean()), 1), T=integer(past.T),
            share=percent((past.T - past.block_size) / past.T, 1)))


past_section()
page.show_code(sections.run_past_block_size, positions.check_learned_positions, G.GPT.embed)

# --- exercises -------------------------------------------------------------------------------------------
page.prose("exercises")
st.markdown(_("The lesson's exercise 1 · 3 layers, no position embedding (n_embd {n_embd}, seed {seed}): "
              "max |Δ logits| = **{diff}**").format(n_embd=n_embd, seed=seed, diff=sci(sweep.diff(3, NONE))))

page.check_yourself()
notebook.download_button()
