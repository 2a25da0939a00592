"""Glossary: the chapters' terms in French, German and English with their names in the code, and the jargon."""

import streamlit as st

from ui import page

# The glossary's wide tables scroll inside themselves on a phone instead of making the whole page scroll sideways.
st.html("<style>[data-testid='stMain'] [data-testid='stMarkdownContainer'] table "
        "{display: block; overflow-x: auto; max-width: 100%;}</style>")
page.header()
page.prose("terms")
page.prose("jargon")
