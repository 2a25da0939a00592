"""AppTest: page 5 (views/multi_head.py) shows the chapter's numbers and follows every control."""

import html

import numpy as np
import pytest
from babel.lists import format_list
from babel.numbers import parse_decimal

from engine import chapter
from engine.bench import attention as bench
from engine.sections import multi_head as sections
from tests.plotly_json import ROOT, badges, cells, figure_json_bytes, figures, open_page, texts
from ui.i18n import LANGUAGES, TRANSLATED, translations
from ui.numbers import byte_size, integer, num, sci

PAGE = "views/multi_head.py"
t = translations("en").gettext


def plain(title: str | None) -> str:
    """A chart title as one line: the figures wrap long titles with <br> (for phones)."""
    return (title or "").replace("<br>", " ")


def metrics(at):
    return {m.label: m.value for m in at.metric}


def heads_figure(at, lang="en"):
    prefix = translations(lang).gettext("head ")
    return next(f for f in figures(at) if f["layout"].get("sliders")
                and f["layout"]["sliders"][0]["currentvalue"]["prefix"] == prefix)


def shapes(at):
    table = next(d.value for d in at.table if t("step") in d.value.columns)
    return dict(zip(table[t("step")], table["shape"], strict=True))


def score_label(heads: int, T: int) -> str:
    return t("score tensor ({shape}), float32").format(shape=f"1, {heads}, {T}, {T}")


def size_name(size: dict, lang: str = "en") -> str:
    """A benchmark input size as the page names it, in ``lang``."""
    batch, seq_len, n_embd, heads = (int(size[k]) for k in ("batch", "seq_len", "n_embd", "num_heads"))
    return translations(lang).gettext("B = {batch} × T = {T} × C = {C}, H = {H} (head_dim {head_dim})").format(
        batch=integer(batch, lang), T=integer(seq_len, lang), C=integer(n_embd, lang), H=heads,
        head_dim=integer(n_embd // heads, lang))


def bench_tables(at):
    return [tb.value for tb in at.table if t("variant") in tb.value.columns]


def test_chapter_numbers_green(at):
    shown = texts(at)
    assert t("context_vecs[0][0] = {row} · shape {shape}").format(
        row="[\u22120.4519, 0.2216, 0.4772, 0.1063]", shape=(2, 6, 4)) in shown
    assert t("`{code}` · context_vecs[0][0] = {row} · shape {shape}").format(
        code="MultiHeadAttention(d_in=3, d_out=2, num_heads=2)", row="[0.3190, 0.4858]", shape=(2, 6, 2)) in shown
    assert any("MultiHeadAttentionWrapper(d_in=3, d_out=1, num_heads=2)" in x and "(2, 6, 2)" in x for x in shown)
    green = badges(at, "green")
    assert len(green) == 6 and not badges(at, "red") and not badges(at, "gray")
    assert any(t("wrapper output (both sequences)") in b for b in green)
    # the split layer's row is checked against the book's printed value, which the chapter's text does not reach
    assert t("split layer, first row: equals {row}, what the book's own code prints for these settings (the "
             "chapter's text stops before printing it), to {decimals} decimals").format(
        row="[0.3190, 0.4858]", decimals=chapter.DECIMALS) in " ".join(green).replace("\\[", "[").replace("\\]", "]")
    # the lesson's counts are integers: equal, not "to 4 decimals"
    for what, count in ((t("qkv parameters with {n} heads").format(n=4), chapter.LESSON_QKV_PARAMS),
                        (t("proj parameters with {n} heads").format(n=4), chapter.LESSON_PROJ_PARAMS)):
        assert t("{what}: {count}, exactly the lesson's count").format(what=what, count=integer(count, "en")) \
            in " ".join(green)
    assert metrics(at) == {t("qkv parameters"): integer(chapter.LESSON_QKV_PARAMS, "en"),
                           t("proj parameters"): integer(chapter.LESSON_PROJ_PARAMS, "en"),
                           score_label(4, 5): byte_size(4 * 5 * 5 * 4, lang="en")}
    title = t("MultiHeadAttentionWrapper: context_vecs[0], shape {shape}").format(shape=(2, 6, 4))
    wrapper = next(f for f in figures(at) if plain(f["layout"]["title"]["text"]) == title)
    assert wrapper["data"][0]["text"][0] == ["\u22120.4519", "0.2216", "0.4772", "0.1063"]


def test_copy_shows_max_difference(at):
    line = next(x for x in texts(at) if x.startswith("max |wrapper − split| before the copy"))
    before = float(line.split("**")[1])
    after = float(line.split("**")[3])
    assert before > 1e-2 and after < 1e-6
    for heads, dim in ((8, 4), (1, 1), (6, 3)):
        at.select_slider(key="mh_copy_heads").set_value(heads).run()
        at.select_slider(key="mh_copy_dim").set_value(dim).run()
        assert not at.exception
        assert any(t("after the copy the split layer's heads equal the wrapper's") in b for b in badges(at, "green"))


def test_other_seed_turns_checks_gray(at):
    for seed in (0, 99_999):
        at.number_input(key="mh_seed").set_value(seed).run()
        assert not at.exception
        gray = badges(at, "gray")
        assert any(t("wrapper output (both sequences)") in b for b in gray)
        assert any(t("split layer, first row") in b for b in gray)
        assert "[-0.4519, 0.2216, 0.4772, 0.1063]" not in " ".join(texts(at))
        assert not badges(at, "red")


def test_heads_figure_steps_through_heads(at):
    fig = heads_figure(at)
    assert len(fig["data"]) == 4
    steps = fig["layout"]["sliders"][0]["steps"]
    assert [s["label"] for s in steps] == ["0", "1", "2", "3"]
    assert steps[2]["args"][0]["visible"] == [False, False, True, False]
    for trace in fig["data"]:
        z = np.array(trace["z"], dtype=float)
        assert z.shape == (5, 5)
        # heatmaps carry 4 decimals: a row of 5 rounded weights sums to 1 within 5 × 0.5e-4
        np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=2.5e-4)
        assert np.allclose(np.triu(z, 1), 0.0)
    assert not np.allclose(np.array(fig["data"][0]["z"], float), np.array(fig["data"][1]["z"], float))
    assert shapes(at)[t("input x")] == "(1, 5, 32)"
    assert shapes(at)[t("q cut into heads")] == "(1, 4, 5, 8)"
    assert shapes(at)[t("attention scores")] == "(1, 4, 5, 5)"
    titles = [plain(s["args"][1]["title.text"]) for s in steps]
    assert titles == [t("attn_weights of head {h} / {H}").format(h=h, H=4) for h in range(4)]
    assert t("{x} → {heads} → scores {scores}").format(x=(1, 5, 32), heads=(1, 4, 5, 8), scores=(1, 4, 5, 5)) \
        in texts(at)


@pytest.mark.parametrize("n_embd, heads", [(32, 1), (32, 32), (8, 8), (64, 64), (64, 1), (12, 6)])
def test_width_and_heads_follow_the_controls(at, n_embd, heads):
    at.selectbox(key="mh_n_embd").set_value(n_embd).run()
    at.select_slider(key="mh_heads").set_value(heads).run()
    assert not at.exception
    assert len(heads_figure(at)["data"]) == heads
    assert shapes(at)[t("q cut into heads")] == f"(1, {heads}, 5, {n_embd // heads})"
    shown = metrics(at)
    assert shown[t("qkv parameters")] == integer(3 * n_embd * n_embd + 3 * n_embd, "en")
    assert shown[t("proj parameters")] == integer(n_embd * n_embd + n_embd, "en")
    assert shown[score_label(heads, 5)] == byte_size(heads * 5 * 5 * 4, lang="en")
    badge = "green" if n_embd == 32 else "gray"
    assert any(t("qkv parameters with {n} heads").format(n=heads) in b for b in badges(at, badge))
    assert figure_json_bytes(at) < 2_000_000


def test_heads_snap_to_a_divisor_when_width_changes(at):
    at.select_slider(key="mh_heads").set_value(8).run()
    at.selectbox(key="mh_n_embd").set_value(12).run()
    assert not at.exception
    slider = at.select_slider(key="mh_heads")
    assert list(slider.options) == ["1", "2", "3", "4", "6", "12"]
    assert slider.value == 6
    assert len(heads_figure(at)["data"]) == 6


def test_line_control(at):
    at.text_input(key="mh_line").set_value("山依日白尽").run()
    assert heads_figure(at)["data"][0]["y"] == [0, 1, 2, 3, 4]
    at.text_input(key="mh_line").set_value("").run()
    assert not at.exception
    assert [w.value for w in at.warning] == [
        t("The line is empty; showing the lesson's line “{line}” until you type one.").format(line="白日依山尽")]
    assert t("{x} → {heads} → scores {scores}").format(x=(1, 5, 32), heads=(1, 4, 5, 8), scores=(1, 4, 5, 5)) \
        in texts(at)
    at.text_input(key="mh_line").set_value("山" * 1000).run()
    assert not at.exception
    assert [w.value for w in at.warning] == [
        t("The line has {n} characters; only the first {limit} are used here.").format(n=1000, limit=12)]
    assert shapes(at)[t("attention scores")] == "(1, 4, 12, 12)"
    at.text_input(key="mh_line").set_value("a").run()
    assert shapes(at)[t("attention scores")] == "(1, 4, 1, 1)"
    np.testing.assert_allclose(np.array(heads_figure(at)["data"][0]["z"], float), [[1.0]])


@pytest.mark.parametrize("d_out, heads, ok", [(32, 5, False), (30, 4, False), (1, 256, False), (4096, 256, True),
                                              (7, 7, True), (1, 1, True), (4096, 3, False)])
def test_split_that_does_not_divide_gets_a_message(at, d_out, heads, ok):
    at.number_input(key="mh_try_d_out").set_value(d_out).run()
    at.number_input(key="mh_try_heads").set_value(heads).run()
    assert not at.exception
    if ok:
        assert [s.value for s in at.success] == [t("d_out {d_out} splits into {heads} heads of head_dim {head_dim}.")
                                                 .format(d_out=integer(d_out, "en"), heads=integer(heads, "en"),
                                                         head_dim=integer(d_out // heads, "en"))]
        assert not at.error
    else:
        assert len(at.error) == 1
        # the layer's own error is shown as it is raised, beside the translated explanation
        assert any(f"d_out={d_out} is not divisible by num_heads={heads}" in c.value for c in at.code)
        assert f"d_out={d_out}" not in at.error[0].value
    if (d_out, heads) == (32, 5):
        assert at.error[0].value.endswith(format_list(["4", "8"], style="or", locale="en") + ".")


VERDICTS = {
    "equal": "Here the wrapper and the split layer took about the same time: {wrapper} ms against {split} ms "
             "(median forward). At least one median lies inside the other's interquartile range, the middle half of "
             "its runs (wrapper {wrapper_q1}–{wrapper_q3} ms, split {split_q1}–{split_q3} ms): the gap is within this "
             "run's noise, so the file cannot say which is faster.",
    "wrapper": "Here the wrapper was faster than the split layer: {wrapper} ms against {split} ms (median forward). "
               "The split layer's score tensor (B, H, T, T) holds {scores}; the wrapper handles one head's {head} at "
               "a time.",
    "split": "Here the split layer was {ratio}× faster than the wrapper: {split} ms against {wrapper} ms (median "
             "forward).",
}


# a file without per-run times: its fastest variant named by the medians alone
FASTEST = "Fastest of all: {variant}, {ms} ms."
WITHIN_NOISE = ("Lowest median: {variant}, {ms} ms, but within this run's noise of {rivals}: for each of them one "
                "median lies inside the other's interquartile range, so the file cannot name the fastest variant at "
                "this size.")
# a file with per-run times: the rule stated on the table's medians and interquartile ranges
FASTEST_RULE = ("Fastest of all: {variant}, {ms} ms: no other median lies inside its interquartile range ({iqr} ms, "
                "column “{column}”), and {ms} ms lies inside no other variant's.")
WITHIN_NOISE_RULE = ("Lowest median: {variant}, {ms} ms, but within this run's noise of {rivals}: for each of them, "
                     "its median lies inside the interquartile range of {variant} ({iqr} ms, column “{column}”) or "
                     "{ms} ms lies inside its own, so the file cannot name the fastest variant at this size.")
IQR_COLUMN = "interquartile range, forward ms"
#: Between an interquartile range's two ends in a table cell: an en dash that never ends a line.
IQR_DASH = "\u2060–\u2060"


def interval(iqr, lang: str) -> str:
    """An interquartile range as the page writes it."""
    return f"{num(iqr[0], 2, lang)}{IQR_DASH}{num(iqr[1], 2, lang)}"


def fastest_sentence(verdict: sections.BenchVerdict, lang: str) -> str:
    """The sentence that names the fastest variant of a benchmark size, or the variants within its noise."""
    gettext = translations(lang).gettext
    words = {"variant": verdict.fastest, "ms": num(verdict.fastest_ms, 2, lang)}
    rivals = format_list(list(verdict.fastest_rivals), locale=lang)
    if verdict.fastest_iqr is None:
        return (gettext(WITHIN_NOISE).format(rivals=rivals, **words) if verdict.fastest_rivals
                else gettext(FASTEST).format(**words))
    words |= {"iqr": interval(verdict.fastest_iqr, lang), "column": gettext(IQR_COLUMN)}
    return (gettext(WITHIN_NOISE_RULE).format(rivals=rivals, **words) if verdict.fastest_rivals
            else gettext(FASTEST_RULE).format(**words))


def read_number(cell: str, lang: str) -> float:
    return float(parse_decimal(cell, locale=lang, strict=True))


def rule_on_the_table(read, lang: str) -> tuple[str, list[str], str]:
    """The lowest median, the variants within its noise and its interquartile range's cell, by the rule the
    verdict states, applied to the cells the reader reads (the table's medians and interquartile ranges): a
    variant is within the noise when its median lies inside the lowest's range or the lowest's inside its own."""
    gettext = translations(lang).gettext
    medians = {v: read_number(m, lang) for v, m in zip(read[gettext("variant")], read[gettext("forward ms")],
                                                       strict=True)}
    cells_iqr = dict(zip(read[gettext("variant")], read[gettext(IQR_COLUMN)], strict=True))
    ranges = {v: tuple(read_number(end, lang) for end in cell.split(IQR_DASH)) for v, cell in cells_iqr.items()}
    best = min(medians, key=medians.get)
    lo, hi = ranges[best]
    rivals = [v for v in sorted(medians, key=medians.get) if v != best
              and (lo <= medians[v] <= hi or ranges[v][0] <= medians[best] <= ranges[v][1])]
    return best, rivals, cells_iqr[best]


def check_rule_on_the_table(read, verdict_text: str, lang: str) -> None:
    """The verdict's list is exactly the variants the stated rule finds within the noise on the table's numbers, and
    its interval is the lowest median's; the "× fastest" column is there exactly when it names a fastest variant,
    1 on that variant's row."""
    gettext = translations(lang).gettext
    best, rivals, best_iqr = rule_on_the_table(read, lang)
    words = {"variant": best, "ms": read.loc[read[gettext("variant")] == best, gettext("forward ms")].item(),
             "iqr": best_iqr, "column": gettext(IQR_COLUMN)}
    if rivals:
        expected = gettext(WITHIN_NOISE_RULE).format(rivals=format_list(rivals, locale=lang), **words)
    else:
        expected = gettext(FASTEST_RULE).format(**words)
    assert verdict_text.endswith(" " + expected)
    assert (gettext("× fastest") in read.columns) == (not rivals)
    if not rivals:
        ratios = dict(zip(read[gettext("variant")], read[gettext("× fastest")], strict=True))
        assert ratios[best] == num(1.0, 2, lang)
        medians = dict(zip(read[gettext("variant")], read[gettext("forward ms")], strict=True))
        assert all(read_number(ratios[v], lang) >= 1 for v in ratios)
        assert all(read_number(ratios[v], lang) == pytest.approx(
            read_number(medians[v], lang) / read_number(medians[best], lang), abs=0.01) for v in ratios)


def check_shipped_benchmark_words(app, lang: str) -> None:
    """Under each shipped table, the fastest variant or the variants within its noise, as the file's runs say;
    the table's times and differences in the reader's number format."""
    gettext = translations(lang).gettext
    sizes = bench.load_results(ROOT / "assets" / "bench_attention.json")["sizes"]
    shown = [x for x in texts(app) if x.startswith(gettext(VERDICTS["equal"]).split("{")[0])
             or x.startswith(gettext(VERDICTS["wrapper"]).split("{")[0])
             or x.startswith(gettext(VERDICTS["split"]).split("{")[0])]
    assert len(shown) == len(sizes)
    for text, size in zip(shown, sizes, strict=True):
        sentence = fastest_sentence(sections.bench_verdict(size), lang)
        assert text.endswith(" " + sentence)
        other = WITHIN_NOISE if sentence.startswith(gettext(FASTEST).split("{")[0]) else FASTEST
        assert gettext(other).split("{")[0] not in text
    tables = [tb for tb in app.table if gettext("variant") in tb.value.columns]
    for table, size, text in zip(tables, sizes, shown, strict=True):
        read = cells(table)
        assert list(read[gettext("max |out − split|")]) == [sci(r["max_abs_diff_vs_split"], lang=lang)
                                                           for r in size["results"]]
        assert list(read[gettext("forward ms")]) == [num(r["forward_ms"], 2, lang) for r in size["results"]]
        # beside each median the interquartile range of its runs, the interval the verdict's rule compares it with
        assert list(read[gettext(IQR_COLUMN)]) == [
            interval(sections.interquartile_range(r["forward_samples_ms"]), lang) for r in size["results"]]
        check_rule_on_the_table(read, text, lang)


def verdicts_shown(shown, lang="en"):
    """Which of the three benchmark sentences the page shows, in its order."""
    starts = {key: translations(lang).gettext(msgid).split("{")[0] for key, msgid in VERDICTS.items()}
    return [key for x in shown for key, start in starts.items() if x.startswith(start)]


def outcome(verdict: sections.BenchVerdict) -> str:
    return "equal" if verdict.within_noise else "wrapper" if verdict.wrapper_faster else "split"


def test_shipped_benchmark_table(at):
    data = bench.load_results(ROOT / "assets" / "bench_attention.json")
    captions = [c.value for c in at.caption]
    machine = data["machine"]
    machine_line = t("{cpu} · {cores} cores (torch {threads} threads) · torch {torch}").format(
        cpu=machine["cpu"], cores=machine["cores"], threads=machine["torch_threads"], torch=machine["torch"])
    assert any(machine_line in c for c in captions)
    tables = bench_tables(at)
    assert len(tables) == len(data["sizes"]) >= 2
    shown = texts(at)
    raw_tables = [tb for tb in at.table if t("variant") in tb.value.columns]
    for table, raw, size in zip(tables, raw_tables, data["sizes"], strict=True):
        # a wider table scrolls sideways inside its frame on a phone (and at 1400 px none hides a column: the
        # legibility check)
        assert len(table.columns) <= 8
        assert list(table[t("variant")]) == [r["variant"] for r in size["results"]]
        # "× fastest" only where the verdict names a fastest variant
        verdict = sections.bench_verdict(size)
        assert (t("× fastest") in table.columns) == (not verdict.fastest_rivals)
        # never forward+backward below forward: such a time is left out, and the sentence says so
        checks = bench.size_checks(size)
        shown_fb = cells(raw)[t("fwd+bwd ms")].tolist()
        for r, cell in zip(size["results"], shown_fb, strict=True):
            ordered = r["variant"] not in checks["unordered"]
            assert (cell == "—") == (not ordered)
            if ordered:
                assert cell == num(r["forward_backward_ms"], 2, "en") and r["forward_backward_ms"] > r["forward_ms"]
        assert cells(raw)[t("stable")].tolist() == ["✗" if r["variant"] in checks["unstable"] else "✓"
                                                   for r in size["results"]]
        if checks["unordered"]:
            assert any(t("For {variants} this run timed").format(variants=format_list(checks["unordered"], locale="en"))
                       in x for x in shown)
        np.testing.assert_allclose(table[t("forward ms")].astype(float), [r["forward_ms"] for r in size["results"]])
        assert (table[t("max |out − split|")].astype(float) < 1e-4).all()
        assert any(x.startswith(t("**Input {size}**").format(size=size_name(size))) for x in shown)
    # under each table a sentence says whichever construction this file found faster, or that the gap is within
    # the run's noise, in the file's order
    assert verdicts_shown(shown) == [outcome(sections.bench_verdict(size)) for size in data["sizes"]]
    check_shipped_benchmark_words(at, "en")
    # every variant's name is explained in one line, in the order of the benchmark's variants
    explained = [x for x in shown if x.startswith("- `wrapper`:")]
    assert len(explained) == 1 and [line.split("`")[1] for line in explained[0].splitlines()] == list(bench.VARIANTS)
    titles = [t("Time per call · {size}").format(size=size_name(size)) for size in data["sizes"]]
    bars = [f for f in figures(at) if plain(f["layout"]["title"]["text"]) in titles]
    assert len(bars) == len(data["sizes"])
    assert bars[0]["data"][0]["y"] == [r["variant"] for r in data["sizes"][0]["results"]]


def test_live_measurement(at, monkeypatch):
    monkeypatch.setattr(bench, "SMALL", bench.TINY)
    at.button(key="mh_bench_rerun").click().run()
    assert not at.exception
    live = bench_tables(at)[-1]
    assert list(live[t("variant")]) == list(bench.VARIANTS)
    assert (live[t("forward ms")].astype(float) > 0).all()
    assert (live[t("max |out − split|")].astype(float) < 1e-5).all()
    tiny = size_name({"batch": bench.TINY.batch, "seq_len": bench.TINY.seq_len, "n_embd": bench.TINY.n_embd,
                      "num_heads": bench.TINY.num_heads})
    assert any(tiny in x for x in texts(at))
    at.number_input(key="mh_seed").set_value(7).run()  # a later rerun keeps the live result
    assert any(tiny in x for x in texts(at))


def timed_size(label: str, wrapper_runs, split_runs, sdpa_runs=(0.5, 0.6, 0.7)) -> dict:
    """A crafted benchmark entry: the wrapper's and the split layer's forward runs in ms, an SDPA row with the
    lowest median."""
    runs = {"wrapper": wrapper_runs, "split": split_runs, "sdpa_causal": list(sdpa_runs)}
    results = [{"variant": name, "description": name, "forward_ms": float(np.median(r)),
                "forward_min_ms": min(r), "forward_samples_ms": r, "forward_backward_ms": None,
                "max_abs_diff_vs_split": 0.0} for name, r in runs.items()]
    return {"batch": 1, "seq_len": 7, "n_embd": 12, "num_heads": 3, "note": "", "label": label, "results": results}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_verdict_sentence_for_each_outcome(monkeypatch, lang):
    """Page 5 section 4: a crafted run per outcome (equal within noise, wrapper faster, split faster) gets its
    own sentence, filled with its medians and quartiles in the reader's format; the fastest variant is named
    only beyond the noise of every other one, else the variants within its noise are."""
    sizes = [timed_size("equal", [10.0, 50.0, 100.0, 300.0, 400.0], [20.0, 60.0, 102.0, 250.0, 500.0]),
             timed_size("wrapper", [10.0, 11.0, 12.0, 13.0, 14.0], [30.0, 31.0, 32.0, 33.0, 34.0]),
             timed_size("split", [30.0, 31.0, 32.0, 33.0, 34.0], [10.0, 11.0, 12.0, 13.0, 14.0]),
             # SDPA's lowest median, 11 ms, with runs spread over both others' medians (quartiles 2 and 200)
             timed_size("noisy", [10.0, 11.0, 12.0, 13.0, 14.0], [30.0, 31.0, 32.0, 33.0, 34.0],
                        [1.0, 2.0, 11.0, 200.0, 210.0])]
    data = {"benchmark": "attention", "created": "2026-01-02", "machine": {"cpu": "test"},
            "settings": {"repeats": 5}, "sizes": sizes}
    monkeypatch.setattr(bench, "SMALL", bench.BenchSize(1, 7, 12, 3))  # a size no other test caches
    monkeypatch.setattr(bench, "run_benchmark", lambda *args, **kwargs: data)
    app = open_page(PAGE, 60, lang=lang)
    app.button(key="mh_bench_rerun").click().run()
    assert not app.exception
    shown = texts(app)
    shipped = bench.load_results(ROOT / "assets" / "bench_attention.json")["sizes"]
    assert verdicts_shown(shown, lang)[len(shipped):] == ["equal", "wrapper", "split", "wrapper"]
    ends = [fastest_sentence(sections.bench_verdict(size), lang) for size in sizes]
    gettext = translations(lang).gettext
    column = gettext(IQR_COLUMN)
    assert ends[-1] == gettext(WITHIN_NOISE_RULE).format(
        variant="sdpa_causal", ms=num(11.0, 2, lang), rivals=format_list(["wrapper", "split"], locale=lang),
        iqr=interval((2.0, 200.0), lang), column=column)
    assert ends[:-1] == [gettext(FASTEST_RULE).format(variant="sdpa_causal", ms=num(0.6, 2, lang),
                                                      iqr=interval((0.55, 0.65), lang), column=column)] * 3
    verdict_texts = [x for x in shown if verdicts_shown([x], lang)][len(shipped):]
    assert [x.endswith(" " + end) for x, end in zip(verdict_texts, ends, strict=True)] == [True] * 4
    # the rule, applied to the cells the reader reads, gives the verdict's list
    live_tables = [tb for tb in app.table if gettext("variant") in tb.value.columns][len(shipped):]
    for table, text in zip(live_tables, verdict_texts, strict=True):
        check_rule_on_the_table(cells(table), text, lang)
    equal = sections.bench_verdict(sizes[0])
    # the times and quartiles with the table's two decimals
    assert gettext(VERDICTS["equal"]).format(
        wrapper=num(100.0, 2, lang), split=num(102.0, 2, lang), wrapper_q1=num(50.0, 2, lang),
        wrapper_q3=num(300.0, 2, lang), split_q1=num(60.0, 2, lang), split_q3=num(250.0, 2, lang)) in " ".join(shown)
    assert equal.wrapper_iqr == (50.0, 300.0) and equal.split_iqr == (60.0, 250.0)
    assert any(gettext(VERDICTS["split"]).format(ratio=num(32.0 / 12.0, 2, lang), split=num(12.0, 2, lang),
                                                 wrapper=num(32.0, 2, lang)) in x for x in shown)


@pytest.mark.parametrize("lang", TRANSLATED)
def test_other_languages_same_checks(lang):
    app = open_page(PAGE, 60, lang=lang)
    assert not app.exception
    assert len(badges(app, "green")) == 6 and not badges(app, "red")
    assert len(heads_figure(app, lang)["data"]) == 4
    check_shipped_benchmark_words(app, lang)


# --- the diagram ---------------------------------------------------------------------------------------


def diagram(at, i: int = 0) -> str:
    """The DOT source of the page's ``i``-th graphviz chart."""
    charts = at.get("graphviz_chart")
    assert len(charts) > i
    return charts[i].proto.spec


def run_shapes(n_embd: int, heads: int) -> dict[str, str]:
    """The shapes the engine prints for the lesson line at these sizes (step -> "(…)")."""
    run = sections.heads_on_line(n_embd=n_embd, num_heads=heads)
    return dict(zip(run.shapes["step"], run.shapes["shape"], strict=True))


def both(at) -> str:
    """The two halves' DOT sources (wrapper, weight splits), joined."""
    assert len(at.get("graphviz_chart")) == 2
    wrapper, split = diagram(at, 0), diagram(at, 1)
    assert "MultiHeadAttentionWrapper" in wrapper and "cluster_split" not in wrapper
    assert "cluster_split" in split and "cluster_wrapper" not in split
    return wrapper + split


def test_diagram_follows_num_heads(at):
    before = both(at)
    four = run_shapes(32, 4)
    assert four["q_heads"] in before and four["input"] in before and four["context_vec"] in before
    at.select_slider(key="mh_heads").set_value(8).run()
    assert not at.exception
    spec = both(at)
    eight = run_shapes(32, 8)
    assert eight["q_heads"] != four["q_heads"]
    assert eight["q_heads"] in spec and four["q_heads"] not in spec
    assert eight["attn_scores"] in spec


@pytest.mark.parametrize(("n_embd", "heads"), [(8, 1), (8, 8), (64, 64)])
def test_diagram_builds_at_the_extremes(at, n_embd, heads):
    at.selectbox(key="mh_n_embd").set_value(n_embd).run()
    at.select_slider(key="mh_heads").set_value(heads).run()
    assert not at.exception
    spec = both(at)
    shapes = run_shapes(n_embd, heads)
    assert shapes["q_heads"] in spec and shapes["context_vec"] in spec and shapes["attn_scores"] in spec
    assert f"nn.Linear({n_embd}, {n_embd})" in spec


@pytest.mark.parametrize("lang", TRANSLATED)
def test_diagram_builds_in_french_and_german(lang):
    other = open_page(PAGE, 60, lang=lang)
    assert not other.exception
    assert run_shapes(32, 4)["q_heads"] in both(other)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_every_chart_and_diagram_has_a_text_alternative_with_its_values(lang):
    """Issue 25: a reader without sight gets what each chart shows and its key values, in their language."""
    app = open_page(PAGE, 60, lang=lang)
    charts = app.get("plotly_chart")
    assert charts and all(c.proto.alt.strip() for c in charts)
    wrapper_alt = next(c.proto.alt for c in charts if c.proto.id.endswith("mh_wrapper_chart"))
    first = sections.wrapper_output(chapter.MHA_WRAPPER_SEED).context_vec[0, 0]
    assert " · ".join(num(float(v), 4, lang) for v in first) in wrapper_alt


def test_split_diagram_is_named_after_the_module_that_ran(at):
    """Section 3's second diagram draws the lesson's layer (one qkv Linear): it is named so, not after the chapter's
    MultiHeadAttention, which computes q, k and v in three."""
    split = html.unescape(diagram(at, 1))  # DOT's HTML labels escape the apostrophe
    assert sections.heads_on_line().layers.fused
    assert "the lesson's layer: one qkv Linear" in split
    assert "MultiHeadAttention (weight splits)" not in split
