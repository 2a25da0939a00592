"""The app's page registry: one entry per built page, in reading order.

Each page is known by one ``slug`` that names it everywhere: ``views/<slug>.py`` (widgets and
layout), ``engine/sections/<slug>.py`` (what it computes), ``engine/figures/<slug>.py`` (what it
draws), ``engine/notebooks/<slug>.py`` (its notebook's cells), ``content/<lang>/<slug>.md`` (what
it says) and the URL path ``/<slug with dashes>``.
``app.py`` builds ``st.navigation`` from :data:`PAGES` and the Home page draws its map of
sections from it, so a page exists in exactly one list. Only pages that are built are listed.

Titles and sections are message ids (marked with :func:`N_` for extraction) translated when
drawn, in the reader's language.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from ui.i18n import N_, _, current_language

#: The page shown at ``/``.
DEFAULT_SLUG = "home"


#: The chapters' own titles (``content/chapter_titles.toml``): names the pages cite, kept as the texts write them.
TITLES = tomllib.loads((Path(__file__).resolve().parent.parent / "content" / "chapter_titles.toml").read_text("utf-8"))
CHAPTER_GLOSS = N_("attention mechanisms")
LESSON_GLOSS = N_("multi-head attention and positional encoding")


@dataclass(frozen=True)
class ChapterSection:
    """A section of the chapters that a page accompanies, by the chapters' own names.

    Attributes:
        source: "chapter" (the French chapter 3) or "lesson" (the lesson in French and German).
        key: the chapter's section number ("3.6.1") or the lesson section's key ("heads") in
            ``content/chapter_titles.toml``, which holds the titles as the texts write them.
        gloss: what the title says, in English (a message id), for readers of a language the text is not in.
        detail: which items of the section the page takes up, e.g. "exercises 2 and 3" (a message id), or "".
    """

    source: str
    key: str
    gloss: str
    detail: str = ""

    def title(self, lang: str) -> str:
        """The title in the reader's language where the text has one, else the French title with a gloss.

        Raises:
            KeyError: for a key the titles file does not hold.
        """
        if self.source == "chapter":
            french, german = TITLES["chapter"]["sections"][self.key], None
        else:
            french, german = TITLES["lesson"]["sections"][self.key]["fr"], TITLES["lesson"]["sections"][self.key]["de"]
        if lang == "de" and german:
            quoted = _("“{title}”").format(title=german)
        elif lang == "fr":
            quoted = _("“{title}”").format(title=french)
        else:
            quoted = _("“{title}” ({gloss})").format(title=french, gloss=_(self.gloss))
        if self.source == "chapter":
            quoted = _("§{number} {title}").format(number=self.key, title=quoted)
        return _("{title}, {detail}").format(title=quoted, detail=_(self.detail)) if self.detail else quoted


def describe_sections(sections: tuple[ChapterSection, ...], lang: str) -> str:
    """What a page accompanies, in the reader's language: each source named once, then its sections."""
    parts = []
    chapter = [s.title(lang) for s in sections if s.source == "chapter"]
    if chapter:
        title = TITLES["chapter"]["title"]
        name = (_("“{title}”").format(title=title) if lang == "fr"
                else _("“{title}” ({gloss})").format(title=title, gloss=_(CHAPTER_GLOSS)))
        parts.append(_("chapter {number} {title}: {sections}").format(number=TITLES["chapter"]["number"], title=name,
                                                                      sections=_("; ").join(chapter)))
    lesson = [s.title(lang) for s in sections if s.source == "lesson"]
    if lesson:
        if lang in ("fr", "de"):
            name = _("“{title}”").format(title=TITLES["lesson"][lang])
        else:
            name = _("“{title}” ({gloss})").format(title=TITLES["lesson"]["fr"], gloss=_(LESSON_GLOSS))
        parts.append(_("the lesson {title}: {sections}").format(title=name, sections=_("; ").join(lesson)))
    return _(" · ").join(parts)


@dataclass(frozen=True)
class PageInfo:
    """One page of the essay.

    Attributes:
        slug: the page's one name (``self_attention``); paths and the URL derive from it.
        number: its section number in reading order ("" for Home).
        title: short title in the navigation (a message id).
        heading: the page's own title (a message id).
        icon: a Material icon name.
        group: "essay" or "lab" (navigation groups; the glossary sits with the Lab).
        sections: the chapters' sections it accompanies, by their own titles and numbers.
        note: what it accompanies when that is no one section (the glossary), a message id; else "".
    """

    slug: str
    number: str
    title: str
    heading: str
    icon: str
    group: str
    sections: tuple[ChapterSection, ...] = ()
    note: str = ""

    @property
    def script(self) -> str:
        """The page script, relative to the repository root."""
        return f"views/{self.slug}.py"

    @property
    def notebook(self) -> str:
        """The module of the page's notebook recipes, ``engine.notebooks.<slug>`` (:mod:`engine.notebooks`), which
        its "Download as notebook" button builds from."""
        return f"engine.notebooks.{self.slug}"

    @property
    def url_path(self) -> str:
        """The page's URL path: dashes instead of underscores; "" for Home, which Streamlit serves at ``/``.

        (Streamlit answers the default page's own name, ``/home``, with a "Page not found" dialog.)
        """
        return "" if self.slug == DEFAULT_SLUG else self.slug.replace("_", "-")

    @property
    def section(self) -> str:
        """What the page accompanies, in the reader's language (:func:`describe_sections`, or the note)."""
        return describe_sections(self.sections, current_language()) if self.sections else _(self.note)

    def nav_title(self) -> str:
        """The translated navigation title, with its number ("1 · Self-attention")."""
        return f"{self.number} · {_(self.title)}" if self.number else _(self.title)

    def page_heading(self) -> str:
        """The translated page title, with its number."""
        return f"{self.number} · {_(self.heading)}" if self.number else _(self.heading)


def _chapter(number: str, gloss: str, detail: str = "") -> ChapterSection:
    return ChapterSection("chapter", number, gloss, detail)


def _lesson(key: str, gloss: str, detail: str = "") -> ChapterSection:
    return ChapterSection("lesson", key, gloss, detail)


PAGES: tuple[PageInfo, ...] = (
    PageInfo("home", "", N_("Why attention"), N_("Attention, step by step"), ":material/home:", "essay", (
        _chapter("3.1", N_("the problem with modelling long sequences")),
        _chapter("3.2", N_("capturing dependencies with attention mechanisms")))),
    PageInfo("self_attention", "1", N_("Self-attention"), N_("Self-attention without trainable weights"),
             ":material/hub:", "essay", (
                 _chapter("3.3.1", N_("simplified self-attention, without trainable weights")),
                 _chapter("3.3.2", N_("generalisation: attention weights for all tokens")))),
    PageInfo("trainable_weights", "2", N_("Trainable weights"), N_("Self-attention with trainable weights"),
             ":material/tune:", "essay", (
                 _chapter("3.4", N_("implementing self-attention with trainable weights"), N_("with Exercise 3.1")),)),
    PageInfo("causal_mask", "3", N_("Causal mask"), N_("Hiding the future: causal attention"),
             ":material/visibility_off:", "essay", (
                 _chapter("3.5.1", N_("applying a causal attention mask")),
                 _chapter("3.5.3", N_("implementing a compact causal attention class")))),
    PageInfo("dropout", "4", N_("Dropout"), N_("Dropout on the attention weights"), ":material/grain:", "essay", (
        _chapter("3.5.2", N_("masking additional attention weights with dropout")),)),
    PageInfo("multi_head", "5", N_("Multi-head attention"), N_("Multi-head attention"), ":material/view_week:",
             "essay", (
                 _chapter("3.6.1", N_("stacking several single-head attention layers"), N_("with Exercise 3.2")),
                 _chapter("3.6.2", N_("implementing multi-head attention with weight splits")),
                 _lesson("heads", N_("several heads: looking at several things at once"), N_("with self-test 1")))),
    PageInfo("memory_layout", "6", N_("Memory layout"), N_("Memory layout"), ":material/memory:", "essay", (
        _chapter("3.6.2", N_("implementing multi-head attention with weight splits"),
                 N_("its passages on .view(), .transpose() and .contiguous()")),)),
    PageInfo("positional_encodings", "7", N_("Positional encodings"), N_("Positional encodings"),
             ":material/pin_drop:", "essay", (
                 _lesson("order", N_("attention cannot tell the order")),
                 _lesson("second_line", N_("the unexpected second line")),
                 _lesson("position_embedding", N_("position embedding")),
                 _lesson("rope", N_("rotary position embedding")),
                 _lesson("exercises", N_("exercises"), N_("exercises 1 and 3")),
                 _lesson("self_test", N_("self-test"), N_("questions 2 and 3")))),
    PageInfo("lab", "8", N_("GPT lab"), N_("GPT lab"), ":material/science:", "lab", (
        _lesson("exercises", N_("exercises"), N_("exercises 2 and 3")),)),
    PageInfo("glossary", "", N_("Glossary"), N_("Glossary"), ":material/translate:", "lab",
             note=N_("Every term of the chapters in French, German and English, with its name in the code")),
)

#: Pages by slug.
BY_SLUG: dict[str, PageInfo] = {p.slug: p for p in PAGES}
#: Navigation group titles (message ids).
GROUPS = {"essay": N_("Attention, step by step"), "lab": N_("Lab and reference")}


def page_info(slug: str) -> PageInfo:
    """The registry entry of ``slug``; raises ``KeyError`` for a page that is not built."""
    return BY_SLUG[slug]


def build_navigation():
    """``st.navigation`` over :data:`PAGES`, grouped, titles in the reader's language; Home is the default."""
    groups: dict[str, list] = {}
    for info in PAGES:
        page = st.Page(info.script, title=info.nav_title(), url_path=info.url_path or None, icon=info.icon,
                       default=info.slug == DEFAULT_SLUG)
        groups.setdefault(_(GROUPS[info.group]), []).append(page)
    return st.navigation(groups)
