"""engine.diagrams (a module per page, core shared) and engine.palette: every diagram builds at the extremes
of its controls, names the shapes it was given, escapes the caller's words, and is valid DOT.

DOT is checked by a small parser below (balanced braces, every edge's ends declared, every
HTML-like label well-formed XML); where the ``dot`` binary is installed, it also renders.
"""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, fields, replace

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from engine import palette as P
from engine.attention import MultiHeadAttention
from engine.diagrams.causal_mask import CausalMaskLabels, CausalMaskShapes, causal_mask
from engine.diagrams.core import FILL_LIGHTEN, shape_text
from engine.diagrams.dropout import DropoutLabels, DropoutShapes, dropout
from engine.diagrams.home import HomeLabels, HomeShapes, home
from engine.diagrams.lab import LabLabels, LabShapes, gpt_parts, lab
from engine.diagrams.multi_head import (
    MULTI_HEAD_HALVES,
    MultiHeadLabels,
    MultiHeadShapes,
    linear_text,
    multi_head,
    split_layers,
)
from engine.diagrams.positional_encodings import (
    PositionalEncodingsLabels,
    PositionalEncodingsShapes,
    positional_encodings,
)
from engine.diagrams.self_attention import SelfAttentionLabels, SelfAttentionShapes, self_attention
from engine.diagrams.trainable_weights import TrainableWeightsLabels, TrainableWeightsShapes, trainable_weights
from engine.gpt import GPT, CausalSelfAttention, GPTConfig, config_params, count_params
from engine.positions import ENCODINGS, encoding
from engine.presets import preset
from ui.diagram import svg_of
from ui.i18n import LANGUAGES
from ui.numbers import significant

# --------------------------------------------------------------------------------------------------
# A small DOT reader
# --------------------------------------------------------------------------------------------------


@dataclass
class Parsed:
    nodes: set[str]
    edges: list[tuple[str, str]]
    labels: list[str]  # the visible text of every HTML-like label, tags removed, entities decoded
    clusters: int


def _tokens(src: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: "id" (bare or quoted, unquoted), "html" (between < and >), "sym"."""
    out, i = [], 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c == '"':
            j, buf = i + 1, []
            while src[j] != '"':
                if src[j] == "\\":
                    j += 1
                buf.append(src[j])
                j += 1
            out.append(("id", "".join(buf)))
            i = j + 1
        elif c == "<":
            depth, j = 1, i + 1
            while depth:
                depth += {"<": 1, ">": -1}.get(src[j], 0)
                j += 1
            out.append(("html", src[i + 1:j - 1]))
            i = j
        elif src.startswith("->", i):
            out.append(("sym", "->"))
            i += 2
        elif c in "{}[];,=":
            out.append(("sym", c))
            i += 1
        else:
            m = re.compile(r"[^\s\"<{}\[\];,=]+").match(src, i)
            assert m and not m.group().startswith("-"), f"unexpected text at {src[i:i + 30]!r}"
            out.append(("id", m.group()))
            i = m.end()
    return out


def _html_text(html: str) -> str:
    """The visible text of an HTML-like label; raises if the label is not well-formed."""
    root = ET.fromstring(f"<r>{html.replace('<BR/>', '&#10;')}</r>")
    return "".join(root.itertext())


def parse_dot(src: str) -> Parsed:
    """Parse the subset of DOT that engine.diagrams writes; AssertionError on anything malformed."""
    toks = _tokens(src) + [("eof", "")] * 3  # lookahead past the end reads "eof"
    assert toks[:2] == [("id", "digraph"), ("sym", "{")], toks[:2]
    nodes: set[str] = set()
    edges: list[tuple[str, str]] = []
    ranked: list[str] = []
    labels: list[str] = []
    depth, clusters, i = 1, 0, 2

    def attr_list(i: int) -> int:
        assert toks[i] == ("sym", "[")
        i += 1
        while toks[i] != ("sym", "]"):
            (kk, _key), eq, (kv, value) = toks[i], toks[i + 1], toks[i + 2]
            assert kk == "id" and eq == ("sym", "=") and kv in ("id", "html"), toks[i:i + 3]
            if kv == "html":
                labels.append(_html_text(value))
            i += 3
            if toks[i] in (("sym", ","), ("sym", ";")):
                i += 1
        return i + 1

    while toks[i][0] != "eof":
        kind, text = toks[i]
        if (kind, text) == ("sym", "}"):
            depth -= 1
            assert depth >= 0, "unbalanced }"
            i += 1
        elif (kind, text) == ("sym", "{"):
            depth += 1
            i += 1
        elif (kind, text) == ("sym", ";"):
            i += 1
        elif kind == "id" and text == "subgraph":
            assert toks[i + 1][0] == "id" and toks[i + 2] == ("sym", "{"), toks[i:i + 3]
            clusters += toks[i + 1][1].startswith("cluster_")
            depth += 1
            i += 3
        elif kind == "id" and text in ("graph", "node", "edge") and toks[i + 1] == ("sym", "["):
            i = attr_list(i + 1)
        elif kind == "id" and toks[i + 1] == ("sym", "="):
            i += 3
        elif kind == "id" and toks[i + 1] == ("sym", "->"):
            assert toks[i + 2][0] == "id", toks[i:i + 3]
            edges.append((text, toks[i + 2][1]))
            i += 3
            if toks[i] == ("sym", "["):
                i = attr_list(i)
        elif kind == "id":
            if depth >= 2 and toks[i + 1] == ("sym", ";"):
                ranked.append(text)  # a member of { rank=same; a; b; }
            else:
                assert text not in nodes, f"node {text!r} declared twice"
                nodes.add(text)
            i += 1
            if toks[i] == ("sym", "["):
                i = attr_list(i)
        else:
            raise AssertionError(f"unexpected token {toks[i]!r}")
    assert depth == 0, f"unbalanced braces: depth {depth} at the end"
    for a, b in edges:
        assert a in nodes and b in nodes, f"edge {a} -> {b} joins an undeclared node"
    for n in ranked:
        assert n in nodes, f"rank=same names undeclared node {n!r}"
    return Parsed(nodes, edges, labels, clusters)


def test_parser_rejects_what_it_should():
    ok = 'digraph {\n  "a" [label=<x>]\n  "b"\n  "a" -> "b"\n}\n'
    assert parse_dot(ok).edges == [("a", "b")]
    with pytest.raises(AssertionError):
        parse_dot(ok[:-2])  # missing }
    with pytest.raises(AssertionError):
        parse_dot(ok.replace('"a" -> "b"', '"a" -> "c"'))
    with pytest.raises(ET.ParseError):
        parse_dot(ok.replace("<x>", "<a <B> b>"))


# --------------------------------------------------------------------------------------------------
# Labels and cases at the extremes of each control
# --------------------------------------------------------------------------------------------------

#: Characters a translation could hold and that must reach the reader as they are.
TRICKY = ' <B>&amp;</B> "q" \'k\' ]; 白日依山尽 √d_k −∞ × Ü'


def crafted(text: str) -> str:
    return text + TRICKY


def make_labels(cls, tokens: int = 3):
    """Labels whose every text is its field name plus TRICKY; callables tag their number."""
    kw = {}
    for f in fields(cls):
        kind = str(f.type)
        if kind.startswith("Callable"):
            kw[f.name] = (lambda name: lambda n: crafted(f"{name}={n}"))(f.name)
        elif kind.startswith("tuple"):
            kw[f.name] = tuple(crafted(f"{f.name}{i}") for i in range(tokens))
        else:
            kw[f.name] = crafted(f.name)
    return cls(**kw)


def _meta_gpt(n_layer: int, pos_encoding: str) -> GPT:
    with torch.device("meta"):
        return GPT(preset("tiny", n_layer=n_layer, pos_encoding=pos_encoding))


def case(name: str, size: int):
    """(dot, shapes written on it, texts it must show) for a diagram at a size (1 = smallest)."""
    T = size
    if name == "home":
        labels = make_labels(HomeLabels, tokens=T)
        shapes = HomeShapes(encoder_states=(T, 16), hidden_state=(16,), attn_weights=(T,), context_vec=(16,))
        return home(labels, shapes), [(T, 16)[1:], (16,), (T,)], labels
    if name == "self_attention":
        labels = make_labels(SelfAttentionLabels)
        inputs = torch.zeros(T, 3)
        shapes = SelfAttentionShapes(inputs=inputs.shape, query=inputs[0].shape, attn_scores=(T,),
                                       attn_weights=(T,), context_vec=(3,))
        return self_attention(labels, shapes), [(T, 3), (3,), (T,)], labels
    if name == "trainable_weights":
        labels = make_labels(TrainableWeightsLabels)
        d_out = 1 if T == 1 else 64
        shapes = TrainableWeightsShapes(inputs=(T, 3), W_query=(3, d_out), W_key=(3, d_out), W_value=(3, d_out),
                                          query=(d_out,), keys=(T, d_out), values=(T, d_out), attn_scores=(T,),
                                          attn_weights=(T,), context_vec=(d_out,), d_k=d_out)
        return trainable_weights(labels, shapes), [(T, 3), (3, d_out), (d_out,), (T, d_out), (T,)], labels
    if name == "causal_mask":
        labels = make_labels(CausalMaskLabels)
        sq = (T, T)
        shapes = CausalMaskShapes(attn_scores=sq, mask=sq, masked_scores=sq, attn_weights_causal=sq,
                                    attn_weights=sq, masked_simple=sq, row_sums=(T, 1), masked_simple_norm=sq, d_k=2)
        return causal_mask(labels, shapes), [sq, (T, 1)], labels
    if name.startswith("dropout"):
        p = {"dropout_0": 0.0, "dropout_09": 0.9}[name]
        labels = make_labels(DropoutLabels)
        shapes = DropoutShapes(attn_weights=(T, T), dropped=(T, T), values=(T, 2), context_vec=(T, 2), p=p)
        return dropout(labels, shapes), [(T, T), (T, 2)], labels
    if name.startswith("multi_head"):
        H = {"multi_head_1": 1, "multi_head_12": 12}[name]
        labels = make_labels(MultiHeadLabels)
        b, hd = 2, 2
        C = H * hd  # the lesson's layer: d_in = d_out = n_embd, one fused qkv
        shapes = MultiHeadShapes(b=b, num_tokens=T, d_in=C, d_out=C, num_heads=H, head_dim=hd)
        steps = [(b, T, C), (b, T, 3 * C), (b, T, H, hd), (b, H, T, hd), (b, H, T, T), (b, T, hd)]
        return multi_head(labels, shapes, _lesson_layers(C, H)), steps, labels
    if name.startswith("pos_"):
        kind = name[4:]
        labels = make_labels(PositionalEncodingsLabels)
        shapes = PositionalEncodingsShapes(
            idx=(1, T), tok_emb=(1, T, 32), x=(1, T, 32), q=(1, 4, T, 8), k=(1, 4, T, 8), attn_scores=(1, 4, T, T),
            pos_table=(T, 32) if encoding(kind).adds_table else None,
            rope=(T, 4) if encoding(kind).rotates_qk else None,
            bias=(4, T, T) if encoding(kind).biases_scores else None)
        written = [(1, T), (1, T, 32), (1, 4, T, 8), (1, 4, T, T)]
        written += [(T, 32)] if shapes.pos_table else []
        written += [(4, T, T)] if shapes.bias else []
        written += [(T, 4)] if shapes.rope else []
        return positional_encodings(labels, shapes, kind), written, labels
    if name.startswith("lab_"):
        kind, n_layer = name[4:].rsplit("_", 1)
        model = _meta_gpt(int(n_layer), kind)
        labels = make_labels(LabLabels)
        shapes = LabShapes(idx=(1, T), residual=(1, T, 32), logits=(1, T, 16), attn_weights=(1, 4, T, T))
        return lab(labels, shapes, gpt_parts(model)), [(1, T), (1, T, 32), (1, T, 16), (1, 4, T, T)], labels
    raise KeyError(name)


#: Labels of one route only (a position encoding's), checked by test_position_diagrams_show_the_right_route.
ONE_ROUTE_ONLY = ("position", "none", "learned", "sinusoidal", "rope", "alibi", "rotate")
#: Every encoding of the registry: page 7 draws one diagram each.
ENCODING_KEYS = tuple(enc.key for enc in ENCODINGS)
NAMES = (["home", "self_attention", "trainable_weights", "causal_mask", "dropout_0", "dropout_09",
          "multi_head_1", "multi_head_12"] + [f"pos_{k}" for k in ENCODING_KEYS]
         + [f"lab_{e.key}_{n}" for e in ENCODINGS for n in (1, 8)])
SIZES = (1, 1024)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", NAMES)
def test_each_diagram_is_valid_dot_with_its_shapes_and_words(name, size):
    dot, shapes, labels = case(name, size)
    parsed = parse_dot(dot)
    assert parsed.edges and len(parsed.nodes) >= 5
    visible = "\n".join(parsed.labels)
    for shape in shapes:
        assert shape_text(shape) in visible, f"{shape_text(shape)} missing from {name}"
    # every plain text label is shown exactly as given (escaping undone by the XML reader)...
    for f in fields(labels):
        value = getattr(labels, f.name)
        if isinstance(value, str) and f.name not in ONE_ROUTE_ONLY:
            assert value in visible, f"{name}: label {f.name} not shown"
    # ...and never raw: "<B>&amp;" would have become markup or an entity
    assert "<B>&amp;</B>" not in dot and "&lt;B&gt;&amp;amp;&lt;/B&gt;" in dot


@pytest.mark.parametrize("kind", ENCODING_KEYS)
def test_position_diagrams_show_the_right_route(kind):
    """Each diagram draws the route its record names: a table added, q and k rotated, the scores biased, or none."""
    dot, _, labels = case(f"pos_{kind}", 6)
    visible = "\n".join(parse_dot(dot).labels)
    shown = {k for k in ("learned", "sinusoidal", "rope", "alibi", "none") if getattr(labels, k) in visible}
    assert shown == {kind}
    record = encoding(kind)
    assert (labels.rotate in visible) == record.rotates_qk
    assert ('label="+"' in dot) == record.adds_table  # the ⊕ where the table is added
    assert ("−s_h·(i − j) (4, 6, 6)" in visible) == record.biases_scores


def test_position_diagrams_name_the_qkv_layer_by_its_weight():
    """Page 7: the projections are the lesson's one ``self.qkv`` layer, its size read from the weight passed in."""
    labels = make_labels(PositionalEncodingsLabels)
    base = dict(idx=(1, 6), tok_emb=(1, 6, 32), x=(1, 6, 32), q=(1, 4, 6, 8), k=(1, 4, 6, 8), attn_scores=(1, 4, 6, 6))
    visible = "\n".join(parse_dot(positional_encodings(labels, PositionalEncodingsShapes(**base, qkv=(96, 32)),
                                                        "none")).labels)
    assert "qkv = nn.Linear(32, 96)" in visible
    bare = "\n".join(parse_dot(positional_encodings(labels, PositionalEncodingsShapes(**base), "none")).labels)
    assert "nn.Linear" not in bare  # no size passed: none typed in


@pytest.mark.parametrize("kind", ["none", "learned", "sinusoidal"])
def test_unrotated_q_and_k_share_one_label_when_their_shapes_agree(kind):
    """Two parallel arrows from the projections to the dot products: two labels would collide."""
    labels = make_labels(PositionalEncodingsLabels)
    table = (6, 32) if kind != "none" else None
    same = PositionalEncodingsShapes(idx=(1, 6), tok_emb=(1, 6, 32), x=(1, 6, 32), q=(1, 4, 6, 8),
                                       k=(1, 4, 6, 8), attn_scores=(1, 4, 6, 6), pos_table=table)
    visible = parse_dot(positional_encodings(labels, same, kind)).labels
    assert visible.count("q, k\n(1, 4, 6, 8)") == 1 and "k\n(1, 4, 6, 8)" not in visible
    other = PositionalEncodingsShapes(idx=(1, 6), tok_emb=(1, 6, 32), x=(1, 6, 32), q=(1, 4, 6, 8),
                                        k=(1, 4, 6, 4), attn_scores=(1, 4, 6, 6), pos_table=table)
    visible = parse_dot(positional_encodings(labels, other, kind)).labels
    assert "q\n(1, 4, 6, 8)" in visible and "k\n(1, 4, 6, 4)" in visible


def _chapter_layers(d_in, d_out, num_heads):
    """The chapter's MultiHeadAttention's linear layers (three projections and out_proj), built on meta."""
    with torch.device("meta"):
        return split_layers(MultiHeadAttention(d_in, d_out, context_length=4, dropout=0.0, num_heads=num_heads))


def _lesson_layers(n_embd, num_heads):
    """The lesson's CausalSelfAttention's layers (one fused qkv and proj), built on meta."""
    with torch.device("meta"):
        return split_layers(CausalSelfAttention(GPTConfig(vocab_size=8, block_size=4, n_layer=1, n_head=num_heads,
                                                          n_embd=n_embd)))


def test_multi_head_names_the_layers_of_the_module_that_ran():
    """Page 5's run is the lesson's layer: one qkv = nn.Linear(32, 96) split in three, not a Linear(32, 32); the
    chapter's class draws its three Linear(d_in, d_out); sizes that do not fit the shapes are refused."""
    labels = make_labels(MultiHeadLabels)
    lesson = MultiHeadShapes(b=1, num_tokens=5, d_in=32, d_out=32, num_heads=4, head_dim=8)
    visible = "\n".join(parse_dot(multi_head(labels, lesson, _lesson_layers(32, 4), halves=("split",))).labels)
    assert "qkv = nn.Linear(32, 96)" in visible and "proj = nn.Linear(32, 32)" in visible
    assert "nn.Linear(32, 32)" not in visible.replace("proj = nn.Linear(32, 32)", "")
    assert labels.split_qkv in visible and "(1, 5, 96)" in visible
    chapter = MultiHeadShapes(b=2, num_tokens=6, d_in=3, d_out=2, num_heads=2, head_dim=1)
    layers = _chapter_layers(3, 2, 2)
    visible = "\n".join(parse_dot(multi_head(labels, chapter, layers, halves=("split",))).labels)
    for name in ("W_query", "W_key", "W_value"):
        assert linear_text((name, 3, 2)) in visible
    assert "out_proj = nn.Linear(2, 2)" in visible and labels.split_qkv not in visible
    with pytest.raises(ValueError, match="do not fit"):
        multi_head(labels, lesson, layers)
    with pytest.raises(ValueError, match="no qkv"):
        split_layers(torch.nn.Linear(3, 2))


def test_multi_head_collapses_many_heads_but_names_first_and_last():
    for heads in (1, 3, 12):
        labels = make_labels(MultiHeadLabels)
        shapes = MultiHeadShapes(b=1, num_tokens=4, d_in=3, d_out=2 * heads, num_heads=heads, head_dim=2)
        visible = "\n".join(parse_dot(multi_head(labels, shapes, _chapter_layers(3, 2 * heads, heads))).labels)
        drawn = {i for i in range(heads) if labels.head(i) in visible}
        assert drawn == ({0, 1, 2} if heads == 3 else {0, heads - 1})
        assert ("⋯" in visible) == (heads > 3)


def test_multi_head_draws_the_halves_asked_for():
    labels = make_labels(MultiHeadLabels)
    shapes = MultiHeadShapes(b=1, num_tokens=5, d_in=8, d_out=8, num_heads=4, head_dim=2)
    layers = _lesson_layers(8, 4)
    for halves in (("wrapper",), ("split",), MULTI_HEAD_HALVES):
        parsed = parse_dot(multi_head(labels, shapes, layers, halves=halves))
        assert parsed.clusters == len(halves)
        assert ("w_concat" in parsed.nodes) == ("wrapper" in halves)
        assert ("s_out_proj" in parsed.nodes) == ("split" in halves)
    for bad in ((), ("heads",)):
        with pytest.raises(ValueError, match="halves"):
            multi_head(labels, shapes, layers, halves=bad)


def test_home_collapses_long_sentences():
    dot, _, labels = case("home", 1024)
    visible = "\n".join(parse_dot(dot).labels)
    assert labels.source_tokens[0] in visible and labels.source_tokens[-1] in visible
    assert labels.source_tokens[500] not in visible and "⋯" in visible


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("lang", LANGUAGES)
def test_dropout_writes_p_and_the_survivors_scale_as_the_caller_formats_them(p, lang):
    labels = replace(make_labels(DropoutLabels), number=lambda v: significant(v, 4, lang=lang))
    shapes = DropoutShapes(attn_weights=(4, 4), dropped=(4, 4), values=(4, 2), context_vec=(4, 2), p=p)
    dot = dropout(labels, shapes)
    visible = "\n".join(parse_dot(dot).labels)
    assert f"p = {significant(p, 4, lang=lang)}" in visible
    assert f"1 − p = {significant(1 - p, 4, lang=lang)}" in visible
    assert f"× {significant(1 / (1 - p), 4, lang=lang)}" in visible
    if p == 0.1 and lang != "en":
        assert "p = 0,1" in visible and "× 1,111" in visible and "0.1" not in visible


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_refuses_a_rate_outside_0_1(p):
    with pytest.raises(ValueError, match="p must be"):
        dropout(make_labels(DropoutLabels),
                  DropoutShapes(attn_weights=(4, 4), dropped=(4, 4), values=(4, 2), context_vec=(4, 2), p=p))


def test_causal_mask_draws_the_mask_of_its_size():
    for T, masked in ((1, 0), (2, 1), (3, 3), (1024, 6)):  # a min(T, 4) square: n(n-1)/2 cells above the diagonal
        dot, _, _ = case("causal_mask", T)
        assert dot.count(">−∞</FONT>") == masked


def test_newlines_in_labels_break_lines():
    labels = make_labels(SelfAttentionLabels)
    labels = SelfAttentionLabels(**{**{f.name: getattr(labels, f.name) for f in fields(labels)}, "query": "a\nb"})
    dot = self_attention(labels, SelfAttentionShapes(inputs=(2, 3), query=(3,), attn_scores=(2,),
                                                         attn_weights=(2,), context_vec=(3,)))
    assert "a<BR/>b" in dot


# --------------------------------------------------------------------------------------------------
# Inputs the diagrams refuse
# --------------------------------------------------------------------------------------------------


def test_labels_are_required_and_typed():
    with pytest.raises(TypeError):
        SelfAttentionLabels(inputs="x")  # the other fields have no default
    good = {f.name: "w" for f in fields(SelfAttentionLabels)}
    with pytest.raises(TypeError, match="query"):
        SelfAttentionLabels(**{**good, "query": 3})
    words = {f.name: "w" for f in fields(LabLabels)}
    with pytest.raises(TypeError, match="params"):
        LabLabels(**words)  # params must be a callable
    with pytest.raises(TypeError, match="source_tokens"):
        HomeLabels(**{f.name: "w" for f in fields(HomeLabels)})


def test_a_callable_label_must_return_text():
    labels = make_labels(LabLabels)
    bad = LabLabels(**{**{f.name: getattr(labels, f.name) for f in fields(labels)}, "params": lambda n: n})
    with pytest.raises(TypeError, match="must return str"):
        shapes = LabShapes(idx=(1, 2), residual=(1, 2, 32), logits=(1, 2, 16))
        lab(bad, shapes, gpt_parts(_meta_gpt(1, "learned")))


def test_shapes_take_tensor_shapes_and_refuse_non_sizes():
    s = SelfAttentionShapes(inputs=torch.zeros(6, 3).shape, query=(3,), attn_scores=[6], attn_weights=(6,),
                              context_vec=(3,))
    assert s.inputs == (6, 3) and type(s.inputs) is tuple and s.attn_scores == (6,)
    for bad in ((6.0, 3), (-1, 3), "63", (True, 3), 6):
        with pytest.raises((TypeError, ValueError)):
            SelfAttentionShapes(inputs=bad, query=(3,), attn_scores=(6,), attn_weights=(6,), context_vec=(3,))
    with pytest.raises(ValueError, match="positive int"):
        MultiHeadShapes(b=0, num_tokens=6, d_in=3, d_out=4, num_heads=2, head_dim=2)
    with pytest.raises(ValueError, match="num_heads \\* head_dim"):
        MultiHeadShapes(b=2, num_tokens=6, d_in=3, d_out=5, num_heads=2, head_dim=2)


def test_shape_text_prints_like_python():
    for shape in [(), (6,), (6, 3), (1, 4, 5, 8)]:
        assert shape_text(shape) == str(tuple(shape))
    assert shape_text(torch.zeros(2, 6, 4).shape) == "(2, 6, 4)"


def test_unknown_choices_raise():
    dot_args = case("self_attention", 2)
    assert dot_args[0]
    labels = make_labels(SelfAttentionLabels)
    shapes = SelfAttentionShapes(inputs=(2, 3), query=(3,), attn_scores=(2,), attn_weights=(2,), context_vec=(3,))
    with pytest.raises(ValueError, match="rankdir"):
        self_attention(labels, shapes, rankdir="sideways")
    assert 'rankdir="LR"' in self_attention(labels, shapes, rankdir="LR")
    pos = PositionalEncodingsShapes(idx=(1, 2), tok_emb=(1, 2, 8), x=(1, 2, 8), q=(1, 2, 2, 4), k=(1, 2, 2, 4),
                                      attn_scores=(1, 2, 2, 2))
    with pytest.raises(ValueError, match="pos_encoding"):
        positional_encodings(make_labels(PositionalEncodingsLabels), pos, "no-such-encoding")
    with pytest.raises(ValueError, match="bias"):
        positional_encodings(make_labels(PositionalEncodingsLabels), pos, "alibi")
    with pytest.raises(ValueError, match="pos_table"):
        positional_encodings(make_labels(PositionalEncodingsLabels), pos, "learned")
    with pytest.raises(ValueError, match="rope"):
        positional_encodings(make_labels(PositionalEncodingsLabels), pos, "rope")
    with pytest.raises(ValueError, match="source token"):
        home(make_labels(HomeLabels, tokens=2),
               HomeShapes(encoder_states=(3, 4), hidden_state=(4,), attn_weights=(3,), context_vec=(4,)))


# --------------------------------------------------------------------------------------------------
# The GPT's parts
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [e.key for e in ENCODINGS])
@pytest.mark.parametrize("n_layer", [1, 8])
def test_gpt_parts_add_up_and_follow_the_layer_formulas(kind, n_layer):
    model = _meta_gpt(n_layer, kind)
    parts = gpt_parts(model)
    n, V = model.config.n_embd, model.config.vocab_size
    assert parts.total == config_params(model.config) == count_params(model)
    assert parts.n_layer == n_layer and parts.pos_encoding == kind
    assert parts.attn == 4 * n * n + 4 * n  # qkv n→3n and proj n→n, with biases
    assert parts.mlp == 8 * n * n + 5 * n  # fc n→4n and proj 4n→n, with biases
    assert parts.ln_1 == parts.ln_2 == parts.ln_f == 2 * n
    assert parts.tok_emb == parts.lm_head == V * n
    assert parts.pos_emb == (model.config.block_size * n if kind == "learned" else 0)


def test_lab_writes_each_parts_count_through_the_callers_words():
    model = _meta_gpt(2, "learned")
    parts = gpt_parts(model)
    labels = make_labels(LabLabels)
    dot = lab(labels, LabShapes(idx=(1, 5), residual=(1, 5, 32), logits=(1, 5, 16)), parts)
    visible = "\n".join(parse_dot(dot).labels)
    for n in (parts.tok_emb, parts.pos_emb, parts.attn, parts.mlp, parts.ln_f, parts.lm_head):
        assert labels.params(n) in visible
    assert labels.total(parts.total) in visible
    assert f"× {parts.n_layer}" in visible


# --------------------------------------------------------------------------------------------------
# Rendering with Graphviz, as the app does (ui.diagram.svg_of)
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_graphviz_renders_each_diagram_without_warnings(name):
    """Debian's graphviz (installed by ``make run``) draws each diagram without a warning, and labels holding
    markup, quotes and brackets (TRICKY) arrive as text: no element, no image, no file read."""
    assert shutil.which("dot"), "install Debian's graphviz (make run does)"
    dot, _, _ = case(name, 1024)
    run = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    svg = svg_of(dot)  # the app's own call
    assert svg is not None and svg.lstrip().startswith("<?xml") and "白日依山尽" in svg
    assert "&lt;B&gt;" in svg and "<B>" not in svg and "<image" not in svg


# --------------------------------------------------------------------------------------------------
# Palette
# --------------------------------------------------------------------------------------------------

ROLES = ("QUERY", "KEY", "VALUE", "ATTN_SCORES", "ATTN_WEIGHTS", "MASK", "CONTEXT", "RESIDUAL", "DROPOUT", "POSITION",
         "ALTERNATIVE")
OKABE_ITO = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}

# Machado, Oliveira & Fernandes (2009), severity 1, applied to linear RGB.
CVD = {
    "protanopia": [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
    "deuteranopia": [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
    "tritanopia": [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]],
}


def _linear(colour: str) -> np.ndarray:
    v = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(v <= 0.04045, v / 12.92, ((v + 0.055) / 1.055) ** 2.4)


def _lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of a linear-RGB colour."""
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ np.clip(rgb, 0, 1)
    t = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_roles_have_distinct_hex_colours_mostly_okabe_ito():
    colours = {name: getattr(P, name) for name in ROLES}
    assert all(re.fullmatch(r"#[0-9A-F]{6}", c) for c in colours.values())
    assert len(set(colours.values())) == len(colours)
    assert sum(c in OKABE_ITO for c in colours.values()) >= 8
    assert P.NEG_INF == P.MASK


@pytest.mark.parametrize("deficiency", sorted(CVD))
def test_roles_stay_apart_for_colour_blind_readers(deficiency):
    m = np.array(CVD[deficiency])
    seen = {name: _lab(m @ _linear(getattr(P, name))) for name in ROLES}
    worst = min((float(np.linalg.norm(seen[a] - seen[b])), a, b) for a, b in itertools.combinations(ROLES, 2))
    assert worst[0] > 12, worst  # CIE76 ΔE; about 2.3 is "just noticeable", the Okabe–Ito pairs keep ≥ 14
    ends = [_lab(m @ _linear(c)) for c in (P.SIGNED_SCALE[0][1], P.SIGNED_SCALE[-1][1])]
    assert np.linalg.norm(ends[0] - ends[1]) > 30


def test_filled_boxes_keep_text_readable():
    for name in ROLES:
        fill = P.lighten(getattr(P, name), FILL_LIGHTEN)
        assert P.contrast_ratio(fill, P.text_colour(fill)) >= 4.5, name


def test_scales_run_from_0_to_1_and_plotly_accepts_them():
    for scale in (P.WEIGHTS_SCALE, P.SIGNED_SCALE):
        positions = [pos for pos, _ in scale]
        assert positions[0] == 0.0 and positions[-1] == 1.0 and positions == sorted(positions)
        go.Heatmap(z=[[0.0, 1.0]], colorscale=scale)  # raises on an invalid scale
    assert P.WEIGHTS_SCALE[0][1] == P.PAPER and P.WEIGHTS_SCALE[-1][1] == P.ATTN_WEIGHTS
    assert P.SIGNED_SCALE[len(P.SIGNED_SCALE) // 2] == (0.5, P.PAPER) and P.SIGNED_SCALE[-1][1] == P.ATTN_SCORES


def test_colour_helpers():
    assert P.lighten("#000000", 1.0) == "#FFFFFF" and P.darken("#FFFFFF", 1.0) == "#000000"
    assert P.mix("#000000", "#FFFFFF", 0.5) == "#808080"
    assert P.contrast_ratio("#000000", "#FFFFFF") == pytest.approx(21.0)
    assert P.text_colour("#000000") == P.PAPER and P.text_colour("#FFFFFF") == P.INK
    with pytest.raises(ValueError):
        P.lighten("blue", 0.5)
    with pytest.raises(ValueError):
        P.mix("#000000", "#FFFFFF", 1.5)
