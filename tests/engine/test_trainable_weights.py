"""Engine tests for section 2 (trainable weights): chapter numbers, the d_k sweep, inits, exercise 3.1."""

import json
import math

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from engine.figures import core
from engine.figures import trainable_weights as figures
from engine.sections import trainable_weights as sections


def close(got, want):
    torch.testing.assert_close(torch.as_tensor(got, dtype=torch.float32), torch.tensor(want), atol=5e-5, rtol=0)


DK_LABELS = figures.DkSweepLabels("spread", "w_max", "grad", "without", "with", "score",
                                  "d_k={d_k} var={var} scaled={var_scaled} n={n}", "d_k: ")
INIT_LABELS = figures.InitLabels("W", "xW", "{init} m", "{init} t", "t")


@pytest.fixture(scope="module")
def sweep():
    return sections.dk_sweep()


def test_walkthrough_reproduces_the_chapter():
    steps = sections.trainable_walkthrough(A.chapter_inputs(), seed=chapter.TRAINABLE_SEED, d_out=2, query_index=1)
    close(steps.query, chapter.TRAINABLE_QUERY_2)
    close(steps.attn_scores, chapter.TRAINABLE_SCORES_2)
    close(steps.attn_weights, chapter.TRAINABLE_WEIGHTS_2)
    close(steps.context_vec, chapter.TRAINABLE_CONTEXT_2)


def test_walkthrough_scale_makes_weights_flatter_and_other_seeds_differ():
    steps = sections.trainable_walkthrough(A.chapter_inputs(), seed=chapter.TRAINABLE_SEED, d_out=2, query_index=1)
    # dividing positive-spread scores by sqrt(2) > 1 flattens the softmax
    assert steps.attn_weights.max() < steps.unscaled_weights.max()
    assert steps.attn_weights.min() > steps.unscaled_weights.min()
    other = sections.trainable_walkthrough(A.chapter_inputs(), seed=7, d_out=2, query_index=1)
    assert not chapter.matches(other.query, chapter.TRAINABLE_QUERY_2)


@pytest.mark.parametrize("d_out", [1, 2, 8])
def test_walkthrough_shapes(d_out):
    steps = sections.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=d_out, query_index=5)
    assert steps.projections.W_query.shape == (3, d_out)
    assert steps.query.shape == (d_out,)
    assert steps.attn_weights.shape == (6,)
    assert abs(float(steps.attn_weights.sum()) - 1) < 1e-6
    assert steps.context_vec.shape == (d_out,)


def test_walkthrough_rejects_bad_sizes():
    with pytest.raises(ValueError):
        sections.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=0, query_index=1)
    with pytest.raises(ValueError):
        sections.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=2, query_index=6)


def test_dk_sweep_variance_grows_like_d_k_and_scale_brings_it_back_to_one(sweep):
    stats = sweep.stats
    assert list(stats["d_k"]) == list(sections.DK_VALUES)
    assert sweep.n_samples == 10_000
    for _, row in stats.iterrows():
        assert abs(row["var_scores"] / row["d_k"] - 1) < 0.10, row
        assert abs(row["var_scaled"] - 1) < 0.10, row


def test_dk_sweep_softmax_saturates_without_scale(sweep):
    stats = sweep.stats.set_index("d_k")
    assert stats.loc[1024, "w_max_unscaled"] > 0.9
    assert stats.loc[1024, "grad_unscaled"] < 0.05
    # with the scale the largest weight stays in a narrow band at every d_k (a row of 8 keys) ...
    assert stats["w_max_scaled"].between(0.25, 0.40).all()
    assert stats.loc[1024, "grad_scaled"] > 0.15
    # ... while without it the largest weight keeps growing
    assert stats["w_max_unscaled"].iloc[3:].is_monotonic_increasing


def test_dk_sweep_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a = sections.dk_sweep(d_ks=(4,), n_samples=400, num_keys=4, seed=3)
    after = torch.rand(1)
    b = sections.dk_sweep(d_ks=(4,), n_samples=400, num_keys=4, seed=3)
    assert torch.equal(before, after)
    assert a.stats.equals(b.stats)


def test_dk_sweep_rejects_bad_sizes():
    with pytest.raises(ValueError):
        sections.dk_sweep(n_samples=10, num_keys=3)
    with pytest.raises(ValueError):
        sections.dk_sweep(d_ks=(0,))


def whole_draw_sweep(d_ks, n_samples, num_keys, seed):
    """The sweep as it was first written: q, k, row_q, row_k each drawn whole, then reduced (the oracle)."""
    gen = torch.Generator().manual_seed(seed)
    n_rows = n_samples // num_keys
    rows, unscaled, scaled_boxes = [], {}, {}
    for d_k in d_ks:
        q = torch.randn(n_samples, d_k, generator=gen)
        k = torch.randn(n_samples, d_k, generator=gen)
        scores = torch.linalg.vecdot(q, k)
        scaled = scores / math.sqrt(d_k)
        row_q = torch.randn(n_rows, 1, d_k, generator=gen)
        row_k = torch.randn(n_rows, num_keys, d_k, generator=gen)
        row_scores = torch.linalg.vecdot(row_q, row_k)
        w_unscaled = torch.softmax(row_scores, dim=-1).amax(dim=-1)
        w_scaled = torch.softmax(row_scores / math.sqrt(d_k), dim=-1).amax(dim=-1)
        rows.append((d_k, float(scores.var()), float(scaled.var()), float(w_unscaled.mean()), float(w_scaled.mean()),
                     float((w_unscaled * (1 - w_unscaled)).mean()), float((w_scaled * (1 - w_scaled)).mean())))
        unscaled[d_k] = sections._box_stats(scores)
        scaled_boxes[d_k] = sections._box_stats(scaled)
    return sections.DkSweep(pd.DataFrame(rows, columns=list(sections.DK_COLUMNS)), unscaled, scaled_boxes, n_samples,
                            num_keys)


@pytest.mark.parametrize(("d_ks", "n_samples", "num_keys", "seed"), [
    ((1, 3, 16, 17, 1024), 64, 8, 0),  # d_k 1024: several blocks of q, k and of the rows' keys
    ((1, 2, 5), 12, 2, 3),  # draws under 16 elements: torch's other sampler path
    ((7, 33), 1000, 8, 11),  # blocks whose last one is short
    ((2, 512), 3000, 3, 5),
])
def test_dk_sweep_is_bit_for_bit_the_whole_draw_sweep(d_ks, n_samples, num_keys, seed):
    """Issue 29: the blocks change no number the page shows."""
    got = sections.dk_sweep(d_ks=d_ks, n_samples=n_samples, num_keys=num_keys, seed=seed)
    want = whole_draw_sweep(d_ks, n_samples, num_keys, seed)
    pd.testing.assert_frame_equal(got.stats, want.stats, check_exact=True)
    assert got.unscaled == want.unscaled and got.scaled == want.scaled
    assert (got.n_samples, got.num_keys) == (want.n_samples, want.num_keys)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 80), d=st.integers(1, 40), keys=st.integers(1, 5), block=st.integers(1, 300),
       seed=st.integers(0, 2**31 - 1))
def test_vecdot_of_draws_equals_the_whole_draws_and_leaves_the_generator_where_they_do(n, d, keys, block, seed):
    for a_shape, b_shape in (((d,), (d,)), ((1, d), (keys, d))):
        gen = torch.Generator().manual_seed(seed)
        got = sections.vecdot_of_draws(gen, n, a_shape, b_shape, block=block)
        after = torch.randn(20, generator=gen)
        whole = torch.Generator().manual_seed(seed)
        want = torch.linalg.vecdot(torch.randn(n, *a_shape, generator=whole), torch.randn(n, *b_shape, generator=whole))
        assert got.shape == want.shape and torch.equal(got, want)
        assert torch.equal(after, torch.randn(20, generator=whole))


def test_dk_sweep_never_draws_more_than_a_block_at_once(monkeypatch):
    """Issue 29: at d_k 1024 the sweep held q and k (10 000 x 1024 floats each) and their product at once."""
    real, sizes = torch.randn, []

    def recording_randn(*size, **kwargs):
        out = real(*size, **kwargs)
        sizes.append(out.numel())
        return out

    monkeypatch.setattr(torch, "randn", recording_randn)
    sections.dk_sweep(d_ks=(1024,))
    assert sizes and max(sizes) <= sections.DRAW_BLOCK
    # every number of the four whole draws, and q and row_q once more to move the generator past them
    n_rows = sections.DK_SAMPLES // 8
    assert sum(sizes) == 1024 * (3 * sections.DK_SAMPLES + 2 * n_rows + n_rows * 8)


def test_vecdot_of_draws_rejects_empty_draws():
    gen = torch.Generator().manual_seed(0)
    for n, a_shape, b_shape in ((0, (2,), (2,)), (3, (), (2,)), (3, (0,), (0,))):
        with pytest.raises(ValueError):
            sections.vecdot_of_draws(gen, n, a_shape, b_shape)
    with pytest.raises(RuntimeError):
        sections.vecdot_of_draws(gen, 3, (2,), (3,))


def test_dk_figure_has_one_slider_step_per_d_k(sweep):
    fig = figures.dk_sweep_figure(sweep, DK_LABELS, active_d_k=64)
    spec = json.loads(fig.to_json())
    steps = spec["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [str(d) for d in sections.DK_VALUES]
    assert len(spec["data"]) == 4 * len(sections.DK_VALUES)
    visible = [t.get("visible", True) for t in spec["data"]]
    assert sum(v is True for v in visible) == 4
    # the step titles come from the caller's template, filled with the sweep's numbers
    row = sweep.stats.set_index("d_k").loc[64]
    assert spec["layout"]["title"]["text"] == DK_LABELS.step_title.format(
        d_k=64, var=f"{row['var_scores']:.2f}", var_scaled=f"{row['var_scaled']:.3f}", n=f"{sweep.n_samples:,}")
    assert spec["layout"]["sliders"][0]["currentvalue"]["prefix"] == "d_k: "
    with pytest.raises(ValueError):
        figures.dk_sweep_figure(sweep, DK_LABELS, active_d_k=3)


def test_init_comparison_signs_and_variances():
    table = sections.init_comparison()
    rand = table[table["init"] == "torch.rand"]
    linear = table[table["init"] == "nn.Linear"]
    assert (rand["share_negative"] == 0).all()
    assert ((linear["share_negative"] - 0.5).abs() < 0.05).all()
    for part in (rand, linear):
        rel = (part["var_w"] / part["var_w_theory"] - 1).abs()
        assert (rel < 0.1).all(), part
    # torch.rand's projection variance grows with d_in; nn.Linear's stays near 1/3
    assert rand["var_xw"].is_monotonic_increasing
    assert rand["var_xw"].iloc[-1] > 100
    assert ((linear["var_xw"] - 1 / 3).abs() < 0.05).all()
    fig = figures.init_figure(table, INIT_LABELS)
    assert len(fig.data) == 8
    assert {t.name for t in fig.data} == {"torch.rand m", "torch.rand t", "nn.Linear m", "nn.Linear t"}


def test_exercise_copy_judged_up_to_float_rounding_not_bit_for_bit(monkeypatch):
    """Issue 15: a 7.45e-09 difference (AVX-512 kernels) is still "equal", but not "exactly equal"."""
    real = A.copy_v2_into_v1

    def copy_then_nudge(sa_v1, sa_v2):
        real(sa_v1, sa_v2)
        with torch.no_grad():
            sa_v1.W_value.mul_(1 + 1e-7)  # a last-bit change, as another summation order gives
        return sa_v1

    monkeypatch.setattr(A, "copy_v2_into_v1", copy_then_nudge)
    result = sections.exercise_3_1(A.chapter_inputs(), d_out=2, seed_v1=123, seed_v2=789)
    assert 0 < result.max_abs_diff_after < 1e-6
    assert result.equal_after and not result.exactly_equal


def test_chapter_setup():
    assert sections.chapter_setup(123, 2, 1) == sections.ChapterSetup(projections=True, query=True)
    assert sections.chapter_setup(123, 2, 0) == sections.ChapterSetup(projections=True, query=False)
    assert sections.chapter_setup(7, 2, 1) == sections.ChapterSetup(projections=False, query=False)
    assert sections.projections_are_chapter(123, 2) and not sections.projections_are_chapter(123, 3)
    assert sections.v2_is_chapter(789, 2) and not sections.v2_is_chapter(789, 3)


def test_v1_v2_outputs_match_the_chapter():
    out = sections.v1_v2_outputs(A.chapter_inputs(), d_out=2, seed_v1=chapter.SA_V1_SEED, seed_v2=chapter.SA_V2_SEED)
    close(out.v1, chapter.SA_V1_OUTPUT)
    close(out.v2, chapter.SA_V2_OUTPUT)


@pytest.mark.parametrize("d_out", [1, 2, 5])
def test_exercise_3_1_copy_makes_outputs_equal(d_out):
    result = sections.exercise_3_1(A.chapter_inputs(), d_out=d_out, seed_v1=123, seed_v2=789)
    assert result.max_abs_diff_before > 1e-3
    assert result.equal_after
    # equal up to float rounding: nn.Linear and x @ W may add the same products in another order
    torch.testing.assert_close(result.v1_after, result.v2)
    assert result.exactly_equal == (result.max_abs_diff_after == 0.0)


def test_matrices_stacked_reads_like_the_tensors_one_panel_under_the_other():
    w = sections.chapter_projections(chapter.TRAINABLE_SEED, 3, 2)
    rows, cols = ["d0", "d1", "d2"], ["o0", "o1"]
    fig = figures.matrices_stacked({"W_query": w.W_query, "W_key": w.W_key, "W_value": w.W_value}, rows, cols,
                                   row_title="input dim")
    assert [a.text for a in fig.layout.annotations] == ["<b>W_query</b>", "<b>W_key</b>", "<b>W_value</b>"]
    assert [t.yaxis for t in fig.data] == ["y", "y2", "y3"]
    assert [list(r) for r in fig.data[0].text] == [[f"{v:.4f}" for v in row] for row in w.W_query.tolist()]
    domains = [tuple(fig.layout[name].domain) for name in ("yaxis", "yaxis2", "yaxis3")]
    for (low, _high), (_next_low, next_high) in zip(domains, domains[1:], strict=False):
        assert next_high < low  # each panel under the previous one, no overlap
    for name in ("yaxis", "yaxis2", "yaxis3"):
        assert fig.layout[name].autorange == "reversed" and fig.layout[name].automargin is False
    assert fig.layout.xaxis.side == "top" and list(fig.layout.xaxis3.ticktext) == cols
    assert fig.layout.margin.autoexpand is False and fig.layout.margin.l >= 8 * len("d0")
    assert all(t.showscale is False for t in fig.data)
    with pytest.raises(ValueError, match="at least one"):
        figures.matrices_stacked({}, rows, cols)
    with pytest.raises(ValueError, match=r"shape \(3, 2\)"):
        figures.matrices_stacked({"a": w.W_query, "b": torch.zeros(3, 3)}, rows, cols)


def test_matrices_stacked_slants_many_column_labels_and_writes_three_decimals():
    rows, cols = ["d0", "d1", "d2"], [f"sortie {j}" for j in range(8)]
    few = figures.matrices_stacked({"W": torch.rand(3, 2)}, rows, cols[:2])
    many = figures.matrices_stacked({"W": torch.full((3, 8), 0.123456)}, rows, cols)
    assert few.layout.xaxis.tickangle == 0 and len(few.data[0].text[0][0]) == len("0.1234")
    # eight labels of 8 characters do not fit a phone's columns level, nor at -45° beside each other: upright
    assert many.layout.xaxis.tickangle in (-45, -90) and many.data[0].text[0][0] == "0.123"
    assert many.layout.xaxis.tickangle == core.column_labels(cols)[0]
    # room above the cells for the slanted labels: the same rows, a taller block above them
    assert many.layout.height > few.layout.height


@settings(max_examples=200, deadline=None)
@given(dtype=st.sampled_from(sorted(sections.CLOSE_TOLERANCES, key=str)),
       base=st.lists(st.floats(-1e3, 1e3, width=32), min_size=1, max_size=6),
       scale=st.sampled_from([0.0, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2]), nan=st.booleans())
def test_close_accepts_what_assert_close_accepts(dtype, base, scale, nan):
    expected = torch.tensor(base, dtype=torch.float64).to(dtype)
    actual = (expected.double() * (1 + scale) + scale).to(dtype)
    if nan:
        actual[0] = float("nan")
    try:
        torch.testing.assert_close(actual, expected)
        accepted = True
    except AssertionError:
        accepted = False
    assert sections._close(actual, expected) == accepted


def test_close_refuses_other_shapes_and_dtypes():
    x = torch.zeros(3)
    assert not sections._close(x, torch.zeros(4))
    assert not sections._close(x, torch.zeros(3, dtype=torch.float64))
    assert sections._close(x, torch.zeros(3))


def test_exercise_3_1_imports_no_sympy():
    """torch.testing.assert_close imports torch.distributed's tensor types and SymPy on its first call; the page's
    check must not, or every server process pays for them."""
    import subprocess
    import sys

    code = ("import sys; from engine import attention as A; from engine.sections import trainable_weights as s; "
            "s.exercise_3_1(A.chapter_inputs(), d_out=2, seed_v1=123, seed_v2=789); "
            "print(sorted(m for m in ('sympy', 'torch.distributed.tensor') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.strip() == "[]"
