"""AppTest: page 7 (views/positional_encodings.py) shows the permutation sweep and follows every control."""

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from engine import chapter
from engine import gpt as G
from engine import positions as P
from engine.checkpoint import save_checkpoint
from engine.diagrams import core as D
from engine.sections import positional_encodings as sections
from engine.tokenizer import CharTokenizer
from tests.plotly_json import ROOT, badges, captions, figures, open_page, texts
from ui import positions as words
from ui.i18n import TRANSLATED, translations
from ui.numbers import integer, percent, sci, seq

PAGE = "views/positional_encodings.py"
PAGE_TIMEOUT = 120


def msg(msgid: str, lang: str = "en", **values) -> str:
    """A message of the page as the reader sees it in ``lang``."""
    return translations(lang).gettext(msgid).format(**values)


def head(msgid: str, lang: str = "en") -> str:
    """The text of ``msgid`` before its first placeholder (to find a line whose numbers the test reads)."""
    return translations(lang).gettext(msgid).split("{", 1)[0]


def starting(at, prefix):
    found = [t for t in texts(at) if t.startswith(prefix)]
    assert found, f"no markdown starting with {prefix!r}"
    return found[0]


def chart(at, key):
    charts = at.get("plotly_chart")
    index = [i for i, c in enumerate(charts) if c.proto.id.endswith(key) or key in c.proto.id]
    assert index, f"no chart with key {key}"
    return figures(at)[index[0]]


def spec(at, key) -> str:
    """The Plotly JSON sent for the chart with ``key``, as sent."""
    return next(c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith(key))


def has_chart(at, key) -> bool:
    return any(key in c.proto.id for c in at.get("plotly_chart"))


def numbers_after_equals(line: str) -> list[float]:
    """The number after each "= " of a line like "a = 1.0e-05 · b = 3.0e-04" (what is not a number is skipped)."""
    found = []
    for part in line.split(" · "):
        word = part.split("= ", 1)[1].split(" ")[0].rstrip(":,") if "= " in part else ""
        try:
            found.append(float(word))
        except ValueError:
            continue
    return found


SPREAD_LINE = ("largest spread along a diagonal = {spread} · max |scores − shifted scores| = {diff} · float32 "
               "rounding of these scores (ε × largest |q|·|k|) = {level}")
#: The encodings' names as the page shows them (message ids of ui.positions), by the code's keys.
NAMES = {enc.key: words.NAMES[enc] for enc in P.ENCODINGS}
EXERCISE_LINE = ("The lesson's exercise 1 · 3 layers, no position embedding (n_embd {n_embd}, seed {seed}): "
                 "max |Δ logits| = **{diff}**")


def names(lang: str = "en") -> tuple[str, ...]:
    """The encodings' names in ``lang``, in the registry's order."""
    return tuple(msg(NAMES[e], lang) for e in sections.ENCODING_KEYS)



def perm_table(at, lang: str = "en"):
    """The permutation experiment's table (a static table, the page's first): index n_layer, one column per
    encoding, named in ``lang`` on the page and by the code's keys here."""
    table = at.table[0].value.set_index("n_layer")
    assert tuple(table.columns) == names(lang)
    return table.rename(columns=dict(zip(names(lang), sections.ENCODING_KEYS, strict=True)))


def table_with(at, column: str):
    """The static table that has ``column``."""
    found = [t.value for t in at.table if column in t.value.columns]
    assert len(found) == 1, column
    return found[0]

def test_permutation_figure_has_one_step_per_layer_and_the_lessons_magnitudes(at):
    fig = chart(at, "pe_perm_chart")
    steps = fig["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == ["1", "2", "3", "4", "5", "6"]
    assert len(fig["data"]) == 12 and fig["layout"]["yaxis"]["type"] == "log"  # bars and rounding line per step
    first = fig["data"][0]
    # the encodings by their names in the reader's language, the values in the reader's number format (d3)
    assert tuple(first["x"]) == names() and fig["layout"]["separators"] == ".,"
    one = dict(zip(sections.ENCODING_KEYS, np.asarray(first["y"], dtype=float), strict=True))
    two = dict(zip(sections.ENCODING_KEYS, np.asarray(fig["data"][2]["y"], dtype=float), strict=True))
    sweep = sections.permutation_by_layers(n_embd=32, seed=0)
    # the dotted line: float32's rounding of these very logits, computed (eps x max |logit|), not a typed 1e-6;
    # it is the largest of the encodings' own levels, and its legend says so (issue: a badge's own level differs)
    level = sweep.rounding_level(1)
    assert np.asarray(fig["data"][1]["y"], dtype=float) == pytest.approx([level] * len(sections.ENCODING_KEYS))
    scale = sweep.table.query("n_layer == 1")["logit_scale"].max()
    assert level == pytest.approx(torch.finfo(torch.float32).eps * scale)
    own = [sweep.rounding_level(1, e) for e in sections.ENCODING_KEYS]
    assert level == max(own) and sweep.rounding_level(1, "none") <= level
    assert 1e-9 < level < 1e-7 and fig["data"][1]["name"] == msg("largest float32 rounding: {level}",
                                                                level=sci(level, lang="en"))
    for s, n_layer in enumerate(sweep.by_layer.index):  # every step's line: its layer count's largest level
        line = fig["data"][2 * s + 1]
        levels = [sweep.rounding_level(n_layer, e) for e in sections.ENCODING_KEYS]
        assert float(line["y"][0]) == pytest.approx(max(levels)) and line["name"] == msg(
            "largest float32 rounding: {level}", level=sci(max(levels), lang="en"))
    # the text under the table says the line is the largest level and the badges use their encoding's own
    assert any(msg("Each encoding's float32 rounding level is ε × max|logits| of its own two logit vectors, with "
                   "ε = 2⁻²³ ≈ {eps}, the spacing of float32 numbers near 1; the dotted line is the largest of these "
                   "levels at each layer count, and each badge below measures a difference against its own "
                   "encoding's level, which can lie a little under the line. A difference within {factor} times "
                   "its level is counted as rounding (the same terms added in another order), one above {real} "
                   "times it as real.", eps=sci(sections.FLOAT32_EPS, lang="en"),
                   factor=integer(sections.ROUNDING_FACTOR, "en"),
                   real=integer(sections.DIFFERENCE_FACTOR, "en")) == m.value
               for m in at.markdown)
    assert one["none"] <= sections.ROUNDING_FACTOR * level
    assert all(one[e] > sections.DIFFERENCE_FACTOR * level for e in ("learned", "sinusoidal", "rope"))
    assert all(v > 1e-4 for v in two.values())
    # each step shows exactly its own bars and line
    for s, step in enumerate(steps):
        assert step["args"][0]["visible"] == [i // 2 == s for i in range(12)]
    assert fig["data"][0]["visible"] is True and fig["data"][2]["visible"] is False
    assert chapter.LESSON_LINE in fig["layout"]["title"]["text"]
    assert chapter.PERMUTED_LINE in steps[1]["args"][1]["title.text"]
    table = perm_table(at)
    assert tuple(table.columns) == sections.ENCODING_KEYS and list(table.index) == [1, 2, 3, 4, 5, 6]
    assert table.loc[1, "none"] == pytest.approx(one["none"])
    green = " ".join(badges(at, "green"))
    assert msg("1 layer without positions: {diff}, {ratio} × the rounding level of its logits ({level}): float "
               "rounding, as in the lesson", diff=sci(sweep.diff(1, "none"), lang="en"),
               ratio=sci(sweep.ratio(1, "none"), lang="en"),
               level=sci(sweep.rounding_level(1, "none"), lang="en")) in green
    assert len(badges(at, "green")) >= 3 and not badges(at, "red")
    exercise = starting(at, head(EXERCISE_LINE))
    assert f"**{sci(table.loc[3, 'none'], lang='en')}**" in exercise and table.loc[3, "none"] > 1e-4


def test_the_lessons_numbers_are_compared_by_orders_of_magnitude(at):
    """Issue 36: the lesson's 1.9e-2 beside the app's two-layer value is never called equal: each of its four numbers
    is shown beside the app's with their ratio, and the badge counts those within the stated factor."""
    lesson = table_with(at, msg("here / lesson"))
    sweep = sections.permutation_by_layers(n_embd=32, seed=0)
    rows = sections.lesson_comparison(sweep)
    assert list(lesson["n_layer"]) == [r.n_layer for r in rows] and len(rows) == 4
    # each "here" cell is its own encoding's cell of the sweep, with the digits that tell a row's values apart: at two
    # layers "none" (6.0986e-3) and "learned" (6.1262e-3) both read 0.0061 with one digit, 0.00610 and 0.00613 here
    digits = sections.comparison_digits(rows)
    assert list(lesson[msg("here")]) == [sci(r.app, digits, lang="en") for r in rows]
    cells = zip(lesson["n_layer"], lesson[msg("encoding")], lesson[msg("here")], strict=True)
    here = {(n_layer, encoding): text for n_layer, encoding, text in cells}
    assert here[(2, msg(NAMES["none"]))] == "0.00610" and here[(2, msg(NAMES["learned"]))] == "0.00613"
    caption = [c.value for c in at.caption if c.value.startswith(head("lesson: its own model"))]
    assert len(caption) == 1 and "to 3 significant digits, as many as tell apart the values of one layer count" in \
        caption[0] and digits + 1 == 3 and "✓: of the same order, within a factor of 10 either way" in caption[0]
    assert list(lesson[msg("lesson")]) == [sci(r.lesson, lang="en") for r in rows]
    # the ratio with its verdict (✓: within the factor), one column: the table keeps within a phone's width
    assert list(lesson[msg("here / lesson")]) == [f"{sci(r.factor, lang='en')} {'✓' if r.same_order else '✗'}"
                                                 for r in rows]
    assert "0.019" in list(lesson[msg("lesson")]) and "0.015" in list(lesson[msg("lesson")])
    badge = msg("all {n} of the lesson's numbers: the app's value is of the same order of magnitude (within a factor "
                "of {factor} either way), not the same digits", n=4, factor="10")
    assert badge in " ".join(badges(at, "green"))
    zeroed = msg("the zeroed table behaves as “none”: rounding at 1 layer, clearly non-zero at 2")
    assert zeroed in " ".join(badges(at, "green"))


def test_the_zeroed_tables_line_names_its_own_rounding_level_and_the_charts(at):
    """The zeroed model's ratios are to its own logits' level (3.3E-8 at one layer: 3.0E-8 is 0.92 × it), which is not
    the chart's dotted line (2.8E-8, the largest level of the chart's five models): the line writes both."""
    sweep = sections.permutation_by_layers(n_embd=32, seed=0)
    zeroed = sections.zeroed_table_sweep(n_embd=32, seed=0)
    assert zeroed.rounding_level(1, "learned") > sweep.rounding_level(1)  # this model's logits are larger
    expected = msg(
        "The lesson's way, `model.pos_emb.weight.zero_()`, on the learned model of the same seed: 1 layer {one}, "
        "{one_ratio} × this model's own rounding level ({one_level}); 2 layers {two}, {two_ratio} × its level "
        "({two_level}). These levels are ε × max|logits| of this model's own two logit vectors; it is not one of the "
        "chart's {n} models, whose dotted line ({line} at 1 layer) is the largest of their levels. Its other weights "
        "are another random draw than the “none” model's, so the numbers differ, but both models have no position "
        "information.", one=sci(zeroed.diff(1, "learned"), lang="en"), one_ratio=sci(zeroed.ratio(1, "learned"),
                                                                                   lang="en"),
        one_level=sci(zeroed.rounding_level(1, "learned"), lang="en"), two=sci(zeroed.diff(2, "learned"), lang="en"),
        two_ratio=sci(zeroed.ratio(2, "learned"), lang="en"),
        two_level=sci(zeroed.rounding_level(2, "learned"), lang="en"), n=5,
        line=sci(sweep.rounding_level(1), lang="en"))
    assert expected in texts(at)
    # the two levels the reader compared (the one-layer differences are rounding residue, which the thread count moves)
    assert "own rounding level (3.3E-8)" in expected and "(2.8E-8 at 1 layer)" in expected
    # the chart's legend writes the same line level
    assert chart(at, "pe_perm_chart")["data"][1]["name"] == msg("largest float32 rounding: {level}",
                                                                level=sci(sweep.rounding_level(1), lang="en"))


@pytest.mark.parametrize("lang", TRANSLATED)
def test_runs_in_french_and_german_with_the_same_green_checks(at, lang):
    other = AppTest.from_file(str(ROOT / PAGE), default_timeout=PAGE_TIMEOUT)
    other.session_state["lang"] = lang
    other.run()
    assert not other.exception
    assert len(badges(other, "green")) == len(badges(at, "green")) and not badges(other, "red")
    assert perm_table(other, lang).equals(perm_table(at))
    assert len(other.get("plotly_chart")) == len(at.get("plotly_chart"))


@pytest.mark.parametrize("n_embd, seed", [(128, 0), (64, 3)])
def test_permutation_controls(at, n_embd, seed):
    before = perm_table(at).copy()
    others = ("pe_tables_untrained", "pe_tables_sinusoidal", "pe_rope_pairs", "pe_scores_0", "pe_scores_1")
    others_before = [spec(at, key) for key in others]
    at.selectbox(key="pe_n_embd").set_value(n_embd).run()
    at.selectbox(key="pe_seed").set_value(seed).run()
    assert not at.exception
    table = perm_table(at)
    assert not table.equals(before)
    # sections 3-6 draw their own seeded tables and vectors: the experiment's seed leaves them as they were
    assert [spec(at, key) for key in others] == others_before
    assert table.loc[1, "none"] < 1e-5 and (table.loc[2:, :] > 1e-4).all().all()
    exercise = starting(at, head(EXERCISE_LINE))
    assert exercise == msg(EXERCISE_LINE, n_embd=n_embd, seed=seed, diff=sci(table.loc[3, "none"], lang="en"))


def test_visibility_picture(at):
    fig = chart(at, "pe_visibility")
    heat, bars = fig["data"]
    assert np.array_equal(np.asarray(heat["z"]), np.tril(np.ones((5, 5))))
    assert heat["text"][1][:2] == ["白<br>山", "日<br>依"] and heat["text"][1][2] == ""
    assert list(np.asarray(bars["x"])) == [1, 2, 3, 4, 5]
    # only position 4 has the same own character and the same visible characters in both lines (position 3 sees
    # the same four characters, but its own is 山 in one line and 白 in the other)
    vis = sections.causal_visibility()
    marked = [label.endswith("✓") for label in fig["layout"]["yaxis"]["ticktext"]]
    assert msg("same inputs") in fig["layout"]["annotations"][0]["text"]
    assert marked == vis.same_inputs.tolist() == [False, False, False, False, True]
    expected = msg("visible tokens per position = {counts} · the same own character and the same visible characters "
                   "in both lines {where}", counts=seq([1, 2, 3, 4, 5], 0, lang="en"), where="at position 4")
    assert expected in texts(at) and "[1, 2, 3, 4, 5]" in expected
    # the sci first-layer differences, read from the same computation: positions 0-3 differ, 4 agrees
    diffs = sections.first_layer_differences(n_embd=32, n_head=4, seed=0).diff
    line = starting(at, head("After the first layer without positions (n_embd {n_embd}, seed {seed}), the two lines' "
                             "outputs differ by {low} to {high} {positions}"))
    assert sci(float(diffs[:4].min()), lang="en") in line and sci(float(diffs[:4].max()), lang="en") in line
    assert sci(float(diffs[4]), lang="en") in line and "at positions 0, 1, 2, and 3" in line
    # the lesson counts from 1 (2, 3 and 4): the page says so, and why position 0 differs too
    lesson = starting(at, head("The lesson counts positions from 1 and names {lesson}"))
    assert "2, 3, and 4" in lesson and "1, 2, and 3" in lesson and "at position 0" in lesson and "白/山" in lesson
    agree = msg("the first layer's outputs agree exactly where the inputs are the same")
    assert agree in " ".join(badges(at, "green"))


def test_tables_follow_block_size_and_width(at):
    shipped = sections.shipped_learned_table()
    panels = 3 if shipped is not None and shipped.table is not None else 2
    tables = [c for c in at.get("plotly_chart") if "pe_tables_" in c.proto.id]
    assert len(tables) == panels and np.asarray(chart(at, "pe_tables_untrained")["data"][0]["z"]).shape == (128, 128)
    # one chart per column: the table (data[0]) on top of its similarity (data[1])
    assert [len(figures(at)[i]["data"]) for i, c in enumerate(at.get("plotly_chart")) if "pe_tables_" in c.proto.id] \
        == [2] * panels and not has_chart(at, "pe_similarity")
    at.select_slider(key="pe_block").set_value(32).run()
    at.slider(key="pe_width").set_value(7).run()
    assert not at.exception
    untrained = np.asarray(chart(at, "pe_tables_untrained")["data"][0]["z"])
    sinusoidal = np.asarray(chart(at, "pe_tables_sinusoidal")["data"][0]["z"])
    assert untrained.shape == (32, 7) and sinusoidal.shape == (32, 7)
    assert np.allclose(sinusoidal[0], [0, 1, 0, 1, 0, 1, 0])
    sim = chart(at, "pe_tables_untrained")["data"][1]
    assert np.asarray(sim["z"]).shape == (32, 32)
    row_line = head("sinusoidal row 0 = {row}{more}")
    odd_line = starting(at, f"{row_line}[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0] · ")
    odd_spread = numbers_after_equals(odd_line)[-1]
    assert 0 < odd_spread < 1e-3  # the unpaired sine column adds a small absolute-position term
    assert odd_line.endswith(msg("a small dependence on the positions themselves (at most {limit}, a hundredth of a "
                                 "similarity's range)", limit="0.02"))
    at.slider(key="pe_width").set_value(8).run()
    even_line = starting(at, f"{row_line}[0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0] · ")
    assert numbers_after_equals(even_line)[-1] < 1e-5  # sin·sin + cos·cos = cos of the difference
    assert even_line.endswith(msg("its diagonals are constant up to float32 rounding: only the distance between two "
                                  "positions matters"))
    at.slider(key="pe_width").set_value(1).run()  # one sine column: a checkerboard, the largest spread there is
    one_line = starting(at, f"{row_line}[0.0] · ")
    assert numbers_after_equals(one_line)[-1] == 2 and one_line.endswith(msg(
        "a large dependence on the positions themselves (more than {limit}, a hundredth of a similarity's range)",
        limit="0.02"))
    std = numbers_after_equals(starting(at, head("untrained table: std = {std} (init std {init})")))[0]
    assert 0.015 < std < 0.025  # normal(0, 0.02) at init, 32 x 8 samples
    if shipped is None:
        assert [i.value for i in at.info][0] == msg(
            "No trained model ships with this copy of the app ({name}), so only the untrained table is shown. "
            "Train one in the GPT lab with learned positions to compare.", name=sections.SHIPPED_MODEL.name)


def test_rope_controls(at):
    at.slider(key="pe_head_dim").set_value(8).run()
    at.slider(key="pe_position").set_value(10).run()
    assert not at.exception
    pairs = table_with(at, "i")
    assert list(pairs["i"]) == [0, 1, 2, 3]
    assert pairs["θ_i"].tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001])
    assert pairs["m·θ_i"].tolist() == pytest.approx(
        [np.degrees(10.0) % 360, np.degrees(1.0), np.degrees(0.1), np.degrees(0.01)], abs=1e-4)
    a, b = numbers_after_equals(starting(at, head("‖v‖ at position 0 = {first} · at position {position} = {norm}")))
    assert a == b
    fig = chart(at, "pe_rope_pairs")
    assert len(fig["data"]) == 12  # 4 pairs x (circle, trail, arrow)
    trail = fig["data"][1]
    assert len(np.asarray(trail["x"])) == 11  # positions 0..10
    drawn_note = head("The figure draws {drawn} of the {n} pairs")
    assert not any(c.value.startswith(drawn_note) for c in at.caption)


#: What a figure of a cache bounded by ``ui.page.SMALL_FIGURE_ENTRIES`` may weigh, as JSON: 64 of them hold a few MB.
SMALL_FIGURE_BYTES = 80_000


def test_the_small_figure_caches_hold_small_figures_at_the_controls_extremes(at):
    """Sections 5-6 keep 64 figures per cache (``ui.page.SMALL_FIGURE_ENTRIES``): at the largest head_dim, the last
    position and the most positions T, each of their charts stays under SMALL_FIGURE_BYTES of JSON."""
    at.slider(key="pe_head_dim").set_value(64).run()
    at.slider(key="pe_position").set_value(127).run()
    at.slider(key="pe_score_T").set_value(16).run()
    assert not at.exception
    keys = ["pe_rope_pairs", "pe_scores_0", "pe_scores_1", *(f"pe_alibi_{h}" for h in range(4))]
    sizes = {key: len(spec(at, key)) for key in keys}
    assert all(size < SMALL_FIGURE_BYTES for size in sizes.values()), sizes
    assert len(np.asarray(chart(at, "pe_rope_pairs")["data"][1]["x"])) == 128  # the trail: positions 0 … 127


@pytest.mark.parametrize("head_dim, drawn", [(16, 8), (64, 8), (2, 1)])
def test_rope_figure_draws_every_pair_or_says_which(at, head_dim, drawn):
    """Page 7 section 5: the figure draws all pairs the table lists, or a caption names the ones it draws."""
    at.slider(key="pe_head_dim").set_value(head_dim).run()
    assert not at.exception
    pairs = head_dim // 2
    assert len(chart(at, "pe_rope_pairs")["data"]) == 3 * drawn and len(table_with(at, "i")) == pairs
    shown = sections.shown_pairs(pairs)
    note = [c.value for c in at.caption if c.value.startswith(head("The figure draws {drawn} of the {n} pairs"))]
    if drawn == pairs:
        assert not note
    else:
        assert note == [msg("The figure draws {drawn} of the {n} pairs, spread evenly from the fastest to the slowest "
                            "(pairs {pairs}); the table lists all {n}.", drawn=drawn, n=pairs,
                            pairs=", ".join(map(str, shown[:-1])) + ", and " + str(shown[-1]))]


def test_odd_head_dim_says_what_the_control_needs_and_keeps_the_rest_working(at):
    at.slider(key="pe_head_dim").set_value(7).run()
    assert not at.exception and not at.error
    warning = msg("head_dim {head_dim} is odd: RoPE rotates pairs of dimensions, so it needs an even head_dim. "
                  "The rotation below and RoPE's score matrix wait for an even value; the sinusoidal score "
                  "matrix works with any head_dim.", head_dim=7)
    assert [w.value for w in at.warning] == [warning]
    assert at.slider(key="pe_position").disabled and not has_chart(at, "pe_rope_pairs")
    assert at.slider(key="pe_shift").disabled and not has_chart(at, "pe_scores")
    assert has_chart(at, "pe_perm_chart") and has_chart(at, "pe_tables")
    at.radio(key="pe_score_mode").set_value("sinusoidal").run()
    assert not at.exception and not at.slider(key="pe_shift").disabled
    fig = chart(at, "pe_scores_0")
    assert np.asarray(fig["data"][0]["z"], dtype=float).shape == (8, 8)
    at.slider(key="pe_head_dim").set_value(8).run()
    assert not at.warning and not at.slider(key="pe_position").disabled and has_chart(at, "pe_rope_pairs")


def test_score_matrix_constant_along_diagonals_and_shift(at):
    at.slider(key="pe_score_T").set_value(6).run()
    at.slider(key="pe_shift").set_value(1000).run()
    assert not at.exception
    first, second = (np.asarray(chart(at, f"pe_scores_{i}")["data"][0]["z"], dtype=float) for i in (0, 1))
    # the two panels share one colour range
    assert chart(at, "pe_scores_0")["data"][0]["zmax"] == chart(at, "pe_scores_1")["data"][0]["zmax"]
    assert first.shape == (6, 6)
    for offset in range(-5, 6):
        d = np.diagonal(first, offset)
        assert d.max() - d.min() < 1e-4
    assert np.abs(first - second).max() < 1e-3
    spread, shift_diff, level = numbers_after_equals(starting(at, head(SPREAD_LINE)))
    assert spread <= sections.ROUNDING_FACTOR * level and shift_diff <= sections.ROUNDING_FACTOR * level
    green = " ".join(badges(at, "green"))
    assert msg("constant along every diagonal, within {factor} × the rounding level: a score depends on m − n only",
               factor="32") in green
    assert msg("unchanged by the shift of {shift}, within {factor} × the rounding level", shift="1,000",
               factor="32") in green
    at.slider(key="pe_shift").set_value(0).run()  # a shift of 0 compares the matrix with itself: nothing tested
    nothing = msg("nothing tested by the shift: a shift of 0 compares the matrix with itself")
    assert nothing in " ".join(badges(at, "gray"))
    assert head("unchanged by the shift of {shift}") not in " ".join(badges(at, "green"))
    at.slider(key="pe_shift").set_value(1000).run()
    at.radio(key="pe_score_mode").set_value("sinusoidal").run()
    assert not at.exception
    spread, shift_diff, level = numbers_after_equals(starting(at, head(SPREAD_LINE)))
    assert spread > 0.1 and shift_diff > 0.1
    gray = " ".join(badges(at, "gray"))
    assert msg("not constant along its diagonals: the scores depend on the absolute positions") in gray
    assert msg("changed by the shift of {shift}: the scores depend on the absolute positions", shift="1,000") in gray


@pytest.mark.parametrize("T, learned_runs", [(24, False), (16, True), (64, False), (1, True)])
def test_past_block_size(at, T, learned_runs):
    at.slider(key="pe_past_T").set_value(T).run()
    assert not at.exception and not at.error  # the learned table's limit is the demonstration, not a failure
    table = at.table[-1].value
    column = msg("position encoding (pos_encoding)")
    assert tuple(table[column]) == names()
    table[column] = sections.ENCODING_KEYS
    ran = dict(zip(table[column], table[msg("ran")], strict=True))
    assert ran == {"none": True, "learned": learned_runs, "sinusoidal": True, "rope": True, "alibi": True}
    by_encoding = table.set_index(column)
    assert by_encoding.loc["rope", msg("logits shape")] == f"(1, {T}, 16)"
    assert by_encoding.loc["rope", msg("what happened")] == msg("ran on {T} tokens", T=T)
    if learned_runs:
        assert [s.value for s in at.success] == [msg("All {n} encodings ran on {T} tokens (within block_size "
                                                     "{block_size}).", n=5, T=T, block_size=16)]
        assert not any(x.startswith(head("**Past the trained length.**")) for x in texts(at))
    else:
        assert by_encoding.loc["learned", msg("what happened")] == msg(
            "no row for positions {first} … {last}: the learned table has {rows} rows", first=16, last=T - 1, rows=16)
        assert len(at.info) >= 1 and not at.success
        assert any(c.value.startswith(f"ValueError: sequence of {T} tokens is longer than block_size 16")
                   for c in at.code)  # the model's own error, shown as code
        # word for word the engine's message (its msgid is that message, so a reader reads it in their language)
        past = sections.run_past_block_size(T)
        run = next(r for r in past.runs if not r.ran)
        assert f"ValueError: {run.error}" in [c.value for c in at.code]
        # what ALiBi does past the trained length, written from the weights of the models that ran
        line = starting(at, head("**Past the trained length.**"))
        alibi = past.run("alibi").far_weight
        assert percent(float(alibi[0]), 1, lang="en") in line and percent(float(alibi[-1]), 1, lang="en") in line
        assert percent(float(past.run("none").far_weight.mean()), 1, lang="en") in line and "1/4" in line


def test_past_block_size_error_is_in_the_readers_language():
    app = open_page(PAGE, PAGE_TIMEOUT, lang="fr")
    assert not app.exception
    codes = [c.value for c in app.code if c.value.startswith("ValueError: ")]
    assert codes == ["ValueError: " + msg(
        "sequence of {T} tokens is longer than block_size {block_size}: the learned position table has no row for "
        "positions {first}..{last}; keep the last {block_size} tokens (generate crops the prompt this way)", "fr",
        T=24, block_size=16, first=16, last=23)]
    assert "plus longue que block_size 16" in codes[0]


def test_shipped_model_table_is_shown_when_present(tmp_path, monkeypatch):
    torch.manual_seed(0)
    tokenizer = CharTokenizer("白日依山尽黄河入海流")
    model = G.GPT(G.GPTConfig(vocab_size=tokenizer.vocab_size, block_size=40, n_embd=16, n_head=2, n_layer=1))
    save_checkpoint(tmp_path / "model", model, tokenizer)
    monkeypatch.setattr(sections, "SHIPPED_MODEL", tmp_path / "model")
    app = open_page(PAGE, PAGE_TIMEOUT)
    assert not app.exception
    shapes = [np.asarray(chart(app, f"pe_tables_{name}")["data"][0]["z"]).shape
              for name in ("untrained", "trained", "sinusoidal")]
    assert shapes == [(128, 128), (40, 16), (128, 128)]
    assert np.asarray(chart(app, "pe_tables_trained")["data"][1]["z"]).shape == (40, 40)  # its similarity under it
    trained = np.asarray(chart(app, "pe_tables_trained")["data"][0]["z"])
    assert np.allclose(trained, model.pos_emb.weight.detach().numpy(), atol=1e-6)
    shown = starting(app, head("trained table: std = {std}"))
    assert "(40, 16)" in shown and " 32 " in shown


# --- the diagram ---------------------------------------------------------------------------------------


def diagram(at, i: int = 0) -> str:
    """The DOT source of the page's ``i``-th graphviz chart."""
    charts = at.get("graphviz_chart")
    assert len(charts) > i
    return charts[i].proto.spec


def entry_specs(at) -> list[str]:
    charts = at.get("graphviz_chart")
    assert len(charts) == len(P.ENCODINGS)  # one per encoding of the registry
    return [c.proto.spec for c in charts]


@pytest.mark.parametrize("n_embd", [32, 128])
def test_diagrams_follow_n_embd(at, n_embd):
    T = len(chapter.LESSON_LINE)
    before = entry_specs(at)
    assert all(D.shape_text((1, T, 32)) in s for s in before)
    at.selectbox(key="pe_n_embd").set_value(n_embd).run()
    assert not at.exception
    none, learned, sinusoidal, rope, alibi = entry_specs(at)
    head_dim = n_embd // 4
    assert D.shape_text((4, T, T)) in alibi and "−s_h·(i − j)" in alibi and "−s_h" not in rope
    assert not any("m_h" in spec for spec in (none, learned, sinusoidal, rope, alibi))  # m is RoPE's position
    for spec in (none, learned, sinusoidal, rope, alibi):
        assert D.shape_text((1, T, n_embd)) in spec
        assert D.shape_text((1, 4, T, head_dim)) in spec and D.shape_text((1, 4, T, T)) in spec
    assert D.shape_text((T, n_embd)) in learned and D.shape_text((T, n_embd)) in sinusoidal
    cos, _sin = P.rope_cos_sin(T, head_dim)
    assert D.shape_text(tuple(cos.shape)) in rope and "cos/sin" in rope
    assert "cos/sin" not in none and D.shape_text((T, n_embd)) not in none
    # the projections box names the lesson's one qkv layer with the size of the module that ran
    qkv = G.GPT(G.GPTConfig(vocab_size=5, block_size=T, n_embd=n_embd, n_head=4, n_layer=1)).blocks[0].attn.qkv
    assert all(f"qkv = nn.Linear({qkv.in_features}, {qkv.out_features})" in spec
               for spec in (none, learned, sinusoidal, rope, alibi)) and qkv.out_features == 3 * n_embd


@pytest.mark.parametrize("lang", TRANSLATED)
def test_diagrams_build_in_french_and_german(lang):
    other = AppTest.from_file(str(ROOT / PAGE), default_timeout=PAGE_TIMEOUT)
    other.session_state["lang"] = lang
    other.run()
    assert not other.exception
    assert len(entry_specs(other)) == len(P.ENCODINGS)


@pytest.mark.parametrize("lang", ["en", "de"])
def test_every_chart_has_a_text_alternative_with_its_values(lang):
    """Issue 25: each chart's text alternative, in the reader's language, carries the values a sighted reader reads."""
    app = open_page(PAGE, PAGE_TIMEOUT, lang=lang)
    charts = app.get("plotly_chart")
    assert charts and all(c.proto.alt.strip() for c in charts)
    perm = next(c.proto.alt for c in charts if c.proto.id.endswith("pe_perm_chart"))
    table = perm_table(app, lang)
    assert sci(table.loc[1, "none"], lang=lang) in perm and sci(table.loc[2, "rope"], lang=lang) in perm
    visibility = next(c.proto.alt for c in charts if c.proto.id.endswith("pe_visibility"))
    assert "1 · 2 · 3 · 4 · 5" in visibility and visibility.rstrip(".").endswith(": 4")  # only position 4


@pytest.mark.parametrize("n_embd, seed", [(32, 0), (64, 1)])
def test_the_rope_sentence_follows_the_sweep(at, n_embd, seed):
    """Section 1: whether RoPE's one-layer difference is the smallest is read from the sweep (at n_embd 64 with
    seed 1 it is not), never written by hand."""
    at.selectbox(key="pe_n_embd").set_value(n_embd).run()
    at.selectbox(key="pe_seed").set_value(seed).run()
    assert not at.exception
    one = perm_table(at).loc[1]
    smallest = one["rope"] < min(one["learned"], one["sinusoidal"])
    said = [x for x in texts(at) if x.startswith(head("At one layer RoPE's difference is the smallest of the explicit "
                                                      "encodings here: {rope} against {others}."))]
    assert bool(said) == smallest
    assert said or any(x.startswith(head("At one layer RoPE's difference is not the smallest of the explicit "
                                         "encodings here: {rope} against {others}.")) for x in texts(at))
    assert sci(one["rope"], lang="en") in " ".join(texts(at))


def test_alibi_bias_per_head_beside_ropes_scores(at):
    """Section 6: ALiBi's bias, one heatmap per head, the slopes of the paper, −∞ above the diagonal; its badge says
    it depends on i − j only, and a shift of 0 is a grey "nothing tested"."""
    at.slider(key="pe_score_T").set_value(6).run()
    at.slider(key="pe_shift").set_value(300).run()
    assert not at.exception
    bias = sections.alibi_score_bias(4, 6, 300)
    traces = [trace for i in range(4) for trace in chart(at, f"pe_alibi_{i}")["data"]]
    panels = [np.asarray(trace["z"], dtype=float) for trace in traces]
    assert len(panels) == 4
    # one symmetric colour range, from the data drawn: it reaches head 0's −5/4 at distance 5, no cell clipped
    largest = max(float(np.nanmax(np.abs(z))) for z in panels)
    assert largest == 1.25 and all(t["zmin"] == -t["zmax"] == -largest for t in traces)
    assert all((t["colorbar"]["tickvals"][0], t["colorbar"]["tickvals"][-1]) == (-largest, largest) for t in traces)
    for h, z in enumerate(panels):
        lower = np.tril(np.ones((6, 6), dtype=bool))
        np.testing.assert_allclose(z[lower], bias.bias[h].numpy()[lower], atol=1e-4)
        assert np.isnan(z[~lower]).all()  # the causal mask's −∞: a gap
    titles = [a["text"].replace("<br>", " ") for i in range(4)
              for a in chart(at, f"pe_alibi_{i}")["layout"]["annotations"]]
    # the slope is s (m is RoPE's query position on this page)
    assert [t.split("s = ")[1].split(" ")[0] for t in titles] == ["1/4", "1/16", "1/64", "1/256"]
    assert not any("m = " in t for t in titles)
    green = " ".join(badges(at, "green"))
    assert msg("ALiBi's bias is the same at positions {first} … {last}: it depends on i − j only", first="300",
               last="305") in green
    at.slider(key="pe_shift").set_value(0).run()
    nothing = msg("nothing tested by the shift: a shift of 0 compares the bias with itself")
    assert nothing in " ".join(badges(at, "gray")) and head("ALiBi's bias is the same") not in " ".join(
        badges(at, "green"))


def test_cells_written_alike_are_said_to_be_different_models(at):
    """Issue 36: at the page's defaults, two layers give "none", "learned" and RoPE the same two significant digits
    (0.0061); a caption under the table names those rows and the precision that tells their cells apart, both
    computed from the sweep, and says nothing where every row reads apart."""
    by_layer = sections.permutation_by_layers(n_embd=32, seed=0).by_layer
    rows = [[float(v) for v in row] for row in by_layer.to_numpy()]
    alike = [int(n) for n, row in zip(by_layer.index, rows, strict=True) if len({sci(v) for v in row}) < len(row)]
    assert 2 in alike  # the reader's case: a doubt the caption must answer
    digits = sections.telling_digits(rows)
    for row in rows:  # with that precision, the different values of every row read apart
        distinct = set(row)
        assert len({f"{v:.{digits}e}" for v in distinct}) == len(distinct)
    caption = msg("Cells written alike in one row ({layers} layers) are different models whose differences agree to "
                  "two significant digits; with {digits} they read apart.",
                  layers=", ".join(integer(n) for n in alike), digits=integer(digits + 1))
    assert caption in captions(at)
    assert not any(by_layer[a].equals(by_layer[b]) for a in by_layer.columns for b in by_layer.columns if a != b)
