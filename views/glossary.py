"""Glossary: the chapters' terms in French, German and English with their names in the code, and the jargon."""

from ui import page

page.header()
page.prose("terms")
page.prose("jargon")
