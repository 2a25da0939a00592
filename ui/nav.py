"""The app's page registry: one entry per built page, in reading order.

``app.py`` builds ``st.navigation`` from it and the Home page draws its map of
sections from it, so a page exists in exactly one list. Only pages that are
built are listed.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True)
class PageInfo:
    """One page: its script, title, URL path, icon, navigation group and the chapter section it accompanies."""

    script: str
    title: str
    url_path: str
    icon: str
    group: str
    section: str


ESSAY = "Attention, step by step"
LAB = "Lab"

PAGES: tuple[PageInfo, ...] = (
    PageInfo("views/home.py", "Why attention", "home", ":material/home:", ESSAY,
             "Chapter 003: the long-sequence problem, Bahdanau (2014), the Transformer (2017)"),
    PageInfo("views/self_attention.py", "1 · Self-attention", "self-attention", ":material/hub:", ESSAY,
             "Chapter 003: simplified self-attention without trainable weights"),
    PageInfo("views/trainable_weights.py", "2 · Trainable weights", "trainable-weights", ":material/tune:", ESSAY,
             "Chapter 003: self-attention with trainable weights, the 1/√d_k scale, SelfAttention_v1/v2"),
    PageInfo("views/causal_mask.py", "3 · Causal mask", "causal-mask", ":material/visibility_off:", ESSAY,
             "Chapter 003: causal attention (masking the future), CausalAttention and register_buffer"),
    PageInfo("views/dropout.py", "4 · Dropout", "dropout", ":material/grain:", ESSAY,
             "Chapter 003: masking additional attention weights with dropout"),
    PageInfo("views/multi_head.py", "5 · Multi-head attention", "multi-head", ":material/view_week:", ESSAY,
             "Chapter 003: multi-head attention (stacked heads, weight splits); lesson 000 part 1 (several heads)"),
    PageInfo("views/memory_layout.py", "6 · Memory layout", "memory-layout", ":material/memory:", ESSAY,
             "Chapter 003: what view(), transpose() and contiguous() do to a tensor's memory"),
    PageInfo("views/positional_encodings.py", "7 · Positional encodings", "positional-encodings", ":material/pin_drop:", ESSAY,
             "Lesson 000 parts 2–3: attention ignores order, the causal mask, learned, sinusoidal and rotary positions"),
    PageInfo("views/lab.py", "8 · GPT lab", "lab", ":material/science:", LAB,
             "Lesson 000 exercises 2–3: train the course's GPT on Tang poems, generate, look inside"),
)


def build_navigation():
    """``st.navigation`` over :data:`PAGES`, grouped; Home is the default page."""
    groups: dict[str, list] = {}
    for i, info in enumerate(PAGES):
        page = st.Page(info.script, title=info.title, url_path=info.url_path, icon=info.icon, default=i == 0)
        groups.setdefault(info.group, []).append(page)
    return st.navigation(groups)
