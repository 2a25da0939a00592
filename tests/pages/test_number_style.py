"""One number style per language (issue 36, item 2): every page's rendered text in French and German, read where
AppTest reads it (markdown, captions, badges, notes), writes its numbers in the reader's format.

Outside code spans and code blocks, which show what PyTorch prints, a French or German text never puts a decimal
point between digits, and writes scientific notation only for a magnitude outside [0.001, 10 000)
(ui.numbers.SCI_BELOW, SCI_FROM). The checker itself is tested on crafted texts first, so a pass means something.
"""

from __future__ import annotations

import re

import pytest

from tests.plotly_json import open_page
from ui.i18n import TRANSLATED
from ui.nav import PAGES
from ui.numbers import SCI_BELOW, SCI_FROM, num, sci, seq

#: Code as the reader sees it: fenced blocks and inline spans.
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
#: Dotted numbers that are names, not decimals: section numbers (§3.5.1, "exercise 3.1", "Übung 3.2"), versions
#: (PyTorch 2.13.0), and German whole numbers grouped by thousands (1.621.248).
_NAMES = re.compile(
    r"§\s*\d+(?:\.\d+)+"
    r"|(?:[Ee]xercices?|[Ee]xercises?|Übung(?:en)?|[Ss]ections?|Abschnitts?|[Cc]hapitres?|[Cc]hapters?|Kapitels?)"
    r"\s+\d+(?:\.\d+)+"
    r"|\d+\.\d+\.\d+\S*")
_GERMAN_GROUPS = re.compile(r"(?<!\d)(?<!\d[.,])[1-9]\d{0,2}(?:\.\d{3})+(?:,\d+)?(?!\d|\.\d)")
_DECIMAL_POINT = re.compile(r"\d\.\d")
#: A hyphen-minus as a number's sign (« x ≈ -103,97 »): the pages write the minus sign U+2212 (ui.numbers.MINUS);
#: a hyphen inside a word or between digits (« 1-99 », « E-notation ») is no sign.
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.DOTALL)
_HYPHEN_SIGN = re.compile(r"(?<![\w)\]}|.,-])-(?=\d)")
_E_NOTATION = re.compile(r"(?<![\w.,])[−-]?(\d+(?:[.,]\d+)?)[eE]([+−-]?\d+)(?![\w])")


def offences(text: str, lang: str) -> list[str]:
    """What in ``text`` breaks the reader's number style: a decimal point between digits, a hyphen-minus for a
    negative sign, or E-notation for a magnitude inside [0.001, 10 000); code spans and blocks are left out (they
    show what Python prints)."""
    prose = _NAMES.sub(" ", _CODE.sub(" ", text))
    if lang == "de":
        prose = _GERMAN_GROUPS.sub(" ", prose)
    found = [prose[max(0, m.start() - 20):m.end() + 20] for m in _DECIMAL_POINT.finditer(prose)]
    text_only = _MATH.sub(" ", prose)  # KaTeX typesets math's "-" as a minus sign
    found += [text_only[max(0, m.start() - 20):m.end() + 20] for m in _HYPHEN_SIGN.finditer(text_only)]
    for m in _E_NOTATION.finditer(prose):
        value = float(m.group(1).replace(",", ".")) * 10 ** int(m.group(2).replace("−", "-"))
        if value != 0 and SCI_BELOW <= abs(value) < SCI_FROM:
            found.append(m.group(0))
    return found


@pytest.mark.parametrize(("text", "lang"), [
    ("poids naïfs = [0.1455, 0.2278]", "fr"),
    ("max |v1 − v2| : 7,5072E-1", "fr"),
    ("Spanne = 2,0E0", "de"),
    ("Differenz 3,157E0", "de"),
    ("écart 1e-2", "fr"),
    ("x ≈ -103,97", "fr"),
    ("Gewichte [0,6667; -0,3333]", "de"),
])
def test_checker_finds_english_decimals_and_needless_e_notation(text, lang):
    assert offences(text, lang)


@pytest.mark.parametrize(("text", "lang"), [
    ("`tensor([0.1455, 0.2278])` et [0,1455 ; 0,2278]", "fr"),
    ("```\ntensor([0.4419, 0.6515])\n```", "de"),
    ("§3.5.1 et l'exercice 3.1, PyTorch 2.13.0+cpu", "fr"),
    ("Übung 3.2 des Kapitels, 1.621.248 Parameter, 3.168, und 1.831,97 ms.", "de"),
    ("max |boucles − produit| = 5,96E-8, ou 1,2E5", "fr"),
    ("float32, x₀, W_query, d_k = 1024", "de"),
    ("x ≈ −103,97, E-Notation, 1-99, float-32, `tensor(-1)`, $10^{-8}$", "fr"),
])
def test_checker_leaves_code_names_and_the_readers_format_alone(text, lang):
    assert not offences(text, lang)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_the_formatters_write_what_the_checker_accepts(lang):
    written = " ".join([seq([0.1455, -0.2278, 1.0], 4, lang), sci(0.75072, 4, lang), sci(-5.96e-8, 2, lang),
                        num(-103.97, 2, lang), num(-1e-17, 4, lang),
                        sci(2.0, 1, lang), sci(12_345.0, 2, lang), num(1621248.0, 0, lang)])
    assert not offences(written, lang), written


def rendered(at) -> list[str]:
    """Every text the reader reads on an AppTest page: markdown and badges, captions, notes, expanders' titles."""
    out = [m.value for m in at.markdown] + [c.value for c in at.caption]
    for kind in ("success", "info", "warning", "error"):
        out += [e.value for e in at.get(kind)]
    out += [e.label for e in at.expander]
    return out


@pytest.mark.parametrize("lang", TRANSLATED)
@pytest.mark.parametrize("info", PAGES, ids=[p.slug for p in PAGES])
def test_every_page_writes_numbers_in_the_readers_format(info, lang):
    at = open_page("app.py" if info.slug == "home" else info.script, 240, lang=lang)
    assert not at.exception, [e.value for e in at.exception]
    texts = rendered(at)
    assert len(texts) > 1  # the page drew its prose
    bad = {text[:80]: offences(text, lang) for text in texts if offences(text, lang)}
    assert not bad, bad
