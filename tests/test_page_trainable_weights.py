"""AppTest: page 2 (views/trainable_weights.py) shows the chapter's numbers and follows its controls."""

import pytest

from tests.plotly_json import badges, figures, texts

PAGE = "views/trainable_weights.py"
CHAPTER_LINES = (
    "`query` = x[1] @ W_query = [0.4306, 1.4551]",
    "`attn_scores` = [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440]",
    "`attn_weights` = softmax(attn_scores / √2) = [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820]",
    "Step 3 · `context_vec` = attn_weights @ values = [0.3061, 0.8210]",
)


def figure_with_title(at, fragment):
    for fig in figures(at):
        titles = [a.get("text", "") for a in fig["layout"].get("annotations", [])]
        if any(fragment in t for t in titles):
            return fig
    raise AssertionError(f"no figure with a panel titled like {fragment!r}")


def test_chapter_numbers_shown_green(fresh):
    shown = texts(fresh)
    for line in CHAPTER_LINES:
        assert line in shown
    green = badges(fresh, "green")
    for label in ("query_2", "attention scores", "scaled attention weights", "context vector",
                  "SelfAttention_v1 output", "SelfAttention_v2 output"):
        assert any(label in b and "matches the chapter" in b for b in green), label
    assert not badges(fresh, "red") and not badges(fresh, "gray")


def test_projection_matrices_read_like_the_tensors(fresh):
    fig = figure_with_title(fresh, "W_query")
    assert len(fig["data"]) == 3
    w_query = fig["data"][0]
    assert len(w_query["text"]) == 3 and len(w_query["text"][0]) == 2  # (d_in, d_out) = (3, 2)
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"


def test_dk_slider_figure_one_step_per_d_k(fresh):
    fig = next(f for f in figures(fresh) if f["layout"].get("sliders"))
    steps = fig["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == [str(2**i) for i in range(11)]
    assert len(fig["data"]) == 4 * 11
    assert "var(q·k/√d_k)" in fig["layout"]["title"]["text"]
    table = fresh.dataframe[0].value
    assert list(table["d_k"]) == [2**i for i in range(11)]
    assert ((table["var(q·k)"] / table["d_k"] - 1).abs() < 0.1).all()
    assert ((table["var(q·k/√d_k)"] - 1).abs() < 0.1).all()


def test_init_table_and_exercise(fresh):
    init = fresh.dataframe[1].value
    assert set(init["init"]) == {"torch.rand", "nn.Linear"}
    assert (init[init["init"] == "torch.rand"]["share negative"] == 0).all()
    shown = texts(fresh)
    assert any(t.startswith("max |v1 − v2| before the copy: **") and "0.0000e+00" not in t for t in shown)
    assert "max |v1 − v2| after copying v2's weights (transposed) into v1: **0.0000e+00**" in shown
    assert any("SelfAttention_v1 computes the same outputs" in b for b in badges(fresh, "green"))


@pytest.mark.parametrize("d_out", [1, 8])
def test_d_out_extremes(at, d_out):
    at.slider(key="tw_d_out").set_value(d_out).run()
    assert not at.exception
    shown = texts(at)
    assert not any(line in shown for line in CHAPTER_LINES[:3])
    query_line = next(t for t in shown if t.startswith("`query` = x[1] @ W_query = ["))
    assert query_line.count(",") == d_out - 1
    assert any(t.startswith(f"`attn_weights` = softmax(attn_scores / √{d_out})") for t in shown)
    gray = badges(at, "gray")
    assert any("query_2: differs from the chapter, as expected" in b for b in gray)
    assert any("SelfAttention_v2 output: differs" in b for b in gray)
    assert not badges(at, "red")
    assert figure_with_title(at, "W_query")["data"][0]["text"][0].__len__() == d_out
    assert any(b.startswith(":green-badge") and "same outputs" in b for b in badges(at, "green"))


@pytest.mark.parametrize("seed", [0, 99_999, 7])
def test_seed_changes_numbers(at, seed):
    at.number_input(key="tw_seed").set_value(seed).run()
    assert not at.exception
    shown = texts(at)
    assert CHAPTER_LINES[0] not in shown
    gray = badges(at, "gray")
    assert any("context vector: differs" in b for b in gray)
    assert any("SelfAttention_v1 output: differs" in b for b in gray)
    # v2 keeps its own seed: still the chapter's
    assert any("SelfAttention_v2 output: matches" in b for b in badges(at, "green"))


def test_v2_seed_and_query_token(at):
    at.number_input(key="tw_seed_v2").set_value(1).run()
    assert not at.exception
    assert any("SelfAttention_v2 output: differs" in b for b in badges(at, "gray"))
    assert any("SelfAttention_v1 output: matches" in b for b in badges(at, "green"))
    at.selectbox(key="tw_query").set_value("step").run()
    assert not at.exception
    shown = texts(at)
    assert CHAPTER_LINES[0] not in shown
    assert any(t.startswith("`query` = x[5] @ W_query = [") for t in shown)
    assert any("query_2: differs from the chapter" in b for b in badges(at, "gray"))
