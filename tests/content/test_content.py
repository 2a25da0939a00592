"""The prose files under content/: the same parts and quizzes in every language, and well-formed math.

Each page's prose is ``content/<lang>/<page>.md``, cut into parts by ``<!-- part: name -->`` lines; the part
``quiz`` holds ``### question`` headings, each followed by its answer. English is the reference: every
page it has must exist in French and German with the same part names in the same order and the same
number of quiz questions.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from ui.i18n import LANGUAGES

CONTENT = Path(__file__).resolve().parents[2] / "content"
LANGS = tuple(LANGUAGES)
PAGES = sorted(p.stem for p in (CONTENT / "en").glob("*.md"))
PART = re.compile(r"^<!--\s*part:\s*([\w-]+)\s*-->\s*$", re.MULTILINE)
QUESTION = re.compile(r"^###\s+\S", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def parts(lang: str, page: str) -> list[tuple[str, str]]:
    """``[(part name, body)]`` of ``content/<lang>/<page>.md`` in file order."""
    text = (CONTENT / lang / f"{page}.md").read_text(encoding="utf-8")
    pieces = PART.split(text)
    assert not pieces[0].strip(), f"{lang}/{page}.md: text before the first part marker"
    return [(name, body.strip()) for name, body in zip(pieces[1::2], pieces[2::2], strict=False)]


def without_code(text: str) -> str:
    """The text with fenced blocks and inline code spans removed (a `$` there is not math)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def test_english_pages_found():
    assert "self_attention" in PAGES and "glossary" in PAGES


@pytest.mark.parametrize("lang", LANGS)
def test_no_extra_pages(lang):
    assert sorted(p.stem for p in (CONTENT / lang).glob("*.md")) == PAGES


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", LANGS)
def test_same_parts_in_same_order(lang, page):
    names = [name for name, _ in parts(lang, page)]
    assert len(names) == len(set(names)), f"{lang}/{page}.md repeats a part name"
    assert names == [name for name, _ in parts("en", page)]


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", LANGS)
def test_no_empty_part(lang, page):
    empty = [name for name, body in parts(lang, page) if not body]
    assert not empty, f"{lang}/{page}.md: empty parts {empty}"


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", LANGS)
def test_same_number_of_quiz_questions(lang, page):
    def count(lang: str) -> int:
        quiz = dict(parts(lang, page)).get("quiz", "")
        return len(QUESTION.findall(quiz))

    assert count(lang) == count("en")
    if "quiz" in dict(parts("en", page)):
        assert count("en") > 0


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("lang", LANGS)
def test_math_delimiters_balanced(lang, page):
    for name, body in parts(lang, page):
        text = without_code(body).replace(r"\$", "")
        assert text.count("$$") % 2 == 0, f"{lang}/{page}.md part {name}: unbalanced $$"
        assert text.replace("$$", "").count("$") % 2 == 0, f"{lang}/{page}.md part {name}: unbalanced $"


@pytest.mark.parametrize("lang", LANGS)
def test_glossary_names_the_chapters_by_their_titles_not_their_file_numbers(lang):
    """The glossary's introduction names chapter 3 and the lesson as their texts title them
    (``content/chapter_titles.toml``), never by the files' numbers 003, 000, 002."""
    titles = tomllib.loads((CONTENT / "chapter_titles.toml").read_text(encoding="utf-8"))
    intro = " ".join(dict(parts(lang, "glossary"))["intro"].split()).replace("’", "'")
    assert not re.search(r"\b00[023]\b", intro)
    chapter = titles["chapter"]
    assert chapter["title"] in intro and re.search(rf"\b{chapter['number']}\b", intro)
    assert titles["lesson"]["fr"] in intro and titles["lesson"]["de"] in intro


def test_helpers_catch_mistakes(tmp_path):
    assert without_code("`$x` and $y$").count("$") == 2
    assert PART.split("<!-- part: a -->\nx\n<!-- part: b -->\n")[1::2] == ["a", "b"]
    assert len(QUESTION.findall("### one?\nyes\n### two?\nno\n#### not a question\n")) == 2
