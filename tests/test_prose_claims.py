"""What the prose of pages 1-4 claims about a computation, checked by running that computation (issue 24).

Each test reads the sentence's part of ``content/<lang>/<page>.md`` in every language and runs what the page
runs: a number the prose writes is the computed one at the precision it is written, and an outcome it states
(a comparison, a trend, a threshold) is what the computation gives. Numbers are read in each language's
format (``6.56``, ``6,56``, ``6{,}56`` in math).
"""

from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest
import torch

from engine import attention as A
from engine import chapter
from engine.sections import causal_mask as cm
from engine.sections import dropout as do
from engine.sections import self_attention as sa
from engine.sections import trainable_weights as tw
from ui.page import load_parts

LANGS = ("en", "fr", "de")
#: A number as the prose writes it: a sign (ASCII or the minus sign), digits, a decimal part with the
#: language's sign (``{,}`` inside math); not the digits of a name (``float32``, ``x1``).
NUMBER = re.compile(r"(?<![\w.,])[−-]?\d+(?:(?:\.|,|\{,\})\d+)?(?!\w)")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, whatever the language's decimal sign (no group separators here)."""
    return [float(m.replace("−", "-").replace("{,}", ".").replace(",", ".")) for m in NUMBER.findall(text)]


def written(text: str, value: float, decimals: int) -> bool:
    """True when ``text`` writes ``value`` rounded to ``decimals`` decimals, in any language's format."""
    return any(math.isclose(n, round(value, decimals), abs_tol=10**-decimals / 10) for n in numbers_in(text))


def quiz_answer(slug: str, lang: str, marker: str) -> str:
    """The answer of the quiz question of ``slug`` whose heading contains ``marker``."""
    questions = load_parts(slug, lang)["quiz"].split("### ")
    found = [q for q in questions if marker in q.split("\n", 1)[0]]
    assert len(found) == 1, (slug, lang, marker)
    return found[0].split("\n", 1)[1]


# --- page 1 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_page_1_naive_jacobian_numbers_are_journeys(lang):
    """§3 bis: the query's S, (1 − w_q)/S, −w_q/S and the softmax's diagonal are filled by the page from the
    matrices it draws (views/self_attention.py's naive_row_text; tests/test_reader_formats.py), so the part
    itself writes no number but the columns' sum 0 and the weights' sum 1, which hold for any scores."""
    scores = sa.query_walkthrough(A.chapter_inputs(), 1).attn_scores
    naive = sa.naive_jacobian(scores)
    softmax = A.softmax_jacobian(torch.softmax(scores, dim=-1))
    body = load_parts("self_attention", lang)["naive_jacobian"].split("\n\n")[-1]
    assert set(numbers_in(body)) <= {0.0, 1.0}  # no hand-written number
    assert float(naive[1, 0]) == pytest.approx(float(naive[1, 5]))  # one value off the diagonal
    np.testing.assert_allclose(naive.sum(dim=0).numpy(), 0, atol=1e-12)  # every column sums to 0
    np.testing.assert_allclose(softmax.sum(dim=0).numpy(), 0, atol=1e-6)


@pytest.mark.parametrize("lang", LANGS)
def test_page_1_quiz_thresholds_are_where_torch_exp_switches(lang):
    """The quiz's overflow and zero thresholds of float32 are the ones torch.exp gives (≈ 88.7 and ≈ −104),
    not ln of the smallest subnormal (−103.28)."""
    overflow, underflow = sa.exp_limits(torch.float32)
    found = numbers_in(quiz_answer("self_attention", lang, "nan"))
    positive, negative = [n for n in found if n > 10], [n for n in found if n < -10]  # not "section 3", "0/0"
    assert positive and negative
    assert all(abs(n - overflow) <= 0.5 for n in positive)
    assert all(abs(n - underflow) <= 0.5 for n in negative)


@pytest.mark.parametrize("lang", LANGS)
def test_page_1_float16_overflows_far_sooner(lang):
    assert "float16" in load_parts("self_attention", lang)["numerics"]
    assert sa.exp_limits(torch.float16)[0] < sa.exp_limits(torch.float32)[0] / 4


# --- page 2 --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sweep() -> tw.DkSweep:
    return tw.dk_sweep()


@pytest.mark.parametrize("lang", LANGS)
def test_page_2_scale_outcomes_are_the_sweeps(lang, sweep):
    """§2: raw scores spread like √d_k (about 32 at the largest d_k, 1024), scaled ones keep variance 1; without
    the scale the largest weight heads to 1 and its gradient factor collapses."""
    body = load_parts("trainable_weights", lang)["scale"]
    stats = sweep.stats
    largest = int(stats["d_k"].max())
    assert largest == 1024 and "d_k = 1024" in body and written(body, math.sqrt(largest), 0)
    np.testing.assert_allclose(stats["var_scores"] / stats["d_k"], 1, rtol=0.1)
    np.testing.assert_allclose(stats["var_scaled"], 1, atol=0.1)
    unscaled = stats["w_max_unscaled"].to_numpy()
    assert unscaled[-1] > 0.9 > stats["w_max_scaled"].max() and np.all(np.diff(unscaled) > 0)
    assert stats["grad_unscaled"].iloc[-1] < stats["grad_scaled"].iloc[-1] / 4
    assert stats["grad_scaled"].min() > 0.15  # the scaled factor does not collapse
    # "a row of eight keys": the sweep's rows, and the figure's panel title "largest of 8 softmax weights"
    assert inspect.signature(tw.dk_sweep).parameters["num_keys"].default == 8
    assert {"en": "eight", "fr": "huit", "de": "acht"}[lang] in body


@pytest.mark.parametrize("lang", LANGS)
def test_page_2_init_outcomes_are_the_measurements(lang):
    """§4: the chart measures five widths; nn.Linear's weights are half negative and its projections keep variance
    1/3, torch.rand's are all positive and its projections grow like d_in/3."""
    init = tw.init_comparison()
    widths = sorted(set(init["d_in"]))
    assert len(widths) == 5 and {"en": "five", "fr": "cinq", "de": "fünf"}[lang] in load_parts(
        "trainable_weights", lang)["init"]
    rand, linear = init[init["init"] == "torch.rand"], init[init["init"] == "nn.Linear"]
    assert (rand["share_negative"] == 0).all()
    np.testing.assert_allclose(linear["share_negative"], 0.5, atol=0.03)
    np.testing.assert_allclose(linear["var_xw"], 1 / 3, rtol=0.1)
    np.testing.assert_allclose(rand["var_xw"], rand["d_in"] / 3, rtol=0.15)


def test_page_2_v1_row_1_is_the_context_vector_of_journey():
    """§3: with seed 123, SelfAttention_v1's row 1 is the context vector of "journey" that section 1 computes."""
    inputs = A.chapter_inputs()
    walk = tw.trainable_walkthrough(inputs, chapter.TRAINABLE_SEED, 2, 1)
    torch.manual_seed(chapter.TRAINABLE_SEED)
    context_vec = A.SelfAttention_v1(inputs.shape[1], 2)(inputs)  # (6, 3) -> (6, 2)
    torch.testing.assert_close(context_vec[1], walk.context_vec)


# --- page 3 --------------------------------------------------------------------------------------------------


def test_page_3_renormalised_rows_and_the_two_routes():
    """§1: after zeroing the future the row sums are below 1 except the last; the two routes differ by float32
    rounding only."""
    scores = cm.v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2)
    two = cm.mask_two_ways(scores, d_k=2)
    sums = two.row_sums.flatten()
    assert (sums[:-1] < 1).all() and float(sums[-1]) == pytest.approx(1.0, abs=1e-6)
    assert two.max_abs_diff < 1e-6


@pytest.mark.parametrize("lang", LANGS)
def test_page_3_triu_extremes_are_what_the_mask_hides(lang):
    """§3: k = 1 is causal, k = 0 leaves row 0 nothing, k ≥ 2 uncovers k − 1 future tokens, k ≤ −5 hides everything
    and k ≥ 6 nothing (T = 6); the quiz's k = 2 uncovers exactly one."""
    body = load_parts("causal_mask", lang)["triu"]
    assert all(s in body for s in ("k = 1", "k = 0", "k-1", r"k \le -5", r"k \ge 6"))
    assert "k = 2" in quiz_answer("causal_mask", lang, "diagonal=k")

    def future(k: int) -> int:  # the most future keys one row sees, counted from the mask
        mask = cm.triu_explorer(6, k).mask
        return max(int(((mask[i] == 0) & (torch.arange(6) > i)).sum()) for i in range(6))

    assert cm.triu_explorer(6, 1).is_causal and future(1) == 0
    assert cm.triu_explorer(6, 0).visible_per_row[0] == 0
    assert all(future(k) == k - 1 for k in range(2, 7))
    assert future(2) == 1
    assert (cm.triu_explorer(6, -5).mask == 1).all() and not (cm.triu_explorer(6, -4).mask == 1).all()
    assert (cm.triu_explorer(6, 6).mask == 0).all() and not (cm.triu_explorer(6, 5).mask == 0).all()


@pytest.mark.parametrize("token", range(6))
def test_page_3_rows_before_the_perturbed_token_are_unchanged_bit_for_bit(token):
    """§2: with the mask, earlier rows do not change at all (an exact 0), the perturbed row and later ones do."""
    leak = cm.leakage_test(A.chapter_inputs(), token, 1.0)
    diffs = leak.table["max_diff_causal"].to_numpy()
    assert (diffs[:token] == 0.0).all() and (diffs[token:] > 0).all()


@pytest.mark.parametrize("lang", LANGS)
def test_page_3_a_dtype_change_casts_the_weights_not_the_boolean_mask(lang):
    """§4: `.to(torch.float64)` casts floating-point tensors only; the page's mask stays bool (and stays put)."""
    assert "torch.float64" in load_parts("causal_mask", lang)["buffer_meta"]
    layer = A.CausalAttention(3, 2, 6, 0.0).to(torch.float64)
    assert layer.W_query.weight.dtype == torch.float64 and layer.mask.dtype == torch.bool


# --- page 4 --------------------------------------------------------------------------------------------------


def test_page_4_row_sums_leave_1_once_p_is_above_0():
    """§1: row sums are 1 at p = 0 and no longer all 1 once p > 0."""
    weights = do.chapter_causal_weights(A.chapter_inputs())
    sweep = do.dropout_sweep(weights, chapter.DROPOUT_SEED)
    for p, pair in sweep.items():
        ones = torch.allclose(pair.weights_row_sums, torch.ones(6), atol=1e-6)
        assert ones == (p == 0)


@pytest.mark.parametrize("lang", LANGS)
def test_page_4_mean_converges_with_slope_minus_a_half_slower_for_larger_p(lang):
    """§2: the largest weight is row 0's 1.0; the error falls like 1/√n (slope −1/2 on log-log axes) and larger p
    converges more slowly."""
    body = load_parts("dropout", lang)["mean"]
    assert "-1/2" in body and written(body, 1.0, 1)
    weights = do.chapter_causal_weights(A.chapter_inputs())
    assert float(weights.max()) == float(weights[0, 0]) == pytest.approx(1.0)
    finals = []
    for p in (0.1, 0.5, 0.9):
        table = do.dropout_expectation(weights, p, n_masks=2000, seed=0).table
        tail = table[table["masks"] >= 10]
        slope = np.polyfit(np.log(tail["masks"]), np.log(tail["max_abs_error"]), 1)[0]
        assert -0.7 < slope < -0.3, (p, slope)
        finals.append(float(table["sigma_over_sqrt_n"].iloc[-1]))
    assert finals == sorted(finals) and finals[0] < finals[-1]
