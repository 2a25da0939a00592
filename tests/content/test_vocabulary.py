"""One vocabulary per language: the pages' prose and the catalog use the glossary's term for each concept.

The glossary (``content/<lang>/glossary.md``) is the source of each term, in the chapters' own words where
they name it (the chapter's « fractionnement des poids », « approche naïve / efficace »; the German lesson's
Positions-Embedding). For each concept below the test checks that the glossary lists the term, that the pages
which teach the concept use it, and that no page and no translated message uses a variant that drifted from it.
Code spans, math and the glossary's own table (which names the variants on purpose) are not prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parents[2]
CONTENT = ROOT / "content"


@dataclass(frozen=True)
class Term:
    """A concept's term in one language.

    Attributes:
        term: the glossary's term.
        pages: the pages (slugs) whose prose must use it: they teach the concept.
        avoid: regular expressions of the variants that must not appear in prose or translated messages.
    """

    term: str
    pages: tuple[str, ...] = ()
    avoid: tuple[str, ...] = ()


VOCABULARY: dict[str, tuple[Term, ...]] = {
    "fr": (
        Term("fractionnement des poids", pages=("multi_head",)),
        Term("approche naïve", pages=("causal_mask",)),
        Term("approche efficace", pages=("causal_mask",)),
        Term("requête / clé / valeur (*query* / *key* / *value*", pages=()),
        Term("passe avant (*forward pass*", pages=()),
        Term("device", avoid=(r"\b[Aa]ppareils?\b",)),
        Term("labo", avoid=(r"\bLab\b",)),
        Term("prompt", avoid=(r"\b[Aa]morces?\b",)),
        # the lesson calls a poem's line « vers »: page 5's line of verse and the Lab's heatmap input
        Term("vers", pages=("multi_head",),
             avoid=(r"\b[Ll]igne à lire\b", r"\b[Ll]igne \(jusqu'à", r"pour une ligne de")),
        # the templated verdicts quote the run names instead of eliding into them (« que apprise », « de aucune »)
        Term("perte de validation", pages=("lab",),
             avoid=(r"\bque (?:apprise|aucune)\b", r"\bde (?:apprise|aucune)\b")),
    ),
    "de": (
        Term("Positions-Embedding", pages=("positional_encodings",), avoid=(r"\bgelernte[nr]? Tabelle\b",)),
        Term("Labor", avoid=(r"\bLab\b",)),
        # the lesson's word for the validation loss; one name for the fixed sinusoidal table; declined run names
        Term("Validierungsverlust", pages=("lab",), avoid=(r"\bVal-Verlust\b", r"(?<!„)\bval loss\b")),
        Term("Sinus-Tabelle", pages=("lab", "positional_encodings"), avoid=(r"\bsinusförmig",)),
        Term("Köpfe", avoid=(r"\bzu \d+ Köpfe\b", r"\bSein Validierungsverlust\b")),
        Term("Punktwerte", pages=("self_attention", "trainable_weights", "causal_mask")),
        Term("Vorwärtsdurchlauf", pages=("trainable_weights",)),
    ),
}
CASES = [(lang, term) for lang, terms in VOCABULARY.items() for term in terms]


def prose(text: str) -> str:
    """``text`` without code spans, fenced code, math and HTML comments."""
    text = re.sub(r"```.*?```", " ", text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$|<!--.*?-->", " ", text, flags=re.DOTALL)
    return text


def page_prose(lang: str, slug: str) -> str:
    return prose((CONTENT / lang / f"{slug}.md").read_text(encoding="utf-8"))


def glossary_terms(lang: str) -> str:
    """The glossary's two tables (terms and jargon) in ``lang``."""
    text = (CONTENT / lang / "glossary.md").read_text(encoding="utf-8")
    return text.split("<!-- part: terms -->", 1)[1]


def translated_messages(lang: str) -> list[str]:
    """Every msgstr of the catalog, without its placeholders and code spans."""
    with open(ROOT / "locales" / lang / "LC_MESSAGES" / "messages.po", "rb") as f:
        catalog = read_po(f, locale=lang)
    strings = []
    for message in catalog:
        if not message.id:
            continue
        for s in (message.string if isinstance(message.string, tuple) else (message.string,)):
            strings.append(prose(re.sub(r"\{[^{}]*\}|%\{[^{}]*\}", " ", s or "")))
    return strings


@pytest.mark.parametrize(("lang", "term"), CASES, ids=[f"{lang}-{t.term}" for lang, t in CASES])
def test_the_glossary_lists_the_term_and_the_pages_use_it(lang, term):
    assert term.term in glossary_terms(lang)
    for slug in term.pages:
        assert term.term in page_prose(lang, slug), f"content/{lang}/{slug}.md does not use « {term.term} »"


@pytest.mark.parametrize(("lang", "term"), [c for c in CASES if c[1].avoid],
                         ids=[f"{lang}-{t.term}" for lang, t in CASES if t.avoid])
def test_no_page_and_no_message_uses_a_drifted_variant(lang, term):
    found = []
    for path in sorted((CONTENT / lang).glob("*.md")):
        text = page_prose(lang, path.stem)
        if path.stem == "glossary":
            text = text.split("<!-- part: terms -->", 1)[0]  # the tables name the variants on purpose
        found += [f"{path.name}: {m.group()!r}" for pattern in term.avoid for m in re.finditer(pattern, text)]
    found += [f"catalog: {m.group()!r} in {s[:60]!r}" for s in translated_messages(lang) for pattern in term.avoid
              for m in re.finditer(pattern, s)]
    assert not found, f"« {term.term} » is the glossary's term; found:\n" + "\n".join(found)


#: The chapters' English words beside the French ones, given once on the page that introduces them (issue 36).
ALONGSIDE = {"trainable_weights": ("la **requête** (*query*", "la\n**clé** (*key*)", "la **valeur** (*value*)",
                                   "passe avant (*forward pass*"), }


def test_french_pages_give_the_chapters_english_words_once_beside_the_french_ones():
    for slug, marks in ALONGSIDE.items():
        text = (CONTENT / "fr" / f"{slug}.md").read_text(encoding="utf-8").replace("La **requête**", "la **requête**")
        for mark in marks:
            assert text.count(mark) == 1, (slug, mark)


#: Calques and templated phrasing the reviews found on pages Home-4 (issue 36), which must not come back.
CALQUES = {
    "fr": (r"\bnoter\b", r"\bnote tous\b", r"\bamincis\b", r"\benveloppe chaque\b", r"\bse passe par\b",
           r"\bVoulu ici\b", r"\bdétenu comme\b", r"\bun import volumineux\b", r"Télécharger en notebook"),
    "de": (r"\bEinheit Gewicht\b", r"\bMittle viele\b", r"\bvon w\(1−w\) davon\b", r"\bdavon$",
           r"übersetzt sind", r"\bfast one-hot-Vektor\b"),
}
OWN_PAGES = ("home", "self_attention", "trainable_weights", "causal_mask", "dropout", "glossary")


@pytest.mark.parametrize("lang", sorted(CALQUES))
def test_pages_home_to_4_and_their_messages_keep_the_reviewed_wording(lang):
    found = [f"{slug}: {m.group()!r}" for slug in OWN_PAGES for pattern in CALQUES[lang]
             for m in re.finditer(pattern, page_prose(lang, slug), flags=re.MULTILINE)]
    found += [f"catalog: {m.group()!r}" for s in translated_messages(lang) for pattern in CALQUES[lang]
              for m in re.finditer(pattern, s, flags=re.MULTILINE)]
    assert not found, found
