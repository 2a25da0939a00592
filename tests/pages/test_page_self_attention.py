"""AppTest: page 1 (views/self_attention.py) shows the chapter's numbers and follows its controls."""

import json
import re

import numpy as np
import pytest
import torch

from engine import attention as A
from engine import chapter, palette
from engine.diagrams.core import shape_text
from engine.sections import self_attention as sections
from tests.plotly_json import badges, captions, decode, figures, open_page, texts
from ui.i18n import LANGUAGES, TRANSLATED, translations
from ui.numbers import num, sci, seq
from ui.page import load_parts

PAGE = "views/self_attention.py"
CHAPTER_SCORES = "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]"


def msg(msgid: str, lang: str = "en", **values) -> str:
    """A message of the page as the reader sees it in ``lang``."""
    return translations(lang).gettext(msgid).format(**values)


def test_chapter_numbers_shown_green(at):
    shown = texts(at)
    assert CHAPTER_SCORES in shown
    assert msg("naive weights = {values}", values="[0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656]") in shown
    assert msg("`attn_weights` (softmax) = {values} · sum = {total}",
               values="[0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581]", total=num(1.0, 4, lang="en")) in shown
    assert msg("Step 3 · `context_vec` z = {values}", values="[0.4419, 0.6515, 0.5683]") in shown
    assert len(badges(at, "green")) >= 8 and not badges(at, "red") and not badges(at, "gray")


@pytest.mark.parametrize("lang", TRANSLATED)
def test_runs_in_french_and_german_with_the_same_green_checks(at, lang):
    other = open_page(PAGE, 60, lang=lang)
    assert not other.exception
    assert len(badges(other, "green")) == len(badges(at, "green"))
    assert not badges(other, "red") and not badges(other, "gray")
    assert "`attn_scores` = " + seq(chapter.SIMPLE_SCORES_JOURNEY, 4, lang=lang) in texts(other)
    # the sum under the chapter's weights in the reader's number format (1,0000 in French and German)
    total = num(1.0, 4, lang=lang)
    assert any(t.endswith(total) and "attn_weights" in t for t in texts(other)), total


def test_numerics_caption_states_where_exp_switches_as_torch_computes_it(at):
    """Issue 24: the zero threshold is where torch.exp gives 0, not ln of the smallest subnormal (-103.28)."""
    overflow, underflow = sections.exp_limits(torch.float32)
    assert torch.exp(torch.tensor(underflow - 1e-3)) == 0 < torch.exp(torch.tensor(underflow + 1e-3))
    assert torch.isinf(torch.exp(torch.tensor(overflow + 1e-3)))
    assert torch.isfinite(torch.exp(torch.tensor(overflow - 1e-3)))
    expected = msg("In {dtype}, exp(x) is inf above x ≈ {overflow} and exactly 0 below x ≈ {underflow}.",
                   dtype="float32", overflow=num(overflow, 2, lang="en"), underflow=num(underflow, 2, lang="en"))
    assert expected in captions(at)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_numerics_prose_states_no_threshold_by_hand(lang):
    """The thresholds come from the computation (the caption); the prose of every language names none."""
    body = load_parts("self_attention", lang)["numerics"]
    assert not re.search(r"-?\d{2,3}[.,]\d", body), body


def test_query_token_changes_numbers(at):
    at.selectbox(key="sa_query").set_value("step").run()
    assert not at.exception
    shown = texts(at)
    assert CHAPTER_SCORES not in shown
    assert any(t.startswith("`attn_scores` = [0.6310, 1.0865") for t in shown)
    label = msg("scores of “journey”")
    assert any(b.startswith(f":gray-badge[:material/tune: {label}") for b in badges(at, "gray"))


def test_edited_embedding_changes_numbers_and_reset_restores(at):
    at.session_state["sa_embeddings_0"] = {"edited_rows": {1: {"dim_0": 0.9}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert CHAPTER_SCORES not in texts(at)
    assert badges(at, "gray")
    at.button(key="sa_reset").click().run()
    assert CHAPTER_SCORES in texts(at)
    assert not badges(at, "gray")


def test_empty_cell_falls_back_with_a_message(at):
    at.session_state["sa_embeddings_0"] = {"edited_rows": {0: {"dim_1": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    expected = translations("en").ngettext("{n} cell is empty; it uses the chapter's value until you fill it in.",
                                           "{n} cells are empty; they use the chapter's value until you fill them in.",
                                           1).format(n=1)
    assert [w.value for w in at.warning] == [expected]
    assert CHAPTER_SCORES in texts(at)


@pytest.mark.parametrize(
    "scale, dtype, naive_breaks",
    [(1.0, "float32", False), (100.0, "float32", True), (-150.0, "float32", True), (10.0, "float16", True),
     (10.0, "float32", False), (150.0, "float64", False), (40.0, "bfloat16", False), (60.0, "bfloat16", True)],
)
def test_softmax_numerics(at, scale, dtype, naive_breaks):
    at.slider(key="sa_scale").set_value(scale).run()
    at.selectbox(key="sa_dtype").set_value(dtype).run()
    assert not at.exception
    table = at.table[0].value  # a static table (st.table)
    naive = table[msg("naive softmax")]
    assert bool(naive.isna().any() or (naive.abs() == float("inf")).any()) == naive_breaks
    stable = table[msg("stable softmax")]
    assert stable.notna().all() and abs(stable.sum() - 1) < 2e-2
    assert (len(at.error) > 0) == naive_breaks and (len(at.success) > 0) != naive_breaks
    assert msg("Stable softmax: all weights finite.") in captions(at)


def test_charts_read_like_tensors_and_both_jacobians_checked(at):
    heatmaps = [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "heatmap"]
    assert len(heatmaps) == 5
    for fig in heatmaps:
        assert fig["layout"]["yaxis"]["autorange"] == "reversed"
    scores = next(f for f in heatmaps if "inputs @ inputs.T" in f["layout"]["title"]["text"])
    assert scores["data"][0]["text"][1][:3] == ["0.9544", "1.4950", "1.4754"]
    naive_title = msg("divide by the sum: ∂w_i/∂x_j for “{token}”", token="journey")
    naive = next(f for f in heatmaps if f["layout"]["title"]["text"].replace("<br>", " ") == naive_title)
    # row "journey" (index 1), column "journey": (1 − w_1) / Σx with the chapter's naive weight and scores
    total = sum((0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865))
    assert abs(float(naive["data"][0]["text"][1][1]) - (1 - 0.2278) / total) < 1e-3
    green = badges(at, "green")
    for label in ("softmax: closed form equals torch.autograd", "divide by the sum: closed form equals torch.autograd"):
        assert any(b.startswith(f":green-badge[:material/check_circle: {msg(label)}") for b in green), label


def test_negative_scores_hide_the_naive_jacobian_with_a_note(at):
    at.session_state["sa_embeddings_0"] = {"edited_rows": {0: {"dim_0": -5.0}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert [i.value for i in at.info] == [msg(
        "Some scores of “{token}” are 0 or negative: dividing by the sum gives no weights there, "
        "so its Jacobian is not shown.", token="journey")]
    heatmaps = [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "heatmap"]
    assert len(heatmaps) == 4


# --- the diagram ---------------------------------------------------------------------------------------


def diagram(at) -> str:
    charts = at.get("graphviz_chart")
    assert len(charts) == 1
    return charts[0].proto.spec


@pytest.mark.parametrize("token", ["Your", "step"])
def test_diagram_shows_the_run_of_the_selected_query(at, token):
    before = diagram(at)
    assert "“journey”" in before
    at.selectbox(key="sa_query").set_value(token).run()
    assert not at.exception
    spec = diagram(at)
    assert spec != before and f"“{token}”" in spec and "“journey”" not in spec
    inputs = A.chapter_inputs()
    steps = sections.query_walkthrough(inputs, A.CHAPTER_TOKENS.index(token))
    for shape in (inputs.shape, steps.attn_scores.shape, steps.attn_weights.shape, steps.context_vec.shape):
        assert shape_text(tuple(shape)) in spec


@pytest.mark.parametrize("lang", TRANSLATED)
def test_diagram_builds_in_french_and_german(lang):
    other = open_page(PAGE, 60, lang=lang)
    assert not other.exception
    assert "attn_weights" in diagram(other)


def chart(at, key: str) -> dict:
    """The decoded figure of the chart with ``key``."""
    return next(decode(json.loads(el.proto.spec)) for el in at.get("plotly_chart") if el.proto.id.endswith(key))


def test_context_vector_shown_as_its_weighted_sum(at):
    fig = chart(at, "sa_context_chart")
    parts = np.array([trace["y"] for trace in fig["data"][:-1]])  # (6 tokens, 3 dims)
    assert [trace["name"] for trace in fig["data"][:-1]] == list(A.CHAPTER_TOKENS)
    np.testing.assert_allclose(parts.sum(axis=0), [0.4419, 0.6515, 0.5683], atol=5e-5)
    np.testing.assert_allclose(fig["data"][-1]["y"], [0.4419, 0.6515, 0.5683], atol=5e-5)
    at.selectbox(key="sa_query").set_value("step").run()
    moved = chart(at, "sa_context_chart")
    steps = sections.query_walkthrough(A.chapter_inputs(), A.CHAPTER_TOKENS.index("step"))
    np.testing.assert_allclose(moved["data"][-1]["y"], steps.context_vec.numpy(), atol=1e-6)


def test_the_3d_chart_holds_every_context_vector_and_ignores_the_query(at):
    fig = chart(at, "sa_vectors")
    every = sections.loop_vs_matmul(A.chapter_inputs())
    tips = np.array([[trace["x"][1], trace["y"][1], trace["z"][1]] for trace in fig["data"][6:]])
    np.testing.assert_allclose(tips, every.context_vec.numpy(), atol=1e-6)
    at.selectbox(key="sa_query").set_value("step").run()
    assert chart(at, "sa_vectors") == fig  # the same figure: the browser keeps the 3-d chart as it is


def test_steps_one_and_two_in_one_chart(at):
    fig = chart(at, "sa_steps_chart")
    scores, naive, softmax = fig["data"]
    np.testing.assert_allclose(scores["y"], chapter.SIMPLE_SCORES_JOURNEY, atol=5e-5)
    np.testing.assert_allclose(naive["y"], chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY, atol=5e-5)
    np.testing.assert_allclose(softmax["y"], chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY, atol=5e-5)
    assert scores["yaxis"] == "y" and naive["yaxis"] == softmax["yaxis"] == "y2"  # scores above, weights under
    assert scores["marker"]["color"] == palette.ATTN_SCORES and softmax["marker"]["color"] == palette.ATTN_WEIGHTS
    assert naive["name"] == msg("divide by the sum")
    at.selectbox(key="sa_query").set_value("step").run()
    steps = sections.query_walkthrough(A.chapter_inputs(), A.CHAPTER_TOKENS.index("step"))
    np.testing.assert_allclose(chart(at, "sa_steps_chart")["data"][0]["y"], steps.attn_scores.numpy(), atol=1e-6)


def test_the_jacobians_have_their_own_query_token(at):
    softmax_jac = chart(at, "sa_jacobian")
    assert softmax_jac["layout"]["title"]["text"].replace("<br>", " ") == msg(
        "softmax: ∂w_i/∂x_j for the query “{token}”", token="journey")
    at.selectbox(key="sa_query").set_value("step").run()
    assert chart(at, "sa_jacobian") == softmax_jac  # the steps' query does not redraw the Jacobians
    steps_chart = chart(at, "sa_steps_chart")
    at.selectbox(key="sa_jacobian_query").set_value("with").run()
    assert not at.exception
    assert chart(at, "sa_steps_chart") == steps_chart  # nor the Jacobians' token the steps
    moved = chart(at, "sa_jacobian")
    assert moved["layout"]["title"]["text"].replace("<br>", " ") == msg(
        "softmax: ∂w_i/∂x_j for the query “{token}”", token="with")
    scores = A.dot_scores(A.chapter_inputs(), A.chapter_inputs()[A.CHAPTER_TOKENS.index("with")])
    expected = sections.jacobian_check(scores).closed_form
    np.testing.assert_allclose(np.array(moved["data"][0]["z"]), expected.numpy(), atol=1e-4)
    green = badges(at, "green")
    assert any(b.startswith(f":green-badge[:material/check_circle: {msg('softmax: closed form equals torch.autograd')}")
               for b in green)


def test_a_silent_underflow_gets_a_warning_and_half_precision_its_reason():
    """Issue 36: scale −150, query "one": the naive weights are finite but wrong, so an amber note, not a green one;
    in float16 the page says why the stable column and torch.softmax part, with the measured difference."""
    at = open_page(PAGE, 60, params={"sa_scale": "-150.0", "sa_query": "one"})
    assert not at.exception
    assert not [s for s in at.success if "Naive softmax" in s.value]
    assert any("fell to exactly 0" in w.value for w in at.warning)
    assert not any("Why the stable column" in t for t in texts(at))
    at = open_page(PAGE, 60, params={"sa_scale": "150.0", "sa_query": "step", "sa_dtype": "float16"})
    numerics = sections.softmax_numerics(sections.query_walkthrough(A.chapter_inputs(), 5).attn_scores, 150.0,
                                         torch.float16)
    line = next(t for t in texts(at) if "Why the stable column" in t)
    assert sci(numerics.stable_vs_torch, 2, lang="en") in line and "float16" in line


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_the_negative_score_line_is_the_computed_division(lang):
    at = open_page(PAGE, 60, lang=lang)
    example = sections.negative_score_example()
    assert any(seq(example.naive_weights, 4, lang=lang) in t and num(example.positive_sum, 4, lang=lang) in t
               for t in texts(at))


def test_all_pairs_heatmaps_keep_the_colour_keys_colours(at):
    """Section 5: the scores heatmap ends in the scores' vermillion and the weights heatmap in the weights' blue, as
    the colour key under the diagrams says and page 3 draws them."""
    scores, weights = chart(at, "sa_all_scores")["data"][0], chart(at, "sa_all_weights")["data"][0]
    assert scores["colorscale"][-1][1] == palette.ATTN_SCORES
    assert weights["colorscale"][-1][1] == palette.ATTN_WEIGHTS
