"""AppTest: page 7 (views/positional_encodings.py) shows the permutation sweep and follows every control."""

import numpy as np
import pytest
import torch

from engine import gpt as G
from engine.sections import positional_encodings as S
from engine.tokenizer import CharTokenizer
from engine.training import save_checkpoint
from tests.plotly_json import figures, open_page, texts

PAGE = "views/positional_encodings.py"
PAGE_TIMEOUT = 120


def starting(at, prefix):
    found = [t for t in texts(at) if t.startswith(prefix)]
    assert found, f"no markdown starting with {prefix!r}"
    return found[0]


def chart(at, key):
    charts = at.get("plotly_chart")
    index = [i for i, c in enumerate(charts) if c.proto.id.endswith(key) or key in c.proto.id]
    assert index, f"no chart with key {key}"
    return figures(at)[index[0]]


def test_permutation_figure_has_one_step_per_layer_and_the_lessons_magnitudes(at):
    fig = chart(at, "pe_perm_chart")
    steps = fig["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == ["1", "2", "3", "4", "5", "6"]
    assert len(fig["data"]) == 6 and fig["layout"]["yaxis"]["type"] == "log"
    first = fig["data"][0]
    assert list(first["x"]) == ["none", "learned", "sinusoidal", "rope"]
    one = dict(zip(first["x"], np.asarray(first["y"], dtype=float)))
    two = dict(zip(fig["data"][1]["x"], np.asarray(fig["data"][1]["y"], dtype=float)))
    assert one["none"] < 1e-5 and all(one[e] > 1e-4 for e in ("learned", "sinusoidal", "rope"))
    assert all(v > 1e-4 for v in two.values())
    # each step shows exactly its own group of bars
    for s, step in enumerate(steps):
        assert step["args"][0]["visible"] == [i == s for i in range(6)]
    assert fig["data"][0]["visible"] is True and fig["data"][1]["visible"] is False
    table = at.dataframe[0].value
    assert list(table.columns) == ["none", "learned", "sinusoidal", "rope"] and list(table.index) == [1, 2, 3, 4, 5, 6]
    assert table.loc[1, "none"] == pytest.approx(one["none"])
    shown = starting(at, "1 layer, none: ")
    assert f"**{table.loc[1, 'none']:.1e}**" in shown and f"**{table.loc[2, 'none']:.1e}**" in shown
    assert sum("green-badge" in t for t in texts(at)) >= 3 and not any("red-badge" in t for t in texts(at))
    exercise = starting(at, "Exercise 1 · 3 layers")
    assert f"**{table.loc[3, 'none']:.1e}**" in exercise and table.loc[3, "none"] > 1e-4


@pytest.mark.parametrize("n_embd, seed", [(128, 0), (64, 3)])
def test_permutation_controls(at, n_embd, seed):
    before = at.dataframe[0].value.copy()
    at.selectbox(key="pe_n_embd").set_value(n_embd).run()
    at.selectbox(key="pe_seed").set_value(seed).run()
    assert not at.exception
    table = at.dataframe[0].value
    assert not table.equals(before)
    assert table.loc[1, "none"] < 1e-5 and (table.loc[2:, :] > 1e-4).all().all()
    assert f"(n_embd {n_embd}, seed {seed})" in starting(at, "Exercise 1")


def test_visibility_picture(at):
    fig = chart(at, "pe_visibility")
    heat, bars = fig["data"]
    assert np.array_equal(np.asarray(heat["z"]), np.tril(np.ones((5, 5))))
    assert heat["text"][1][:2] == ["白/山", "日/依"] and heat["text"][1][2] == ""
    assert list(np.asarray(bars["x"])) == [1, 2, 3, 4, 5]
    assert "visible tokens per position = [1, 2, 3, 4, 5]" in starting(at, "visible tokens")
    assert starting(at, "visible tokens").endswith("positions [3, 4]")


def test_tables_follow_block_size_and_width(at):
    shipped = S.shipped_learned_table()
    panels = 3 if shipped is not None and shipped["table"] is not None else 2
    fig = chart(at, "pe_tables")
    assert len(fig["data"]) == panels and np.asarray(fig["data"][0]["z"]).shape == (128, 128)
    at.select_slider(key="pe_block").set_value(32).run()
    at.slider(key="pe_width").set_value(7).run()
    assert not at.exception
    fig = chart(at, "pe_tables")
    untrained, sinusoidal = np.asarray(fig["data"][0]["z"]), np.asarray(fig["data"][-1]["z"])
    assert untrained.shape == (32, 7) and sinusoidal.shape == (32, 7)
    assert np.allclose(sinusoidal[0], [0, 1, 0, 1, 0, 1, 0])
    sim = chart(at, "pe_similarity")
    assert np.asarray(sim["data"][0]["z"]).shape == (32, 32)
    odd_spread = float(starting(at, "sinusoidal row 0 = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0] · ").rsplit("= ", 1)[1])
    assert 0 < odd_spread < 1e-3  # the unpaired sine column adds a small absolute-position term
    at.slider(key="pe_width").set_value(8).run()
    even_spread = float(starting(at, "sinusoidal row 0 = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0] · ").rsplit("= ", 1)[1])
    assert even_spread < 1e-5  # sin·sin + cos·cos = cos of the difference: only the distance matters
    std = float(starting(at, "untrained table: std = ").split("= ")[1].split(" ")[0])
    assert 0.015 < std < 0.025  # normal(0, 0.02) at init, 32 x 8 samples
    assert any("No trained model ships" in i.value for i in at.info) == (shipped is None)


def test_rope_controls(at):
    at.slider(key="pe_head_dim").set_value(8).run()
    at.slider(key="pe_position").set_value(10).run()
    assert not at.exception
    pairs = at.dataframe[1].value
    assert list(pairs["pair i"]) == [0, 1, 2, 3]
    assert pairs["θ_i (rad / position)"].tolist() == pytest.approx([1.0, 0.1, 0.01, 0.001])
    assert pairs["angle m·θ_i (°, mod 360)"].tolist() == pytest.approx([np.degrees(10.0) % 360, np.degrees(1.0),
                                                                       np.degrees(0.1), np.degrees(0.01)], abs=1e-4)
    norms = starting(at, "‖v‖ at position 0 = ")
    a, b = (float(part.rsplit("= ", 1)[1]) for part in norms.split(" · "))
    assert a == b and "at position 10" in norms
    fig = chart(at, "pe_rope_pairs")
    assert len(fig["data"]) == 12  # 4 pairs x (circle, trail, arrow)
    trail = fig["data"][1]
    assert len(np.asarray(trail["x"])) == 11  # positions 0..10


def test_odd_head_dim_shows_an_error_not_a_traceback(at):
    at.slider(key="pe_head_dim").set_value(7).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("head_dim must be even" in e and "7" in e for e in errors)
    assert len([e for e in errors if "head_dim" in e]) == 2  # the rotation and the score matrix


def test_score_matrix_constant_along_diagonals_and_shift(at):
    at.slider(key="pe_score_T").set_value(6).run()
    at.slider(key="pe_shift").set_value(1000).run()
    assert not at.exception
    fig = chart(at, "pe_scores")
    first, second = (np.asarray(t["z"], dtype=float) for t in fig["data"])
    assert first.shape == (6, 6)
    for offset in range(-5, 6):
        d = np.diagonal(first, offset)
        assert d.max() - d.min() < 1e-4
    assert np.abs(first - second).max() < 1e-3
    shown = starting(at, "largest spread along a diagonal = ")
    spread, shift_diff = (float(part.rsplit("= ", 1)[1]) for part in shown.split(" · "))
    assert spread < 1e-4 and shift_diff < 1e-3
    assert any("only m − n matters" in t for t in texts(at))
    at.radio(key="pe_score_mode").set_value("sinusoidal table added to q and k").run()
    assert not at.exception
    shown = starting(at, "largest spread along a diagonal = ")
    spread, shift_diff = (float(part.rsplit("= ", 1)[1]) for part in shown.split(" · "))
    assert spread > 0.1 and shift_diff > 0.1
    assert any("depends on the absolute positions" in t for t in texts(at))


@pytest.mark.parametrize("T, learned_runs", [(24, False), (16, True), (64, False), (1, True)])
def test_past_block_size(at, T, learned_runs):
    at.slider(key="pe_past_T").set_value(T).run()
    assert not at.exception
    table = at.dataframe[-1].value
    ran = dict(zip(table["pos_encoding"], table["ran"]))
    assert ran == {"none": True, "learned": learned_runs, "sinusoidal": True, "rope": True}
    rope_shape = table.set_index("pos_encoding").loc["rope", "logits shape"]
    assert rope_shape == f"(1, {T}, 16)"
    learned_errors = [e.value for e in at.error if e.value.startswith("learned:")]
    if learned_runs:
        assert not learned_errors and any("All four encodings ran" in s.value for s in at.success)
    else:
        assert learned_errors and f"sequence of {T} tokens is longer than block_size 16" in learned_errors[0]


def test_shipped_model_table_is_shown_when_present(tmp_path, monkeypatch):
    torch.manual_seed(0)
    tokenizer = CharTokenizer("白日依山尽黄河入海流")
    model = G.GPT(G.GPTConfig(vocab_size=tokenizer.vocab_size, block_size=40, n_embd=16, n_head=2, n_layer=1))
    save_checkpoint(tmp_path / "model", model, tokenizer)
    monkeypatch.setattr(S, "SHIPPED_MODEL", tmp_path / "model")
    app = open_page(PAGE, 120)
    assert not app.exception
    fig = chart(app, "pe_tables")
    assert [np.asarray(t["z"]).shape for t in fig["data"]] == [(128, 128), (40, 16), (128, 128)]
    assert np.allclose(np.asarray(fig["data"][1]["z"]), model.pos_emb.weight.detach().numpy(), atol=1e-6)
    shown = starting(app, "trained table: std = ")
    assert "shape (40, 16)" in shown and "positions 32 apart" in shown
