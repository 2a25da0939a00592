"""French typography of the prose and the catalog: a narrow no-break space (U+202F) before « : ; ? ! »
and inside « », so that no mark starts a line and no colon stands without its space.

Code spans, fenced code, math, HTML comments and tags, URLs, link targets and placeholders are left as
they are: they are not French prose.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
NNBSP = "\u202f"

#: Segments that are not prose: fenced and inline code, HTML comments and tags, display and inline
#: math, URLs, Markdown link targets, Plotly and Python placeholders, entities, Streamlit directives.
_NOT_PROSE = re.compile(
    r"```.*?```|<!--.*?-->|<[^<>\n]+>|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|https?://[^\s)>\]]+|\]\([^)]*\)"
    r"|%\{[^}]*\}|\{[^{}]*\}|%\([a-z_]+\)[sdfr]|&[a-z]+;|&#\d+;|:[a-z][a-z0-9_/-]*:|:[a-z-]+\[",
    re.S,
)
#: A mark that ends a clause (followed by a space or the end) without a narrow no-break space before it.
_BARE_MARK = re.compile(r"(?<!\u202f)[:;?!](?=\s|$)")
_BARE_OPEN = re.compile(r"«(?!\u202f)")
_BARE_CLOSE = re.compile(r"(?<!\u202f)»")


def faults(text: str) -> list[str]:
    """The places in ``text`` where French typography is broken, each with a little context."""
    prose = _NOT_PROSE.sub("\u0000", text)
    return [
        prose[max(0, match.start() - 25) : match.start() + 5].replace("\u0000", "…")
        for pattern in (_BARE_MARK, _BARE_OPEN, _BARE_CLOSE)
        for match in pattern.finditer(prose)
    ]


@pytest.mark.parametrize("path", sorted((ROOT / "content" / "fr").glob("*.md")), ids=lambda p: p.name)
def test_french_content_has_narrow_spaces(path: Path) -> None:
    assert faults(path.read_text(encoding="utf-8")) == []


def test_french_catalog_has_narrow_spaces() -> None:
    with (ROOT / "locales" / "fr" / "LC_MESSAGES" / "messages.po").open("rb") as handle:
        catalog = read_po(handle)
    bad = {}
    for message in catalog:
        if not message.id:
            continue
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        for string in strings:
            if found := faults(string):
                bad[str(message.id)] = found
    assert bad == {}


@pytest.mark.parametrize(
    "text",
    ["Étape 1 : le score", "quoi ?", "« mot »", "un ; deux", "Feu !", "{name}: {value}", "«mot»"],
)
def test_checker_finds_missing_spaces(text: str) -> None:
    assert faults(text) != []


@given(st.sampled_from([":", ";", "?", "!"]), st.text(alphabet="abcdé ", min_size=1, max_size=12))
def test_checker_accepts_narrow_spaces_and_code(mark: str, word: str) -> None:
    assert faults(f"«{NNBSP}{word}{NNBSP}»{NNBSP}{mark} `a{mark} b` $x {mark} y$ <!-- part: x -->") == []


#: A number and its percent sign joined by an ordinary space, which may break the line between them: Babel
#: (CLDR) writes « 1 % » with a no-break space in French and German (ui.numbers.percent).
_LOOSE_PERCENT = re.compile(r"\d[ \t]%")


@pytest.mark.parametrize("lang", ["fr", "de"])
def test_a_percent_sign_is_held_to_its_number_by_a_no_break_space(lang: str) -> None:
    from babel.numbers import format_percent

    assert format_percent(0.01, locale=lang) == "1\u00a0%"  # the spacing this test asks of the hand-written texts
    with (ROOT / "locales" / lang / "LC_MESSAGES" / "messages.po").open("rb") as handle:
        catalog = read_po(handle)
    loose = [str(m.id) for m in catalog if m.id and any(
        _LOOSE_PERCENT.search(s or "") for s in (m.string if isinstance(m.string, tuple) else (m.string,)))]
    loose += [path.name for path in sorted((ROOT / "content" / lang).glob("*.md"))
              if _LOOSE_PERCENT.search(path.read_text(encoding="utf-8"))]
    assert loose == []
