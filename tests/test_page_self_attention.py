"""AppTest: page 1 (views/self_attention.py) shows the chapter's numbers and follows its controls."""

import pytest

from tests.plotly_json import badges, figures, texts

PAGE = "views/self_attention.py"


def test_chapter_numbers_shown_green(at):
    shown = texts(at)
    assert "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" in shown
    assert "naive weights = [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656]" in shown
    assert "`attn_weights` (softmax) = [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581] · sum = 1.0000" in shown
    assert "Step 3 · `context_vec` z = [0.4419, 0.6515, 0.5683]" in shown
    assert len(badges(at, "green")) >= 7 and not badges(at, "red") and not badges(at, "gray")


def test_query_token_changes_numbers(at):
    at.selectbox(key="sa_query").set_value("step").run()
    assert not at.exception
    shown = texts(at)
    assert "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" not in shown
    assert any(t.startswith("`attn_scores` = [0.6310, 1.0865") for t in shown)
    assert any("scores of “journey”: differs from the chapter" in t for t in badges(at, "gray"))


def test_edited_embedding_changes_numbers_and_reset_restores(at):
    at.session_state["sa_embeddings_0"] = {"edited_rows": {1: {"dim 0": 0.9}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" not in texts(at)
    assert badges(at, "gray")
    at.button(key="sa_reset").click().run()
    assert "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" in texts(at)
    assert not badges(at, "gray")


def test_empty_cell_falls_back_with_a_message(at):
    at.session_state["sa_embeddings_0"] = {"edited_rows": {0: {"dim 1": None}}, "added_rows": [], "deleted_rows": []}
    at.run()
    assert not at.exception
    assert any("empty" in w.value for w in at.warning)
    assert "`attn_scores` = [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865]" in texts(at)


@pytest.mark.parametrize(
    "scale, dtype, naive_breaks",
    [(1.0, "float32", False), (100.0, "float32", True), (-150.0, "float32", True), (10.0, "float16", True),
     (10.0, "float32", False), (150.0, "float64", False), (40.0, "bfloat16", False), (60.0, "bfloat16", True)],
)
def test_softmax_numerics(at, scale, dtype, naive_breaks):
    at.slider(key="sa_scale").set_value(scale).run()
    at.selectbox(key="sa_dtype").set_value(dtype).run()
    assert not at.exception
    table = at.dataframe[1].value
    naive = table["naive softmax"]
    assert bool(naive.isna().any() or (naive.abs() == float("inf")).any()) == naive_breaks
    stable = table["stable softmax"]
    assert stable.notna().all() and abs(stable.sum() - 1) < 2e-2
    assert (len(at.error) > 0) == naive_breaks and (len(at.success) > 0) != naive_breaks


def test_charts_read_like_tensors_and_jacobian_checked(at):
    figs = figures(at)
    heatmaps = [f for f in figs if f["data"] and f["data"][0]["type"] == "heatmap"]
    assert len(heatmaps) == 4
    for fig in heatmaps:
        assert fig["layout"]["yaxis"]["autorange"] == "reversed"
    scores = next(f for f in heatmaps if "inputs @ inputs.T" in f["layout"]["title"]["text"])
    assert scores["data"][0]["text"][1][:3] == ["0.9544", "1.4950", "1.4754"]
    assert any(t.startswith(":green-badge[:material/check_circle: closed form equals torch.autograd") for t in texts(at))
