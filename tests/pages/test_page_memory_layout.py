"""AppTest: page 6 (views/memory_layout.py) — chapter checks, the explorer, the memory walk and head walk figures."""


import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from engine.sections import memory_layout as sections
from tests.plotly_json import ROOT, badges, figure_json_bytes, figures, open_page, texts
from ui.i18n import TRANSLATED, translations
from ui.numbers import byte_size, integer

PAGE = "views/memory_layout.py"
t = translations("en").gettext


def plain(title: str | None) -> str:
    """A chart title as one line: the figures wrap long titles with <br> (for phones)."""
    return (title or "").replace("<br>", " ")


def walk_figure(at, lang="en"):
    prefix = translations(lang).gettext("logical step ")
    return next(f for f in figures(at) if f["layout"].get("sliders") and
                f["layout"]["sliders"][0]["currentvalue"]["prefix"] == prefix)


def head_figure(at):
    return next(f for f in figures(at) if f["layout"].get("sliders") and
                f["layout"]["sliders"][0]["currentvalue"]["prefix"] == t("stage "))


def lit_cell(trace) -> tuple[int, int]:
    """(row, col) of the one non-empty cell of a highlight heatmap."""
    z = np.array([[np.nan if v is None else v for v in row] for row in trace["z"]], dtype=float)
    rows, cols = np.nonzero(~np.isnan(z))
    assert len(rows) == 1
    return int(rows[0]), int(cols[0])


def explorer_table(at):
    return next(d.value for d in at.table if t("tensor") in d.value.columns and "M" in list(d.value[t("tensor")])
                and len(d.value) <= 4 and "….reshape(-1)" not in list(d.value[t("tensor")]))


def memory(table) -> list[str]:
    return table[t("memory")].tolist()


ORIGINAL, SHARED, COPY = t("original storage"), t("shares {name}'s storage").format(name="M"), t("own storage (a copy)")


def set_explorer(at, base="2, 3", recipe="view", new="3, 2", d0=0, d1=1):
    at.text_input(key="ml_base").set_value(base)
    at.selectbox(key="ml_recipe").set_value(recipe)
    at.text_input(key="ml_new_shape").set_value(new)
    at.number_input(key="ml_d0").set_value(d0)
    at.number_input(key="ml_d1").set_value(d1)
    at.run()
    assert not at.exception


def walk_order(fig) -> list[int]:
    """The storage cell lit at each step of the walk slider."""
    n_steps = len(fig["layout"]["sliders"][0]["steps"])
    return [lit_cell(fig["data"][2 + 2 * k + 1])[1] for k in range(n_steps)]


def test_chapter_checks_green(at):
    green = badges(at, "green")
    assert len(green) == 5 and not badges(at, "red") and not badges(at, "gray")
    assert "M.view(3, 2) = [[1, 2], [3, 4], [5, 6]] · M.transpose(0, 1) = [[1, 4], [2, 5], [3, 6]]" in texts(at)
    assert t("Memory under the transpose: {storage} · read in logical order: {reading}").format(
        storage=[1, 2, 3, 4, 5, 6], reading=[1, 4, 2, 5, 3, 6]) in texts(at)
    summary = next(d.value for d in at.table if t("memory") in d.value.columns)
    assert memory(summary) == [ORIGINAL, SHARED, SHARED, COPY, SHARED, COPY]
    assert summary[t("strides (stride)")].tolist()[:3] == ["(3, 1)", "(2, 1)", "(1, 3)"]


def test_view_on_transposed_shows_the_real_error(at):
    codes = [c.value for c in at.code]
    assert any("RuntimeError: view size is not compatible with input tensor's size and stride" in c for c in codes)
    assert any("[1, 4, 2, 5, 3, 6]" in t and "reshape(-1)" in t for t in texts(at))


def test_default_walk_is_the_view(at):
    fig = walk_figure(at)
    assert len(fig["data"]) == 2 + 2 * 6
    assert len(fig["layout"]["sliders"][0]["steps"]) == 6
    assert walk_order(fig) == [0, 1, 2, 3, 4, 5]
    assert lit_cell(fig["data"][2 + 2 * 3]) == (1, 1)  # step 3 lights logical (1, 1) of the 3x2 view
    assert fig["data"][1]["text"][0] == ["1", "2", "3", "4", "5", "6"]
    assert t("`{code}` reads storage cells in the order {order}").format(code="M.view(3, 2)", order=list(range(6))) \
        in texts(at)


def test_transpose_walk_jumps(at):
    set_explorer(at, recipe="transpose")
    fig = walk_figure(at)
    assert walk_order(fig) == [0, 3, 1, 4, 2, 5]
    assert t("step {k}: element {where} → cell {cell}").format(k=1, where="(0, 1)", cell=3) \
        in plain(fig["layout"]["sliders"][0]["steps"][1]["args"][1]["title.text"])
    table = explorer_table(at)
    assert table[t("contiguous (is_contiguous)")].tolist() == [True, False]
    assert memory(table)[1] == SHARED


def test_contiguous_copies_and_view_error(at):
    set_explorer(at, recipe="transpose_contiguous")
    assert walk_order(walk_figure(at)) == [0, 1, 2, 3, 4, 5]
    assert memory(explorer_table(at))[-1] == COPY
    assert walk_figure(at)["data"][1]["text"][0] == ["1", "4", "2", "5", "3", "6"]
    set_explorer(at, recipe="transpose_view", new="6")
    # the translated notice, then PyTorch's own words as code
    assert at.error and any("view size is not compatible" in c.value for c in at.code)
    set_explorer(at, recipe="transpose_reshape", new="-1")
    assert not at.error
    assert memory(explorer_table(at))[-1] == COPY
    set_explorer(at, recipe="transpose_contiguous_view", new="2, 3")
    assert walk_order(walk_figure(at)) == [0, 1, 2, 3, 4, 5]


def test_slices_show_offset_and_unused_cells(at):
    set_explorer(at, recipe="slice_from_1")
    table = explorer_table(at)
    assert table[t("storage offset (storage_offset)")].tolist() == [0, 1]
    fig = walk_figure(at)
    assert walk_order(fig) == [1, 2, 4, 5]
    assert fig["data"][1]["z"][0] == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0]  # cells 0 and 3 are never read
    set_explorer(at, recipe="every_other")
    assert explorer_table(at)[t("strides (stride)")].tolist()[-1] == "(3, 2)"


def start_error(reason: str, **params) -> str:
    return t("Starting shape: {reason}. Using the chapter's (2, 3).").format(reason=t(REASONS[reason]).format(**params))


def new_error(reason: str, **params) -> str:
    return t("New shape: {reason}. Using (-1,), which flattens.").format(reason=t(REASONS[reason]).format(**params))


REASONS = {
    "empty": "no shape given", "too_long": "at most {limit} characters",
    "not_a_shape": "not a shape; type whole numbers separated by commas, e.g. 3, 2",
    "too_many_dims": "at most {limit} dimensions here, got {count}",
    "not_positive": "sizes must be positive whole numbers",
    "two_inferred": "at most one size may be -1 (it is inferred)",
    "no_inferred": "the starting shape cannot contain -1; give every size",
    "too_large": "at most {limit} elements here, so the picture stays readable",
}
LIMITS = {"limit": sections.MAX_ELEMENTS}


@pytest.mark.parametrize("base, recipe, new, d0, d1, message", [
    ("a, b", "view", "3, 2", 0, 1, start_error("not_a_shape")),
    ("7, 7", "view", "3, 2", 0, 1, start_error("too_large", **LIMITS)),
    ("-1, 6", "view", "3, 2", 0, 1, start_error("no_inferred")),
    ("99999999999999999999", "view", "3, 2", 0, 1, start_error("too_large", **LIMITS)),
    ("2, 3", "view", "99999999999999999999", 0, 1, new_error("too_large", **LIMITS)),
    ("2, 3", "reshape", "-99999999999999999999", 0, 1, new_error("too_large", **LIMITS)),
    ("9" * 300, "view", "3, 2", 0, 1, start_error("too_long", limit=sections.MAX_SHAPE_TEXT)),
    ("0, 3", "view", "3, 2", 0, 1, start_error("not_positive")),
    ("-5", "view", "3, 2", 0, 1, start_error("not_positive")),
    ("", "view", "3, 2", 0, 1, start_error("empty")),
    ("٣, ٢", "view", "3, 2", 0, 1, start_error("not_a_shape")),
    ("2, 3", "view", "３", 0, 1, new_error("not_a_shape")),
    ("1, 1, 1, 1, 1, 1", "view", "3, 2", 0, 1, start_error("too_many_dims", limit=sections.MAX_DIMS, count=6)),
    ("2, 3", "view", "-1, -1", 0, 1, new_error("two_inferred")),
    ("2, 3", "view", "4, 2", 0, 1, "RuntimeError: shape '[4, 2]' is invalid"),
    ("2, 3", "reshape", "x", 0, 1, new_error("not_a_shape")),
    ("2, 3", "transpose", "3, 2", 3, 0, "IndexError: Dimension out of range"),
    ("2, 3", "transpose", "3, 2", -4, 3, "IndexError"),
])
def test_bad_inputs_give_messages(at, base, recipe, new, d0, d1, message):
    set_explorer(at, base, recipe, new, d0, d1)
    shown = [e.value for e in at.error] + [c.value for c in at.code]
    assert at.error and any(message in x for x in shown), shown
    assert walk_figure(at)["data"]


def test_reader_shapes_and_permutations(at):
    set_explorer(at, base="2, 3, 2, 2", recipe="transpose", d0=0, d1=3)
    fig = walk_figure(at)
    assert len(fig["layout"]["sliders"][0]["steps"]) == 24
    order = walk_order(fig)
    assert sorted(order) == list(range(24)) and order != list(range(24))
    assert explorer_table(at)[t("strides (stride)")].tolist() == ["(12, 4, 2, 1)", "(1, 4, 2, 12)"]
    set_explorer(at, base="6, 8", recipe="reshape", new="4, -1, 2")
    assert explorer_table(at)[t("shape")].tolist()[-1] == "(4, 6, 2)"
    set_explorer(at, base="48", recipe="view", new="2, 2, 2, 6")
    assert len(walk_figure(at)["layout"]["sliders"][0]["steps"]) == 48
    assert figure_json_bytes(at) < 2_000_000


def test_head_walk_default(at):
    fig = head_figure(at)
    steps = fig["layout"]["sliders"][0]["steps"]
    assert len(steps) == 8 and len(fig["data"]) == 16
    titles = [plain(s["args"][1]["title.text"]) for s in steps]
    stage = t("{title} · shape {shape} · stride {stride} · {contiguity} · {storage}")
    assert titles[0] == stage.format(title="keys = W_key(x)", shape=(1, 4, 4), stride=(16, 4, 1),
                                     contiguity=t("contiguous"), storage=t("new storage"))
    assert titles[2] == stage.format(title=".transpose(1, 2)", shape=(1, 2, 4, 2), stride=(16, 2, 4, 1),
                                     contiguity=t("NOT contiguous"), storage=t("same storage as the step before"))
    assert "(1, 2, 4, 4)" in titles[3] and t("new storage") in titles[3]
    # stage 0: heads interleaved per token in memory; stage 3: the scores grouped by head. Their cells carry
    # two-digit reading positions, so the strip has rows of 8 cells (16 crowd the numbers at 390 px)
    assert fig["data"][1]["z"] == [[0.0, 0.0, 1.0, 1.0] * 2] * 2
    assert fig["data"][1]["texttemplate"] == "%{text}" and fig["data"][1]["text"][1][-1] == "15"
    assert steps[0]["args"][1]["yaxis2.ticktext"] == [t("cells {first}–{last}").format(first=0, last=7),
                                                      t("cells {first}–{last}").format(first=8, last=15)]
    assert [v for row in fig["data"][7]["z"] for v in row] == [0.0] * 16 + [1.0] * 16
    # stage 2 (after transpose): reading order jumps
    assert fig["data"][5]["text"][0][:4] == ["0", "1", "8", "9"]
    table = next(d.value for d in at.table if t("stage") in d.value.columns)
    assert table[t("contiguous (is_contiguous)")].tolist() == [True, True, False, True, True, False, True, True]
    assert table[t("storage")].tolist()[:3] == [t("new"), t("same as the stage before"), t("same as the stage before")]


@pytest.mark.parametrize("T, H, d_h", [(1, 1, 1), (8, 4, 4), (8, 1, 4), (1, 4, 1)])
def test_head_walk_extremes(at, T, H, d_h):
    at.slider(key="ml_T").set_value(T).run()
    at.slider(key="ml_H").set_value(H).run()
    at.slider(key="ml_dh").set_value(d_h).run()
    assert not at.exception
    fig = head_figure(at)
    title = plain(fig["layout"]["sliders"][0]["steps"][0]["args"][1]["title.text"])
    assert f"(1, {T}, {H * d_h})" in title
    scores_heads = np.array([v for row in fig["data"][7]["z"] for v in row if v is not None], dtype=float)
    assert len(scores_heads) == H * T * T
    assert figure_json_bytes(at) < 2_000_000


@pytest.mark.parametrize("B, H, d_h, dtype", [
    (8, 12, 64, "float32"), (1, 1, 1, "float32"), (512, 128, 512, "float64"), (8, 12, 64, "bfloat16 / float16"),
])
def test_score_cost(at, B, H, d_h, dtype):
    at.number_input(key="ml_cost_B").set_value(B)
    at.number_input(key="ml_cost_H").set_value(H)
    at.number_input(key="ml_cost_dh").set_value(d_h)
    at.selectbox(key="ml_cost_dtype").set_value(dtype)
    at.run()
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    at_1024 = byte_size(sections.score_tensor_bytes(B, H, 1024, sections.DTYPE_BYTES[dtype]), lang="en")
    assert shown[t("attn_scores at T = {T}").format(T=integer(1024, "en"))] == at_1024
    title = t("Bytes against T · B={batch}, H={heads}, d_h={head_dim}").format(
        batch=integer(B, "en"), heads=integer(H, "en"), head_dim=integer(d_h, "en"))
    fig = next(f for f in figures(at) if plain(f["layout"]["title"]["text"]) == title)
    scores = np.asarray(fig["data"][0]["y"], dtype=float)
    qkv = np.asarray(fig["data"][1]["y"], dtype=float)
    np.testing.assert_allclose(scores[1:] / scores[:-1], 4.0)
    np.testing.assert_allclose(qkv[1:] / qkv[:-1], 2.0)
    # the lengths on the T axis carry the reader's group separator (d3), the sizes the reader's units
    assert fig["layout"]["xaxis"]["tickformat"] == ",d" and fig["layout"]["separators"] == ".,"
    assert fig["data"][0]["customdata"][-1] == byte_size(scores[-1], lang="en")


def test_score_cost_in_french_units():
    app = open_page(PAGE, 60, lang="fr")
    assert not app.exception
    fr = translations("fr").gettext
    shown = {m.label: m.value for m in app.metric}
    at_1024 = shown[fr("attn_scores at T = {T}").format(T=integer(1024, "fr"))]
    assert at_1024 == byte_size(8 * 12 * 1024**2 * 4, lang="fr") and at_1024.endswith("\u00a0Mio")
    tables = [d.value for d in app.table]
    assert any(fr("contiguous (is_contiguous)") in table.columns for table in tables)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_other_languages_same_checks(lang):
    app = open_page(PAGE, 60, lang=lang)
    assert not app.exception
    assert len(badges(app, "green")) == 5 and not badges(app, "red")
    assert walk_order(walk_figure(app, lang)) == [0, 1, 2, 3, 4, 5]


def test_a_crafted_link_gets_messages_not_a_traceback():
    """Issue 15: values from a URL are bounded before anything is allocated."""
    app = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    app.query_params.update({"ml_base": "99999999999999999999", "ml_new_shape": "-" + "9" * 4000,
                             "ml_recipe": "view", "ml_d0": "99999999999999999999"})
    app.run()
    assert not app.exception
    assert app.selectbox(key="ml_recipe").value == "view" and app.number_input(key="ml_d0").value == 0
    assert [e.value for e in app.error] == [start_error("too_large", **LIMITS),
                                            new_error("too_long", limit=sections.MAX_SHAPE_TEXT)]
    assert walk_order(walk_figure(app)) == [0, 1, 2, 3, 4, 5]


def test_every_chart_has_a_text_alternative_with_its_values(at):
    """Issue 25: the walk's alternative lists the cells read in logical order, the cost chart's the sizes it marks."""
    charts = at.get("plotly_chart")
    assert charts and all(c.proto.alt.strip() for c in charts)
    walk = next(c.proto.alt for c in charts if c.proto.id.endswith("ml_walk"))
    assert "0 · 1 · 2 · 3 · 4 · 5" in walk
    cost = next(c.proto.alt for c in charts if c.proto.id.endswith("ml_cost_chart"))
    assert byte_size(sections.score_tensor_bytes(8, 12, sections.LONG_T), lang="en") in cost



def test_the_integer_matrices_get_the_exact_badge(at):
    labels = ["M.view(3, 2)", "M.transpose(0, 1)", t("memory after the transpose (unchanged)"),
              t("reading order of the transpose")]
    green = badges(at, "green")
    for label in labels:
        assert any(t("{label}: matches the chapter exactly").format(label=label) in b for b in green), label
        assert not any(t("{label}: matches the chapter to {decimals} decimals").format(label=label, decimals=4) in b
                       for b in green), label


def test_the_layout_tables_are_static_so_no_column_hides_in_a_grid():
    """Issue 36: page 6's "memory" column carries the section's point; a data grid hid it behind a sideways scroll
    at 1400 px, a static table shows every column (the browser test checks the widths)."""
    fr = translations("fr").gettext
    at = open_page(PAGE, lang="fr")
    assert not at.dataframe
    assert sum(fr("memory") in d.value.columns for d in at.table) >= 2


def test_the_backward_pass_sentence_is_counted():
    """Issue 36: "training keeps them for the backward pass" is a count of the tensors autograd saves, not a claim;
    none under no_grad (page 2: the weights are never stored in the model)."""
    saved = sections.saved_score_tensors(dropout=0.1)
    assert saved.training == 2 and saved.inference == 0 and saved.shape == (2, 2, 6, 6)
    assert sections.saved_score_tensors(dropout=0.0).training == 1
    at = open_page(PAGE)
    sentence = [x for x in texts(at) if x.startswith("Counted on the chapter's MultiHeadAttention")]
    assert sentence == [
        "Counted on the chapter's MultiHeadAttention (B = 2, H = 2, T = 6, dropout 0.1): a training forward pass "
        "leaves 2 float tensors of shape (2, 2, 6, 6) for the backward pass; under `torch.no_grad()` it leaves 0."]
