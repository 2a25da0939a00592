"""The app's page registry: one entry per built page, in reading order.

Each page is known by one ``slug`` that names it everywhere: ``views/<slug>.py`` (widgets and
layout), ``engine/sections/<slug>.py`` (what it computes), ``engine/figures/<slug>.py`` (what it
draws), ``content/<lang>/<slug>.md`` (what it says) and the URL path ``/<slug with dashes>``.
``app.py`` builds ``st.navigation`` from :data:`PAGES` and the Home page draws its map of
sections from it, so a page exists in exactly one list. Only pages that are built are listed.

Titles and sections are message ids (marked with :func:`N_` for extraction) translated when
drawn, in the reader's language.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ui.i18n import N_, _, current_language

#: The page shown at ``/``.
DEFAULT_SLUG = "home"


#: The French chapter (file 003): its own title and number; it has no German text.
CHAPTER_NUMBER = "3"
CHAPTER_TITLE = "Mécanismes d'attention"
CHAPTER_GLOSS = N_("attention mechanisms")
#: The lesson on several heads and positions: French (file 000) and German (file 002) titles.
LESSON_TITLES = {"fr": "Attention multi-têtes et encodage de position",
                 "de": "Mehrköpfige Attention und Positionskodierung"}
LESSON_GLOSS = N_("multi-head attention and positional encoding")


@dataclass(frozen=True)
class ChapterSection:
    """A section of the chapters that a page accompanies, by the chapters' own names.

    Attributes:
        source: "chapter" (the French chapter 3) or "lesson" (the lesson in French and German).
        fr: the section's title in the French text (chapter 003 or lesson 000), as the reader finds it there.
        de: the title in the German lesson (002); "" for the chapter, which has no German text.
        number: the chapter's section number ("3.6.1"); "" for the lesson, whose sections have no numbers, and
            for a titled passage inside a numbered section.
        gloss: what the title says, in English (a message id), for readers of a language the text is not in.
        detail: which items of the section the page takes up, e.g. "exercises 2 and 3" (a message id), or "".

    The titles are the chapters' names, kept as the texts write them (with the French narrow no-break space
    before a colon), not translated.
    """

    source: str
    fr: str
    de: str = ""
    number: str = ""
    gloss: str = ""
    detail: str = ""

    def title(self, lang: str) -> str:
        """The title in the reader's language where the text has one, else the French title with a gloss."""
        if self.source == "lesson" and lang == "de" and self.de:
            quoted = _("“{title}”").format(title=self.de)
        elif lang == "fr" or not self.gloss:
            quoted = _("“{title}”").format(title=self.fr)
        else:
            quoted = _("“{title}” ({gloss})").format(title=self.fr, gloss=_(self.gloss))
        if self.number:
            quoted = _("§{number} {title}").format(number=self.number, title=quoted)
        return _("{title}, {detail}").format(title=quoted, detail=_(self.detail)) if self.detail else quoted


def describe_sections(sections: tuple[ChapterSection, ...], lang: str) -> str:
    """What a page accompanies, in the reader's language: each source named once, then its sections."""
    parts = []
    chapter = [s.title(lang) for s in sections if s.source == "chapter"]
    if chapter:
        name = (_("“{title}”").format(title=CHAPTER_TITLE) if lang == "fr"
                else _("“{title}” ({gloss})").format(title=CHAPTER_TITLE, gloss=_(CHAPTER_GLOSS)))
        parts.append(_("chapter {number} {title}: {sections}").format(number=CHAPTER_NUMBER, title=name,
                                                                      sections=_("; ").join(chapter)))
    lesson = [s.title(lang) for s in sections if s.source == "lesson"]
    if lesson:
        if lang in LESSON_TITLES:
            name = _("“{title}”").format(title=LESSON_TITLES[lang])
        else:
            name = _("“{title}” ({gloss})").format(title=LESSON_TITLES["fr"], gloss=_(LESSON_GLOSS))
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


def _chapter(number: str, fr: str, gloss: str, detail: str = "") -> ChapterSection:
    return ChapterSection("chapter", fr, number=number, gloss=gloss, detail=detail)


def _lesson(fr: str, de: str, gloss: str, detail: str = "") -> ChapterSection:
    return ChapterSection("lesson", fr, de=de, gloss=gloss, detail=detail)


LESSON_HEADS = _lesson("Plusieurs têtes\u202f: regarder plusieurs choses à la fois",
                       "Mehrere Köpfe: mehrere Dinge zugleich sehen",
                       N_("several heads: looking at several things at once"), N_("with self-test 1"))
LESSON_EXERCISES = "Exercices", "Übungen", N_("exercises")

PAGES: tuple[PageInfo, ...] = (
    PageInfo("home", "", N_("Why attention"), N_("Attention, step by step"), ":material/home:", "essay", (
        _chapter("3.1", "Le problème de la modélisation des longues séquences",
                 N_("the problem with modelling long sequences")),
        _chapter("3.2", "Capturer les dépendances avec les mécanismes d’attention",
                 N_("capturing dependencies with attention mechanisms")))),
    PageInfo("self_attention", "1", N_("Self-attention"), N_("Self-attention without trainable weights"),
             ":material/hub:", "essay", (
                 _chapter("3.3.1", "Self-attention simplifiée — sans poids apprenables",
                          N_("simplified self-attention, without trainable weights")),
                 _chapter("3.3.2", "Généralisation — poids d’attention pour tous les tokens",
                          N_("generalisation: attention weights for all tokens")))),
    PageInfo("trainable_weights", "2", N_("Trainable weights"), N_("Self-attention with trainable weights"),
             ":material/tune:", "essay", (
                 _chapter("3.4", "Implémentation de la self-attention avec des poids apprenables",
                          N_("implementing self-attention with trainable weights"), N_("with Exercise 3.1")),)),
    PageInfo("causal_mask", "3", N_("Causal mask"), N_("Hiding the future: causal attention"),
             ":material/visibility_off:", "essay", (
                 _chapter("3.5.1", "Application d’un masque d’attention causale",
                          N_("applying a causal attention mask")),
                 _chapter("3.5.3", "Implémentation d’une classe d’attention causale compacte",
                          N_("implementing a compact causal attention class")))),
    PageInfo("dropout", "4", N_("Dropout"), N_("Dropout on the attention weights"), ":material/grain:", "essay", (
        _chapter("3.5.2", "Masquage de poids d’attention supplémentaires avec le dropout",
                 N_("masking additional attention weights with dropout")),)),
    PageInfo("multi_head", "5", N_("Multi-head attention"), N_("Multi-head attention"), ":material/view_week:",
             "essay", (
                 _chapter("3.6.1", "Empilement de plusieurs couches d’attention mono-tête",
                          N_("stacking several single-head attention layers"), N_("with Exercise 3.2")),
                 _chapter("3.6.2", "Implémentation de l’attention multi-têtes avec fractionnement des poids",
                          N_("implementing multi-head attention with weight splits")),
                 LESSON_HEADS)),
    PageInfo("memory_layout", "6", N_("Memory layout"), N_("Memory layout"), ":material/memory:", "essay", (
        _chapter("3.6.2", "Implémentation de l’attention multi-têtes avec fractionnement des poids",
                 N_("implementing multi-head attention with weight splits"),
                 N_("its passages on .view(), .transpose() and .contiguous()")),)),
    PageInfo("positional_encodings", "7", N_("Positional encodings"), N_("Positional encodings"),
             ":material/pin_drop:", "essay", (
                 _lesson("L'attention ne distingue pas l'ordre", "Attention kennt keine Reihenfolge",
                         N_("attention does not tell order")),
                 _lesson("La deuxième ligne, inattendue", "Die unerwartete zweite Zeile",
                         N_("the unexpected second line")),
                 _lesson("L'embedding de position", "Positions-Embedding", N_("position embedding")),
                 _lesson("L'encodage de position rotatif", "Rotary Position Embedding", N_("rotary position encoding")),
                 _lesson(*LESSON_EXERCISES, N_("exercises 1 and 3")),
                 _lesson("Auto-test", "Selbsttest", N_("self-test"), N_("questions 2 and 3")))),
    PageInfo("lab", "8", N_("GPT lab"), N_("GPT lab"), ":material/science:", "lab", (
        _lesson(*LESSON_EXERCISES, N_("exercises 2 and 3")),)),
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
