"""Process start-up (engine.startup): once per process, every page module imported, long-lived objects frozen."""

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

from streamlit import config

from engine.startup import page_modules

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys, weakref
from engine.startup import prepare_process
first = prepare_process()
second = prepare_process()

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a reference cycle made after the freeze: still garbage the collector must find
probe = weakref.ref(a)
del a, b
gc.collect()
missing = [m for m in first.modules if m not in sys.modules]
print(json.dumps({"same": first is second, "frozen": first.frozen, "missing": missing,
                  "cycle_collected": probe() is None, "threads": first.threads}))
"""


def run_probe() -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_prepare_process_runs_once_imports_the_page_modules_and_freezes():
    result = run_probe()
    assert result["same"], "a second call must return the first call's result and change nothing"
    assert result["missing"] == []
    assert result["frozen"] > 10_000  # torch, plotly, pandas and the engine: hundreds of thousands of objects
    assert result["cycle_collected"], "garbage made after the freeze must still be collected"
    assert result["threads"] >= 1


def engine_imports(path: Path) -> set[str]:
    """Engine modules a view imports (``import engine.x``, ``from engine.x import y``, ``from engine import x``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("engine.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine":
            if node.module == "engine":
                names |= {f"engine.{a.name}" for a in node.names}
            else:
                names.add(node.module)
    return names


def test_every_engine_module_a_page_imports_is_imported_at_start_up():
    modules = set(page_modules())
    for path in sorted((ROOT / "views").glob("*.py")) + sorted((ROOT / "ui").glob("*.py")):
        for name in engine_imports(path):
            if name in modules:
                continue
            # ``from engine.figures import vectors_3d`` names a function of a module that is imported
            assert name.rsplit(".", 1)[0] in modules, f"{path.name} imports {name}, not imported at start-up"
    assert "engine.training" in modules
    assert "engine.train" not in modules and not any(m.endswith("__main__") for m in modules)


SERVE_PROBE = """
import asyncio, json, threading
import serve
from engine import startup

async def main():
    async with serve.lifespan(serve.app):
        pass

asyncio.run(main())
worker = next(t for t in threading.enumerate() if t.name == "prepare-process")
worker.join(timeout=300)
print(json.dumps({"prepared": startup._startup is not None, "alive": worker.is_alive()}))
"""


def test_serve_is_an_asgi_app_streamlit_run_finds_and_its_start_up_prepares_the_process():
    from streamlit.web.server.app_discovery import discover_asgi_app

    found = discover_asgi_app(ROOT / "serve.py")
    assert found.is_asgi_app and found.import_string.endswith(":app")
    out = subprocess.run([sys.executable, "-c", SERVE_PROBE], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"prepared": True, "alive": False}


def test_streamlit_does_not_collect_after_every_run():
    """Streamlit's post-run ``gc.collect(2)`` is off in the app's config (an option Streamlit still knows)."""
    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert settings["runner"]["postScriptGC"] is False
    assert config.get_option("runner.postScriptGC") is False  # Streamlit reads the same file


def test_collect_garbage_frees_cycles_and_returns_what_it_found():
    import gc
    import weakref

    from engine.startup import collect_garbage

    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the cycle collector frees it
    alive = weakref.ref(a)
    del a, b
    gc.disable()  # so that no automatic collection frees it first
    try:
        assert alive() is not None
        assert collect_garbage() >= 2
        assert alive() is None
    finally:
        gc.enable()


def test_serve_collects_garbage_on_its_cadence_in_a_worker_thread(monkeypatch):
    import asyncio
    import threading

    import serve

    calls = []
    monkeypatch.setattr(serve, "COLLECT_EVERY_S", 0.05)
    monkeypatch.setattr(serve, "collect_garbage", lambda: calls.append(threading.current_thread().name))

    async def main():
        task = asyncio.create_task(serve._collect_garbage())
        await asyncio.sleep(0.5)
        task.cancel()

    asyncio.run(main())
    assert len(calls) >= 3
    assert threading.main_thread().name not in calls  # never in the event loop's thread
