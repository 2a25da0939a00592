"""AppTest: page 3 (views/causal_mask.py) checks the chapter's matrices and drives every control."""

import math

import pytest

from tests.plotly_json import badges, figures, open_page, texts

PAGE = "views/causal_mask.py"
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
GUARDS = ["none (-inf)", "large finite negative", "nan_to_num after softmax", "keep the diagonal visible"]


#: The page's first tables in order (AppTest does not expose a dataframe's key); the NaN table, when
#: shown, is always the last one (a machine with an accelerator adds one more buffer table before it).
TABLES = {"cm_leak_table": 0, "cm_buffer_keys": 1, "cm_buffer_meta": 2, "cm_nan_table": -1}


def table(at, key):
    return at.dataframe[TABLES[key]].value


def test_chapter_matrices_checked_green(fresh):
    green = badges(fresh, "green")
    for label in ("weights before masking", "renormalised weights (route 1)", "scores with −inf above the diagonal",
                  "softmax of the masked scores (route 2)", "row 2"):
        assert any(label in b and "matches the chapter" in b for b in green), label
    assert not badges(fresh, "red")
    shown = texts(fresh)
    assert "row 2 (“journey”) = [0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000]" in shown
    diff_line = next(t for t in shown if t.startswith("max |route 1 − route 2| = **"))
    assert float(diff_line.split("**")[1]) < 1e-6
    sums_line = next(t for t in shown if t.startswith("row sums after zeroing the future = ["))
    assert sums_line.endswith(", 1.0000]")


def test_two_ways_figure_reads_like_the_printed_tensors(fresh):
    fig = figures(fresh)[0]
    assert len(fig["data"]) == 6
    masked_scores = fig["data"][4]
    assert masked_scores["text"][0] == ["0.2899", "-inf", "-inf", "-inf", "-inf", "-inf"]
    assert masked_scores["z"][0][1] is None  # -inf is a gap, written out in the cell
    causal = fig["data"][5]
    assert causal["text"][1][:3] == ["0.5517", "0.4483", "0.0000"]
    assert fig["layout"]["yaxis"]["autorange"] == "reversed"


def test_leakage_marks_only_that_row_and_later(at):
    for t, token in enumerate(TOKENS):
        at.selectbox(key="cm_leak_token").set_value(token).run()
        assert not at.exception
        leak = table(at, "cm_leak_table")
        assert leak["changed (causal)"].tolist() == [i >= t for i in range(6)]
        assert leak["changed (no mask)"].all()
        assert f"Perturbing “{token}” (row {t}) changed the rows: **{', '.join(TOKENS[t:])}**." in texts(at)
        assert any("nothing leaks from the future" in b for b in badges(at, "green"))


@pytest.mark.parametrize("delta", [-3.0, 0.0, 3.0])
def test_leakage_perturbation_extremes(at, delta):
    at.slider(key="cm_leak_delta").set_value(delta).run()
    assert not at.exception
    leak = table(at, "cm_leak_table")
    if delta == 0.0:
        assert not leak["changed (causal)"].any()
        assert any("changes nothing" in i.value for i in at.info)
    else:
        assert leak["changed (causal)"].tolist() == [False, False, True, True, True, True]


@pytest.mark.parametrize("k, message", [(-6, "nothing visible"), (0, "nothing visible"), (1, "the causal mask"),
                                        (2, "1 future token"), (6, None)])
def test_triu_explorer_extremes(at, k, message):
    at.slider(key="cm_triu_k").set_value(k).run()
    assert not at.exception
    visible = next(t for t in texts(at) if t.startswith("visible keys per row = "))
    expected = [min(6, max(0, i + k)) for i in range(6)]
    assert visible == f"visible keys per row = {expected}"
    notes = [w.value for w in at.warning] + [s.value for s in at.success]
    if message:
        assert any(message in n for n in notes), notes
    fig = next(f for f in figures(at) if f"diagonal={k})" in (f["layout"].get("title") or {}).get("text", ""))
    assert sum(row.count("1") for row in fig["data"][0]["text"]) == 36 - sum(expected)


def test_register_buffer_table(fresh):
    keys = table(fresh, "cm_buffer_keys")
    assert keys["state_dict() keys"].iloc[0].startswith("mask, ")
    assert "mask" not in keys["state_dict() keys"].iloc[2]
    buffers = table(fresh, "cm_buffer_meta").set_index("mask held as")
    assert buffers["mask in state_dict()"].tolist() == [True, False, False]
    assert buffers["mask after .to()"].tolist() == ["meta", "meta", "cpu"]
    outcomes = next(t for t in texts(fresh) if t.startswith("- forward after `.to('meta')`")).split("\n")
    assert len(outcomes) == 3
    assert outcomes[0].endswith("`ok, shape (2, 6, 2)`") and outcomes[1].endswith("`ok, shape (2, 6, 2)`")
    assert "plain attribute" in outcomes[2] and "`RuntimeError: Tensor on device meta is not on the expected device cpu!`" in outcomes[2]


@pytest.mark.parametrize("guard", GUARDS)
def test_fully_masked_row_never_draws_nan(at, guard):
    at.radio(key="cm_nan_guard").set_value(guard).run()
    for token in ("Your", "with", "step"):
        at.selectbox(key="cm_nan_row").set_value(token).run()
        assert not at.exception
        check_masked_row(at, TOKENS.index(token), token, guard)


def check_masked_row(at, row, token, guard):
    for fig in figures(at):
        for trace in fig["data"]:
            for value in (trace.get("z") or []):
                for v in (value if isinstance(value, list) else [value]):
                    assert not (isinstance(v, float) and math.isnan(v))
    if guard == GUARDS[0]:
        assert any("NaN" in e.value for e in at.error)
        weights = table(at, "cm_nan_table")
        assert (weights.iloc[row, 1:] == "nan").all()
        assert not (weights.drop(index=row).iloc[:, 1:] == "nan").any().any()
        assert len(at.get("plotly_chart")) == 4  # two ways, leakage, triu, mask: no weights heatmap
    else:
        assert "query" not in table(at, "cm_nan_table").columns and len(at.get("plotly_chart")) == 5
        assert not at.error
        success = at.success[-1].value
        assert success.startswith(f"No NaN. Row {row} (“{token}”) = [")
        if guard == "large finite negative":
            assert success.endswith("[0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667]")
        if guard == "nan_to_num after softmax":
            assert success.endswith("[0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000]")
        if guard == "keep the diagonal visible":
            assert success.split("= ")[1] == "[" + ", ".join("1.0000" if j == row else "0.0000" for j in range(6)) + "]"


def test_accelerator_branch_with_the_meta_device_standing_in(monkeypatch):
    import torch

    import engine.device

    monkeypatch.setattr(engine.device, "pick_device", lambda override=None: torch.device("meta"))
    app = open_page(PAGE)
    assert not app.exception
    assert any("This machine has a **meta** device" in t for t in texts(app))
    on_device = app.dataframe[3].value.set_index("mask held as")
    assert on_device["mask after .to()"].tolist() == ["meta", "meta", "cpu"]
