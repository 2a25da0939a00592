"""The engine of the explorable essay on attention: pure PyTorch, no user interface.

Pages (``views/``) call into this package and draw what it returns with
``engine.figures``; nothing here imports Streamlit.
"""
