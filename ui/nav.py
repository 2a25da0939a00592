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

from ui.i18n import N_, _

#: The page shown at ``/``.
DEFAULT_SLUG = "home"


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
        section: the chapter section it accompanies (a message id).
    """

    slug: str
    number: str
    title: str
    heading: str
    icon: str
    group: str
    section: str

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

    def nav_title(self) -> str:
        """The translated navigation title, with its number ("1 · Self-attention")."""
        return f"{self.number} · {_(self.title)}" if self.number else _(self.title)

    def page_heading(self) -> str:
        """The translated page title, with its number."""
        return f"{self.number} · {_(self.heading)}" if self.number else _(self.heading)


PAGES: tuple[PageInfo, ...] = (
    PageInfo("home", "", N_("Why attention"), N_("Attention, step by step"), ":material/home:", "essay",
             N_("Chapter 003: the long-sequence problem, Bahdanau (2014), the Transformer (2017)")),
    PageInfo("self_attention", "1", N_("Self-attention"), N_("Self-attention without trainable weights"),
             ":material/hub:", "essay",
             N_("Chapter 003: simplified self-attention without trainable weights")),
    PageInfo("trainable_weights", "2", N_("Trainable weights"), N_("Self-attention with trainable weights"),
             ":material/tune:", "essay",
             N_("Chapter 003: self-attention with trainable weights, the 1/√d_k scale, SelfAttention_v1/v2")),
    PageInfo("causal_mask", "3", N_("Causal mask"), N_("Hiding the future: causal attention"),
             ":material/visibility_off:", "essay",
             N_("Chapter 003: causal attention (masking the future), CausalAttention and register_buffer")),
    PageInfo("dropout", "4", N_("Dropout"), N_("Dropout on the attention weights"), ":material/grain:", "essay",
             N_("Chapter 003: masking additional attention weights with dropout")),
    PageInfo("multi_head", "5", N_("Multi-head attention"), N_("Multi-head attention"), ":material/view_week:",
             "essay",
             N_("Chapter 003: multi-head attention (stacked heads, weight splits); lesson 000 part 1 (several heads)")),
    PageInfo("memory_layout", "6", N_("Memory layout"), N_("Memory layout"), ":material/memory:", "essay",
             N_("Chapter 003: what view(), transpose() and contiguous() do to a tensor's memory")),
    PageInfo("positional_encodings", "7", N_("Positional encodings"), N_("Positional encodings"),
             ":material/pin_drop:", "essay",
             N_("Lesson 000 parts 2–3: attention ignores order, the causal mask, learned, sinusoidal and rotary "
                "positions")),
    PageInfo("lab", "8", N_("GPT lab"), N_("GPT lab"), ":material/science:", "lab",
             N_("Lesson 000 exercises 2–3: train the course's GPT on Tang poems, generate, look inside")),
    PageInfo("glossary", "", N_("Glossary"), N_("Glossary"), ":material/translate:", "lab",
             N_("Every term of the chapters in French, German and English, with its name in the code")),
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
