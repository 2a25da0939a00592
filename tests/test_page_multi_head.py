"""AppTest: page 5 (views/multi_head.py) shows the chapter's numbers and follows every control."""

import numpy as np
import pytest

from engine.bench import attention as bench
from engine.layout import human_bytes
from tests.plotly_json import ROOT, badges, figure_json_bytes, figures, texts

PAGE = "views/multi_head.py"


def metrics(at):
    return {m.label: m.value for m in at.metric}


def heads_figure(at):
    return next(f for f in figures(at) if f["layout"].get("sliders") and "attn_weights of head" in f["layout"]["title"]["text"])


def shapes(at):
    table = next(d.value for d in at.dataframe if "step" in d.value.columns)
    return dict(zip(table["step"], table["shape"]))


def test_chapter_numbers_green(at):
    shown = texts(at)
    assert "context_vecs[0][0] = [-0.4519, 0.2216, 0.4772, 0.1063] · shape (2, 6, 4)" in shown
    assert any("context_vecs[0][0] = [0.3190, 0.4858] · shape (2, 6, 2)" in t for t in shown)
    assert any(t.startswith("Exercise 3.2") and "shape (2, 6, 2)" in t for t in shown)
    green = badges(at, "green")
    assert len(green) == 6 and not badges(at, "red") and not badges(at, "gray")
    assert any("wrapper output" in b for b in green) and any("split layer, first row" in b for b in green)
    assert any("qkv parameters with 4 heads" in b for b in green)
    assert metrics(at) == {"qkv parameters": "3,168", "proj parameters": "1,056",
                           "score tensor (1, 4, 5, 5), float32": "400 B"}
    wrapper = next(f for f in figures(at) if "MultiHeadAttentionWrapper" in f["layout"]["title"]["text"])
    assert wrapper["data"][0]["text"][0] == ["-0.4519", "0.2216", "0.4772", "0.1063"]


def test_copy_shows_max_difference(at):
    line = next(t for t in texts(at) if t.startswith("max |wrapper − split| before the copy"))
    before = float(line.split("**")[1])
    after = float(line.split("**")[3])
    assert before > 1e-2 and after < 1e-6
    for heads, dim in ((8, 4), (1, 1), (6, 3)):
        at.select_slider(key="mh_copy_heads").set_value(heads).run()
        at.select_slider(key="mh_copy_dim").set_value(dim).run()
        assert not at.exception
        assert any("after the copy the split layer's heads equal the wrapper's" in b for b in badges(at, "green"))


def test_other_seed_turns_checks_gray(at):
    for seed in (0, 99_999):
        at.number_input(key="mh_seed").set_value(seed).run()
        assert not at.exception
        gray = badges(at, "gray")
        assert any("wrapper output" in b for b in gray) and any("split layer" in b for b in gray)
        assert "context_vecs[0][0] = [-0.4519, 0.2216, 0.4772, 0.1063] · shape (2, 6, 4)" not in texts(at)
        assert not badges(at, "red")


def test_heads_figure_steps_through_heads(at):
    fig = heads_figure(at)
    assert len(fig["data"]) == 4
    steps = fig["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == ["0", "1", "2", "3"]
    assert steps[2]["args"][0]["visible"] == [False, False, True, False]
    for trace in fig["data"]:
        z = np.array(trace["z"], dtype=float)
        assert z.shape == (5, 5)
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-6)
        assert np.allclose(np.triu(z, 1), 0.0)
    assert not np.allclose(np.array(fig["data"][0]["z"], float), np.array(fig["data"][1]["z"], float))
    assert shapes(at)["input x"] == "(1, 5, 32)"
    assert shapes(at)["q cut into heads"] == "(1, 4, 5, 8)"
    assert shapes(at)["attention scores"] == "(1, 4, 5, 5)"
    assert "(1, 5, 32) → (1, 4, 5, 8) → scores (1, 4, 5, 5)" in texts(at)


@pytest.mark.parametrize("n_embd, heads", [(32, 1), (32, 32), (8, 8), (64, 64), (64, 1), (12, 6)])
def test_width_and_heads_follow_the_controls(at, n_embd, heads):
    at.selectbox(key="mh_n_embd").set_value(n_embd).run()
    at.select_slider(key="mh_heads").set_value(heads).run()
    assert not at.exception
    assert len(heads_figure(at)["data"]) == heads
    assert shapes(at)["q cut into heads"] == f"(1, {heads}, 5, {n_embd // heads})"
    shown = metrics(at)
    assert shown["qkv parameters"] == f"{3 * n_embd * n_embd + 3 * n_embd:,}"
    assert shown["proj parameters"] == f"{n_embd * n_embd + n_embd:,}"
    assert shown[f"score tensor (1, {heads}, 5, 5), float32"] == human_bytes(heads * 5 * 5 * 4)
    badge = "green" if n_embd == 32 else "gray"
    assert any(f"qkv parameters with {heads} heads" in b for b in badges(at, badge))
    assert figure_json_bytes(at) < 2_000_000


def test_heads_snap_to_a_divisor_when_width_changes(at):
    at.select_slider(key="mh_heads").set_value(8).run()
    at.selectbox(key="mh_n_embd").set_value(12).run()
    assert not at.exception
    slider = at.select_slider(key="mh_heads")
    assert list(slider.options) == ["1", "2", "3", "4", "6", "12"]
    assert slider.value == 6
    assert len(heads_figure(at)["data"]) == 6


def test_line_control(at):
    at.text_input(key="mh_line").set_value("山依日白尽").run()
    assert heads_figure(at)["data"][0]["y"] == [0, 1, 2, 3, 4]
    at.text_input(key="mh_line").set_value("").run()
    assert not at.exception
    assert any("empty" in w.value for w in at.warning)
    assert "(1, 5, 32) → (1, 4, 5, 8) → scores (1, 4, 5, 5)" in texts(at)
    at.text_input(key="mh_line").set_value("山" * 1000).run()
    assert not at.exception
    assert any("only the first 12" in w.value for w in at.warning)
    assert shapes(at)["attention scores"] == "(1, 4, 12, 12)"
    at.text_input(key="mh_line").set_value("a").run()
    assert shapes(at)["attention scores"] == "(1, 4, 1, 1)"
    np.testing.assert_allclose(np.array(heads_figure(at)["data"][0]["z"], float), [[1.0]])


@pytest.mark.parametrize("d_out, heads, ok", [(32, 5, False), (30, 4, False), (1, 256, False), (4096, 256, True),
                                              (7, 7, True), (1, 1, True), (4096, 3, False)])
def test_split_that_does_not_divide_gets_a_message(at, d_out, heads, ok):
    at.number_input(key="mh_try_d_out").set_value(d_out).run()
    at.number_input(key="mh_try_heads").set_value(heads).run()
    assert not at.exception
    if ok:
        assert any(f"d_out {d_out} splits into {heads} heads of head_dim {d_out // heads}" in s.value for s in at.success)
        assert not at.error
    else:
        assert len(at.error) == 1
        message = at.error[0].value
        assert f"d_out={d_out} is not divisible by num_heads={heads}" in message
        assert "Nearest head counts that work" in message
    if (d_out, heads) == (32, 5):
        assert "4 or 8" in at.error[0].value


def test_shipped_benchmark_table(at):
    data = bench.load_results(ROOT / "assets" / "bench_attention.json")
    captions = [c.value for c in at.caption]
    assert any(data["machine"]["cpu"] in c and f"{data['machine']['cores']} cores" in c and data["machine"]["torch"] in c
               for c in captions)
    tables = [d.value for d in at.dataframe if "variant" in d.value.columns]
    assert len(tables) == len(data["sizes"]) >= 2
    for table, size in zip(tables, data["sizes"]):
        assert list(table["variant"]) == list(bench.VARIANTS)
        np.testing.assert_allclose(table["forward ms"], [r["forward_ms"] for r in size["results"]])
        assert (table["max |out − split|"] < 1e-4).all()
        assert any(t.startswith(f"**Input {size['label']}**") for t in texts(at))
    bars = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Time per call")]
    assert len(bars) == len(data["sizes"]) and bars[0]["data"][0]["y"] == list(bench.VARIANTS)


def test_live_measurement(at, monkeypatch):
    monkeypatch.setattr(bench, "SMALL", bench.TINY)
    at.button(key="mh_bench_rerun").click().run()
    assert not at.exception
    live = [d.value for d in at.dataframe if "variant" in d.value.columns][-1]
    assert list(live["variant"]) == list(bench.VARIANTS)
    assert (live["forward ms"] > 0).all() and (live["max |out − split|"] < 1e-5).all()
    assert any(f"Input {bench.TINY.label}" in t for t in texts(at))
    at.number_input(key="mh_seed").set_value(7).run()  # a later rerun keeps the live result
    assert any(f"Input {bench.TINY.label}" in t for t in texts(at))
