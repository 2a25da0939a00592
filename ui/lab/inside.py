"""Section 5 of the Lab: the model's attention on a line, layer by layer and head by head; its position table."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from engine import chapter
from engine.figures import lab as figures
from engine.lab import internals
from engine.lab import settings as rules
from engine.lab.models import LabModel
from ui import page
from ui.i18n import _
from ui.lab.words import fill, plain, position_name, strongest_keys
from ui.numbers import colon, plotly_separators


@st.cache_resource(show_spinner=False, max_entries=32)
def attention_view(model_id: str, line: str, max_len: int, _model: LabModel, labels: figures.AttentionLabels
                   ) -> tuple[internals.AttentionMaps, go.Figure | None]:
    """The model's attention maps on ``line`` (at most ``max_len`` characters) and their slider figure."""
    maps = internals.attention_maps(_model, line, max_len)
    if not maps.tokens:
        return maps, None
    return maps, figures.attention_slider(maps.attn_weights, maps.tokens, labels)


@st.cache_resource(show_spinner=False, max_entries=8)
def positions_view(model_id: str, _model: LabModel, labels: figures.PositionLabels
                   ) -> tuple[internals.PositionTables, tuple[go.Figure, ...]] | None:
    """The learned position table before and after training and its four panels' figures (the tables, then
    their similarities); None without a learned table."""
    tables = internals.position_tables(_model)
    if tables is None:
        return None
    return tables, figures.position_tables_figures(tables.trained, tables.untrained, labels)


def attention_on_a_line(model: LabModel | None) -> None:
    """The line input, then (with a model) its attention maps and, under the positions' prose, the table."""
    line = st.text_input(_("a line to read"), value=chapter.LESSON_LINE + "，黄河入海流。",
                         key="lab_line", bind="query-params", max_chars=rules.MAX_PROMPT_CHARS)
    if model is None:
        return
    cfg = model.config
    max_len = figures.attention_line_length(cfg.n_layer, cfg.n_head)
    labels = figures.AttentionLabels(title="attn_weights", step=_("layer {layer} · head {head}"),
                                     query=_("query (position:character)"), key=_("key"),
                                     separators=plotly_separators(), colon=colon())
    maps, attn_figure = attention_view(model.model_id, line, max_len, model, labels)
    if maps.unknown:
        chars = plain(" ".join(maps.unknown[:30])) + (" …" if len(maps.unknown) > 30 else "")
        # the rule of the generation's prompt (generation.prepare_prompt): the axes show these characters as typed
        st.warning(fill(_("Not in this model's vocabulary, so the model reads each as its unknown token, the one its "
                          "rare characters share: {chars}") if maps.as_unk
                        else _("Not in the vocabulary, left out: {chars}"), chars=chars))
    if maps.cut:
        st.info(fill(
            _("Only the first {shown} characters the model reads are drawn ({cut} more left out), so that the {maps} "
              "maps stay readable."), shown=len(maps.tokens), cut=maps.cut, maps=cfg.n_layer * cfg.n_head))
    if attn_figure is None:
        st.warning(_("No character of this line is in the model's vocabulary: nothing to draw."))
    else:
        w = maps.attn_weights
        st.plotly_chart(attn_figure, key="lab_attention", alt=fill(
            _("Heatmaps of attn_weights on the line, one for each layer and head ({layers} × {heads}, chosen with the "
              "slider), queries in rows and keys in columns; in layer 0 · head 0 the key each query weighs most: "
              "{strongest}."),
            layers=w.shape[0], heads=w.shape[1], strongest=strongest_keys(w[0, 0], maps.tokens)))
        st.markdown(fill(_("{layers} layers × {heads} heads on {chars} characters · every row sums to {row:.4f} · mean "
                      "weight a query puts on itself: {diag:.3f}"),
            layers=w.shape[0], heads=w.shape[1], chars=w.shape[2], row=maps.row_sum, diag=maps.self_weight))
    page.prose("positions")
    position_table(model)


def position_table(model: LabModel) -> None:
    """The learned position table after training beside the one it started from, or why there is none."""
    labels = figures.PositionLabels(
        trained=_("pos_emb after training"), untrained=_("pos_emb before training (same seed)"),
        sim_trained=_("cosine similarity of positions, trained"),
        sim_untrained=_("cosine similarity of positions, untrained"), position=_("position"),
        dimension=_("dimension"), separators=plotly_separators(), colon=colon())
    tables = positions_view(model.model_id, model, labels)
    if tables is None:
        st.info(fill(_("This model uses pos_encoding “{pos}”: it has no learned position table."),
            pos=position_name(model.config.pos_encoding)))
        return
    stats, panels = tables
    block_size, n_embd = stats.trained.shape
    alts = [fill(_("Heatmap “{title}”: {rows} positions × {cols} dimensions, values from {low:.2f} to {high:.2f}."),
                 title=title, rows=block_size, cols=n_embd, low=float(table.min()), high=float(table.max()))
            for title, table in ((labels.trained, stats.trained), (labels.untrained, stats.untrained))]
    alts += [fill(_("Heatmap “{title}”: the cosine similarity of each pair of the {rows} positions; neighbouring "
                    "positions {sim:.3f} on average."), title=title, rows=block_size, sim=sim)
             for title, sim in ((labels.sim_trained, stats.neighbour_sim_trained),
                                (labels.sim_untrained, stats.neighbour_sim_untrained))]
    # two panels a row on a wide screen; Streamlit's columns stack them on a phone, each at the screen's width
    for row in range(0, len(panels), 2):
        for column, k in zip(st.columns(2), range(row, row + 2), strict=True):
            column.plotly_chart(panels[k], key=f"lab_positions_{k}", alt=alts[k])
    st.markdown(fill(_("mean cosine similarity of neighbouring positions: trained **{trained:.3f}**, before training "
                  "**{untrained:.3f}** (seed {seed})"), trained=stats.neighbour_sim_trained,
                                                              untrained=stats.neighbour_sim_untrained,
                                                              seed=stats.seed))
