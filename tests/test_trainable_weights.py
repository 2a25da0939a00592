"""Engine tests for section 2 (trainable weights): chapter numbers, the d_k sweep, inits, exercise 3.1."""

import json

import pytest
import torch

from engine import attention as A
from engine import chapter
from engine.figures import trainable_weights as F
from engine.sections import trainable_weights as T


def close(got, want):
    torch.testing.assert_close(torch.as_tensor(got, dtype=torch.float32), torch.tensor(want), atol=5e-5, rtol=0)


@pytest.fixture(scope="module")
def sweep():
    return T.dk_sweep()


def test_walkthrough_reproduces_the_chapter():
    steps = T.trainable_walkthrough(A.chapter_inputs(), seed=chapter.TRAINABLE_SEED, d_out=2, query_index=1)
    close(steps["query"], chapter.TRAINABLE_QUERY_2)
    close(steps["attn_scores"], chapter.TRAINABLE_SCORES_2)
    close(steps["attn_weights"], chapter.TRAINABLE_WEIGHTS_2)
    close(steps["context_vec"], chapter.TRAINABLE_CONTEXT_2)


def test_walkthrough_scale_makes_weights_flatter_and_other_seeds_differ():
    steps = T.trainable_walkthrough(A.chapter_inputs(), seed=chapter.TRAINABLE_SEED, d_out=2, query_index=1)
    # dividing positive-spread scores by sqrt(2) > 1 flattens the softmax
    assert steps["attn_weights"].max() < steps["unscaled_weights"].max()
    assert steps["attn_weights"].min() > steps["unscaled_weights"].min()
    other = T.trainable_walkthrough(A.chapter_inputs(), seed=7, d_out=2, query_index=1)
    assert not chapter.matches(other["query"], chapter.TRAINABLE_QUERY_2)


@pytest.mark.parametrize("d_out", [1, 2, 8])
def test_walkthrough_shapes(d_out):
    steps = T.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=d_out, query_index=5)
    assert steps["W_query"].shape == (3, d_out)
    assert steps["query"].shape == (d_out,)
    assert steps["attn_weights"].shape == (6,)
    assert abs(float(steps["attn_weights"].sum()) - 1) < 1e-6
    assert steps["context_vec"].shape == (d_out,)


def test_walkthrough_rejects_bad_sizes():
    with pytest.raises(ValueError):
        T.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=0, query_index=1)
    with pytest.raises(ValueError):
        T.trainable_walkthrough(A.chapter_inputs(), seed=1, d_out=2, query_index=6)


def test_dk_sweep_variance_grows_like_d_k_and_scale_brings_it_back_to_one(sweep):
    stats = sweep["stats"]
    assert list(stats["d_k"]) == list(T.DK_VALUES)
    assert sweep["n_samples"] == 10_000
    for _, row in stats.iterrows():
        assert abs(row["var(q·k)"] / row["d_k"] - 1) < 0.10, row
        assert abs(row["var(q·k/√d_k)"] - 1) < 0.10, row


def test_dk_sweep_softmax_saturates_without_scale(sweep):
    stats = sweep["stats"].set_index("d_k")
    assert stats.loc[1024, "mean w_max, unscaled"] > 0.9
    assert stats.loc[1024, "mean w_max(1-w_max), unscaled"] < 0.05
    # with the scale the largest weight stays in a narrow band at every d_k (a row of 8 keys) ...
    assert stats["mean w_max, scaled"].between(0.25, 0.40).all()
    assert stats.loc[1024, "mean w_max(1-w_max), scaled"] > 0.15
    # ... while without it the largest weight keeps growing
    assert stats["mean w_max, unscaled"].iloc[3:].is_monotonic_increasing


def test_dk_sweep_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a = T.dk_sweep(d_ks=(4,), n_samples=400, num_keys=4, seed=3)
    after = torch.rand(1)
    b = T.dk_sweep(d_ks=(4,), n_samples=400, num_keys=4, seed=3)
    assert torch.equal(before, after)
    assert a["stats"].equals(b["stats"])


def test_dk_sweep_rejects_bad_sizes():
    with pytest.raises(ValueError):
        T.dk_sweep(n_samples=10, num_keys=3)
    with pytest.raises(ValueError):
        T.dk_sweep(d_ks=(0,))


def test_dk_figure_has_one_slider_step_per_d_k(sweep):
    fig = F.dk_sweep_figure(sweep, active_d_k=64)
    spec = json.loads(fig.to_json())
    steps = spec["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [str(d) for d in T.DK_VALUES]
    assert len(spec["data"]) == 4 * len(T.DK_VALUES)
    visible = [t.get("visible", True) for t in spec["data"]]
    assert sum(v is True for v in visible) == 4
    with pytest.raises(ValueError):
        F.dk_sweep_figure(sweep, active_d_k=3)


def test_init_comparison_signs_and_variances():
    table = T.init_comparison()
    rand = table[table["init"] == "torch.rand"]
    linear = table[table["init"] == "nn.Linear"]
    assert (rand["share negative"] == 0).all()
    assert ((linear["share negative"] - 0.5).abs() < 0.05).all()
    for part in (rand, linear):
        rel = (part["var(W) measured"] / part["var(W) theory"] - 1).abs()
        assert (rel < 0.1).all(), part
    # torch.rand's projection variance grows with d_in; nn.Linear's stays near 1/3
    assert rand["var(x·W) measured"].is_monotonic_increasing
    assert rand["var(x·W) measured"].iloc[-1] > 100
    assert ((linear["var(x·W) measured"] - 1 / 3).abs() < 0.05).all()
    assert len(F.init_figure(table).data) == 8


def test_v1_v2_outputs_match_the_chapter():
    out = T.v1_v2_outputs(A.chapter_inputs(), d_out=2, seed_v1=chapter.SA_V1_SEED, seed_v2=chapter.SA_V2_SEED)
    close(out["v1"], chapter.SA_V1_OUTPUT)
    close(out["v2"], chapter.SA_V2_OUTPUT)


@pytest.mark.parametrize("d_out", [1, 2, 5])
def test_exercise_3_1_copy_makes_outputs_equal(d_out):
    result = T.exercise_3_1(A.chapter_inputs(), d_out=d_out, seed_v1=123, seed_v2=789)
    assert result["max_abs_diff_before"] > 1e-3
    assert result["max_abs_diff_after"] < 1e-6
    torch.testing.assert_close(result["v1_after"], result["v2"], atol=1e-6, rtol=0)
