"""Streamlit-only helpers shared by the pages: header, prose, chapter checks, code, quizzes."""
