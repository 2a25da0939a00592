"""``python -m engine.bench docs``: writes ``docs/performance.md`` from the benchmarks' results files.

Every benchmark stores its numbers with the machine it ran on in ``assets/bench_<name>.json``; this command
turns those files into the performance document, so the document says what the files say and nothing else
(``--check`` exits 1 when the committed document differs from what the files give; a test does the same).
A results file without a renderer of its own still gets its machine and date, so a new benchmark's file is
never left out silently. Nothing is measured here.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from engine.bench.machine import isa_line

#: Not a measurement: the dispatcher prints no machine line for it.
PRINTS_MACHINE = True

ROOT = Path(__file__).resolve().parents[2]
ASSETS = ROOT / "assets"
OUT = ROOT / "docs" / "performance.md"

#: The command that writes each results file, in the document's order.
COMMANDS = {
    "attention": "python -m engine.bench attention --json assets/bench_attention.json",
    "train": "python -m engine.bench train --json assets/bench_train.json",
    "generate": "python -m engine.bench generate --json assets/bench_generate.json",
    "load": "python -m engine.bench load --json assets/bench_load.json",
    "load_limited": "python -m engine.bench load --readers 30 --trainers 5 --minutes 12 --settings same own "
                    "--memory-limit-mb 600 --json assets/bench_load_limited.json",
    "load_unlimited": "python -m engine.bench load --readers 30 --trainers 5 --minutes 12 --settings same "
                      "--json assets/bench_load_unlimited.json",
    "load_busy": "python -m engine.bench load --busy-cores 1 --json assets/bench_load_busy.json",
    "load_profile": "python -m engine.bench load --readers 30 --trainers 5 --minutes 8 --settings same --profile "
                    "--json assets/bench_load_profile.json",
    "load_compare_first": "python -m engine.bench load --readers 30 --trainers 5 --minutes 8 --settings same "
                          "--variant before <checkout of b5c26e9> --variant cuts <checkout of 11efc9e> "
                          "ATTENTION_TRAINING_NICE=0 --variant nice <the same checkout> ATTENTION_TRAINING_NICE=10 "
                          "--json assets/bench_load_compare_first.json",
    "load_compare": "python -m engine.bench load --readers 30 --trainers 5 --minutes 8 --settings same --variant "
                    "before <checkout of b5c26e9> --variant cuts <checkout of 1dcd42c> ATTENTION_TRAINING_NICE=0 "
                    "--variant nice <the same checkout> --json assets/bench_load_compare.json",
    "load_compare_avx512": "python -m engine.bench load --readers 30 --trainers 5 --minutes 8 --settings same "
                           "--variant before <checkout of b5c26e9> --variant cuts <checkout of 1dcd42c> "
                           "ATTENTION_TRAINING_NICE=0 --variant nice <the same checkout> "
                           "--json assets/bench_load_compare_avx512.json",
    "load_switch": "python -m engine.bench load --readers 30 --trainers 5 --minutes 8 --settings same "
                   "--variant switch <checkout of b601c68> --variant cuts <checkout of 1dcd42c> "
                   "ATTENTION_TRAINING_NICE=0 --variant switch-again <checkout of b601c68> "
                   "--json assets/bench_load_switch.json",
    "queue": "python -m engine.bench queue --policies 2,1 --json assets/bench_queue.json",
    "preset": "python -m engine.bench queue --trainers 3 --policies 1 --steps N (one run per candidate)",
    "notebook": "python -m engine.bench notebook --json assets/bench_notebook.json",
    "pages": "python -m engine.bench pages --browser --json assets/bench_pages.json",
    "gates": "python -m tools.bench_gates",
}


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def _machine(data: dict) -> str:
    """One line: where and when a results file was measured."""
    m = data.get("machine", {})
    if isinstance(m, str):  # the page benchmarks store the CPU's name only
        return f"Measured on {m}."
    load = m.get("load_average_1min")
    end = m.get("load_average_1min_end", m.get("load_average_1min_after"))
    load_text = "?" if load is None else f"{load:.1f}" + ("" if end is None else f" → {end:.1f}")
    ceiling = m.get("matmul_ceiling_gflops")
    if isinstance(ceiling, dict) and ceiling.get("after") is None:  # printed at the start only
        ceiling_text = f"; fp32 matmul ceiling {ceiling['before']:.0f} GFLOP/s at the start of the run"
    elif isinstance(ceiling, dict):
        ceiling_text = f"; fp32 matmul ceiling {ceiling['before']:.0f} → {ceiling['after']:.0f} GFLOP/s in the run"
    else:
        ceiling_text = ""
    created = data.get("created", "")[:10]
    return (f"Measured {created + ' ' if created else ''}on {m.get('cpu', '?')}, {m.get('cores', '?')} cores, "
            f"{isa_line(m)}, torch {m.get('torch', '?')} with {m.get('torch_threads', '?')} thread(s), "
            f"load average {load_text}{ceiling_text}.")


def attention(data: dict) -> list[str]:
    """The multi-head implementations, per size, and the book's class timed beside ours."""
    s = data["settings"]
    lines = [f"Median of {s['repeats']} interleaved rounds ({s['dtype']}); forward and forward+backward, ms. "
             "A busy machine inflates the medians: the ratios within a round are the numbers to read.", ""]
    for size in data["sizes"]:
        lines += [f"**{size['label']}**" + (f" ({size['note']})" if size.get("note") else ""), "",
                  "| variant | what it is | forward ms | forward+backward ms | max abs diff vs split |",
                  "| --- | --- | ---: | ---: | ---: |"]
        book = size.get("book_reference")
        for r in [*size["results"], *([book] if book else [])]:
            lines.append(f"| `{r['variant']}` | {r['description']} | {_ms(r['forward_ms'])} | "
                         f"{_ms(r['forward_backward_ms'])} | {r['max_abs_diff_vs_split']:.1e} |")
        if book:
            lines += ["", f"Ours over the book's class, median of the back-to-back ratios: "
                          f"{book['split_over_book_forward_paired']:.2f}× forward, "
                          f"{book['split_over_book_forward_backward_paired']:.2f}× forward+backward."]
        lines.append("")
    return lines


def train(data: dict) -> list[str]:
    """Training throughput of a preset by dropout setting, and how a step's time grows with T."""
    c = data["config"]
    rows = {(r["attn_dropout"], r["resid_dropout"]): r for r in data["t_scaling"]}
    lines = [f"Preset `{data['preset']}` (n_embd {c['n_embd']}, {c['n_head']} heads, {c['n_layer']} layers, "
             f"block_size {c['block_size']}), {data['timed_steps']} timed steps after {data['warmup_steps']}; "
             f"ceiling {data['ceiling_gflops']['mean']:.0f} GFLOP/s (matmul n={data['matmul_n']}).", "",
             "| attention / residual dropout | batch | tokens/s | % of ceiling | step time ∝ T^k (k) |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for r in data["rows"]:
        scaling = rows.get((r["attn_dropout"], r["resid_dropout"]))
        k = "" if scaling is None else (f"{scaling['exponent']:.2f} "
                                        f"(T={scaling['seq_lens'][0]}…{scaling['seq_lens'][-1]})")
        lines.append(f"| {r['attn_dropout']:g} / {r['resid_dropout']:g} | {r['batch_size']} | "
                     f"{r['tokens_per_s']:,.0f} | {r['pct_of_ceiling']:.1f} % | {k} |")
    return [*lines, ""]


def generate(data: dict) -> list[str]:
    """Generation with and without the KV cache, same tokens."""
    c = data["config"]
    model = Path(str(data.get("model", "?"))).name  # the folder's name, never a machine's path
    lines = [f"Model `{model}` (n_embd {c['n_embd']}, {c['n_layer']} layers, block_size {c['block_size']}, "
             f"vocabulary {c['vocab_size']}), {data['settings']['statistic']} of {data['settings']['repeats']}.", "",
             "| case | new tokens | uncached ms | cached ms | speed-up | same tokens (greedy, sampled) |",
             "| --- | ---: | ---: | ---: | ---: | --- |"]
    for name, r in data["results"].items():
        same = r.get("same_tokens", {})
        lines.append(f"| {name.replace('_', ' ')} | {r['new_tokens']} | {_ms(r['uncached_ms'])} | "
                     f"{_ms(r['cached_ms'])} | {r['speedup']:.2f}× | "
                     f"{'yes' if same.get('greedy') else 'no'}, {'yes' if same.get('sampled') else 'no'} |")
    return [*lines, ""]


def _unfinished(row: dict) -> str:
    """``2: 71 %, queued`` from a class's unfinished trainings and their bars' last values (older runs: the count)."""
    at = row.get("trainings_unfinished_at")
    if not row["trainings_unfinished"] or at is None:
        return f"{row['trainings_unfinished']}"
    return f"{row['trainings_unfinished']}: " + ", ".join("queued" if p is None else f"{p} %" for p in at)


def _variant_cell(row: dict, speed: bool = True) -> str:
    """A row's variant: its label, its checkout's folder and the variables it gave the server (and the machine's
    matmul ceiling before its class, with ``speed``, where the row has it)."""
    v = row["variant"]
    env = " ".join(f"`{name}={value}`" for name, value in v["env"].items())
    ceiling = row.get("matmul_ceiling_gflops")
    speed = "" if ceiling is None or not speed else f"; ceiling {ceiling:.0f} GFLOP/s before it"
    return f"{v['label']} ({v['app_root']}{', ' + env if env else ''}{speed})"


def _moves_by_page(data: dict) -> list[str]:
    """A table of the moves' p50 / p95 by page and class (``moves_by_page``), or nothing when no row has them."""
    rows = [r for r in data["classes"] if r.get("moves_by_page")]
    if not rows:
        return []
    pages = sorted({path for r in rows for path in r["moves_by_page"]})
    names = [_variant_cell(r, speed=False) if "variant" in r else f"{r['readers']} readers" for r in rows]
    lines = ["", "What a move took on each page (p50 / p95 s, and the moves over 1 s), as the class saw it: the "
             "page's own run and its wait for the others'.", "",
             "| page | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(rows)]
    for path in pages:
        cells = []
        for r in rows:
            m = r["moves_by_page"].get(path)
            cells.append("—" if m is None else f"{m['p50_s']} / {m['p95_s']} ({m['over_1s']} of {m['moves']})")
        lines.append(f"| {path} | " + " | ".join(cells) + " |")
    return lines


def load(data: dict) -> list[str]:
    """A class of readers on one server (``tools.bench_load``'s format)."""
    busy = data.get("busy_cores", 0)
    variants = any("variant" in r for r in data["classes"])
    lines = [f"{data['trainers']} trainers per class (their settings: \"own\", each a seed of its own; \"same\", "
             "all the page's defaults, so that they follow one training), "
             f"a move every {data['think_s']:g} s on average, "
             f"readers arriving over {data['arrival_s']:g} s, each class {data['minutes']:g} min"
             + (f"; {busy} of the machine's cores kept busy by other work (a matmul loop each) the whole run."
                if busy else "."), "",
             f"| {'variant | ' if variants else ''}readers | trainers' settings | peak MB (before the class) | "
             "per-minute peaks MB | moves p50 / p95 s (> 1 s) | trainings s (unfinished: their bar at the end) | "
             "below the bigram s | load |",
             f"| {'--- | ' if variants else ''}---: | --- | --- | --- | --- | --- | --- | --- |"]
    for r in data["classes"]:
        before = r.get("before_class_mb")
        peak = f"{r['class_peak_mb']:.0f}" + ("" if before is None else f" ({before:.0f})")
        settings = "same" if r.get("same_settings") else "own"
        lines.append(f"| {_variant_cell(r) + ' | ' if variants else ''}{r['readers']} | {settings} | {peak} | "
                     f"{' '.join(f'{v:.0f}' for v in r['per_minute_peak_mb'])} | "
                     f"{r['move_p50_s']} / {r['move_p95_s']} ({r['moves_over_1s']} of {r['moves']}) | "
                     f"{' '.join(f'{t:.0f}' for t in r['trainings_s']) or '—'} ({_unfinished(r)}) | "
                     f"{' '.join('—' if t is None else f'{t:.0f}' for t in r.get('bigram_s', [])) or '—'} | "
                     f"{r['load_average']['before'][0]}–{r['load_average']['after'][0]} |")
    for r in data["classes"]:
        limit = r.get("memory_limit")
        if limit:
            settings = "same" if r.get("same_settings") else "own"
            lines += ["", f"The class of {r['readers']} (\"{settings}\") ran with the server under a hard memory "
                      f"limit of {limit['limit_mb']} MB (a cgroup {limit['cgroup']}, as a container holds an app): the "
                      f"group's charged peak {_s(limit['charged_peak_mb'])} MB (pages of files read from disk "
                      f"included), the limit reached {limit['limit_hits']:,} times, {limit['oom_kills']} processes "
                      "killed."]
    for r in data["classes"]:
        gil = r.get("gil") or {}
        if gil.get("by_area"):
            settings = "same" if r.get("same_settings") else "own"
            lines += ["", f"Where the server's interpreter lock went while the class of {r['readers']} "
                      f"(\"{settings}\") worked (py-spy, {gil['rate_hz']} samples a second of the thread holding "
                      f"it): held {gil['held_share']:.0%} of the class's {r['wall_s']:,.0f} s, of which "
                      + "; ".join(f"{area} {share:.0%}" for area, share in gil["by_area"].items()) + "."]
    return [*lines, *_moves_by_page(data), ""]


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def queue(data: dict) -> list[str]:
    """Trainings submitted at once under each queue policy (``engine.bench.queue``'s format)."""
    lines = [f"{data['trainers']} one-click trainings (`{data['preset']}`, {data['steps']:,} steps, corpus "
             f"{data['corpus']}) submitted at once; bigram val loss {data['bigram_val']:.4f}; cap {data['cap_s']} s of "
             "training. Seconds; \"click\" counts from the click, \"train\" from the job's first step; the estimate's "
             "error is the time-left estimate over the time then really left, minus 1.", "",
             "| slots | seed | wait | bigram (train / click) | end (train / click) | steps | val loss | "
             "estimate error at 10 / 25 / 50 % |", "| ---: | ---: | ---: | --- | --- | --- | ---: | --- |"]
    for policy in data["policies"]:
        for j in policy["jobs"]:
            found = j["estimate_errors"]
            errors = " / ".join("—" if found.get(k) is None else f"{100 * found[k]:+.0f} %"
                                for k in ("0.10", "0.25", "0.50"))
            val = "—" if j["final_val_loss"] is None else f"{j['final_val_loss']:.3f}"
            lines.append(f"| {policy['max_concurrent']} | {j['seed']} | {_s(j['wait_s'])} | "
                         f"{_s(j['bigram_training_s'])} / {_s(j['bigram_click_s'])} | {_s(j['training_s'])} / "
                         f"{_s(j['end_s'])} | {j['steps_done']:,} of {j['steps']:,} | {val} | {errors} |")
    lines += ["", "| slots | last end s | mean end s |", "| ---: | ---: | ---: |"]
    lines += [f"| {p['max_concurrent']} | {p['makespan_s']:,.0f} | {p['mean_end_s']:,.0f} |" for p in data["policies"]]
    return [*lines, ""]


def preset(data: dict) -> list[str]:
    """The one-click preset's candidates over several seeds (runs of ``engine.bench queue``, one at a time)."""
    lines = [f"{data['what'][0].upper()}{data['what'][1:]}; corpus {data['corpus']}, bigram val loss "
             f"{data['bigram_val']:.4f}. Seconds of training.", "",
             "| steps | seed | below the bigram (step, s) | end s | val loss at the end |",
             "| ---: | ---: | --- | ---: | ---: |"]
    for c in data["candidates"]:
        for j in c["jobs"]:
            below = "—" if j["bigram_step"] is None else f"{j['bigram_step']:,}, {j['bigram_training_s']:.0f}"
            lines.append(f"| {c['steps']:,} | {j['seed']} | {below} | {j['training_s']:.0f} | "
                         f"{j['final_val_loss']:.3f} |")
    return [*lines, ""]


def lab_notebook(data: dict) -> list[str]:
    """The Lab's notebook run top to bottom (``tools.bench_notebook``'s format)."""
    r = data["notebook"]
    model, training = r.get("model") or {}, r.get("training") or {}

    def nats(value) -> str:
        return "—" if value is None else f"{value:.4f}"

    early = ("ran all its steps" if r["stopped_early_at"] is None
             else f"stopped early at step {r['stopped_early_at']:,}")
    lines = [f"Built by the Lab page's button with its defaults ({data.get('lang', 'en')}): a slice of "
             f"{r['records']:,} poems, n_layer {model.get('n_layer', '?')}, n_embd {model.get('n_embd', '?')}, "
             f"block_size {model.get('block_size', '?')}, {training.get('steps', 0):,} steps of batch "
             f"{training.get('batch_size', '?')}; executed with nbclient on a fresh kernel in an empty folder.", "",
             "| whole run s | training cell s | val loss first / best / last | bigram / unigram (the slice) | "
             "the training |", "| ---: | ---: | --- | --- | --- |",
             f"| {r['wall_s']:,.0f} | {r['training_cell_s'] or 0:,.0f} | {nats(r['first_val'])} / "
             f"{nats(r['best_val'])} / {nats(r['last_val'])} | {nats(r['bigram_val'])} / "
             f"{nats(r['unigram_val'])} | {early} |", ""]
    return lines


def gates(data: dict) -> list[str]:
    """Page 1's first visit with the prediction gates on and off (``tools.bench_gates``' format)."""
    load = " ".join(f"{v:.1f}" for v in data.get("load_average", []))
    lines = [f"{data['what']}; {data['loads']} loads each at {data['width']} px, load average {load or '?'}, "
             f"measured {data.get('measured', '?')}.", "",
             "| gates | first words ms | first chart ms |", "| --- | ---: | ---: |"]
    for label, key in (("on", "predict_on"), ("off", "predict_off")):
        lines.append(f"| {label} | {data[key]['first_words_ms']:,} | {data[key]['first_chart_ms']:,} |")
    per_page = ", ".join(f"{page.replace('_', ' ')} {n}" for page, n in data.get("gates_per_page", {}).items())
    return [*lines, "", f"Gates per page: {per_page}.", ""]


#: Renderers by benchmark name; a file whose name has none gets its machine line only.
RENDERERS: dict[str, Callable[[dict], list[str]]] = {"attention": attention, "train": train,
                                                      "generate": generate, "load": load, "load_limited": load,
                                                      "load_unlimited": load,
                                                      "load_busy": load, "load_profile": load,
                                                      "load_compare_first": load, "load_compare": load,
                                                      "load_compare_avx512": load, "load_switch": load,
                                                      "queue": queue,
                                                      "preset": preset, "notebook": lab_notebook, "gates": gates}
TITLES = {"attention": "Attention implementations", "train": "Training throughput",
          "generate": "Generation and the KV cache", "load": "A class on one server",
          "load_limited": "A class on one server under a container's memory limit",
          "load_unlimited": "The class of the memory limit's machine, without the limit",
          "load_busy": "A class on one server busy with other work",
          "load_profile": "Where a class's time goes on the server",
          "load_compare_first": "Cutting a move's cost, and the training's priority: page 7's cuts",
          "load_compare": "Cutting a move's cost, and the training's priority: pages 4 and 7, nice 10 by default",
          "load_compare_avx512": ("Cutting a move's cost, and the training's priority: the same "
                                  "three on a machine with AVX-512 (nice 10 by default at 1dcd42c)"),
          "load_switch": "The interpreter's switch interval at 1 ms (b601c68, not kept) against CPython's 5 ms",
          "queue": "Trainings at once: the queue's policy", "preset": "The one-click preset over several seeds",
          "notebook": "The Lab's notebook, run top to bottom", "pages": "Pages in the browser",
          "gates": "Prediction gates on a first visit"}


def render(assets: Path = ASSETS) -> str:
    """The whole document from the ``bench_*.json`` files in ``assets``.

    Raises:
        ValueError: if a results file is not JSON (its name is in the message).
    """
    files = sorted(assets.glob("bench_*.json"), key=lambda p: (list(COMMANDS).index(p.stem[6:])
                                                               if p.stem[6:] in COMMANDS else len(COMMANDS), p.name))
    lines = ["# Performance", "",
             "<!-- Generated by `python -m engine.bench docs` from assets/bench_*.json: edit those, not this. -->", "",
             "Every benchmark prints numbers and writes them, with the machine it ran on, to",
             "`assets/bench_<name>.json`; this page is made from those files. Times depend on the machine and on what",
             "else it runs: compare versions on one machine, and read ratios measured in one run rather than absolute",
             "milliseconds.", ""]
    for path in files:
        name = path.stem[len("bench_"):]
        try:
            data = json.loads(path.read_text("utf-8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path.name} is not JSON: {err}") from err
        lines += [f"## {TITLES.get(name, name)}", "",
                  f"`{COMMANDS.get(name, f'python -m engine.bench {name}')}` → `assets/{path.name}`. "
                  + _machine(data), ""]
        lines += RENDERERS.get(name, lambda _d: [])(data)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m engine.bench docs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/performance.md is not up to date")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        committed = OUT.read_text("utf-8") if OUT.exists() else ""
        if committed != text:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python -m engine.bench docs", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, "utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
