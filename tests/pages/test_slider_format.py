"""Float sliders write their value in the reader's format: Streamlit's "localized" format, never a printf one."""

from __future__ import annotations

import ast
import json

from tests.plotly_json import ROOT, open_page
from ui.numbers import GRID_FORMAT, SLIDER_FORMAT


def float_sliders() -> list[tuple[str, ast.Call]]:
    """Every ``st.slider`` call of the views and ui/ whose step is a float (a float slider), with its file."""
    found = []
    for path in sorted([*ROOT.glob("views/*.py"), *ROOT.glob("ui/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "slider":
                step = next((k.value for k in node.keywords if k.arg == "step"), None)
                if isinstance(step, ast.Constant) and isinstance(step.value, float):
                    found.append((str(path.relative_to(ROOT)), node))
    return found


def test_every_float_slider_uses_the_localized_format():
    sliders = float_sliders()
    files = {path for path, _ in sliders}
    assert {"views/self_attention.py", "views/causal_mask.py", "ui/lab/controls.py", "ui/lab/generate.py"} <= files
    for path, call in sliders:
        fmt = next((k.value for k in call.keywords if k.arg == "format"), None)
        assert isinstance(fmt, ast.Name) and fmt.id == "SLIDER_FORMAT", f"{path}:{call.lineno}"


def test_streamlit_receives_the_localized_format():
    at = open_page("views/causal_mask.py", lang="de")
    slider = next(s for s in at.slider if s.key == "cm_leak_delta")
    assert slider.proto.format == SLIDER_FORMAT == "localized"
    assert slider.value == 1.0


def test_no_printf_number_format_in_a_column():
    """A printf format ("%.2f") writes English decimals in every language; number columns use GRID_FORMAT."""
    printf = []
    for path in sorted([*ROOT.glob("views/*.py"), *ROOT.glob("ui/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "NumberColumn":
                fmt = next((k.value for k in node.keywords if k.arg == "format"), None)
                if isinstance(fmt, ast.Constant) and "%" in str(fmt.value):
                    printf.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not printf


def test_the_embedding_editor_uses_the_localized_format():
    at = open_page("views/self_attention.py", lang="fr")
    columns = json.loads(at.dataframe[0].proto.columns)
    numbers = [c["type_config"] for c in columns.values() if c.get("type_config", {}).get("type") == "number"]
    assert len(numbers) == 3 and {c["format"] for c in numbers} == {GRID_FORMAT}
