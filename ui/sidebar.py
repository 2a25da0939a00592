"""The sidebar every page shares: where the code runs and what versions it uses."""

from __future__ import annotations

import platform

import streamlit as st
import torch

from engine.device import describe_device, pick_device


def render_sidebar() -> None:
    """Show the compute device (CUDA, Apple MPS or CPU) and the library versions."""
    with st.sidebar:
        device = pick_device()
        st.caption(f"Device: **{describe_device(device)}**")
        st.caption(f"PyTorch {torch.__version__} · Streamlit {st.__version__} · Python {platform.python_version()}")
