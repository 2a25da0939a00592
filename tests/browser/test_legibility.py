"""Every text of every figure legible, every page clean under axe-core, in a real browser.

For each covered page (:data:`COVERED`), in French, German and English, at a desktop's 1400 px and a phone's
390 px, and with a few controls at their extremes (:data:`EXTREMES`, in German, whose labels are the longest),
``tools.legibility.visit`` measures the texts of every Plotly chart and diagram, the badges, headings and table
cells: no two distinct texts overlap, none is outside its figure or cut by the viewport, none is drawn under 9 CSS
px, nothing is cut short. One load of a page serves both widths (the viewport narrows between the two
measurements: nothing the server sends depends on the width), and axe-core runs once per page and language, at
1400 px: no violation of impact "serious" or "critical". One server and one browser serve the whole module;
progress lines go to the real stderr.
"""

from __future__ import annotations

import sys
import time

import pytest

from tools import legibility
from ui.i18n import LANGUAGES

pytestmark = pytest.mark.browser

#: The pages whose figures are checked: add a page's slug here once its faults are fixed.
COVERED = ("home", "self_attention", "trainable_weights", "causal_mask", "dropout", "multi_head", "memory_layout",
           "positional_encodings", "lab", "glossary")
LANGS = tuple(LANGUAGES)
#: Measured in this order from one load; axe-core runs at the first.
WIDTHS = (1400, 390)
#: The language of the extremes: German's labels are the longest of the three.
EXTREME_LANG = "de"
#: Controls at the ends of their ranges, where labels grow (URL parameters of each page).
EXTREMES: dict[str, tuple[dict[str, str], ...]] = {
    "self_attention": ({"sa_scale": "150", "sa_dtype": "float16", "sa_query": "Your"},),
    "trainable_weights": ({"tw_d_out": "8"}, {"tw_d_out": "1"}),
    "causal_mask": ({"cm_triu_k": "-6", "cm_nan_guard": "finite_min"}, {"cm_triu_k": "6", "cm_nan_row": "Your"}),
    "dropout": ({"do_layer_p": "0.9", "do_mean_p": "0.9", "do_seed": "0"},),
    "multi_head": ({"mh_n_embd": "64", "mh_heads": "64", "mh_line": "白日依山尽黄河入海流欲穷千"},
                   {"mh_n_embd": "8", "mh_heads": "8"}),
    # the head walk (behind a prediction gate, hence predict=off) with the most cells that carry numbers: 64
    # two-digit reading positions in its storage strip
    "memory_layout": ({"ml_cost_B": "512", "ml_cost_H": "128", "ml_cost_dh": "512"},
                      {"predict": "off", "ml_T": "8", "ml_H": "2", "ml_dh": "4"}),
    "positional_encodings": ({"pe_block": "256", "pe_width": "256", "pe_past_T": "64", "pe_position": "127"},
                             {"pe_n_embd": "128", "pe_seed": "4", "pe_block": "16", "pe_width": "1",
                              "pe_head_dim": "64", "pe_position": "127", "pe_score_T": "16", "pe_shift": "0"}),
    # the longest generation and the longest line the attention maps draw
    "lab": ({"lab_length": "300", "lab_line": "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。床前明月光，疑是"},),
}
#: axe-core impacts that fail the test.
BLOCKING = {"serious", "critical"}
#: axe-core rules broken by Streamlit's own markup, not the app's: its sectioned page navigation puts each
#: section's <li> items in a <div> inside the <ul> (``list``, ``listitem``). Allowed only where every element
#: axe names lies in that navigation; anywhere else they fail like any other rule.
STREAMLIT_NAVIGATION = {"list", "listitem"}

VISITS = [
    pytest.param(slug, lang, {}, id=f"{slug}-{lang}") for slug in COVERED for lang in LANGS
] + [
    pytest.param(slug, EXTREME_LANG, query, id=f"{slug}-{EXTREME_LANG}-" + "-".join(map("=".join, query.items())))
    for slug in COVERED for query in EXTREMES.get(slug, ())
]


def say(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.__stderr__, flush=True)


@pytest.fixture(scope="module")
def app():
    """One server and one browser for the module: (browser, base URL)."""
    with legibility.serve() as base, legibility.chromium() as browser:
        # a new server's first page imports and warms what every later visit reuses: waited for here, with time to
        # spare on a loaded machine, not inside the first case's timeout
        page = browser.new_page()
        try:
            page.goto(f"{base}/?lang=en", wait_until="domcontentloaded")
            page.get_by_role("heading", level=1).first.wait_for(timeout=600_000)
        finally:
            page.close()
        say("legibility: server and browser up")
        yield browser, base


@pytest.mark.parametrize(("slug", "lang", "query"), VISITS)
def test_page_is_legible(app, slug, lang, query):
    browser, base = app
    start = time.monotonic()
    reports = legibility.visit(browser, base, slug, lang, WIDTHS, query, audit_width=None if query else WIDTHS[0],
                               min_charts=0 if slug == "glossary" else 1)
    faults = [str(f) for report in reports for f in report.faults]
    say(f"{slug} [{lang}] {query or ''}: {len(faults)} faults, " + ", ".join(
        f"{w} px {r.figures} figures {r.texts} texts" for w, r in zip(WIDTHS, reports, strict=True))
        + f", {time.monotonic() - start:.1f} s")
    assert faults == []
    blocking = [f for report in reports for f in report.findings if f.impact in BLOCKING]
    assert [str(f) for f in blocking if not (f.in_navigation and f.rule in STREAMLIT_NAVIGATION)] == []
    if slug != "glossary":
        assert all(r.figures > 0 and r.texts > 0 for r in reports), "no figure was measured"


def test_keyboard_reaches_and_moves_a_slider(app):
    """Tab from the page's top reaches the first slider of the main area; the arrow keys change its value."""
    browser, base = app
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        page.goto(f"{base}/dropout?lang=fr", wait_until="domcontentloaded")
        legibility.settle(page, 120_000, 1400)
        slider = page.locator('[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]').first
        before = slider.input_value()
        page.locator("body").focus()
        reached = []
        for _ in range(80):
            page.keyboard.press("Tab")
            focused = page.evaluate("() => document.activeElement && document.activeElement.tagName")
            reached.append(focused)
            if slider.evaluate("(el) => el === document.activeElement"):
                break
        assert slider.evaluate("(el) => el === document.activeElement"), f"Tab never reached the slider: {reached}"
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "(v) => document.querySelector('[data-testid=\"stMain\"] [data-testid=\"stSlider\"] input[type=range]')"
            ".value !== v", arg=before, timeout=30_000)
        assert slider.input_value() != before
    finally:
        page.close()
