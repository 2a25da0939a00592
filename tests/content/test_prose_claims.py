"""What the prose of pages 1-4 and 7 claims about a computation, checked by running that computation (issue 24).

Each test reads the sentence's part of ``content/<lang>/<page>.md`` in every language and runs what the page
runs: a number the prose writes is the computed one at the precision it is written, and an outcome it states
(a comparison, a trend, a threshold) is what the computation gives. Numbers are read in each language's
format (``6.56``, ``6,56``, ``6{,}56`` in math).
"""

from __future__ import annotations

import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from engine import attention as A
from engine import chapter, positions
from engine import gpt as G
from engine.sections import causal_mask as cm
from engine.sections import dropout as do
from engine.sections import positional_encodings as pe
from engine.sections import self_attention as sa
from engine.sections import trainable_weights as tw
from ui.i18n import LANGUAGES, translations
from ui.page import load_parts

LANGS = tuple(LANGUAGES)
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
    matrices it draws (views/self_attention.py's naive_row_text; tests/pages/test_reader_formats.py), so the part
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


@pytest.mark.parametrize("lang", LANGS)
def test_page_1_a_negative_score_makes_the_others_add_up_to_more_than_1_not_one_weight_above_1(lang):
    """Issue 36: dividing [1, 1, −0.5] by its sum gives [0.667, 0.667, −0.333]: one weight negative and the positive
    ones adding up to more than 1, none of them above 1; the prose says so and the page writes the computed line."""
    example = sa.negative_score_example()
    weights = example.naive_weights
    assert (weights < 0).sum() == 1 and example.positive_sum > 1 and float(weights.max()) < 1
    assert float(weights.sum()) == pytest.approx(1.0, abs=1e-6)
    body = load_parts("self_attention", lang)["naive_jacobian"]
    assert not any(wrong in body for wrong in ("another one exceeds 1", "un autre\n  dépasse 1", "dépasse 1",
                                                 "ein anderes größer als 1", "größer als 1"))
    assert {"en": "more than 1", "fr": "plus de 1", "de": "mehr als 1"}[lang] in body


@pytest.mark.parametrize("lang", LANGS)
def test_page_1_loops_and_matmul_agree_up_to_float32_rounding(lang):
    """Issue 36: "the same numbers" holds to float32 rounding, which the prose now says (5.96e-8 on the page)."""
    every = sa.loop_vs_matmul(A.chapter_inputs())
    assert every.max_abs_diff < 8 * torch.finfo(torch.float32).eps
    assert {"en": "float32 rounding", "fr": "arrondis\nfloat32", "de": "float32-Rundung"}[lang] in load_parts(
        "self_attention", lang)["allpairs"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_page_1_half_precision_stable_and_torch_softmax_part_by_the_dtypes_rounding(dtype):
    """Issue 36: the page's sentence on why the stable column and torch.softmax differ in float16: torch.softmax
    on the CPU computes in float32 and rounds once (the same as the page's reference column), the stable one
    rounds every step, and they differ by a few of the dtype's spacings, never by more than the 4th decimal's."""
    scores = sa.query_walkthrough(A.chapter_inputs(), 5).attn_scores
    x = scores.to(dtype) * torch.tensor(150.0, dtype=dtype)
    assert torch.equal(torch.softmax(x, dim=0), torch.softmax(x.float(), dim=0).to(dtype))
    numerics = sa.softmax_numerics(scores, 150.0, dtype)
    eps = torch.finfo(dtype).eps
    assert 0 < numerics.stable_vs_torch <= 8 * eps
    assert sa.softmax_numerics(scores, 150.0, torch.float32).stable_vs_torch < 1e-6


def test_page_1_a_silent_underflow_is_not_called_fine():
    """Issue 36: at scale −150 with the query "one", the naive weights are finite but two fell to exactly 0 where
    the stable softmax is positive: counted, so the page warns instead of a green "all finite". §3 names that case."""
    for lang in LANGS:
        assert "−150" in load_parts("self_attention", lang)["numerics"] and "one" in load_parts(
            "self_attention", lang)["numerics"]
    scores = sa.query_walkthrough(A.chapter_inputs(), 4).attn_scores
    numerics = sa.softmax_numerics(scores, -150.0, torch.float32)
    assert numerics.naive_broken == 0 and numerics.naive_underflowed >= 1
    assert sa.softmax_numerics(scores, 1.0, torch.float32).naive_underflowed == 0


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


@pytest.mark.parametrize("lang", LANGS)
def test_page_2_attention_weights_are_no_part_of_the_model_but_training_keeps_them(lang):
    """Issue 36: page 2 said the attention weights are "never stored", page 6 that "training keeps several for the
    backward pass". Both facts, precisely: the weights are not in the module's state_dict (no checkpoint holds
    them); with autograd on, the softmax keeps its output for the backward pass; under no_grad nothing keeps it."""
    body = load_parts("trainable_weights", lang)["two_weights"]
    assert "`state_dict()`" in body and "`torch.no_grad()`" in body
    assert not any(old in body for old in ("never stored", "jamais stockés", "nie gespeichert"))
    torch.manual_seed(chapter.SA_V2_SEED)
    layer = A.SelfAttention_v2(3, 2)
    assert set(layer.state_dict()) == {"W_query.weight", "W_key.weight", "W_value.weight"}
    x = A.chapter_inputs()
    keys, queries = layer.W_key(x), layer.W_query(x)  # (6, 2) each
    attn_weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)  # (6, 6)
    assert type(attn_weights.grad_fn).__name__ == "SoftmaxBackward0"
    torch.testing.assert_close(attn_weights.grad_fn._saved_result, attn_weights)  # kept for the backward pass
    with torch.no_grad():
        assert torch.softmax(queries @ keys.T, dim=-1).grad_fn is None
    assert {"en": "backward pass", "fr": "passe arrière", "de": "Rückwärtsdurchlauf"}[lang] in body


@pytest.mark.parametrize("lang", LANGS)
def test_page_2_box_colours_named_in_the_prose_are_the_figures(lang):
    """Issue 36: "without scale" is the palette's ALTERNATIVE grey, no longer KEY's orange; the prose names the
    colours the figure draws."""
    from engine import palette
    from engine.figures import trainable_weights as figures

    labels = figures.DkSweepLabels(spread_panel="a", w_max_panel="b", grad_panel="c", without_scale="w",
                                   with_scale="s", score_axis="x", step_title="{d_k}{var}{var_scaled}{n}")
    figure = figures.dk_sweep_figure(tw.dk_sweep(), labels)
    boxes = {t.marker.color for t in figure.data if t.type == "box"}
    bars = {c for t in figure.data if t.type == "bar" for c in t.marker.color}
    assert boxes == {palette.ALTERNATIVE, palette.ATTN_SCORES}
    assert bars == {palette.ALTERNATIVE, palette.ATTN_WEIGHTS}
    body = load_parts("trainable_weights", lang)["scale"]
    # the colour legend's names: vermillion is the scores' colour (engine.palette.ATTN_SCORES)
    grey, red = {"en": ("grey box", "vermillion one"), "fr": ("boîte grise", "la vermillon"),
                 "de": ("graue Box", "die zinnoberrote")}[lang]
    assert grey in body and red in body and "orange" not in body


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
    """§4: `.to(torch.float64)` casts floating-point tensors only; the page's mask stays bool (and stays put) in
    every row of the table, while the chapter's float 0./1. buffer would be cast: the prose says whose mask is
    bool, not "the mask either way"."""
    body = load_parts("causal_mask", lang)["buffer_meta"]
    assert "torch.float64" in body and {"en": "this page's\nmask is a bool tensor", "fr": "le masque de cette page est "
                                        "booléen", "de": "Maske dieser Seite ist"}[lang] in body
    assert "`causal_mask`" in body and "`.bool()`" in body  # where the reader sees the bool: its builder's last call
    assert inspect.getsource(A.causal_mask).rstrip().endswith(".bool()")
    for cls in cm.MASK_HOLDERS.values():
        layer = cls(3, 2, 6, 0.0).to(torch.float64)
        assert layer.W_query.weight.dtype == torch.float64 and layer.mask.dtype == torch.bool
    chapter_style = torch.nn.Module()
    chapter_style.register_buffer("mask", torch.triu(torch.ones(6, 6), diagonal=1))  # the chapter's float buffer
    assert chapter_style.to(torch.float64).mask.dtype == torch.float64


@pytest.mark.parametrize("lang", LANGS)
def test_page_3_where_it_departs_from_the_chapter_on_state_dict_it_is_right(lang):
    """Issue 36: the page says, against the chapter, that a mask left out of state_dict (persistent=False) comes back
    from __init__ when a checkpoint is reloaded: the non-persistent buffer has no key, and a fresh module loaded
    from that state_dict holds the same mask and computes the same outputs."""
    body = load_parts("causal_mask", lang)["buffer_meta"]
    assert "`persistent=False`" in body and {"en": "departs from the chapter", "fr": "s'écarte ici du chapitre",
                                             "de": "weicht die Seite vom Kapitel ab"}[lang] in body
    # "in the first table, the persistent=False row lists only the three weight matrices as its keys"
    assert {"en": "three weight matrices", "fr": "trois matrices de poids", "de": "drei Gewichtsmatrizen"}[lang] in body
    keys = cm.buffer_demo("cpu").set_index("holder")["state_dict_keys"]
    assert keys["buffer_nonpersistent"].split(", ") == ["W_query.weight", "W_key.weight", "W_value.weight"]
    torch.manual_seed(0)
    saved = cm.CausalAttentionNonPersistent(3, 2, 6, 0.0)
    assert "mask" not in saved.state_dict() and "mask" in A.CausalAttention(3, 2, 6, 0.0).state_dict()
    reloaded = cm.CausalAttentionNonPersistent(3, 2, 6, 0.0)
    reloaded.load_state_dict(saved.state_dict())
    assert torch.equal(reloaded.mask, saved.mask)
    batch = A.chapter_inputs().unsqueeze(0)  # (1, 6, 3)
    torch.testing.assert_close(reloaded(batch), saved(batch))


@pytest.mark.parametrize("lang", LANGS)
def test_page_3_the_routes_are_named_in_the_order_the_panels_draw_them(lang):
    """Issue 36: "top row / bottom row" was wrong on a phone; the prose now counts panels, the naive route first, as
    the page draws its six panels (three of the naive route, then three of the efficient one) and the diagram."""
    body = load_parts("causal_mask", lang)["two_ways"]
    first, last = {"en": ("first three panels", "last three panels"), "fr": ("trois premiers panneaux",
                   "trois derniers panneaux"), "de": ("ersten drei Felder", "letzten drei Felder")}[lang]
    naive = {"en": "naive approach", "fr": "approche naïve", "de": "naive"}[lang]
    assert body.index(first) < body.index(last) and body.index(naive) < body.index(last)
    assert not any(w in body for w in ("top row", "bottom row", "rangée", "obere Reihe", "untere Reihe"))


# --- page 4 --------------------------------------------------------------------------------------------------


def test_page_4_row_sums_leave_1_once_p_is_above_0():
    """§1: row sums are 1 at p = 0 and no longer all 1 once p > 0."""
    weights = do.chapter_causal_weights(A.chapter_inputs())
    sweep = do.dropout_sweep(weights, chapter.DROPOUT_SEED)
    for p, pair in sweep.items():
        ones = torch.allclose(pair.weights_row_sums, torch.ones(6), atol=1e-6)
        assert ones == (p == 0)


@pytest.mark.parametrize("lang", LANGS)
def test_page_4_the_labs_one_slider_sets_both_rates_its_config_keeps_apart(lang):
    """§4: the Lab's config can give the attention weights a rate of their own, and the Lab's one dropout slider
    (``dropout=``, ui/lab/controls.py) sets both rates to its value."""
    body = load_parts("dropout", lang)["gpt"]
    assert "`attn_dropout`" in body and "`resid_dropout`" in body
    config = G.GPTConfig(dropout=0.3)
    assert config.attn_dropout_rate == config.resid_dropout_rate == 0.3
    assert G.GPTConfig(dropout=0.3, attn_dropout=0.0).attn_dropout_rate == 0.0
    controls = Path(__file__).resolve().parents[2].joinpath("ui", "lab", "controls.py").read_text(encoding="utf-8")
    assert controls.count('slider("dropout"') == 1 and "dropout=dropout," in controls


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


# --- page 5 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_page_5_cost_counts_are_the_lesson_layers_at_n_embd_32(lang):
    """The cost part writes 3,168 and 1,056 (the lesson's qkv and proj at n_embd 32, whatever the head count) and
    the layers (32 → 96) and (32 → 32): the counts of the module, for every head count that divides 32."""
    from engine import gpt
    from engine.diagrams.multi_head import split_layers
    from engine.sections import multi_head as mh

    body = load_parts("multi_head", lang)["cost"]
    for heads in (1, 2, 4, 8, 16, 32):
        counts = mh.param_counts(32, heads)
        assert (counts.qkv, counts.proj) == (3168, 1056)
    layers = split_layers(gpt.CausalSelfAttention(mh.lesson_config(32, 4, block_size=5)))
    assert layers.projections == (("qkv", 32, 96),) and layers.out_projection == ("proj", 32, 32)
    digits = body.replace("\u202f", "").replace(" ", "").replace(",", "").replace(".", "")
    assert "3168" in digits and "1056" in digits and "(32 → 96)" in body and "(32 → 32)" in body


def test_page_5_scores_flops_do_not_grow_with_heads_but_their_memory_does():
    """The cost part says the heads' score products cost B·T²·n_embd multiply-adds whatever H, while the scores take
    B·H·T² numbers: counted on the layer that runs."""
    from engine.sections import multi_head as mh

    T, n_embd = 7, 32
    for heads in (1, 4, 8):
        run = mh.heads_on_line("白日依山尽黄河"[:T], n_embd, heads)
        head_dim = n_embd // heads
        assert heads * T * T * head_dim == T * T * n_embd  # the products' multiply-adds
        assert run.score_bytes == 4 * heads * T * T  # float32 scores, one (T, T) table per head


@pytest.mark.parametrize("lang", LANGS)
def test_page_5_speed_part_names_the_agreement_column_by_its_header(lang):
    """§4 says which column shows the variants agree by its header, not by a position ("the last column" was wrong
    once the "stable" column came after it)."""
    from pathlib import Path

    source = Path(__file__).resolve().parents[2].joinpath("views", "multi_head.py").read_text(encoding="utf-8")
    assert '"stable": _("stable"), "max_abs_diff": _("max |out − split|")' in source  # not the last column
    body = load_parts("multi_head", lang)["speed"]
    assert f"`{translations(lang).gettext('max |out − split|')}`" in body
    assert not re.search({"en": "last column", "fr": "dernière colonne", "de": "letzte Spalte"}[lang], body)


@pytest.mark.parametrize("lang", LANGS)
def test_page_5_speed_details_state_the_rules_the_page_applies(lang):
    """The drawer's stability factor and the rule "forward+backward below forward is left out" are the code's."""
    from engine.bench import attention as bench

    body = load_parts("multi_head", lang)["speed_details"]
    assert written(body, bench.STABLE_RATIO, 1)
    rows = bench.size_checks({"results": [{"variant": "x", "forward_ms": 2.0, "forward_backward_ms": 1.0,
                                           "forward_min_ms": 2.0, "forward_backward_min_ms": 1.0}]})
    assert rows["unordered"] == ["x"]


# --- page 6 --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_page_6_score_sizes_are_the_computed_ones(lang):
    """384 MiB at GPT-2's size (B 8, H 12, T 1,024, float32) and 6 GiB at T 4,096, as written in the cost part and
    its quiz."""
    from engine.sections import memory_layout as ml

    assert ml.score_tensor_bytes(8, 12, 1024) == 384 * 2**20
    assert ml.score_tensor_bytes(8, 12, 4096) == 6 * 2**30
    body = load_parts("memory_layout", lang)["cost"]
    assert written(body, 384, 0)
    assert written(quiz_answer("memory_layout", lang, "B = 8, H = 12"), 6, 0)


@pytest.mark.parametrize("lang", LANGS)
def test_page_6_backward_pass_sentence_matches_page_2_and_the_count(lang):
    """Page 2 says the attention weights are never stored (in the model); page 6 says autograd keeps them during
    training: both hold, counted — no parameter of the layer has their shape, a training pass saves them, an
    inference pass none."""
    from engine.sections import memory_layout as ml

    saved = ml.saved_score_tensors(dropout=0.1)
    assert saved.training >= 1 and saved.inference == 0
    layer = A.MultiHeadAttention(4, 4, context_length=6, dropout=0.1, num_heads=2)
    assert not any(tuple(p.shape)[-2:] == saved.shape[-2:] for p in layer.parameters())
    body = load_parts("memory_layout", lang)["cost"]
    assert {"en": "training keeps several", "fr": "en\ngarde plusieurs", "de": "hält\nmehrere"}[lang] not in body


# --- the Lab ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", LANGS)
def test_lab_context_of_the_lesson_is_128_positions(lang):
    """The lesson's pos_emb has 128 rows: the prose says the lesson gives the context, and the course preset's
    block_size is that context."""
    from engine import presets

    body = load_parts("lab", lang)["controls"]
    assert presets.PRESETS["course"].model.block_size == 128
    assert "128" in body and "pos_emb" in body and {"en": "not its layers or context", "fr": "pas les couches ni le",
                              "de": "nicht die Schichten\nund den Kontext"}[lang] not in body


@pytest.mark.parametrize("lang", LANGS)
def test_lab_similarity_band_is_named_by_its_end_of_the_scale(lang):
    """Neighbouring rows of a trained table have a cosine similarity near +1; the prose names the band by that end
    of the colour bar, not by a brightness the palette decides ("bright" was the darkest colour)."""
    body = load_parts("lab", lang)["positions"].lower()
    assert "+1" in body
    assert not any(words in body for words in ("bright band", "bande claire", "helle band"))


def test_lab_shipped_model_loss_is_the_whole_split():
    """The Lab shows the shipped model's loss over the whole validation split (4.094), measured again here, not the
    checkpoint's 10-batch estimate (4.086)."""
    from engine.checkpoint import load_checkpoint
    from engine.corpus import load_corpus
    from engine.lab.experiments.measurement import split_loss
    from ui.lab import shipped

    recorded = shipped.whole_split()
    assert recorded is not None
    ckpt = load_checkpoint(shipped.WHOLE_SPLIT_FILE.parent)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    measured = split_loss(ckpt.model, load_corpus("tang").val_ids)
    assert (measured.windows, measured.tokens) == (recorded.windows, recorded.tokens)
    assert measured.mean == pytest.approx(recorded.val_loss, abs=1e-4)
    assert f"{recorded.val_loss:.3f}" != f"{ckpt.summary['final_val_loss']:.3f}"  # the estimate is another number


def test_lab_window_trends_are_said_only_where_the_seeds_interval_leaves_out_0():
    """The shipped runs' growth intervals: 1 head, RoPE and no position grow (interval above 0); sinusoidal holds 0,
    so no "grows" is said for it."""
    from engine.lab.results import read_exercises
    from ui.lab.experiments import EARLY_SHARE, window_growth

    data = read_exercises()
    split = max(1, data.block_size // EARLY_SHARE)
    for exercise, key, grows in (("heads", "heads_1", True), ("positions", "pos_rope", True),
                                 ("positions", "pos_none", True), ("positions", "pos_sinusoidal", False)):
        ref = data.exercise(exercise).reference
        growth = window_growth(data.runs_of(key), data.runs_of(ref), split)
        low, high = growth.t_interval
        assert (low > 0) == grows and (low <= 0 <= high) != grows


# --- no page, shipped results file or notebook holds a machine's path ----------------------------------------------

MACHINE_PATH = re.compile(r"(?<![\w.])(/work/|/home/|/root/|/tmp/|/Users/)")


def test_no_machine_path_in_shipped_files_or_content():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [*root.glob("assets/**/*.json"), *root.glob("content/**/*.md"), *root.glob("**/*.ipynb")]
    files = [f for f in files if ".venv" not in f.parts and "runs" not in f.parts]
    assert any(f.suffix == ".json" for f in files) and any(f.suffix == ".md" for f in files)
    found = [f"{f.relative_to(root)}: {m.group(0)}" for f in files for m in MACHINE_PATH.finditer(f.read_text("utf-8"))]
    assert found == []


def test_a_recorded_machine_path_is_cut_to_the_repository():
    from ui.lab.experiments import repository_paths

    command = "python -m engine.lab.experiments --out /home/someone/checkout/assets/lab_exercises.json --seeds 1,2,3"
    assert repository_paths(command) == "python -m engine.lab.experiments --out assets/lab_exercises.json --seeds 1,2,3"
    assert not MACHINE_PATH.search(repository_paths("x --out /tmp/a/b.json"))


@pytest.mark.parametrize("slug", ["multi_head", "memory_layout", "lab"])
def test_rendered_pages_hold_no_machine_path(slug):
    """What the page draws (prose, captions, code, tables, expanders' contents) names no path of a machine."""
    from tests.plotly_json import open_page, texts

    at = open_page(f"views/{slug}.py", 300)
    assert not at.exception
    shown = "\n".join([*texts(at), *(c.value for c in at.caption), *(c.value for c in at.code)])
    assert not MACHINE_PATH.search(shown), MACHINE_PATH.search(shown)


# --- page 7 --------------------------------------------------------------------------------------------------

#: Every model size and seed page 7's permutation controls offer (views/positional_encodings.py).
PE_SIZES, PE_SEEDS = (32, 64, 128), (0, 1, 2, 3, 4)


@pytest.fixture(scope="module")
def pe_sweeps():
    # layers 1-3 and the slider's last, 6: "from two layers on" sampled at its start and end, at less cost
    return {(n_embd, seed): pe.permutation_by_layers(n_embd=n_embd, seed=seed, layers=(1, 2, 3, 6))
            for n_embd in PE_SIZES for seed in PE_SEEDS}


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_bars_as_the_permutation_part_reads_them(lang, pe_sweeps):
    """§1: at one layer only "none" is rounding; RoPE's bar is *usually* the shortest explicit one at one layer
    (a majority, not every case: the page's own line says which); from two layers on "none" is of the same order
    as the others (within the lesson comparison's factor) and RoPE close to "none" (within 25 %)."""
    body = load_parts("positional_encodings", lang)["permutation"]
    assert {"en": "one layer", "fr": "une couche", "de": "einer Schicht"}[lang] in body
    shortest = 0
    for sweep in pe_sweeps.values():
        explicit = [e for e in sweep.by_layer.columns if e != "none"]
        assert sweep.is_rounding(1, "none") and all(sweep.differs(1, e) for e in explicit)
        shortest += min(explicit, key=lambda e: sweep.diff(1, e)) == "rope"
        for n_layer in sweep.by_layer.index[1:]:
            none = sweep.diff(n_layer, "none")
            assert all(1 / pe.ORDER_FACTOR <= sweep.diff(n_layer, e) / none <= pe.ORDER_FACTOR for e in explicit)
            assert 0.8 <= sweep.diff(n_layer, "rope") / none <= 1.25
    assert len(pe_sweeps) / 2 < shortest < len(pe_sweeps)  # usually, and not always


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_the_lessons_four_numbers_and_the_factor_of_ten(lang):
    body = load_parts("positional_encodings", lang)["lesson_numbers"]
    assert len(pe.LESSON_PERMUTATION) == 4 and {"en": "four", "fr": "quatre", "de": "vier"}[lang] in body
    assert pe.ORDER_FACTOR == 10 and {"en": "ten", "fr": "dix", "de": "zehn"}[lang] in body
    # "at two layers 'none' about as large as the learned table": the lesson's own two numbers
    assert 1 / 2 < pe.LESSON_PERMUTATION[(2, "none")] / pe.LESSON_PERMUTATION[(2, "learned")] < 2


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_one_layer_residue_is_a_few_rounding_steps(lang, pe_sweeps):
    """§2 and self-test 2: the one-layer "none" difference is at most a few float32 rounding steps of the logits'
    size, not a fixed 1e-7: below the rounding factor's quarter for every size and seed. It can be exactly 0 (the two
    orders' sums can round alike, depending on the kernels' thread count), so the prose says "at most"."""
    assert "float32" in load_parts("positional_encodings", lang)["why"]
    assert not re.search(r"10\^\{-[0-9]+\}", load_parts("positional_encodings", lang)["quiz"])
    ratios = [sweep.ratio(1, "none") for sweep in pe_sweeps.values()]
    assert min(ratios) >= 0 and max(ratios) < pe.ROUNDING_FACTOR / 4
    assert {"en": "at most a few", "fr": "au plus quelques", "de": "höchstens einige"}[lang] in " ".join(
        load_parts("positional_encodings", lang)["why"].split())


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_odd_widths_strongly_for_few_columns_hardly_for_wide_ones(lang):
    """§4: at width 1 every similarity off position 0 (a zero row) is ±1, a few columns are strongly
    position-dependent, a wide odd table hardly."""
    body = load_parts("positional_encodings", lang)["sinusoidal"]
    assert "±1" in body and written(body, 0.02, 2)
    one = pe.sinusoidal_position_table(128, 1)
    torch.testing.assert_close(one.similarity[1:, 1:].abs(), torch.ones(127, 127))
    assert (one.similarity[1:, 1:] < 0).any() and not one.similarity[0].any()  # both signs; row 0 is sin 0 = 0
    assert pe.spread_kind(one.diagonal_spread) == "large"
    assert pe.spread_kind(pe.sinusoidal_position_table(128, 3).diagonal_spread) == "large"
    assert pe.spread_kind(pe.sinusoidal_position_table(256, 255).diagonal_spread) in ("small", "rounding")
    assert G.SINUSOIDAL_SCALE == 0.02


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_pair_0_turns_one_radian_per_position(lang):
    body = load_parts("positional_encodings", lang)["rope"]
    assert {"en": "one radian", "fr": "un radian", "de": "einen Radiant"}[lang] in body
    assert float(positions.rope_frequencies(16)[0]) == 1.0
    assert {"Llama", "Qwen", "DeepSeek"} <= set(re.findall(r"\w+", body))  # the lesson's examples


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_alibi_bar_above_ropes_at_one_layer(lang, pe_sweeps):
    """§1: ALiBi acts only through the scores too, yet its one-layer bar stands above RoPE's at every size and seed."""
    assert "ALiBi" in load_parts("positional_encodings", lang)["permutation"]
    for sweep in pe_sweeps.values():
        assert sweep.diff(1, positions.ALIBI.key) > sweep.diff(1, positions.ROPE.key)


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_alibi_slopes_are_geometric_and_its_bias_distance_only(lang):
    assert "ALiBi" in load_parts("positional_encodings", lang)["alibi"]
    for heads in (1, 4, 8):
        slopes = positions.alibi_slopes(heads)
        ratios = slopes[1:] / slopes[:-1]
        assert torch.allclose(ratios, ratios[0].expand_as(ratios)) if heads > 1 else slopes.tolist() == [2 ** -8]
    assert pe.alibi_score_bias(4, 16, 1000).distance_only


@pytest.mark.parametrize("lang", LANGS)
def test_page_7_m_is_ropes_position_and_s_alibis_slope(lang):
    """§5-6: $m$ is RoPE's query position; ALiBi's slope has its own letter, $s_h$, in the prose, the heatmaps' titles
    (views/positional_encodings.py) and the diagram (engine/diagrams/positional_encodings.py), in every language."""
    diagram = inspect.getsource(inspect.getmodule(pe.PositionalEncodingsShapes))  # engine/diagrams/positional_…
    parts = load_parts("positional_encodings", lang)
    assert "$m$" in parts["rope"] and "$m$" in parts["alibi"]  # RoPE's position; the paper's letter, named as such
    assert "$-s_h \\cdot (i - j)$" in parts["alibi"] and "$-s_h(i - j)$" in parts["quiz"]
    assert not any("m_h" in body for body in parts.values())
    assert " · s = {slope}" in translations(lang).gettext("head {h} · s = {slope}")
    assert "−s_h·(i − j)" in diagram and "m_h" not in diagram


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("T", [24, 64])
def test_page_7_past_the_trained_length_alibis_steep_heads_read_the_window(lang, T):
    """§7: past block_size the bias pushes far keys down, more the steeper the head: the steepest head gives the keys
    beyond every trained distance less than a tenth of what a model without a bias gives them."""
    assert {"en": "steeper", "fr": "raide", "de": "steiler"}[lang] in load_parts("positional_encodings", lang)["past"]
    past = pe.run_past_block_size(T)
    alibi, plain = past.run(positions.ALIBI.key).far_weight, past.run(positions.NONE.key).far_weight
    assert alibi[0] < plain.mean() / 10 and list(alibi) == sorted(alibi)


@pytest.mark.parametrize("lang", LANGS)
def test_lab_window_differences_say_which_minus_which(lang, monkeypatch):
    """The window sentence's differences are the run's loss minus the reference's, averaged over the seeds, and its
    change is |late| − |early| seed by seed (RoPE's +0.072 beside −0.131 → −0.203): the sentence says both, and both
    are what the shipped runs give."""
    import ui.i18n
    import ui.lab.words
    from engine.lab.results import read_exercises
    from ui.lab import experiments as E

    for module in (ui.i18n, ui.lab.words):
        monkeypatch.setattr(module, "current_language", lambda: lang)
    data = read_exercises()
    exercise = data.exercise("positions")
    split = max(1, data.block_size // E.EARLY_SHARE)
    curve = next(c for c in exercise.by_position if c.key == "pos_rope")
    runs, refs = data.runs_of("pos_rope"), {r.seed: r for r in data.runs_of(exercise.reference)}
    by_seed = [[b - a for a, b in zip(refs[r.seed].val_loss_by_position, r.val_loss_by_position, strict=True)]
               for r in runs]
    np.testing.assert_allclose(curve.difference, np.mean(by_seed, axis=0), atol=1e-4)  # run − reference, 4 decimals
    growth = E.window_growth(runs, data.runs_of(exercise.reference), split)
    changes = [abs(np.mean(d[split:])) - abs(np.mean(d[:split])) for d in by_seed]
    assert growth.mean == pytest.approx(np.mean(changes)) and growth.mean > 0  # |late| − |early|: it widens
    assert curve.mean_difference(split) < curve.mean_difference(0, split) < 0  # so a plain late − early is < 0
    comparison = exercise.comparison("pos_rope")
    text = E.along_window_sentence(comparison, curve, "RoPE", "C", growth)
    minus = {"en": "RoPE minus that of C", "fr": "«\u202fRoPE\u202f» moins celle de «\u202fC\u202f»",
             "de": "„RoPE“ minus der des Laufs „C“"}[lang]
    assert minus in text
    assert {"en": "|late| − |early|", "fr": "|fin| − |début|", "de": "|spät| − |früh|"}[lang] in text
