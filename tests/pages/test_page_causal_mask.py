"""AppTest: page 3 (views/causal_mask.py) checks the chapter's matrices and drives every control."""

import json
import os
import subprocess
import sys

import pytest
import streamlit as st
import torch
from streamlit.testing.v1 import AppTest

from engine import attention as A
from engine import chapter
from engine.diagrams.core import shape_text
from engine.sections import causal_mask as sections
from tests.plotly_json import ROOT, badges, captions, cells, figures, open_page, texts
from ui.i18n import TRANSLATED, translations
from ui.numbers import integer, plotly_separators, sci, seq

PAGE = "views/causal_mask.py"
TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
GUARDS = ["none", "finite_min", "nan_to_num", "keep_diagonal"]
#: The guards' labels (message ids) as the radio shows them.
GUARD_MSGIDS = {"none": "none (-inf)", "finite_min": "large finite negative", "nan_to_num": "nan_to_num after softmax",
                "keep_diagonal": "keep the diagonal visible"}


def plain(title: str | None) -> str:
    """A chart title as one line: the figures wrap long titles with <br> (for phones)."""
    return (title or "").replace("<br>", " ")


def msg(msgid: str, lang: str = "en", **values) -> str:
    """A message of the page as the reader sees it in ``lang``."""
    return translations(lang).gettext(msgid).format(**values)


#: The note under the meta table when it is the recording (assets/buffer_demo.json).
RECORDING_NOTE = ("This meta table is a recording of the code below, made with PyTorch {version}: running on the meta "
                  "device loads PyTorch's compiler, a large import, so the server reads the recording and the test "
                  "suite reruns the code to check it.")


#: The page's tables in order (AppTest does not expose a dataframe's key); a machine with an
#: accelerator adds one more buffer table at the end.
TABLES = {"cm_leak_table": 0, "cm_buffer_keys": 1, "cm_buffer_meta": 2, "cm_buffer_device": 3}


def table(at, key):
    return at.dataframe[TABLES[key]].value


def badge_for(at, colour, label):
    return [b for b in badges(at, colour) if b.split(" ", 1)[1].startswith(label)]


def test_chapter_matrices_checked_green(fresh):
    for label in ("weights before masking (sa_v2, seed 789)", "renormalised weights (naive approach)",
                  "scores with −inf above the diagonal", "softmax of the masked scores (efficient approach)"):
        assert badge_for(fresh, "green", msg(label) + ": matches the chapter"), label
    # rows are counted from 0, as in the tensors: "journey" is row 1
    assert badge_for(fresh, "green", msg("row {row}", row=1) + ": matches the chapter")
    assert not badges(fresh, "red")
    shown = texts(fresh)
    assert msg("row {row} (“{token}”) = {values}", row=1, token="journey",
               values="[0.5517, 0.4483, 0.0000, 0.0000, 0.0000, 0.0000]") in shown
    diff_prefix = msg("max |naive − efficient| = **{diff}**", diff=0.0).split("**")[0]
    diff_line = next(t for t in shown if t.startswith(diff_prefix))
    assert float(diff_line.split("**")[1]) < 1e-6
    sums_prefix = msg("row sums after zeroing the future = {values}", values="[")
    sums_line = next(t for t in shown if t.startswith(sums_prefix))
    assert sums_line.endswith(", 1.0000]")


@pytest.mark.parametrize("lang", TRANSLATED)
def test_runs_in_french_and_german_with_the_same_green_checks(fresh, lang):
    other = open_page(PAGE, 60, lang=lang)
    assert not other.exception
    assert len(badges(other, "green")) == len(badges(fresh, "green"))
    assert not badges(other, "red")
    assert msg(RECORDING_NOTE, lang, version=torch.__version__) in captions(other)
    assert msg(RECORDING_NOTE, lang, version=torch.__version__) != msg(RECORDING_NOTE, version=torch.__version__)
    # the same cells, written with the reader's decimal sign (the figure tells Plotly the same separators)
    decimal = plotly_separators(lang)[0]
    assert figures(other)[4]["data"][0]["text"][0] == [
        cell.replace(".", decimal) for cell in figures(fresh)[4]["data"][0]["text"][0]]
    assert figures(other)[4]["layout"]["separators"] == plotly_separators(lang)
    # the leakage table's numbers in the reader's format, the numbers behind them unchanged
    leak = other.dataframe[TABLES["cm_leak_table"]]
    assert leak.value.to_numpy().tolist() == table(fresh, "cm_leak_table").to_numpy().tolist()
    index_col = msg("token index", lang)
    assert cells(leak)[index_col].tolist() == [integer(v, lang=lang) for v in leak.value[index_col]]
    for msgid in ("max |Δ| causal", "max |Δ| no mask"):
        column = msg(msgid, lang)
        assert cells(leak)[column].tolist() == [sci(v, 3, lang=lang) for v in leak.value[column]]
        assert any(plotly_separators(lang)[0] in cell for cell in cells(leak)[column])
    # issue 24: the visible keys of the default diagonal as a list in the reader's format, not a Python list
    visible = sections.triu_explorer(len(TOKENS), 1).visible_per_row
    shown = texts(other)
    assert msg("visible keys per row = {counts}", lang, counts=seq(visible, 0, lang=lang)) in shown
    assert not [t for t in shown if str(list(visible)) in t]


def test_two_ways_figure_reads_like_the_printed_tensors(fresh):
    panels = figures(fresh)[:6]  # one figure per panel (they stack on a phone)
    assert all(len(fig["data"]) == 1 for fig in panels)
    masked_scores = panels[4]["data"][0]
    assert masked_scores["text"][0] == ["0.2899", "-inf", "-inf", "-inf", "-inf", "-inf"]
    assert masked_scores["z"][0][1] is None  # -inf is a gap, written out in the cell
    causal = panels[5]["data"][0]
    assert causal["text"][1][:3] == ["0.5517", "0.4483", "0.0000"]
    assert panels[0]["layout"]["yaxis"]["autorange"] == "reversed"
    assert panels[0]["layout"]["title"]["text"] == msg("1 · softmax of all scores")


def test_leakage_marks_only_that_row_and_later(at):
    changed_col = msg("changed (causal)")
    for t, token in enumerate(TOKENS):
        at.selectbox(key="cm_leak_token").set_value(token).run()
        assert not at.exception
        leak = table(at, "cm_leak_table")
        assert leak[changed_col].tolist() == [i >= t for i in range(6)]
        assert leak[msg("changed (no mask)")].all()
        assert msg("Perturbing “{token}” (row {row}) changed the rows: **{rows}**.", token=token, row=t,
                   rows=", ".join(TOKENS[t:])) in texts(at)
        if t == 0:  # no earlier row: the check could not fail, so it says it tested nothing (issue 36)
            assert badge_for(at, "gray", msg("nothing tested: no row comes before “{token}”; perturb a later token "
                                             "to test the mask", token=token))
            assert not badges(at, "green") or not badge_for(at, "green", msg("no row before"))
        else:
            assert badge_for(at, "green", msg("no row before “{token}” changed: nothing leaks from the future",
                                              token=token))


@pytest.mark.parametrize("delta", [-3.0, 0.0, 3.0])
def test_leakage_perturbation_extremes(at, delta):
    at.slider(key="cm_leak_delta").set_value(delta).run()
    assert not at.exception
    changed = table(at, "cm_leak_table")[msg("changed (causal)")]
    if delta == 0.0:
        assert not changed.any()
        assert at.info[0].value == msg("A perturbation of 0 changes nothing; move the slider away from 0.")
        assert badge_for(at, "gray", msg("nothing tested: a perturbation of 0 changes no row, so it cannot show a "
                                         "leak"))
        assert not any("nothing leaks" in b for b in badges(at, "green"))
    else:
        assert changed.tolist() == [False, False, True, True, True, True]


@pytest.mark.parametrize("k", [-6, 0, 1, 2, 6])
def test_triu_explorer_extremes(at, k):
    at.slider(key="cm_triu_k").set_value(k).run()
    assert not at.exception
    expected = [min(6, max(0, i + k)) for i in range(6)]
    assert msg("visible keys per row = {counts}", counts=seq(expected, 0, lang="en")) in texts(at)
    notes = [w.value for w in at.warning] + [s.value for s in at.success]
    if k <= 0:
        hidden = [TOKENS[i] for i, v in enumerate(expected) if v == 0]
        assert msg("Rows with nothing visible: {rows}. Their softmax would be NaN (see section 5).",
                   rows=", ".join(hidden)) in notes
    elif k == 1:
        assert msg("k = 1: the causal mask — each token sees itself and the past.") in notes
    else:
        n = min(k - 1, 5)
        assert translations("en").ngettext("Each token may see up to {n} future token: information leaks.",
                                           "Each token may see up to {n} future tokens: information leaks.",
                                           n).format(n=n) in notes
    title = msg("torch.triu(ones(6, 6), diagonal={k}) — 1 = hidden", k=k)
    fig = next(f for f in figures(at) if plain((f["layout"].get("title") or {}).get("text")) == title)
    assert sum(row.count("1") for row in fig["data"][0]["text"]) == 36 - sum(expected)


def test_register_buffer_table(fresh):
    keys = table(fresh, "cm_buffer_keys")
    state_keys = keys[msg("state_dict() keys")]
    assert state_keys.iloc[0].startswith("mask, ")
    assert "mask" not in state_keys.iloc[2]
    buffers = table(fresh, "cm_buffer_meta")
    assert buffers[msg("mask in state_dict()")].tolist() == [True, False, False]
    assert buffers[msg("mask after .to()")].tolist() == ["meta", "meta", "cpu"]
    outcome_prefix = "- " + msg("forward after `.to('{device}')`, {holder}: `{outcome}`", device="meta",
                                holder="", outcome="").split(",")[0]
    outcomes = next(t for t in texts(fresh) if t.startswith(outcome_prefix)).split("\n")
    assert len(outcomes) == 3
    ok = msg("ok, shape {shape}", shape="(2, 6, 2)")
    assert outcomes[0].endswith(f"`{ok}`") and outcomes[1].endswith(f"`{ok}`")
    prefix = msg("forward after `.to('{device}')`, {holder}: `{outcome}`", device="meta",
                 holder=msg("plain attribute self.mask = ..."), outcome="")
    assert outcomes[2].startswith("- " + prefix[:-1] + "RuntimeError")  # the mask stayed behind on the CPU
    assert "cpu" in outcomes[2] and "meta" in outcomes[2]
    # the recording of this very PyTorch, and the page says so with its version
    assert sections.read_buffer_demo().torch_version == torch.__version__
    assert msg(RECORDING_NOTE, version=torch.__version__) in captions(fresh)


def test_another_torchs_recording_runs_the_table_live(tmp_path, monkeypatch):
    data = sections.buffer_demo_record()
    data["torch"] = "1.0.0+other"
    data["rows"][2]["forward_result"] = "RuntimeError: recorded elsewhere"
    other = tmp_path / "buffer_demo.json"
    other.write_text(json.dumps(data), encoding="utf-8")
    monkeypatch.setattr(sections, "BUFFER_DEMO_FILE", other)
    st.cache_data.clear()  # the page caches the meta table for the process
    try:
        app = open_page(PAGE)
    finally:
        st.cache_data.clear()
    assert not app.exception
    buffers = table(app, "cm_buffer_meta")
    assert buffers[msg("mask after .to()")].tolist() == ["meta", "meta", "cpu"]
    assert not [c for c in captions(app) if "1.0.0+other" in c or "PyTorch " + torch.__version__ in c]
    assert not [t for t in texts(app) if "recorded elsewhere" in t]  # run live, not read


#: Page 3 under AppTest in a fresh interpreter, reporting which of PyTorch's lazily imported packages it loaded.
IMPORT_PROBE = """
import json, sys
from tests.plotly_json import open_page
app = open_page("views/causal_mask.py", 120)
print(json.dumps({"exception": [e.value for e in app.exception], "captions": [c.value for c in app.caption],
                  "loaded": [name for name in ("torch._dynamo", "sympy") if name in sys.modules]}))
"""


def test_page_3_never_loads_torch_dynamo_or_sympy():
    """Running on the meta device imports torch._dynamo and SymPy (hundreds of modules in every server process);
    page 3 reads its meta table from the recording instead, so a fresh process running it loads neither."""
    env = {**os.environ, "ATTENTION_DIAGRAMS": os.environ.get("ATTENTION_DIAGRAMS", "browser")}
    run = subprocess.run([sys.executable, "-c", IMPORT_PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["exception"] == []
    assert msg(RECORDING_NOTE, version=torch.__version__) in report["captions"]
    assert report["loaded"] == []


@pytest.mark.parametrize("guard", GUARDS)
def test_fully_masked_row(at, guard):
    at.radio(key="cm_nan_guard").set_value(guard).run()
    for token in ("Your", "with", "step"):
        at.selectbox(key="cm_nan_row").set_value(token).run()
        assert not at.exception
        check_masked_row(at, TOKENS.index(token), token, guard)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_a_link_names_the_guard_by_its_key_in_every_language(lang):
    """The guard radio shows its labels in the reader's language; a link holds the guard's key (finite_min), so the
    same link opens the same guard on the French and the German page."""
    app = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    app.session_state["lang"] = lang
    app.query_params["cm_nan_guard"] = "finite_min"
    app.run()
    assert not app.exception
    radio = app.radio(key="cm_nan_guard")
    assert radio.value == "finite_min" and app.query_params["cm_nan_guard"] == "finite_min"
    assert radio.options == [translations(lang).gettext(GUARD_MSGIDS[g]) for g in GUARDS]
    assert radio.options != [GUARD_MSGIDS[g] for g in GUARDS]


def check_masked_row(at, row, token, guard):
    weights = next(f for f in figures(at) if plain((f["layout"].get("title") or {}).get("text")).startswith(
        msg("attn_weights with the guard “{guard}”", guard="").split("“")[0]))
    cells = weights["data"][0]["text"]
    # the intended demonstration is never a red error: no st.error, no red badge
    assert not at.error and not badges(at, "red")
    if guard == "none":
        # the NaN is drawn in the figure: "nan" written in the row's cells, which stay uncoloured, and an outline
        assert cells[row] == ["nan"] * 6
        assert all(v is None for v in weights["data"][0]["z"][row])
        assert not any("nan" in r for i, r in enumerate(cells) if i != row)
        assert [s["y0"] for s in weights["layout"]["shapes"]] == [row - 0.5]
        assert [i.value for i in at.info][-1:] == [msg(
            "As intended here: row {row} (“{token}”) has no visible position, so its softmax is 0/0 = NaN. The figure "
            "writes nan in its cells and leaves them uncoloured; pick a guard to fix it.", row=row, token=token)]
    else:
        assert not any("nan" in r for r in cells)
        assert not weights["layout"].get("shapes")
        success = at.success[-1].value
        assert success.startswith(msg("No NaN. Row {row} (“{token}”) = {values}", row=row, token=token, values="["))
        if guard == "finite_min":
            assert success.endswith("[0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667]")
        if guard == "nan_to_num":
            assert success.endswith("[0.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000]")
        if guard == "keep_diagonal":
            assert success.split("= ")[1] == "[" + ", ".join("1.0000" if j == row else "0.0000" for j in range(6)) + "]"


def test_accelerator_branch_with_the_meta_device_standing_in(monkeypatch):
    import torch

    import engine.device

    monkeypatch.setattr(engine.device, "pick_device", lambda override=None: torch.device("meta"))
    app = open_page(PAGE)
    assert not app.exception
    assert msg("This machine has a **{device}** device; the same experiment with `.to('{device}')`:",
               device="meta") in texts(app)
    on_device = table(app, "cm_buffer_device")
    assert on_device[msg("mask after .to()")].tolist() == ["meta", "meta", "cpu"]


# --- the diagram ---------------------------------------------------------------------------------------


def diagram(at, i: int = 0) -> str:
    """The DOT source of the page's ``i``-th graphviz chart."""
    charts = at.get("graphviz_chart")
    assert len(charts) > i
    return charts[i].proto.spec


def test_diagram_shows_both_routes_with_the_run_shapes(fresh):
    # the wide diagram, then each route alone for a phone (the page's CSS shows one or the other)
    assert len(fresh.get("graphviz_chart")) == 3
    spec = diagram(fresh)
    routes = [diagram(fresh, 1), diagram(fresh, 2)]
    assert [r.count("cluster_") for r in routes] == [1, 1]
    # the naive route first, as the heatmaps and the prose take them (issue 36)
    assert "−∞" in routes[1] and "−∞" not in routes[0]
    assert spec.index("cluster_renorm") < spec.index("cluster_masked")
    result = sections.mask_two_ways(sections.v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2), d_k=2)
    assert shape_text(tuple(result.attn_scores.shape)) in spec and shape_text(tuple(result.row_sums.shape)) in spec
    # the divisor drawn is the tensor that divides, (6, 1) with keepdim, not a (6,) that would broadcast along columns
    assert tuple(result.row_sums.shape) == (6, 1) and "÷ " + shape_text((6, 1)) in spec and "÷ (6,)" not in spec
    torch.testing.assert_close(result.masked_simple / result.row_sums, result.masked_simple_norm)
    assert "√2" in spec and "−∞" in spec
    assert spec.count("cluster_") == 2  # the two routes


@pytest.mark.parametrize("lang", TRANSLATED)
def test_diagram_builds_in_french_and_german(fresh, lang):
    other = open_page(PAGE, 60, lang=lang)
    assert not other.exception
    assert diagram(other).count("cluster_") == diagram(fresh).count("cluster_")
