"""engine.sections.multi_head: the chapter's multi-head numbers, the lesson's layer, shapes and costs."""

import statistics

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter, gpt
from engine.sections import multi_head as M

ATOL = 5e-5  # the chapter prints 4 decimals


def close(actual, expected):
    torch.testing.assert_close(actual.detach().float(), torch.tensor(expected, dtype=torch.float32), atol=ATOL, rtol=0)


def test_wrapper_matches_chapter():
    out = M.wrapper_output()
    assert out.context_vec.shape == (2, 6, 4)
    close(out.context_vec[0], chapter.MHA_WRAPPER_OUTPUT)
    close(out.context_vec[1], chapter.MHA_WRAPPER_OUTPUT)
    torch.testing.assert_close(out.attn_weights.sum(-1), torch.ones(2, 2, 6))


def test_split_matches_chapter():
    out = M.split_output()
    assert out.context_vec.shape == (2, 6, 2)
    close(out.context_vec[0, 0], chapter.MHA_SPLIT_FIRST_ROW)


def test_exercise_3_2_d_out_one_per_head():
    out = M.wrapper_output(d_out=1, num_heads=2)
    assert out.context_vec.shape == (2, 6, 2)
    assert out.attn_weights.shape == (2, 2, 6, 6)


@pytest.mark.parametrize("head_dim, num_heads", [(2, 2), (1, 2), (3, 4), (4, 1)])
def test_wrapper_weights_copied_into_split(head_dim, num_heads):
    out = M.wrapper_vs_split(head_dim=head_dim, num_heads=num_heads)
    assert out.max_abs_diff < 1e-6
    assert out.max_abs_diff_before > 1e-3
    torch.testing.assert_close(out.split, out.wrapper)


def test_divisors_and_split_messages():
    assert M.divisors(32) == [1, 2, 4, 8, 16, 32]
    assert M.divisors(7) == [1, 7]
    assert M.check_split(32, 4) == 8
    with pytest.raises(ValueError, match="d_out=32 is not divisible by num_heads=5"):
        M.check_split(32, 5)
    with pytest.raises(ValueError, match="positive"):
        M.check_split(0, 1)
    assert M.nearest_divisors(32, 5) == (4, 8)
    assert M.nearest_divisors(32, 8) == (8, 8)
    assert M.nearest_divisors(7, 40) == (7, 7)


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 16, 32])
def test_param_count_does_not_depend_on_heads(num_heads):
    counts = M.param_counts(chapter.LESSON_N_EMBD, num_heads)
    assert counts.qkv == chapter.LESSON_QKV_PARAMS
    assert counts.proj == chapter.LESSON_PROJ_PARAMS
    assert counts.total == counts.qkv + counts.proj


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 16, 32])
def test_lesson_numbers_n_embd_32(num_heads):
    """The lesson's own numbers, written out: n_embd 32 gives qkv 3168 and proj 1056 for every head count."""
    counts = M.param_counts(32, num_heads)
    assert (counts.qkv, counts.proj) == (3168, 1056)
    assert counts.qkv == 32 * 96 + 96 and counts.proj == 32 * 32 + 32


def test_param_counts_equal_the_built_layer():
    layer = gpt.CausalSelfAttention(M.lesson_config(48, 6))
    counts = M.param_counts(48, 6)
    assert counts.total == gpt.count_params(layer)
    assert counts.qkv == gpt.count_params(layer.qkv) == 3 * 48 * 48 + 3 * 48
    with pytest.raises(ValueError, match="divisible"):
        M.param_counts(32, 3)


@pytest.mark.parametrize("n_embd, num_heads, T", [(32, 4, 5), (12, 3, 7), (8, 8, 1)])
def test_attention_steps_equal_the_layer(n_embd, num_heads, T):
    torch.manual_seed(3)
    layer = gpt.CausalSelfAttention(M.lesson_config(n_embd, num_heads, block_size=T)).eval()
    x = torch.randn(2, T, n_embd)
    steps = M.attention_steps(layer, x)
    with torch.no_grad():
        out, weights = layer(x, return_weights=True)
        fast, _ = layer(x)
    torch.testing.assert_close(steps.context_vec, out)
    torch.testing.assert_close(steps.context_vec, fast, atol=1e-5, rtol=0)
    torch.testing.assert_close(steps.attn_weights, weights)
    assert steps.q_heads.shape == (2, num_heads, T, n_embd // num_heads)
    assert not steps.q_heads.is_contiguous() or num_heads == 1 or T == 1
    with pytest.raises(ValueError, match="block_size"):
        M.attention_steps(layer, torch.randn(1, T + 1, n_embd))


def test_lesson_shapes():
    out = M.heads_on_line(chapter.LESSON_LINE, 32, 4)
    shapes = dict(zip(out.shapes["step"], out.shapes["shape"], strict=True))
    assert list(out.shapes["step"]) == [key for key, _, _ in M.SHAPE_STEPS]
    assert shapes["input"] == "(1, 5, 32)"
    assert shapes["q_heads"] == "(1, 4, 5, 8)"
    assert shapes["attn_scores"] == "(1, 4, 5, 5)"
    assert shapes["merged"] == "(1, 5, 32)"
    assert out.attn_weights.shape == (4, 5, 5)
    assert out.score_bytes == 4 * 5 * 5 * 4
    assert out.params == M.param_counts(32, 4)
    w = out.attn_weights
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 5))
    assert (w.triu(diagonal=1) == 0).all()
    other = M.heads_on_line("山依日白尽", 16, 2)
    assert dict(zip(other.shapes["step"], other.shapes["shape"], strict=True))["q_heads"] == "(1, 2, 5, 8)"


def test_heads_differ_from_one_another():
    w = M.heads_on_line(chapter.LESSON_LINE, 32, 4).attn_weights
    assert (w[0] - w[1]).abs().max() > 1e-3


def test_line_errors():
    with pytest.raises(ValueError, match="empty"):
        M.heads_on_line("", 32, 4)
    with pytest.raises(ValueError, match="divisible"):
        M.heads_on_line(chapter.LESSON_LINE, 32, 3)
    with pytest.raises(ValueError, match="at most 64"):
        M.heads_on_line("x" * 65, 32, 4)


def test_same_character_same_embedding():
    x = M.line_embeddings("abca", 8)
    torch.testing.assert_close(x[0, 0], x[0, 3])
    assert not torch.equal(x[0, 0], x[0, 1])


def test_fused_layer_equals_the_chapter_class_with_stacked_weights():
    torch.manual_seed(1)
    C, H, T = 12, 3, 7
    mha = A.MultiHeadAttention(C, C, context_length=T, dropout=0.0, num_heads=H, qkv_bias=True)
    fused = gpt.CausalSelfAttention(M.lesson_config(C, H, block_size=T)).eval()
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))  # (3C, C)
        fused.qkv.bias.copy_(torch.cat([mha.W_query.bias, mha.W_key.bias, mha.W_value.bias]))  # (3C,)
        fused.proj.load_state_dict(mha.out_proj.state_dict())
        x = torch.randn(2, T, C)
        torch.testing.assert_close(M.attention_steps(fused, x).context_vec, mha(x), atol=1e-5, rtol=0)


def test_page_line():
    assert M.page_line("", 12) == M.PageLine(chapter.LESSON_LINE, "empty", 0)
    assert M.page_line("山" * 1000, 12) == M.PageLine("山" * 12, "too_long", 1000)
    assert M.page_line("ab", 12) == M.PageLine("ab", None, 2)


@pytest.mark.parametrize("d_out, heads, head_dim, nearest", [(32, 4, 8, (4,)), (32, 5, None, (4, 8)),
                                                             (7, 40, None, (7,)), (4096, 256, 16, (256,))])
def test_split_check(d_out, heads, head_dim, nearest):
    check = M.split_check(d_out, heads)
    assert check.head_dim == head_dim and check.nearest == nearest
    assert check.ratio == pytest.approx(d_out / heads)
    assert (check.error is None) == (head_dim is not None)
    if check.error:
        assert f"d_out={d_out} is not divisible by num_heads={heads}" in check.error
    with pytest.raises(ValueError):
        M.split_check(0, 1)


def test_bench_rows():
    table = pd.DataFrame({"size": ["a", "a", "b"], "variant": ["x", "y", "x"], "what": ["", "", ""],
                          "forward ms": [1.0, 2.0, 3.0], "× fastest (fwd)": [1.0, 2.0, 1.0],
                          "forward+backward ms": [2.0, None, 5.0], "max |out − split|": [0.0, 1e-7, 0.0]})
    rows = M.bench_rows(table, "a")
    keys = [key for key, _ in M.BENCH_COLUMNS]
    assert list(rows.columns) == [*keys[:2], "forward_iqr", *keys[2:]]
    assert rows["variant"].tolist() == ["x", "y"] and rows["forward_ms"].tolist() == [1.0, 2.0]
    # a file written before the fastest run was recorded has no min column: the page shows it empty
    assert rows["forward_min_ms"].tolist() == [None, None]
    # without the file's runs no interquartile range; with them, each variant's (q1, q3), None where it has none
    assert rows["forward_iqr"].tolist() == [None, None]
    results = [{"variant": "y", "forward_samples_ms": [1.0, 2.0, 3.0, 4.0, 5.0]}, {"variant": "x"}]
    assert M.bench_rows(table, "a", results)["forward_iqr"].tolist() == [None, (2.0, 4.0)]


def bench_size(wrapper_ms, split_ms, **extra):
    results = [{"variant": "wrapper", "forward_ms": wrapper_ms}, {"variant": "split", "forward_ms": split_ms},
               {"variant": "sdpa_causal", "forward_ms": 0.5 * min(wrapper_ms, split_ms)}]
    return {"batch": 2, "seq_len": 1024, "n_embd": 768, "num_heads": 12, "results": results, **extra}


@pytest.mark.parametrize("wrapper_ms, split_ms", [(1194.4, 399.6), (116.0, 158.5), (2.3, 1.9)])
def test_bench_verdict_follows_the_numbers(wrapper_ms, split_ms):
    """Page 5 section 4: the sentence says whichever construction the file found faster, never a fixed one."""
    verdict = M.bench_verdict(bench_size(wrapper_ms, split_ms))
    assert verdict.wrapper_faster == (wrapper_ms < split_ms)
    assert verdict.ratio == pytest.approx(max(wrapper_ms, split_ms) / min(wrapper_ms, split_ms))
    assert verdict.fastest == "sdpa_causal" and verdict.fastest_ms == pytest.approx(0.5 * min(wrapper_ms, split_ms))
    assert verdict.score_bytes == 2 * 12 * 1024**2 * 4 and verdict.head_bytes * 12 == verdict.score_bytes


def test_bench_verdict_of_the_shipped_file():
    """Every size of the shipped file gives a verdict, whichever numbers a re-measurement wrote there."""
    from engine.bench import attention as bench

    data = bench.load_results("assets/bench_attention.json")
    for size in data["sizes"]:
        times = {r["variant"]: r["forward_ms"] for r in size["results"]}
        verdict = M.bench_verdict(size)
        assert verdict.wrapper_faster == (times["wrapper"] < times["split"])
        assert verdict.fastest_ms == min(times.values())


@pytest.mark.parametrize("size", [
    {"batch": 2, "seq_len": 8, "n_embd": 16, "num_heads": 4, "results": [{"variant": "split", "forward_ms": 1.0}]},
    bench_size(0.0, 1.0), bench_size(1.0, 2.0, batch="x"), {"results": []},
])
def test_bench_verdict_of_an_unexpected_file_is_none(size):
    assert M.bench_verdict(size) is None


def timed_size(wrapper_runs, split_runs):
    """A benchmark entry whose wrapper and split layer recorded these forward runs (ms), medians as the file's."""
    results = [{"variant": name, "forward_ms": statistics.median(runs), "forward_samples_ms": list(runs)}
               for name, runs in (("wrapper", wrapper_runs), ("split", split_runs))]
    return {"batch": 8, "seq_len": 64, "n_embd": 256, "num_heads": 4, "results": results}


@pytest.mark.parametrize("wrapper_runs, split_runs, within_noise, wrapper_faster", [
    ([10.0, 50.0, 100.0, 300.0, 400.0], [20.0, 60.0, 102.0, 250.0, 500.0], True, True),  # a 2 % gap, runs spread 5x
    ([10.0, 11.0, 12.0, 13.0, 14.0], [30.0, 31.0, 32.0, 33.0, 34.0], False, True),  # no run of one near the other
    ([30.0, 31.0, 32.0, 33.0, 34.0], [10.0, 11.0, 12.0, 13.0, 14.0], False, False),
])
def test_bench_verdict_within_noise(wrapper_runs, split_runs, within_noise, wrapper_faster):
    """Page 5 section 4: the two constructions are called equal only when a median lies in the other's
    interquartile range (the rule of the fastest variant's rivals too); otherwise the faster median wins."""
    verdict = M.bench_verdict(timed_size(wrapper_runs, split_runs))
    assert verdict.within_noise is within_noise and verdict.wrapper_faster is wrapper_faster
    for runs, iqr in ((wrapper_runs, verdict.wrapper_iqr), (split_runs, verdict.split_iqr)):
        assert iqr == pytest.approx(tuple(np.percentile(runs, [25, 75])))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 1e4), min_size=2, max_size=15), st.lists(st.floats(0.01, 1e4), min_size=2,
                                                                          max_size=15))
def test_bench_verdict_noise_is_symmetric_and_bound_to_the_quartiles(wrapper_runs, split_runs):
    verdict = M.bench_verdict(timed_size(wrapper_runs, split_runs))
    swapped = M.bench_verdict(timed_size(split_runs, wrapper_runs))
    assert verdict.within_noise == swapped.within_noise
    inside = [lo <= m <= hi for (lo, hi), m in ((verdict.wrapper_iqr, verdict.split_ms),
                                                   (verdict.split_iqr, verdict.wrapper_ms))]
    assert verdict.within_noise == (any(inside) or verdict.wrapper_ms == verdict.split_ms)


@pytest.mark.parametrize("runs", [None, [], [5.0], [1.0, float("nan")], [1.0, -2.0], [1.0, True], "12", [1.0] * 10_001])
def test_bench_verdict_without_usable_runs_follows_the_medians(runs):
    size = bench_size(2.0, 2.1)
    for r in size["results"]:
        r["forward_samples_ms"] = runs
    verdict = M.bench_verdict(size)
    assert verdict.wrapper_iqr is None and verdict.split_iqr is None
    assert not verdict.within_noise and verdict.wrapper_faster



def runs_size(runs: dict) -> dict:
    """A benchmark entry whose variants recorded these forward runs (ms), medians as the file's."""
    results = [{"variant": name, "forward_ms": statistics.median(r), "forward_samples_ms": list(r)}
               for name, r in runs.items()]
    return {"batch": 8, "seq_len": 64, "n_embd": 256, "num_heads": 4, "results": results}


SPREAD = [1.0, 2.0, 10.0, 200.0, 210.0]  # median 10, quartiles 2 and 200: a loaded run


@pytest.mark.parametrize("runs, fastest, rivals", [
    # every middle half apart: the lowest median is the fastest of all
    ({"wrapper": [30.0, 31.0, 32.0], "split": [20.0, 21.0, 22.0], "sdpa_causal": [5.0, 6.0, 7.0]}, "sdpa_causal", ()),
    # the fastest's own runs spread over the others' medians (the shipped small input's fused_qkv)
    ({"wrapper": [30.0, 31.0, 32.0], "split": [20.0, 21.0, 22.0], "fused_qkv": SPREAD}, "fused_qkv",
     ("split", "wrapper")),
    # a slower variant's runs reach below the fastest's median, the runner-up's do not
    ({"wrapper": [3.0, 4.0, 40.0, 41.0, 42.0], "split": [20.0, 21.0, 22.0], "sdpa_causal": [5.0, 6.0, 7.0]},
     "sdpa_causal", ("wrapper",)),
    # equal medians without recorded runs
    ({"wrapper": [9.0], "split": [9.0], "sdpa_causal": [9.0]}, "wrapper", ("split", "sdpa_causal")),
])
def test_fastest_of_all_only_beyond_the_noise(runs, fastest, rivals):
    """Page 5 section 4: the lowest median is named fastest only when no other variant is within its noise."""
    verdict = M.bench_verdict(runs_size(runs))
    assert verdict.fastest == fastest and verdict.fastest_rivals == rivals


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0.01, 1e4), min_size=2, max_size=9), min_size=3, max_size=6))
def test_fastest_rivals_are_the_variants_whose_quartiles_overlap_its_median(all_runs):
    names = ["wrapper", "split", *(f"v{i}" for i in range(len(all_runs) - 2))]
    verdict = M.bench_verdict(runs_size(dict(zip(names, all_runs, strict=True))))
    medians = {n: statistics.median(r) for n, r in zip(names, all_runs, strict=True)}
    quartiles = {n: np.percentile(r, [25, 75]) for n, r in zip(names, all_runs, strict=True)}
    best = verdict.fastest
    assert medians[best] == min(medians.values()) and best not in verdict.fastest_rivals
    assert [medians[n] for n in verdict.fastest_rivals] == sorted(medians[n] for n in verdict.fastest_rivals)
    tol = 1e-9 * max(medians.values())  # the quartiles' float rounding (statistics against numpy)
    for name in names:
        if name == best:
            continue
        apart = (medians[best] < quartiles[name][0] - tol and medians[name] > quartiles[best][1] + tol)
        overlap = (medians[best] > quartiles[name][0] + tol or medians[name] < quartiles[best][1] - tol
                   or medians[name] == medians[best])
        if apart:
            assert name not in verdict.fastest_rivals
        if overlap:
            assert name in verdict.fastest_rivals


def test_fastest_of_the_shipped_file_follows_its_runs():
    """Whichever numbers a re-measurement wrote, the shipped file's fastest is named only beyond the noise."""
    from engine.bench import attention as bench

    for size in bench.load_results("assets/bench_attention.json")["sizes"]:
        runs = {r["variant"]: r["forward_samples_ms"] for r in size["results"]}
        verdict = M.bench_verdict(size)
        best = np.median(runs[verdict.fastest])
        best_q3 = np.percentile(runs[verdict.fastest], 75)
        for name, r in runs.items():
            if name != verdict.fastest:
                overlap = np.percentile(r, 25) <= best or np.median(r) <= best_q3
                assert (name in verdict.fastest_rivals) == overlap, name

def test_cost_table():
    table = M.cost_table(32, (5, 1024))
    assert table["num_heads"].tolist() == [1, 2, 4, 8, 16, 32]
    assert set(table["qkv_params"]) == {3168} and set(table["proj_params"]) == {1056}
    assert table["scores_bytes_5"].tolist() == [h * 25 * 4 for h in (1, 2, 4, 8, 16, 32)]
    assert table["scores_bytes_1024"].tolist() == [h * 1024**2 * 4 for h in (1, 2, 4, 8, 16, 32)]
