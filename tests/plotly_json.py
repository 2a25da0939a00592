"""AppTest helpers: open a page by its repository path, read Plotly figures back (Plotly >= 6 base64 arrays)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from streamlit.testing.v1 import AppTest

if TYPE_CHECKING:
    import pandas as pd

#: The repository root; AppTest resolves relative paths against the calling file, so pass absolute ones.
ROOT = Path(__file__).resolve().parent.parent


def open_page(script: str, timeout: float = 60, lang: str | None = None, state: dict | None = None,
              params: dict | None = None) -> AppTest:
    """Run ``script`` (a path relative to the repository root, e.g. "views/home.py") and return the AppTest.

    ``lang`` ("fr", "de", "en") opens it in that language, as the sidebar's selector would; ``state`` goes into
    the session and ``params`` into the link before the first run.
    """
    at = AppTest.from_file(str(ROOT / script), default_timeout=timeout)
    if lang is not None:
        at.session_state["lang"] = lang
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.query_params.update(params or {})
    return at.run()

_DTYPES = {"f8": np.float64, "f4": np.float32, "i1": np.int8, "u1": np.uint8, "i2": np.int16, "u2": np.uint16,
           "i4": np.int32, "u4": np.uint32, "i8": np.int64, "u8": np.uint64}


def texts(at) -> list[str]:
    """Every markdown text on the page (badges appear as ``:green-badge[...]`` markdown)."""
    return [m.value for m in at.markdown]


def badges(at, colour: str) -> list[str]:
    """The chapter-check badges of one colour ("green", "red", "gray")."""
    return [t for t in texts(at) if t.startswith(f":{colour}-badge[")]


def captions(at) -> list[str]:
    """Every caption on the page."""
    return [c.value for c in at.caption]


def cells(dataframe) -> pd.DataFrame:
    """An ``st.dataframe``'s cells as the reader reads them: the display values of the Styler it was given.

    ``AppTest``'s ``.value`` holds the numbers behind the table; a Styler's formatting travels beside them.
    """
    from streamlit import dataframe_util

    return dataframe_util.convert_arrow_bytes_to_pandas_df(dataframe.proto.arrow_data.styler.display_values)


def decode(value):
    """Turn ``{"dtype", "bdata", "shape"}`` blobs (recursively) into numpy arrays; leave the rest."""
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=_DTYPES[value["dtype"]])
            shape = value.get("shape")
            if shape:
                arr = arr.reshape([int(s) for s in str(shape).split(",")] if isinstance(shape, str) else shape)
            return arr
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def figures(at) -> list[dict]:
    """Every Plotly chart on an AppTest page as a decoded figure dict (``data``, ``layout``)."""
    return [decode(json.loads(el.proto.spec)) for el in at.get("plotly_chart")]


def figure_json_bytes(at) -> int:
    """Total size of the Plotly JSON the page sends."""
    return sum(len(el.proto.spec) for el in at.get("plotly_chart"))


def numeric_values(fig: dict):
    """Every numeric array in the figure's traces (z, x, y, text excluded), flattened to float64."""
    out = []
    for trace in fig.get("data", []):
        for key in ("z", "x", "y"):
            v = trace.get(key)
            if v is None:
                continue
            arr = np.asarray(v, dtype=object).ravel()
            nums = [float(a) for a in arr if isinstance(a, (int, float, np.number)) and not isinstance(a, bool)]
            out.extend(nums)
    return np.asarray(out, dtype=np.float64)
