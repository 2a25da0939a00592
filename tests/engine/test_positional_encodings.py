"""Engine tests of section 7: the page's experiments (engine.sections.positional_encodings) and its figures."""

import inspect
import math

import numpy as np
import pandas as pd
import pytest
import torch

from engine import chapter, palette
from engine import gpt as G
from engine import positions as P
from engine.checkpoint import save_checkpoint
from engine.figures import positional_encodings as figures
from engine.sections import positional_encodings as sections
from engine.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: faster on one thread (test process only)


# --- the permutation experiment ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def permutation(one_thread):
    return sections.permutation_experiment(n_layers=range(1, 7), pos_encodings=("none", "learned"), seed=0)


def test_permutation_table_layout(permutation):
    assert list(permutation.columns) == ["n_layer", "pos_encoding", "max_abs_diff", "logit_scale", "rounding_level"]
    assert len(permutation) == 12
    assert list(permutation["n_layer"].unique()) == [1, 2, 3, 4, 5, 6]
    # the rounding level is float32's epsilon times the largest |logit| compared, so it grows with the logits
    eps = torch.finfo(torch.float32).eps
    np.testing.assert_allclose(permutation["rounding_level"], eps * permutation["logit_scale"])
    assert (permutation["logit_scale"] > 0.01).all() and (permutation["logit_scale"] < 10).all()


def _ratios(table):
    indexed = table.set_index(["n_layer", "pos_encoding"])
    return indexed["max_abs_diff"] / indexed["rounding_level"]


def test_one_layer_without_positions_cannot_tell_the_lines_apart(permutation):
    ratio = _ratios(permutation)
    assert ratio[(1, "none")] <= sections.ROUNDING_FACTOR  # float rounding only (the lesson: 3.7e-08)
    assert ratio[(1, "none")] > 0  # the reordered sum does move the last bits here: the check is not vacuous
    assert ratio[(1, "learned")] > sections.DIFFERENCE_FACTOR  # position vectors make the lines differ


def test_two_or_more_layers_leak_order_through_the_causal_mask(permutation):
    ratio = _ratios(permutation)
    for n_layer in range(2, 7):
        assert ratio[(n_layer, "none")] > sections.DIFFERENCE_FACTOR  # the lesson: 1.9e-02 at 2 layers
        assert ratio[(n_layer, "learned")] > sections.DIFFERENCE_FACTOR


def test_permutation_thresholds_for_every_encoding():
    table = sections.permutation_experiment(n_layers=(1, 2), seed=0)
    assert tuple(table["pos_encoding"].unique()) == sections.ENCODING_KEYS
    ratio = _ratios(table)
    assert ratio[(1, "none")] <= sections.ROUNDING_FACTOR
    for enc in sections.ENCODING_KEYS:
        if enc != "none":
            assert ratio[(1, enc)] > sections.DIFFERENCE_FACTOR, enc
        assert ratio[(2, enc)] > sections.DIFFERENCE_FACTOR, enc


@pytest.mark.parametrize("n_embd", [32, 64, 128])
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_thresholds_hold_for_every_size_and_seed_of_the_page(n_embd, seed):
    """The rounding factor's margin: "none" at one layer stays below it, and everything else far above the
    difference factor, at every n_embd and seed the page offers."""
    table = sections.permutation_experiment(n_layers=(1, 2), pos_encodings=("none", "rope"), seed=seed, n_embd=n_embd)
    ratio = _ratios(table)
    assert ratio[(1, "none")] <= sections.ROUNDING_FACTOR / 4
    assert min(ratio[(1, "rope")], ratio[(2, "none")], ratio[(2, "rope")]) > 4 * sections.DIFFERENCE_FACTOR


def test_zeroed_learned_table_is_the_lessons_none():
    """``model.pos_emb.weight.zero_()``, the lesson's line: rounding at one layer, a real difference at two."""
    zeroed = sections.zeroed_table_sweep(n_embd=32, seed=0)
    assert tuple(zeroed.by_layer.columns) == ("learned",)
    assert zeroed.is_rounding(1, "learned") and zeroed.differs(2, "learned")
    plain = sections.permutation_experiment(n_layers=(1,), pos_encodings=("learned",), seed=0)
    assert plain["max_abs_diff"].iloc[0] > 1000 * zeroed.diff(1, "learned")  # zeroing did switch positions off


def test_lesson_comparison_counts_orders_of_magnitude():
    sweep = sections.permutation_by_layers(n_embd=32, seed=0, layers=(1, 2))
    rows = sections.lesson_comparison(sweep)
    assert {(r.n_layer, r.pos_encoding) for r in rows} == set(sections.LESSON_PERMUTATION)
    for r in rows:
        assert r.lesson == sections.LESSON_PERMUTATION[(r.n_layer, r.pos_encoding)]
        assert r.app == sweep.diff(r.n_layer, r.pos_encoding) and r.factor == pytest.approx(r.app / r.lesson)
        assert r.same_order == (1 / sections.ORDER_FACTOR <= r.factor <= sections.ORDER_FACTOR)
    assert all(r.same_order for r in rows)  # the page's default: its green badge
    two = next(r for r in rows if (r.n_layer, r.pos_encoding) == (2, "none"))
    assert not math.isclose(two.app, two.lesson, rel_tol=0.5)  # not the lesson's digits: never claimed equal


def test_each_lesson_cell_is_its_own_encodings_computation():
    """The comparison's "here" cells, each recomputed alone (one model of its own encoding, the sweep's seed): at two
    layers "none" and "learned" are 6.10e-3 and 6.13e-3, two models with other weights that round alike to 6.1e-3,
    not one value copied into two cells."""
    sweep = sections.permutation_by_layers(n_embd=32, seed=0, layers=(1, 2))
    rows = sections.lesson_comparison(sweep)
    for r in rows:
        alone = sections.permutation_experiment(n_layers=(r.n_layer,), pos_encodings=(r.pos_encoding,), seed=0)
        assert r.app == alone["max_abs_diff"].iloc[0], (r.n_layer, r.pos_encoding)
    none, learned = sweep.diff(2, "none"), sweep.diff(2, "learned")
    assert none != learned and f"{none:.1e}" == f"{learned:.1e}"  # alike at one digit, different values
    digits = sections.comparison_digits(rows)
    assert digits == 2 and f"{none:.{digits}e}" != f"{learned:.{digits}e}"


def test_telling_digits_writes_different_values_differently():
    assert sections.telling_digits([[6.0986e-3, 6.1262e-3], [3.0e-8, 3.1e-3]]) == 2
    assert sections.telling_digits([[1.0, 2.0]]) == 1 and sections.telling_digits([[0.5, 0.5, 2.0]]) == 1  # equal stay
    assert sections.telling_digits([[1.0, 1.0 + 1e-12]]) == sections.MOST_DIGITS  # as far as it goes
    assert sections.telling_digits([[1.04, 1.06]], least=0) == 1 and sections.telling_digits([], least=3) == 3
    with pytest.raises(ValueError, match="least"):
        sections.telling_digits([[1.0]], least=2, most=1)


def test_permutation_defaults_are_the_lessons_lines():
    params = inspect.signature(sections.permutation_experiment).parameters
    assert (params["line_a"].default, params["line_b"].default) == (chapter.LESSON_LINE, chapter.PERMUTED_LINE)
    assert tuple(params["pos_encodings"].default) == sections.ENCODING_KEYS


def test_permutation_is_reproducible_and_takes_encodings_as_a_parameter():
    a = sections.permutation_experiment(n_layers=(2,), pos_encodings=("learned",), seed=5)
    b = sections.permutation_experiment(n_layers=(2,), pos_encodings=("learned",), seed=5)
    assert list(a["pos_encoding"]) == ["learned"]
    assert a["max_abs_diff"].iloc[0] == b["max_abs_diff"].iloc[0]
    with pytest.raises(ValueError, match="pos_encoding"):
        sections.permutation_experiment(n_layers=(1,), pos_encodings=("no-such-encoding",))
    with pytest.raises(ValueError, match="at least one character"):
        sections.permutation_experiment(n_layers=(1,), line_a="")


def test_identical_lines_give_zero_difference():
    table = sections.permutation_experiment(n_layers=(3,), pos_encodings=("learned",), line_a=chapter.LESSON_LINE,
                                            line_b=chapter.LESSON_LINE)
    assert table["max_abs_diff"].iloc[0] == 0.0


def test_permutation_leaves_the_global_generator_alone():
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    sections.permutation_experiment(n_layers=(1,), pos_encodings=("none",), seed=0)
    assert torch.equal(torch.rand(3), expected)


def test_permutation_by_layers_covers_every_layer_and_encoding():
    sweep = sections.permutation_by_layers(n_embd=32, seed=0, layers=(1, 3))
    assert len(sweep.table) == 2 * len(sections.ENCODING_KEYS)
    assert list(sweep.table.columns) == ["n_layer", "pos_encoding", *sections.PERMUTATION_COLUMNS]
    assert tuple(sweep.by_layer.columns) == sections.ENCODING_KEYS and list(sweep.by_layer.index) == [1, 3]
    long = sweep.table.set_index(["n_layer", "pos_encoding"])
    for (n_layer, enc), row in long.iterrows():
        assert sweep.diff(n_layer, enc) == row["max_abs_diff"]
        assert sweep.rounding_level(n_layer, enc) == row["rounding_level"]
    assert sweep.rounding_level(1) == long.loc[1, "rounding_level"].max()
    assert sweep.is_rounding(1, "none") and not sweep.differs(1, "none")
    assert sweep.differs(3, "none") and not sweep.is_rounding(3, "none")  # exercise 1: 3 layers without positions
    with pytest.raises(KeyError):
        sweep.diff(2, "none")


def test_the_section_does_not_change_the_thread_count():
    """Issue 15: no request changes a process-wide setting (torch.set_num_threads) for the other readers."""
    before = torch.get_num_threads()
    sections.permutation_by_layers(n_embd=32, seed=0, layers=(1,))
    sections.run_past_block_size(4)
    assert torch.get_num_threads() == before
    assert not hasattr(sections, "one_thread")


# --- why: the causal mask ------------------------------------------------------------------------------


def test_causal_visibility_of_the_two_lines():
    vis = sections.causal_visibility()
    assert (vis.line, vis.permuted) == (chapter.LESSON_LINE, chapter.PERMUTED_LINE)
    assert vis.counts.tolist() == [1, 2, 3, 4, 5]
    assert torch.equal(vis.mask, torch.ones(5, 5, dtype=torch.int64).tril())
    # 白日依山 and 山依日白 hold the same characters too: positions 3 and 4 see the same set, but position 3's own
    # character (its query) is 山 in one line and 白 in the other: only position 4 has the same inputs
    assert vis.same_set.tolist() == [False, False, False, True, True]
    assert vis.same_inputs.tolist() == [False, False, False, False, True]
    assert vis.same_positions == (4,)
    with pytest.raises(ValueError, match="equal length"):
        sections.causal_visibility("白日", "山")


# --- tables -------------------------------------------------------------------------------------------


def test_position_similarity_of_sinusoidal_depends_on_distance_only():
    sim = sections.position_similarity(P.sinusoidal_table(12, 16))
    assert sections.diagonal_spread(sim) < 1e-5
    torch.testing.assert_close(torch.diagonal(sim), torch.ones(12))


def test_describe_table_reads_the_diagonals():
    table = P.sinusoidal_table(40, 16)
    described = sections.describe_table(table)
    sim = sections.position_similarity(table)
    assert described.far_distance == sections.FAR_DISTANCE
    assert described.neighbour_similarity == pytest.approx(float(sim[range(39), range(1, 40)].mean()), abs=1e-6)
    far = sections.FAR_DISTANCE
    assert described.far_similarity == pytest.approx(float(sim[range(40 - far), range(far, 40)].mean()), abs=1e-6)
    assert described.std == pytest.approx(float(table.std()))
    short = sections.describe_table(P.sinusoidal_table(5, 4))
    assert short.far_distance == 4  # fewer rows than FAR_DISTANCE: the farthest pair
    one_row = sections.describe_table(torch.ones(1, 3))
    assert one_row.neighbour_similarity is None and one_row.far_similarity is None and one_row.far_distance == 0
    with pytest.raises(ValueError, match="2-d"):
        sections.describe_table(torch.ones(3))


def test_sinusoidal_table_spread_is_zero_for_even_widths_only():
    assert sections.sinusoidal_position_table(32, 8).diagonal_spread < 1e-5  # cos of the difference
    odd = sections.sinusoidal_position_table(32, 7).diagonal_spread
    assert 0 < odd < 1e-3  # the unpaired sine column adds a small absolute-position term


@pytest.mark.parametrize("block_size", [16, 128, 256])
def test_spread_kind_reads_each_width_of_the_slider(block_size):
    """Even widths stay at float32 rounding; an odd width's dependence on the positions is large for a few columns
    (2, the most a similarity can spread, at width 1) and small or rounding for wide tables."""
    kinds = {w: sections.spread_kind(sections.sinusoidal_position_table(block_size, w).diagonal_spread)
             for w in range(1, 257)}
    assert all(kinds[w] == "rounding" for w in range(2, 257, 2))
    assert kinds[1] == "large" and sections.sinusoidal_position_table(block_size, 1).diagonal_spread == 2.0
    assert all(kinds[w] in ("small", "rounding") for w in range(63, 257, 2))
    if block_size >= 128:
        assert kinds[3] == "large" and kinds[7] == "small"
    assert sections.spread_kind(0.0) == "rounding" and sections.spread_kind(sections.SMALL_SPREAD) == "small"


def test_learned_table_of_an_untrained_model():
    table = sections.learned_table(G.GPTConfig(vocab_size=16, block_size=32, n_embd=24, n_head=1, n_layer=1), seed=0)
    assert table.shape == (32, 24)
    assert 0.015 < float(table.std()) < 0.025  # normal(0, 0.02) init
    untrained = sections.untrained_table(32, 24, seed=0)
    torch.testing.assert_close(untrained.table, table)
    assert untrained.similarity.shape == (32, 32)


def test_shipped_table_absent_unreadable_and_other_encodings(tmp_path):
    assert sections.shipped_learned_table(tmp_path / "nothing") is None
    broken = tmp_path / "broken"
    broken.mkdir()
    unreadable = sections.shipped_learned_table(broken)
    assert unreadable.error and unreadable.table is None and unreadable.pos_encoding is None
    tokenizer = CharTokenizer(chapter.LESSON_LINE)
    torch.manual_seed(0)
    for enc in ("learned", "rope"):
        model = G.GPT(G.GPTConfig(vocab_size=tokenizer.vocab_size, block_size=40, n_embd=16, n_head=2, n_layer=1,
                                  pos_encoding=enc))
        save_checkpoint(tmp_path / enc, model, tokenizer)
        shipped = sections.shipped_learned_table(tmp_path / enc)
        assert shipped.error is None and shipped.pos_encoding == enc
        if enc == "learned":
            torch.testing.assert_close(shipped.table.table, model.pos_emb.weight.detach())
            assert shipped.table.far_distance == 32
        else:
            assert shipped.table is None


# --- RoPE ----------------------------------------------------------------------------------------------


def test_rope_rotation_keeps_pair_lengths():
    torch.manual_seed(4)
    v = torch.randn(16)
    rot = sections.rope_rotation(v, 40)
    assert rot.pairs.shape == (40, 8, 2) and rot.n_pairs == 8
    torch.testing.assert_close(rot.pairs.norm(dim=-1), rot.pair_norms.expand(40, 8), atol=1e-5, rtol=0)
    torch.testing.assert_close(rot.norms, torch.full((40,), float(v.norm())), atol=1e-5, rtol=0)
    assert rot.angles[3, 0].item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="even"):
        sections.rope_rotation(torch.randn(7), 4)


def test_rope_supported_needs_an_even_head_dim():
    assert [h for h in range(1, 9) if sections.rope_supported(h)] == [2, 4, 6, 8]


def test_rope_pair_table_angles_and_wavelengths():
    rot = sections.seeded_rope_rotation(8, seed=0)
    table = sections.rope_pair_table(rot, 10)
    assert list(table.columns) == ["pair", "dims", "theta", "angle_deg", "wavelength"]
    assert list(table["pair"]) == [0, 1, 2, 3] and table["dims"][3] == "(6, 7)"
    assert table["theta"].tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001])
    assert table["angle_deg"].tolist() == pytest.approx([math.degrees(10.0) % 360, math.degrees(1.0),
                                                         math.degrees(0.1), math.degrees(0.01)], abs=1e-6)
    assert ((table["angle_deg"] >= 0) & (table["angle_deg"] < 360)).all()
    assert table["wavelength"].tolist() == pytest.approx([2 * math.pi / t for t in (1.0, 0.1, 0.01, 0.001)])
    with pytest.raises(ValueError, match="outside"):
        sections.rope_pair_table(rot, 128)


@pytest.mark.parametrize("n_pairs, expected", [(3, [0, 1, 2]), (8, list(range(8))),
                                               (32, [0, 4, 9, 13, 18, 22, 27, 31])])
def test_shown_pairs(n_pairs, expected):
    assert sections.shown_pairs(n_pairs) == expected


def test_rope_score_matrix_constant_along_diagonals_and_shift_invariant():
    torch.manual_seed(5)
    q, k = torch.randn(16), torch.randn(16)
    result = sections.rope_score_matrix(q, k, T=10, shift=500)
    assert result.attn_scores.shape == (10, 10) and result.shift == 500
    assert result.max_diagonal_spread < 1e-5
    assert result.max_shift_diff < 1e-4 and result.distance_only
    assert result.rounding_level == pytest.approx(sections.FLOAT32_EPS * float(q.norm() * k.norm()), rel=1e-5)
    assert result.max_diagonal_spread <= sections.ROUNDING_FACTOR * result.rounding_level
    unshifted = sections.rope_score_matrix(q, k, T=10, shift=0)
    assert not unshifted.shift_tested and unshifted.max_shift_diff == 0  # nothing tested: never a pass
    assert unshifted.constant_diagonals and not unshifted.distance_only
    # at distance 0 the two rotations cancel: the main diagonal is the plain q·k
    torch.testing.assert_close(torch.diagonal(result.attn_scores), torch.full((10,), float(q @ k)), atol=1e-5, rtol=0)


@pytest.mark.parametrize("head_dim", [16, 7])
def test_additive_score_matrix_depends_on_absolute_positions(head_dim):
    torch.manual_seed(5)
    q, k = torch.randn(head_dim), torch.randn(head_dim)
    additive = sections.additive_score_matrix(q, k, T=10, shift=100)
    table = P.sinusoidal_encoding(torch.arange(110), head_dim)  # (110, head_dim)
    torch.testing.assert_close(additive.attn_scores, (q + table[:10]) @ (k + table[:10]).T)
    torch.testing.assert_close(additive.shifted, (q + table[100:]) @ (k + table[100:]).T)
    assert additive.max_diagonal_spread > 0.1 and additive.max_shift_diff > 0.1 and not additive.distance_only


def test_position_scores_picks_the_encoding_and_checks_it():
    rope = sections.position_scores("rope", 16, 6, 1000, seed=0)
    assert rope.distance_only and rope.attn_scores.shape == (6, 6)
    sinusoidal = sections.position_scores("sinusoidal", 7, 6, 1000, seed=0)  # odd head_dim works here
    assert not sinusoidal.distance_only
    with pytest.raises(ValueError, match="even"):
        sections.position_scores("rope", 7, 6, 0, seed=0)
    with pytest.raises(ValueError, match="encoding must be one of"):
        sections.position_scores("learned", 8, 6, 0, seed=0)
    with pytest.raises(ValueError, match="T >= 1"):
        sections.position_scores("sinusoidal", 8, 0, 0, seed=0)


# --- past block_size -----------------------------------------------------------------------------------


def test_run_past_block_size():
    past = sections.run_past_block_size(24, block_size=16)
    assert tuple(run.pos_encoding for run in past.runs) == sections.ENCODING_KEYS
    ran = {run.pos_encoding: run.ran for run in past.runs}
    assert ran == {"none": True, "learned": False, "sinusoidal": True, "rope": True, "alibi": True} and not past.all_ran
    # past block_size, ALiBi's steep heads give the keys beyond every trained distance little weight; without a bias
    # the untrained model spreads its weight about evenly (8 of 24 keys)
    alibi, plain = past.run("alibi").far_weight, past.run("none").far_weight
    slopes = P.alibi_slopes(sections.PAST_N_HEAD)
    assert alibi.shape == (sections.PAST_N_HEAD,) and plain.mean() == pytest.approx(8 / 24, abs=0.03)
    assert alibi[slopes.argmax()] < plain.mean() / 10 and alibi[slopes.argmin()] > plain.mean() / 2
    assert list(alibi) == sorted(alibi)  # the steeper the head, the less it reads far back
    assert past.run("learned").far_weight is None
    learned = next(run for run in past.runs if run.pos_encoding == "learned")
    assert learned.logits_shape is None and "longer than block_size 16" in learned.error
    rope = next(run for run in past.runs if run.pos_encoding == "rope")
    assert rope.logits_shape == (1, 24, sections.PAST_VOCAB_SIZE) and rope.error is None
    assert past.missing_positions == range(16, 24)
    within = sections.run_past_block_size(16, block_size=16)
    assert within.all_ran and len(within.missing_positions) == 0
    assert all(run.far_weight is None for run in within.runs)  # nothing lies past block_size
    with pytest.raises(ValueError, match="T >= 1"):
        sections.run_past_block_size(0)


# --- figures -------------------------------------------------------------------------------------------


def permutation_labels(n: int) -> figures.PermutationLabels:
    return figures.PermutationLabels(titles=[f"T{i}" for i in range(n)], yaxis="Y", xaxis="X",
                                     rounding=[f"R{i}" for i in range(n)],
                                     exact_zero="Z", value="V {value}", slider_prefix="P",
                                     encodings={"none": "N"}, separators=",.")


def test_permutation_figure_has_one_step_per_layer_and_the_callers_words():
    rows = [{"n_layer": n, "pos_encoding": e, "max_abs_diff": 10.0 ** -(3 - n / 3),
             "rounding_level": n * 1e-8 + i * 1e-9} for n in range(1, 7) for i, e in enumerate(sections.ENCODING_KEYS)]
    rows[0]["max_abs_diff"] = 0.0
    fig = figures.permutation_figure(pd.DataFrame(rows), permutation_labels(6), active_layers=2)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["1", "2", "3", "4", "5", "6"]
    assert len(fig.data) == 12 and [t.visible for t in fig.data] == [False, False, True, True] + [False] * 8
    # each layer count's dotted line at its own largest rounding level, named in the legend
    for n in range(1, 7):
        line = fig.data[2 * n - 1]
        count = len(sections.ENCODING_KEYS)
        assert list(line.y) == pytest.approx([n * 1e-8 + (count - 1) * 1e-9] * count)
        assert line.name == f"R{n - 1}" and line.showlegend and line.line.dash == "dot"
    # the encodings by the caller's names (a key without one as is), values in a d3 format in the reader's separators
    assert list(fig.data[0].x) == ["N", *sections.ENCODING_KEYS[1:]] and fig.layout.separators == ",."
    assert fig.data[0].y[0] == figures.LOG_FLOOR and fig.data[0].texttemplate[0] == "Z"
    assert fig.data[0].texttemplate[1] == "%{customdata:.1e}" and fig.data[0].customdata[1] == rows[1]["max_abs_diff"]
    assert fig.data[0].hovertemplate[1] == "%{x}<br>V %{customdata:.1e}<extra></extra>"
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.title.text == "Y" and fig.layout.title.text == "T1"
    assert fig.layout.sliders[0].currentvalue.prefix == "P"
    colors = fig.data[0].marker.color  # "none" grey as the residual stream, the others shades of the position colour
    assert colors[0] == palette.RESIDUAL and colors[1] == palette.POSITION and len(set(colors)) == len(colors)
    assert [s.args[1]["title.text"] for s in steps] == [f"T{i}" for i in range(6)]
    with pytest.raises(ValueError, match="active_layers"):
        figures.permutation_figure(pd.DataFrame(rows), permutation_labels(6), active_layers=9)
    with pytest.raises(ValueError, match="one title and one rounding legend per layer"):
        figures.permutation_figure(pd.DataFrame(rows), permutation_labels(5))


@pytest.mark.parametrize("n_embd, seed", [(32, 0), (64, 3), (128, 4)])
def test_first_layer_differs_exactly_where_the_inputs_differ(n_embd, seed):
    """Page 7 section 2: after one layer without positions only the positions with the same query and the same
    visible characters agree (float rounding); the others differ clearly, and the second layer reads them."""
    vis = sections.causal_visibility()
    first = sections.first_layer_differences(n_embd=n_embd, seed=seed)
    diffs = first.diff
    assert diffs.shape == (5,) and diffs.dtype == torch.float32 and first.rounding_level.shape == (5,)
    assert first.agrees.tolist() == vis.same_inputs.tolist()
    assert (diffs <= sections.ROUNDING_FACTOR * first.rounding_level).tolist() == vis.same_inputs.tolist()
    assert (diffs[~vis.same_inputs] > sections.DIFFERENCE_FACTOR * first.rounding_level[~vis.same_inputs]).all()
    with pytest.raises(ValueError, match="equal length"):
        sections.first_layer_differences("白日", "山")


def test_visibility_figure_marks_the_same_inputs():
    vis = sections.causal_visibility()
    labels = figures.VisibilityLabels(mask_title="M", count_title="C", count_axis="A", same_inputs="S",
                                      cell_hover="H %{x}", count_hover="B %{y}", separators=",\u202f")
    heat, bars = figures.visibility_figure(vis, labels).data
    fig = figures.visibility_figure(vis, labels)
    assert np.array_equal(np.asarray(heat.z), np.tril(np.ones((5, 5))))
    assert heat.text[1][:2] == ["白<br>山", "日<br>依"] and heat.text[1][2] == ""  # stacked: narrow cells on a phone
    marked = [t.endswith(" " + figures.SAME_MARK) for t in fig.layout.yaxis.ticktext]
    assert marked == [False, False, False, False, True]
    assert fig.layout.annotations[0].text.endswith(f"{figures.SAME_MARK} S")
    assert fig.layout.separators == ",\u202f"
    assert list(bars.x) == [1, 2, 3, 4, 5] and heat.hovertemplate.startswith("H %{x}")
    assert len(fig.layout.annotations) == 1 and fig.layout.annotations[0].text.startswith("M<br>")
    assert fig.layout.xaxis2.title.text == "C<br>A"


def stacked_tables(**kwargs):
    """A table (12, 5) with a subtitle over a (3, 4) table of zeros with zmax 1."""
    return figures.stacked_tables_figure([
        figures.TablePanel("a", P.sinusoidal_table(12, 5), "R", "C", "sub"),
        figures.TablePanel("b", torch.zeros(3, 4), "R2", "C2", zmax=1.0),
    ], **kwargs)


def test_stacked_tables_figure_panels_read_like_tables():
    fig = stacked_tables()
    top, bottom = fig.data
    assert len(fig.data) == 2 and (top.xaxis, top.yaxis, bottom.xaxis, bottom.yaxis) == ("x", "y", "x2", "y2")
    assert top.z.shape == (12, 5) and bottom.z.shape == (3, 4)
    assert top.z.dtype.name == "float32" and bottom.z.dtype.name == "float32"
    assert np.allclose(top.z, P.sinusoidal_table(12, 5).numpy())
    # row 0 on top, column labels on top, each panel's own row title
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.yaxis2.autorange == "reversed"
    assert fig.layout.xaxis.side == "top" and fig.layout.xaxis2.side == "top"
    assert fig.layout.yaxis.title.text == "R" and fig.layout.yaxis2.title.text == "R2"
    assert top.hovertemplate == "R %{y} · C %{x}: %{z:.4f}<extra>a</extra>"
    # symmetric colour ranges: the table's largest |value| (sin, cos reach 1) and the zmax given
    limit = float(np.abs(top.z).max())
    assert (top.zmin, top.zmax, top.zmid) == (-limit, limit, 0) and (bottom.zmin, bottom.zmax) == (-1.0, 1.0)
    assert top.colorbar.orientation == "h" and top.colorbar.tickformat == ".2g" and top.colorbar.thickness == 10
    assert [a.text for a in fig.layout.annotations] == ["<b>a</b><br>sub", "<b>b</b>"]


def test_stacked_tables_figure_places_everything_inside_fixed_margins():
    fig = stacked_tables(heatmap_height=200)
    # margins never grown by Plotly (a figure whose margins grow is drawn twice): no automatic margin anywhere
    assert fig.layout.margin.autoexpand is False
    assert all(fig.layout[f"{axis}{s}"].automargin is False for axis in ("xaxis", "yaxis") for s in ("", "2"))
    assert fig.layout.margin.l == 56 + 8 * 2  # row numbers up to 11: two digits
    (low1, high1), (low2, high2) = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    assert 0 <= low2 < high2 < low1 < high1 <= 1  # the table's panel above its neighbour's, no overlap
    # each title above its panel, each colour bar under it, all inside the plot area
    a1, a2 = (a.y for a in fig.layout.annotations)
    c1, c2 = (t.colorbar.y for t in fig.data)
    assert all(0 <= y <= 1 for y in (a1, a2, c1, c2))
    assert a1 > high1 and low1 > c1 > a2 > high2 and low2 > c2
    assert all(a.yanchor == "bottom" for a in fig.layout.annotations) and all(t.colorbar.yanchor == "top"
                                                                              for t in fig.data)
    # the height: the panels' blocks plus the margins, and each heatmap as tall as asked
    plot = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert (high1 - low1) * plot == pytest.approx(200) and (high2 - low2) * plot == pytest.approx(200)
    assert stacked_tables(heatmap_height=300).layout.height == fig.layout.height + 200


def test_stacked_tables_figure_wraps_long_titles_and_makes_room_for_them():
    short = figures.stacked_tables_figure([figures.TablePanel("a", torch.ones(2, 2), "R", "C")])
    title = "a long title of a table that needs more than one line"
    long = figures.stacked_tables_figure([figures.TablePanel(title, torch.ones(2, 2), "R", "C")])
    assert short.layout.annotations[0].text == "<b>a</b>"
    lines = long.layout.annotations[0].text.count("<br>") + 1
    assert lines > 1 and long.layout.height == short.layout.height + figures.TITLE_LINE_PX * (lines - 1)
    assert max(len(line) for line in long.layout.annotations[0].text[3:-4].split("<br>")) <= 30


def test_stacked_tables_figure_refuses_no_panel_and_non_tables():
    with pytest.raises(ValueError, match="at least one panel"):
        figures.stacked_tables_figure([])
    with pytest.raises(ValueError, match="2-d"):
        figures.stacked_tables_figure([figures.TablePanel("a", torch.ones(3), "R", "C")])


def test_rope_pairs_figure_draws_the_rotated_pair():
    torch.manual_seed(6)
    rot = sections.rope_rotation(torch.randn(8), 20)
    labels = figures.RopePairLabels(panel="p{pair} {dim_a}-{dim_b} {theta} {angle}", earlier="E",
                                    position="at {position}", pair="q{pair}", point="<%{x:.3f} ; %{y:.3f}>",
                                    theta_text="θ{:.3g}".format, angle_text="a{:.1f}".format, separators=",.")
    fig = figures.rope_pairs_figure(rot, 7, [0, 3], labels)
    assert len(fig.data) == 6
    arrow = fig.data[2]
    assert arrow.x[1] == pytest.approx(float(rot.pairs[7, 0, 0]), abs=1e-6)
    assert fig.layout.annotations[0].text == f"p0 0-1 θ1<br>a{math.degrees(7.0) % 360:.1f}"
    assert "<%{x:.3f} ; %{y:.3f}>" in arrow.hovertemplate and fig.layout.separators == ",."
    assert "at 7" in arrow.hovertemplate and "q0" in arrow.hovertemplate and "E" in fig.data[1].hovertemplate
    with pytest.raises(ValueError):
        figures.rope_pairs_figure(rot, 20, [0], labels)


def test_score_matrices_figure_takes_its_words():
    scores = sections.position_scores("rope", 8, 4, 10, seed=0)
    labels = {"first": ["0", "1", "2", "3"], "second": ["10", "11", "12", "13"]}
    fig = figures.score_matrices_figure({"first": scores.attn_scores, "second": scores.shifted}, labels, "Q", "H")
    assert len(fig.data) == 2 and fig.data[0].hovertemplate == "H<extra></extra>"
    assert fig.layout.yaxis.title.text == "Q" and fig.layout.yaxis2.title.text is None
    # heatmaps carry 4 decimals (engine.figures.core.heatmap_trace)
    assert np.allclose(np.asarray(fig.data[1].z, dtype=float), scores.shifted.numpy(), atol=5e-5)
    # one colour bar (the last panel's), fixed margins wide enough for the longest position label
    assert [t.showscale for t in fig.data] == [False, True]
    assert fig.layout.margin.autoexpand is False and fig.layout.xaxis.automargin is False
    shifted = figures.score_matrices_figure({"s": scores.shifted}, {"s": ["1000", "1001", "1002", "1003"]}, "Q", "H")
    assert shifted.layout.margin.l > fig.layout.margin.l
    # the panel title clears column labels that Plotly may turn upright (4 digits)
    assert shifted.layout.annotations[0].yshift > fig.layout.annotations[0].yshift


def test_stacked_tables_make_room_for_the_title_lines_asked():
    short = [figures.TablePanel("a", torch.ones(4, 4), "R", "C"), figures.TablePanel("b", torch.ones(4, 4), "R", "C")]
    assert [figures.title_lines(p) for p in short] == [1, 1]
    own = figures.stacked_tables_figure(short)
    padded = figures.stacked_tables_figure(short, lines=[3, 2])
    # three more title lines of 18 px: a taller figure, each heatmap lower by the lines above it
    assert padded.layout.height - own.layout.height == 3 * figures.TITLE_LINE_PX
    assert padded.layout.yaxis.domain[1] < own.layout.yaxis.domain[1]
    assert figures.stacked_tables_figure(short, lines=[0, 0]).layout.height == own.layout.height
    with pytest.raises(ValueError, match="one entry per panel"):
        figures.stacked_tables_figure(short, lines=[2])


def test_rope_pair_titles_keep_a_parenthesised_group_on_one_line():
    rot = sections.rope_rotation(torch.ones(8), 4)
    labels = figures.RopePairLabels(panel="pair {pair} (dims {dim_a}, {dim_b})<br>θ = {theta} rad/pos",
                                    earlier="E", position="at {position}", pair="q{pair}")
    title = figures.rope_pairs_figure(rot, 2, [1], labels).layout.annotations[0].text
    assert title.split("<br>")[:2] == ["pair 1", "(dims\u00a02,\u00a03)"]


def test_stacked_tables_figure_draws_an_empty_table():
    fig = figures.stacked_tables_figure([figures.TablePanel("empty", torch.zeros(0, 4), "R", "C")])
    assert np.asarray(fig.data[0].z).shape == (0, 4) and fig.data[0].zmax > 0


def test_entry_shapes_come_from_a_cpu_run_that_leaves_the_global_generator_alone():
    torch.manual_seed(5)
    before = torch.get_rng_state()
    shapes = sections.entry_shapes(32, 4, "白日依山尽")
    assert torch.equal(torch.get_rng_state(), before)
    assert list(shapes) == list(sections.ENCODING_KEYS)
    T = 5
    for encoding, s in shapes.items():
        assert (s.idx, s.tok_emb, s.x) == ((1, T), (1, T, 32), (1, T, 32)), encoding
        assert s.q == s.k == (1, 4, T, 8) and s.attn_scores == (1, 4, T, T), encoding
        assert s.pos_table == ((T, 32) if encoding in ("learned", "sinusoidal") else None), encoding
        assert s.rope == ((T, 4) if encoding == "rope" else None), encoding
        assert s.bias == ((4, T, T) if encoding == "alibi" else None) and s.qkv == (96, 32), encoding


def test_alibi_score_bias_is_distance_only_and_the_papers_slopes():
    bias = sections.alibi_score_bias(4, T=6, shift=300)
    assert bias.slopes.tolist() == [1 / 4, 1 / 16, 1 / 64, 1 / 256]  # Press et al. (2022): 2^(-8h/n)
    assert bias.bias.shape == bias.shifted.shape == (4, 6, 6) and bias.distance_only
    i, j = torch.meshgrid(torch.arange(6), torch.arange(6), indexing="ij")
    for h, m in enumerate(bias.slopes.tolist()):
        torch.testing.assert_close(bias.bias[h][j <= i], (-m * (i - j)).float()[j <= i])
    unshifted = sections.alibi_score_bias(4, T=6, shift=0)
    assert not unshifted.shift_tested and not unshifted.distance_only  # nothing tested: never a pass
    with pytest.raises(ValueError, match="T >= 1"):
        sections.alibi_score_bias(4, T=0)


@pytest.mark.parametrize("T", [2, 8, 16])
def test_alibi_heatmaps_colour_range_covers_every_head_drawn(T):
    """The ALiBi heatmaps as page 7 draws them (−∞ above the diagonal): the shared colour range is symmetric and
    reaches the largest |bias| of every head (head 0's −(T − 1)/4: −1.75 at T = 8), so no cell is clipped; the colour
    bar labels both ends."""
    bias = sections.alibi_score_bias(4, T, 100)
    shown = bias.bias.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))  # (nh, T, T)
    limit = figures.score_limit(list(shown))
    assert limit == (T - 1) / 4 == float(bias.bias.abs().max())
    for h in range(4):
        trace = figures.score_matrices_figure({"h": shown[h]}, {"h": [str(t) for t in range(T)]}, "Q", "H",
                                              limit=limit, show_values=False).data[0]
        z = np.asarray(trace.z, dtype=float)
        assert trace.zmin == -trace.zmax and np.nanmax(np.abs(z)) <= trace.zmax
        assert (trace.colorbar.tickvals[0], trace.colorbar.tickvals[-1]) == (trace.zmin, trace.zmax)
    assert figures.score_limit([torch.full((2, 2), float("-inf"))]) == 1.0  # nothing finite: a unit range


def test_explicit_keys_are_the_records_that_give_positions():
    assert sections.ENCODING_KEYS == tuple(e.key for e in P.ENCODINGS)
    assert sections.EXPLICIT_KEYS == tuple(k for k in sections.ENCODING_KEYS if k != P.NONE.key)
