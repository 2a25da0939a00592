"""The Lab's notebook as a reader downloads it, run top to bottom: how long it takes and what it learns.

Started by ``python -m engine.bench notebook`` (``engine`` never imports Streamlit, and the notebook is built from
what the page's own button writes, so this lives here). The Lab page (``views/lab.py``) runs once under AppTest
in ``--lang`` with its defaults; the settings its real ``ui.notebook.download_button`` receives are kept, the
notebook is built from them as the button builds it, and nbclient executes it on a fresh kernel of this
interpreter started in an empty folder (the notebook carries its engine: no project file is in reach). Each
code cell's time comes from nbclient's own timing (``execute_reply`` minus ``execute_input``); the run's time is
the wall time of the whole execution, the kernel's start included.

What it learned is read from the lines its training cell prints (``name = value``): the slice's unigram and
bigram validation losses, the validation loss of every evaluation (the first, the best, the last), the steps
evaluated and the step where the early stop ended it, if it did. Prints a summary and writes ``--json``
(default ``runs/bench_notebook.json``) with ``engine.bench.machine.machine_info()`` and the fp32 matmul ceiling
measured before and after the run.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

import streamlit as st
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from streamlit.testing.v1 import AppTest

from engine import notebook
from engine.bench import machine
from ui import i18n
from ui import notebook as ui_notebook
from ui.i18n import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
SLUG = "lab"


def page_notebook(lang: str):
    """The Lab's notebook as its download button builds it with the page's defaults in ``lang``; with its settings.

    Raises:
        RuntimeError: if the page fails or draws no download button.
    """
    captured: dict[str, tuple] = {}
    original = ui_notebook.download_button

    def wrapped(**settings):
        original(**settings)
        captured[SLUG] = (ui_notebook.page.recorded(), ui_notebook.page_settings(SLUG, st.session_state, settings))

    ui_notebook.download_button = wrapped
    try:
        app = AppTest.from_file(str(ROOT / "views" / f"{SLUG}.py"), default_timeout=300)
        app.session_state["lang"] = lang
        app.run()
        if app.exception or SLUG not in captured:
            raise RuntimeError(f"the Lab page failed or drew no notebook button: {[e.value for e in app.exception]}")
    finally:
        ui_notebook.download_button = original
    record, settings = captured[SLUG]
    before = i18n.current_language
    i18n.current_language = lambda: lang  # the notebook's sentences as the reader's session translates them
    try:
        words = ui_notebook.labels(SLUG, ui_notebook.page.page_info(SLUG).page_heading())
    finally:
        i18n.current_language = before
    nb = notebook.build(ui_notebook.recipes_module(SLUG), ui_notebook.notebook_items(record, lang), settings, words)
    return nb, settings


def printed(lines: list[str]) -> dict[str, object]:
    """``{name: value}`` of the ``name = value`` lines a notebook's cells print (JSON values)."""
    values = {}
    for line in lines:
        if " = " in line and not line.lstrip().startswith("≈"):
            name, _sep, text = line.rpartition(" = ")
            try:
                values[name] = json.loads(text)
            except json.JSONDecodeError:
                continue
    return values


def cell_seconds(cell) -> float | None:
    """A code cell's run time from nbclient's timing metadata, or None when it holds none."""
    timing = cell.metadata.get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    parse = datetime.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def run(nb, timeout_s: int) -> tuple[float, list[dict], dict]:
    """Executes ``nb`` on a fresh kernel of this interpreter in an empty folder.

    Returns:
        The wall seconds of the whole run (the kernel's start included), one ``{"first_line", "seconds"}`` per
        code cell, and the values the cells printed.
    """
    ran = copy.deepcopy(nb)
    with tempfile.TemporaryDirectory() as empty:
        start = time.perf_counter()
        km = KernelManager(kernel_name="python3")
        km.kernel_spec.argv[0] = sys.executable
        km.start_kernel(cwd=empty)
        try:
            NotebookClient(ran, km=km, timeout=timeout_s).execute()
        finally:
            km.shutdown_kernel(now=True)
        wall = time.perf_counter() - start
    cells, lines = [], []
    for cell in ran.cells:
        if cell.cell_type != "code":
            continue
        first = next((line for line in cell.source.splitlines() if line.strip()), "")
        cells.append({"first_line": first[:80], "seconds": cell_seconds(cell)})
        lines += "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout").splitlines()
    return wall, cells, printed(lines)


def summary(settings: dict, wall_s: float, cells: list[dict], values: dict) -> dict:
    """The JSON row: the notebook's settings in brief, its times and what its training printed."""
    val = values.get("val_loss") or []
    timed = [c for c in cells if c["seconds"] is not None]
    slowest = max(timed, key=lambda c: c["seconds"], default=None)
    bigram = values.get("bigram.val_loss")
    return {
        "records": len(settings.get("corpus_records", [])),
        "model": settings.get("model"), "training": settings.get("training"),
        "wall_s": round(wall_s, 1),
        "cells_s": round(sum(c["seconds"] for c in timed), 1),
        "training_cell_s": None if slowest is None else round(slowest["seconds"], 1),
        "training_cell": None if slowest is None else slowest["first_line"],
        "cells": cells,
        "steps_evaluated": values.get("steps"),
        "stopped_early_at": values.get("stopped_early_at"),
        "unigram_val": values.get("unigram.val_loss"), "bigram_val": bigram,
        "first_val": val[0] if val else None, "best_val": values.get("best_val_loss"),
        "last_val": val[-1] if val else None,
        "last_below_bigram": None if not val or bigram is None else val[-1] < bigram,
        "generated_chars": len(values.get("generated") or ""),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench notebook", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lang", choices=tuple(LANGUAGES), default="en", help="the page's language")
    parser.add_argument("--timeout-s", type=int, default=1800, help="most seconds one cell may run")
    parser.add_argument("--json", default="runs/bench_notebook.json", help="where to write the results")
    args = parser.parse_args(argv)
    info = machine.machine_info()
    ceiling_before = machine.matmul_ceiling()
    for line in machine.header_lines(info, ceiling_before):
        print(line, flush=True)
    nb, settings = page_notebook(args.lang)
    wall, cells, values = run(nb, args.timeout_s)
    info["matmul_ceiling_gflops"] = {"before": ceiling_before, "after": machine.matmul_ceiling()}
    info["load_average_1min_end"] = machine.load_average()
    row = summary(settings, wall, cells, values)
    print(f"{row['records']:,} records; {row['wall_s']:.0f} s in all, the training cell {row['training_cell_s']} s; "
          f"val loss {row['first_val']} → best {row['best_val']}, last {row['last_val']} "
          f"(bigram {row['bigram_val']}, unigram {row['unigram_val']}); early stop at {row['stopped_early_at']}")
    result = {"machine": info, "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "lang": args.lang, "notebook": row}
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
