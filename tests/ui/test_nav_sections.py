"""The registry names the chapters' sections by their own titles and numbers, in every reader's language."""

import re

import pytest

from ui import nav
from ui.i18n import LANGUAGES, translations

CHAPTER_PAGES = [p for p in nav.PAGES if p.sections]


def described(monkeypatch, info: nav.PageInfo, lang: str) -> str:
    """What ``info`` accompanies, as a reader of ``lang`` reads it in the page header."""
    monkeypatch.setattr(nav, "_", translations(lang).gettext)
    return nav.describe_sections(info.sections, lang)


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("info", CHAPTER_PAGES, ids=[p.slug for p in CHAPTER_PAGES])
def test_sections_by_their_own_titles_never_by_file_numbers(monkeypatch, info, lang):
    text = described(monkeypatch, info, lang)
    gettext = translations(lang).gettext
    assert not re.search(r"\b00[023]\b", text)  # the chapters' file numbers are not their names
    for section in info.sections:
        if section.source == "chapter":
            assert f"§{section.key} " in text and nav.TITLES["chapter"]["sections"][section.key] in text
        else:
            titles = nav.TITLES["lesson"]["sections"][section.key]
            assert titles["de" if lang == "de" else "fr"] in text
        # a gloss where the reader's language is not the text's: German and English readers of the French chapter,
        # English readers of the lesson
        glossed = lang == "en" or (lang == "de" and section.source == "chapter")
        assert (f"({gettext(section.gloss)})" in text) == glossed
        if section.detail:
            assert gettext(section.detail) in text


def test_exercises_and_self_test_on_the_page_each_belongs_to():
    """The chapter's Exercise 3.1 / 3.2, the lesson's exercises 1-3 and self-test 1-3, each where it is worked."""
    details = {p.slug: {s.detail for s in p.sections} for p in CHAPTER_PAGES}
    assert "with Exercise 3.1" in details["trainable_weights"] and "with Exercise 3.2" in details["multi_head"]
    assert "with self-test 1" in details["multi_head"]  # self-test 1 is about heads
    assert {"exercises 1 and 3", "questions 2 and 3"} <= details["positional_encodings"]
    assert "exercises 2 and 3" in details["lab"]


def test_every_title_key_is_in_the_titles_file():
    for info in CHAPTER_PAGES:
        for section in info.sections:
            source = nav.TITLES[section.source]["sections"]
            assert section.key in source
