"""Browser page benchmark: first paint and input-to-redraw time of every server-side control, in Chromium.

Started by ``python -m engine.bench pages --browser``. Starts ``streamlit run app.py`` (from
``--app-root``, so an older checkout can be measured with this tool), visits every page once to warm
the server, then per page:

- **cold server**: the first page is opened once right after the server answers its health check (the
  first reader after a deploy or a restart: imports and first-run caches);
- **first paint** and **first chart**: ``--loads`` fresh browser contexts (a reader's first visit, nothing
  cached) open the page's URL; milliseconds from navigation start (``performance.timeOrigin``) until the
  page's first words (title or prose) are visible, and until its first Plotly chart's SVG is; medians;
- **input to redraw**: for each visible slider, select slider, number input and selectbox in the page's
  main area, ``--moves`` moves made as a reader makes them (arrow keys on a slider, the +/− buttons of a
  number input, the keyboard in a selectbox); each time, from the input (the browser's time stamp of the key
  press or click that sets the value, so Playwright's own time to find and focus the control is not counted)
  until the last change of any chart's DOM, once the page has been still for ``QUIET_MS`` and the app reports
  no run in progress.
  A control that changes no chart (it drives text or a table) is timed to the last change of the main
  area outside the control, and marked ``text`` in the table.

Prints a table with the machine and the load average before and after, and writes JSON.
Needs Debian's ``chromium`` and the ``playwright`` package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tools.bench_pages import cpu_name
from ui.nav import PAGES

ROOT = Path(__file__).resolve().parent.parent
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--disable-quic"]
#: The charts must be still this long (ms) before a redraw counts as finished.
QUIET_MS = 600
#: A move whose charts have not changed after this long (ms) changed no chart.
NO_CHANGE_MS = 6000
CHART = '[data-testid="stPlotlyChart"]'

#: Installs one MutationObserver on the main area: the time of the last mutation inside a chart, and of the
#: last one elsewhere outside the control being moved (its container is marked ``data-bench-moving``); and the
#: browser's time stamp of the last key press or click (the reader's input; a selectbox's last one is the Enter
#: that picks the option, not the click that opened it).
OBSERVE_JS = """() => {
  if (window.__bench) return;
  window.__bench = {lastChart: 0, lastOther: 0, lastInput: 0};
  const stamp = (e) => { if (e.isTrusted) window.__bench.lastInput = e.timeStamp; };
  document.addEventListener('keydown', stamp, true);
  document.addEventListener('click', stamp, true);
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  new MutationObserver((records) => {
    const now = performance.now();
    for (const r of records) {
      const t = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      if (!t || !t.closest || t.closest('[data-bench-moving]') || r.attributeName === 'data-bench-moving') continue;
      const inChart = t.closest('[data-testid="stPlotlyChart"]');
      const added = [...r.addedNodes].some(n => n.nodeType === 1 &&
        (n.matches('[data-testid="stPlotlyChart"]') || n.querySelector('[data-testid="stPlotlyChart"]')));
      if (inChart || added) window.__bench.lastChart = now; else window.__bench.lastOther = now;
    }
  }).observe(main, {subtree: true, childList: true, attributes: true, characterData: true});
}"""
STATE_JS = """() => ({now: performance.now(), lastChart: window.__bench.lastChart, lastOther: window.__bench.lastOther,
  lastInput: window.__bench.lastInput, running: !!document.querySelector('[data-testid="stStatusWidget"]')})"""

#: Visible controls in the main area, each with a stable name (its key class, else its label).
CONTROLS_JS = """() => {
  const out = [];
  const kinds = [['stSlider', 'slider'], ['stNumberInput', 'number'], ['stSelectbox', 'selectbox']];
  for (const [testid, kind] of kinds) {
    document.querySelectorAll(`[data-testid="stMain"] [data-testid="${testid}"]`).forEach((el, i) => {
      const box = el.getBoundingClientRect();
      if (box.width === 0 || box.height === 0) return;
      const c = el.closest('[class*="st-key-"]');
      const key = c ? [...c.classList].find(k => k.startsWith('st-key-')).slice(7) : null;
      const label = (el.querySelector('label') || {}).innerText || '';
      out.push({kind, index: i, key, label: label.slice(0, 40)});
    });
  }
  return out;
}"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(app_root: Path, port: int) -> subprocess.Popen:
    """``streamlit run serve.py`` (``app.py`` in a checkout without it) in ``app_root`` on ``port``; returns once
    its health check answers."""
    entry = "serve.py" if (app_root / "serve.py").exists() else "app.py"
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", entry, "--server.port", str(port), "--server.headless", "true",
         "--server.address", "127.0.0.1"],
        cwd=app_root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(app_root)},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become healthy within 120 s")


def wait_idle(page, timeout_ms: float = 120_000) -> None:
    """Until a chart is drawn and the app reports no run in progress."""
    page.wait_for_selector(f"{CHART} .main-svg", state="visible", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout_ms)


#: The page's first words: its title or a paragraph of prose in the main area.
TEXT = '[data-testid="stMain"] :is([data-testid="stHeading"], [data-testid="stMarkdown"])'


def open_timed(context, url: str) -> tuple[float, float]:
    """(first paint, first chart): milliseconds from navigation start until the page's first words, and
    until its first chart's SVG, are visible, in a new tab of ``context``."""
    page = context.new_page()
    page.goto(url, wait_until="commit")
    page.wait_for_selector(TEXT, state="visible", timeout=120_000)
    paint = page.evaluate("performance.now()")
    page.wait_for_selector(f"{CHART} .main-svg", state="visible", timeout=120_000)
    chart = page.evaluate("performance.now()")
    wait_idle(page)
    page.close()
    return paint, chart


def _move(page, control: dict, step: int) -> None:
    """One reader's move of ``control``: forward on even steps, back on odd ones.

    Forward goes up, or down from the top of the range; back undoes the previous move (remembered in
    ``control["_last"]``), so a slider that the first move took to its maximum comes back down.
    """
    testid = {"slider": "stSlider", "number": "stNumberInput", "selectbox": "stSelectbox"}[control["kind"]]
    el = page.locator(f'[data-testid="stMain"] [data-testid="{testid}"]').nth(control["index"])
    forward = step % 2 == 0
    if control["kind"] == "selectbox":
        el.locator("input").first.click()
        page.keyboard.press("ArrowDown" if forward else "ArrowUp")
        page.keyboard.press("Enter")
        return
    if forward or "_last" not in control:
        if control["kind"] == "slider":
            thumb = el.locator('input[type="range"]').first
            up = float(thumb.input_value()) < float(thumb.get_attribute("max"))
        else:
            button = el.locator('[data-testid="stNumberInputStepUp"]')
            up = not button.count() or button.is_enabled()
    else:
        up = not control["_last"]
    control["_last"] = up
    if control["kind"] == "slider":
        el.locator('input[type="range"]').first.focus()
        page.keyboard.press("ArrowRight" if up else "ArrowLeft")
        return
    stepper = el.locator('[data-testid="stNumberInputStepUp"]' if up else '[data-testid="stNumberInputStepDown"]')
    if stepper.count():
        stepper.click()
    else:  # a narrow input has no +/- buttons: the arrow keys step it, Enter commits
        box = el.locator("input").first
        box.focus()
        page.keyboard.press("ArrowUp" if up else "ArrowDown")
        page.keyboard.press("Enter")


def redraw_times(page, control: dict, moves: int) -> tuple[list[float], bool]:
    """Input-to-redraw times (ms) of ``moves`` moves, and whether they are chart redraws.

    A move's time runs to the last change inside a chart; a control that changed no chart in any move is
    timed to the last change of anything else in the main area outside the control itself (its text,
    tables), and ``False`` is returned with the times.
    """
    page.evaluate(OBSERVE_JS)
    testid = {"slider": "stSlider", "number": "stNumberInput", "selectbox": "stSelectbox"}[control["kind"]]
    page.locator(f'[data-testid="stMain"] [data-testid="{testid}"]').nth(control["index"]).evaluate(
        "el => (el.closest('[data-testid=\"stElementContainer\"]') || el).setAttribute('data-bench-moving', '')")
    charts: list[float | None] = []
    others: list[float] = []
    for step in range(moves):
        t0 = page.evaluate("performance.now()")
        _move(page, control, step)
        while True:
            page.wait_for_timeout(40)
            s = page.evaluate(STATE_JS)
            last = max(s["lastChart"], s["lastOther"])
            if last > t0 and s["now"] - last > QUIET_MS and not s["running"]:
                start = s["lastInput"] if t0 < s["lastInput"] < last else t0
                charts.append(s["lastChart"] - start if s["lastChart"] > t0 else None)
                others.append(last - start)
                break
            if last <= t0 and s["now"] - t0 > NO_CHANGE_MS and not s["running"]:
                raise RuntimeError(f"{control} changed nothing in {NO_CHANGE_MS} ms")
            if s["now"] - t0 > 120_000:
                raise RuntimeError(f"{control} did not settle within 120 s")
    page.evaluate("() => document.querySelector('[data-bench-moving]').removeAttribute('data-bench-moving')")
    control.pop("_last", None)  # _move's memory, not a result
    drawn = [t for t in charts if t is not None]
    return (drawn, True) if drawn else (others, False)


def measure(app_root: Path, slugs: list[str], moves: int, width: int, loads: int, progress) -> dict:
    """Start a server in ``app_root``, time its first page (cold), warm it, and measure the pages ``slugs``."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    up = time.monotonic()
    server = start_server(app_root, port)
    started_ms = (time.monotonic() - up) * 1000
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=LAUNCH_ARGS)
            infos = [i for i in PAGES if i.slug in slugs]
            cold = None
            for info in infos:  # the first request after start-up is the cold one; the rest warm the server
                ctx = browser.new_context(viewport={"width": width, "height": 900})
                paint, chart = open_timed(ctx, f"{base}/{info.url_path}")
                ctx.close()
                if cold is None:
                    cold = {"url_path": info.url_path, "server_start_ms": round(started_ms),
                            "first_paint_ms": round(paint), "first_chart_ms": round(chart)}
                    progress(f"cold server: /{info.url_path} first paint {paint:.0f} ms, first chart {chart:.0f} ms")
                progress(f"warmed /{info.url_path}")
            for info in infos:
                paints, charts = [], []
                for _ in range(loads):  # a reader's first visit: a fresh browser context, nothing cached
                    ctx = browser.new_context(viewport={"width": width, "height": 900})
                    paint, chart = open_timed(ctx, f"{base}/{info.url_path}")
                    paints.append(paint)
                    charts.append(chart)
                    ctx.close()
                ctx = browser.new_context(viewport={"width": width, "height": 900})
                page = ctx.new_page()
                page.goto(f"{base}/{info.url_path}")
                wait_idle(page)
                page.wait_for_timeout(500)
                controls = []
                for control in page.evaluate(CONTROLS_JS):
                    try:
                        times, chart = redraw_times(page, control, moves)
                    except Exception as error:  # one control's failure must not lose the others
                        progress(f"/{info.url_path} {control['key'] or control['label']}: skipped ({error})"[:300])
                        page.goto(f"{base}/{info.url_path}")
                        wait_idle(page)
                        continue
                    controls.append({**control, "drives_chart": chart, "times_ms": [round(t) for t in times],
                                     "median_ms": round(statistics.median(times))})
                    progress(f"/{info.url_path} {control['key'] or control['label']}: "
                             f"{controls[-1]['median_ms']} ms")
                rows.append({"url_path": info.url_path, "first_paint_ms": round(statistics.median(paints)),
                             "first_chart_ms": round(statistics.median(charts)),
                             "first_paints_ms": [round(t) for t in paints],
                             "first_charts_ms": [round(t) for t in charts], "controls": controls})
                progress(f"/{info.url_path}: first paint {rows[-1]['first_paint_ms']} ms, "
                         f"first chart {rows[-1]['first_chart_ms']} ms")
                ctx.close()
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=20)
    return {"cold": cold, "pages": rows}


def print_table(result: dict) -> None:
    print(f"machine: {result['machine']}; load average before {result['load_before']}, after {result['load_after']}")
    cold = result["cold"]
    print(f"cold server (first request after start-up, /{cold['url_path']}): first paint {cold['first_paint_ms']} ms, "
          f"first chart {cold['first_chart_ms']} ms (the server answered its health check {cold['server_start_ms']} ms "
          "after launch)")
    print(f"first visit, warm server: median of {result['loads']} fresh browser contexts")
    print(f"{'page':<22}{'paint ms':>9}{'chart ms':>9}  {'control':<22}{'median ms':>10}  moves (ms)")
    for row in result["pages"]:
        first = True
        empty = {"key": "-", "label": "", "median_ms": None, "times_ms": [], "drives_chart": True}
        for c in row["controls"] or [empty]:
            name = (c["key"] or c["label"])[:21]
            med = "-" if c["median_ms"] is None else str(c["median_ms"])
            moves = " ".join(str(t) for t in c["times_ms"]) + ("" if c.get("drives_chart", True) else "  (text)")
            paint = str(row["first_paint_ms"]) if first else ""
            chart = str(row["first_chart_ms"]) if first else ""
            print(f"{row['url_path'] if first else '':<22}{paint:>9}{chart:>9}  {name:<22}{med:>10}  {moves}")
            first = False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench pages --browser", description=__doc__)
    parser.add_argument("--moves", type=int, default=5, help="moves per control (the median is reported)")
    parser.add_argument("--page", action="append", help="only these url paths (repeatable; home is '')")
    parser.add_argument("--all", action="store_true", help="the Lab too (by default only the essay pages)")
    parser.add_argument("--loads", type=int, default=3, help="fresh-context loads per page (median reported)")
    parser.add_argument("--width", type=int, default=1440, help="viewport width in px")
    parser.add_argument("--app-root", default=str(ROOT), help="the checkout whose app is measured")
    parser.add_argument("--json", default="runs/bench_pages_browser.json", help="where to write the results")
    args = parser.parse_args(argv)
    slugs = [i.slug for i in PAGES if (args.page is None or i.url_path in args.page)
             and (args.all or args.page or i.group == "essay")]

    def progress(line: str) -> None:
        print(f"  [{time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)

    load_before = [round(x, 2) for x in os.getloadavg()]
    result = measure(Path(args.app_root).resolve(), slugs, args.moves, args.width, args.loads, progress)
    result = {"machine": cpu_name(), "cores": os.cpu_count(), "app_root": str(Path(args.app_root).resolve()),
              "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
              "moves": args.moves, "loads": args.loads, "width": args.width, **result}
    print_table(result)
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
