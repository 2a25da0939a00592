"""The load benchmark's client (tools/bench_load.py) against a running server, for a few readers (not timed).

Three readers in three languages open essay pages, move their sliders and number inputs and switch pages for
about 20 s, as ``python -m engine.bench load`` has a class do. Every reader's runs must finish without an
exception element or a failed run, each reader must have a session of their own, and the navigation the server
sends each reader must be in that reader's language in every run (the page titles the server translates per session),
not another's: sessions stay separate.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.plotly_json import ROOT
from tools import bench_load

#: The server process of each base address the fixture started.
SERVERS: dict[str, object] = {}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    port = bench_load.free_port()
    server = bench_load.start_server(ROOT, port, tmp_path_factory.mktemp("load") / "server.log")
    SERVERS[f"http://127.0.0.1:{port}"] = server
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        bench_load.stop_server(server)


def test_a_few_readers_work_without_an_exception_each_in_their_own_session(base):
    logs = asyncio.run(bench_load.run_class(base, readers=3, trainers=0, minutes=1 / 3, think_s=1.0,
                                            switch_every=4, arrival_s=2.0, seed=7))
    assert [log.errors for log in logs] == [[], [], []]
    assert all(log.opens_s for log in logs), "every reader's first run finished"
    assert all(log.moves_s for log in logs), "every reader moved a control"
    assert sum(len(log.switches_s) for log in logs) > 0, "a reader switched pages"
    ids = [log.session_id for log in logs]
    assert None not in ids and len(set(ids)) == 3
    # the page titles are translated in the server's session: each reader got their own language's, every run
    titles = [log.page_names for log in logs]
    assert all(len(t) == 1 for t in titles), titles
    assert len({next(iter(t)) for t in titles}) == 3, "three languages, three sets of titles"


def test_a_control_moves_one_step_inside_its_range():
    """The move a reader makes: one step, turned back at the range's end, a select slider by its option."""
    import random

    from streamlit.proto.Element_pb2 import Element

    element = Element()
    element.slider.id, element.slider.min, element.slider.max, element.slider.step = "s", 0.0, 1.0, 0.5
    element.slider.default.append(1.0)
    control = bench_load._control(element, "frag")
    assert (control.kind, control.value, control.fragment_id) == ("slider", 1.0, "frag")

    session = bench_load.Session("http://127.0.0.1:1", "x")
    session.controls = {"s": control}
    sent = []

    async def rerun(**fields):
        sent.append(fields)
        return 0.0

    session.rerun = rerun
    for seed in range(8):
        asyncio.run(session.move(random.Random(seed)))
        assert 0.0 <= control.value <= 1.0
        assert list(session.set_values["s"].double_array_value.data) == [control.value]
    assert {f["fragment_id"] for f in sent} == {"frag"}

    element = Element()
    element.slider.id = "o"
    element.slider.options.extend(["a", "b"])
    element.slider.default.append(0)
    control = bench_load._control(element, "")
    session.controls = {"o": control}
    asyncio.run(session.move(random.Random(0)))
    assert list(session.set_values["o"].string_array_value.data) == ["b"]


def _unbounded_caches(source: str) -> list[str]:
    """Functions under ``st.cache_data``/``st.cache_resource`` keyed by an argument, without ``max_entries``."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            if ast.unparse(call.func if call else decorator) not in ("st.cache_data", "st.cache_resource"):
                continue
            keyed = [a.arg for a in node.args.args + node.args.kwonlyargs if not a.arg.startswith("_")]
            if keyed and not (call and any(k.arg == "max_entries" for k in call.keywords)):
                found.append(node.name)
    return found


def test_every_cache_keyed_by_a_readers_values_is_bounded():
    """A cache keyed by what readers choose (slider values, seeds) grows with every value a class tries: the server's
    memory climbed while the class worked. Each such cache holds at most ``max_entries`` (argument-free caches and
    arguments Streamlit does not hash, named with a leading underscore, hold one entry)."""
    assert _unbounded_caches("@st.cache_data(show_spinner=False)\ndef f(seed): ...\n"
                             "@st.cache_resource\ndef g(x): ...\n@st.cache_data\ndef h(_corpus): ...\n") == ["f", "g"]
    files = [ROOT / "app.py", *sorted((ROOT / "views").rglob("*.py")), *sorted((ROOT / "ui").rglob("*.py"))]
    unbounded = {str(p.relative_to(ROOT)): names for p in files if (names := _unbounded_caches(p.read_text()))}
    assert unbounded == {}


def test_figure_caches_of_the_pages_share_two_bounds():
    """A page's cache of Plotly figures keyed by control values holds ``ui.page.FIGURE_CACHE_ENTRIES`` entries, or
    ``SMALL_FIGURE_ENTRIES`` for figures of a few tens of KB (page 7's test holds them to it): the figures a class
    leaves behind stay in memory while the server runs."""
    import ast

    from ui.page import FIGURE_CACHE_ENTRIES, SMALL_FIGURE_ENTRIES

    assert 1 <= FIGURE_CACHE_ENTRIES <= 16 and FIGURE_CACHE_ENTRIES < SMALL_FIGURE_ENTRIES <= 64
    bounds = {}
    for path in sorted((ROOT / "views").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            returns = ast.unparse(node.returns) if isinstance(node, ast.FunctionDef) and node.returns else ""
            if "Figure" not in returns:
                continue
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and ast.unparse(decorator.func) == "st.cache_resource":
                    bound = next((ast.unparse(k.value) for k in decorator.keywords if k.arg == "max_entries"), None)
                    bounds[f"{path.name}:{node.name}"] = bound
    assert len(bounds) >= 10, bounds
    assert {name: b for name, b in bounds.items()
            if b not in ("page.FIGURE_CACHE_ENTRIES", "page.SMALL_FIGURE_ENTRIES")} == {}
    small = sorted(name for name, b in bounds.items() if b == "page.SMALL_FIGURE_ENTRIES")
    assert small == ["positional_encodings.py:rope_pairs_chart", "positional_encodings.py:score_chart"]


def test_a_profile_sample_goes_to_the_area_of_its_innermost_known_frame():
    # frames as py-spy writes them: paths shortened to the sys.path entry, a page's own module by its bare name
    run = ["_run_script (streamlit/runtime/scriptrunner/script_runner.py:1)",
           "exec_func_with_error_handling (streamlit/runtime/scriptrunner/exec_code.py:2)",
           "<module> (dropout.py:3)"]
    figure = [*run, "dropout_slider_figure (engine/figures/dropout.py:4)",
              "__init__ (plotly/graph_objs/_figure.py:5)", "deepcopy (copy.py:6)"]
    number = [*run, "num (ui/numbers.py:7)", "format_decimal (babel/numbers.py:8)"]
    engine = [*run, "dropout_pair (engine/sections/dropout.py:9)", "<listcomp> (random.py:1)"]
    page = [*run, "alt_text (ui/alt.py:3)", "<genexpr> (ui/alt.py:5)", "join (textwrap.py:2)"]
    imported = [*run, "_find_and_load (<frozen importlib._bootstrap>:1176)", "<module> (pandas/core/frame.py:1)"]
    training = ["_bootstrap (threading.py:1)", "run (engine/lab/queue.py:2)", "step (torch/optim/adamw.py:3)"]
    server = ["_run_once (asyncio/base_events.py:1)", "write_message (tornado/web.py:2)"]
    assert bench_load.profile_area(figure).startswith("charts")  # the stdlib's deepcopy counts as Plotly's
    assert bench_load.profile_area(number) == "numbers (Babel)"
    assert bench_load.profile_area(engine) == "the engine's Python code"
    assert bench_load.profile_area(run) == bench_load.profile_area(page) == bench_load.PAGE_CODE
    assert bench_load.profile_area(imported).startswith("importing")
    assert bench_load.profile_area(training).startswith("the Lab's training")
    assert bench_load.profile_area(server).startswith("the server")
    raw = "\n".join([";".join(figure) + " 30", ";".join(number) + " 10", ";".join(server) + " 10", "garbage"])
    summary = bench_load.profile_summary(raw, wall_s=2.0, rate_hz=50)
    assert summary["samples"] == 50 and summary["held_s"] == 1.0 and summary["held_share"] == 0.5
    assert list(summary["by_area"].values()) == [0.6, 0.2, 0.2]
    assert next(iter(summary["by_area"])).startswith("charts")


def test_py_spy_samples_the_servers_interpreter_lock_while_readers_move(base, tmp_path):
    profiler = bench_load.GilProfiler(SERVERS[base].pid, tmp_path / "gil.txt")
    logs = asyncio.run(bench_load.run_class(base, readers=2, trainers=0, minutes=1 / 6, think_s=0.5,
                                            switch_every=4, arrival_s=1.0, seed=3))
    summary = profiler.stop()
    assert "error" not in summary, summary
    assert all(log.moves_s for log in logs)
    assert summary["samples"] > 0 and 0 < summary["held_share"] <= 1.05
    assert any(area.startswith("charts") for area in summary["by_area"]), summary


def test_a_variant_is_a_label_a_checkout_and_the_servers_variables(tmp_path):
    (tmp_path / "app.py").write_text("")
    v = bench_load.parse_variant(["nice-10", str(tmp_path), "ATTENTION_TRAINING_NICE=10", "A_B="])
    assert (v.label, v.root, v.env) == ("nice-10", tmp_path.resolve(), {"ATTENTION_TRAINING_NICE": "10", "A_B": ""})
    for words, says in [(["only-a-label"], "a label, a checkout"), (["a b", str(tmp_path)], "letters, digits"),
                        (["x", str(tmp_path / "none")], "no app.py"), (["x", str(tmp_path), "NOEQUALS"], "NAME=VALUE"),
                        (["x", str(tmp_path), "1X=2"], "NAME=VALUE")]:
        with pytest.raises(ValueError, match=says):
            bench_load.parse_variant(words)


def test_the_summary_gives_each_pages_moves_and_their_quantiles():
    a = bench_load.ReaderLog("reader-01", "essay", "en", moves_s=[0.1, 0.2, 1.5],
                             moves_by_page={"self-attention": [0.1, 0.2], "positional-encodings": [1.5]})
    b = bench_load.ReaderLog("reader-02", "essay", "fr", moves_s=[0.3], moves_by_page={"self-attention": [0.3]})
    row = bench_load.summarise(2, [a, b], {}, None, {"before": [0], "after": [0]}, 60.0)
    assert row["moves"] == 4
    by_page = row["moves_by_page"]
    assert list(by_page) == ["positional-encodings", "self-attention"]
    assert by_page["self-attention"] == {"moves": 3, "p50_s": bench_load.quantile([0.1, 0.2, 0.3], 0.5),
                                         "p95_s": round(bench_load.quantile([0.1, 0.2, 0.3], 0.95), 3), "over_1s": 0}
    assert by_page["positional-encodings"]["over_1s"] == 1
