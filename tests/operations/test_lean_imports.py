"""The server never loads PyTorch's compiler stack: every page, in a fresh process, leaves torch._dynamo and SymPy out.

PyTorch imports ``torch._dynamo`` (and with it SymPy, ``torch.distributed`` and ``torch.onnx``: about 800 modules)
the first time an op runs on the ``meta`` device or a ``torch.optim.Optimizer`` is made. In a server that is a
large share of a small host's memory for nothing the pages use, so the engine reads sizes from configs
(``engine.gpt.param_shapes``), page 3 reads its meta-device table from a recording, and the Lab's training uses
``engine.optim``. This test opens every page of the app in one fresh interpreter, as a reader would, and fails
when any of them brings those modules back.
"""

import json
import subprocess
import sys

from tests.plotly_json import ROOT

#: Modules whose presence means the compiler stack was imported.
HEAVY = ("torch._dynamo", "sympy", "torch.onnx")

_SCRIPT = """
import json, sys
from streamlit.testing.v1 import AppTest
from ui.nav import PAGES
at = AppTest.from_file("app.py", default_timeout=240).run()
errors = [e.value for e in at.exception]
opened = []
for info in PAGES:
    at.switch_page(info.script).run()
    errors += [f"{info.script}: {e.value}" for e in at.exception]
    opened.append((info.script, [m for m in HEAVY if m in sys.modules]))
print(json.dumps({"opened": opened, "errors": errors}))
"""


def test_no_page_imports_the_compiler_stack():
    script = f"HEAVY = {HEAVY!r}\n" + _SCRIPT
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert len(result["opened"]) >= 10
    assert [(script, loaded) for script, loaded in result["opened"] if loaded] == []
