"""The README and docs/ stand alone in a clone: the README stays short, every link and every repository path they
name exists, and no machine's path or file outside the repository is written into them."""

import json
import math
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "assets").glob("*/README.md")])
#: Top-level entries a path written in a document may start with (others are commands' outputs, e.g. runs/).
TOP = ("engine", "ui", "views", "tests", "tools", "assets", "docs", "deploy", "content", "locales", ".streamlit", ".ci")
MACHINE_PATH = re.compile(r"(^|[^A-Za-z0-9_.])/(home|root|tmp|work|Users)/")


def _names(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def test_the_readme_is_for_readers_and_teachers():
    text = (ROOT / "README.md").read_text("utf-8")
    assert len(text.splitlines()) <= 150
    first_screen = "\n".join(text.splitlines()[:20])
    assert "docs/teaching.md" in first_screen
    for command in ("make run", "make test", "make check"):
        assert command in text


@pytest.mark.parametrize("doc", DOCS, ids=_names)
def test_nothing_outside_the_repository(doc):
    text = doc.read_text("utf-8")
    assert "../shared" not in text and not MACHINE_PATH.search(text)


@pytest.mark.parametrize("doc", DOCS, ids=_names)
def test_every_link_and_named_path_exists(doc):
    text = doc.read_text("utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if not re.match(r"[a-z]+:", target) and not (doc.parent / target).exists():
            missing.append(target)
    for token in re.findall(r"`([^`\s]+)`", text):
        path = token.rstrip(".,;:")
        if (path.split("/", 1)[0] in TOP and "/" in path and not re.search(r"[<>*{}]", path)
                and not (ROOT / path).exists()):
            missing.append(path)
    assert not missing, f"{_names(doc)} names what the repository does not have: {missing}"


def test_the_model_card_states_what_the_checkpoint_holds():
    card = (ROOT / "assets" / "models" / "README.md").read_text("utf-8")
    summary = json.loads((ROOT / "assets" / "models" / "course_tang" / "checkpoint.json").read_text("utf-8"))["summary"]
    train = summary["train_config"]
    for fact in (f"train {summary['final_train_loss']:.3f} / validation {summary['final_val_loss']:.3f} nats",
                 f"{train['steps']:,} steps of batch {train['batch_size']}".replace(",", " "),
                 f"peak learning rate {train['learning_rate']:g}", f"seed {train['seed']}",
                 f"{summary['wall_s']:,.0f} s of training".replace(",", " ")):
        assert fact in card, fact
    listing = card.split("```bash")[1].split("```")[0]
    assert listing.replace("\\\n", " ").split() == summary["command"].split()  # the command, as it ran


def test_the_teachers_class_case_is_the_load_benchmarks():
    """The class case the teacher's page states is the one in assets/bench_load.json: the peak, the moves, the
    trainings' ends and their bigram crossings, for the class that kept the defaults and for the one that did not."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "teaching.md").read_text("utf-8"))
    data = json.loads((ROOT / "assets" / "bench_load.json").read_text("utf-8"))
    rows = {("same" if r.get("same_settings") else "own"): r for r in data["classes"]}
    same, own = rows["same"], rows["own"]

    def span(values):
        return f"{min(values):.0f}–{max(values):.0f} s"

    each = len(same["trainings_s"]) // data["trainers"]  # trainings per follower, listed follower after follower
    later = [t for i, t in enumerate(same["bigram_s"]) if i % each]  # each follower's trainings after their first
    assert f"ended {span(same['trainings_s'])} after the click" in text
    assert f"below the bigram line {span(later)} after it" in text
    assert f"{same['move_p95_s']:.2f} s at the 95th percentile ({same['moves_over_1s']} of {same['moves']:,}" \
        .replace(",", " ") in text
    assert ", ".join(f"{t:.0f}" for t in own["trainings_s"][:-1]) + f" and {own['trainings_s'][-1]:.0f} s" in text
    assert f"peaked at {max(same['peak_mb'], own['peak_mb']):.0f} MB" in text
    assert f"({same['before_class_mb']:.0f} MB before the class" in text
    assert len(same["bigram_s"]) == len(same["trainings_s"]) and same["trainings_unfinished"] == 0


def test_the_teachers_notebook_figures_are_the_notebook_benchmarks():
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "teaching.md").read_text("utf-8"))
    run = json.loads((ROOT / "assets" / "bench_notebook.json").read_text("utf-8"))["notebook"]
    assert f"a slice of {run['records']:,} poems".replace(",", " ") in text
    assert f"top to bottom in {run['wall_s']:.0f} s" in text
    assert f"ended {run['bigram_val'] - run['last_val']:.2f} nats below the slice's bigram line" in text
    assert run["last_below_bigram"] and run["last_val"] < run["first_val"] - 1


def test_the_teachers_queue_figures_are_the_queue_benchmarks():
    """The one-click training's times and the two policies' last ends on the teacher's page are those of
    assets/bench_queue.json, and the estimate before the click is the upper bound the page calls it."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "teaching.md").read_text("utf-8"))
    data = json.loads((ROOT / "assets" / "bench_queue.json").read_text("utf-8"))
    policies = {p["max_concurrent"]: p["jobs"] for p in data["policies"]}
    jobs = [j for js in policies.values() for j in js]

    def span(values):
        return f"{min(values):.0f}–{max(values):.0f} s"

    assert f"took {span([j['training_s'] for j in jobs])}" in text
    assert f"after {span([j['bigram_training_s'] for j in jobs])} of training" in text
    assert f"ended after {max(j['end_s'] for j in policies[1]):.0f} s with one at a time" in text
    assert f"(the fifth waited {max(j['wait_s'] for j in policies[1]):.0f} s)" in text
    assert f"after {max(j['end_s'] for j in policies[2]):.0f} s with two at a time" in text
    assert all(j["state"] == "done" and j["final_val_loss"] < data["bigram_val"] for j in jobs)
    worst = max(abs(e) for j in jobs for e in j["estimate_errors"].values())
    assert f"within {math.ceil(worst * 100)} % of the truth from a tenth of the steps on" in text
    before = [1 + j["estimate_before_error"] for j in jobs]  # the estimate over the time it really took
    assert min(before) > 1 and f"{min(before):.1f} to {max(before):.1f} times too long" in text


def _same_class(name: str, variant: str | None = None) -> tuple[dict, dict]:
    """A load benchmark file's machine and its "same" class (of ``variant``, where the file compares variants)."""
    data = json.loads((ROOT / "assets" / f"{name}.json").read_text("utf-8"))
    same = next(r for r in data["classes"] if r.get("same_settings")
                and (variant is None or r["variant"]["label"] == variant))
    return data["machine"], same


#: The teacher's table: (file, variant, what the row adds to its machine). "cuts" is the current version: the cuts
#: of pages 4 and 7 with the training at the server's priority (jobs.DEFAULT_TRAINING_NICE).
TEACHERS_ROWS = (("bench_load_compare_avx512", "cuts", ""), ("bench_load_compare", "cuts", ""),
                 ("bench_load", None, ", an earlier version"),
                 ("bench_load_limited", None, ", 600 MB memory limit, an earlier version"))


def test_the_teachers_machines_table_is_the_load_benchmarks():
    """Each row of the teacher's table of machines is the "same" class of one load benchmark file: its kernels, its
    ceiling (just before the class where the file has it, else at the start of the run), its students, its peak, its
    moves' median and 95th percentile and its trainings."""
    from engine.lab import jobs

    assert jobs.DEFAULT_TRAINING_NICE == 0  # the rows' "cuts" variant ran with ATTENTION_TRAINING_NICE=0
    text = (ROOT / "docs" / "teaching.md").read_text("utf-8")
    for name, variant, suffix in TEACHERS_ROWS:
        machine, same = _same_class(name, variant)
        kernels = machine["torch_cpu_capability"].replace("AVX512", "AVX-512")
        ceiling = same.get("matmul_ceiling_gflops") or machine["matmul_ceiling_gflops"]["before"]
        row = (f"| {kernels} kernels ({ceiling:.0f} GFLOP/s){suffix} | "
               f"{same['readers']} | {same['class_peak_mb']:.0f} MB | {same['move_p50_s']:.2f} / "
               f"{same['move_p95_s']:.2f} s | {min(same['trainings_s']):.0f}–{max(same['trainings_s']):.0f} s |")
        assert row in text, row
        assert (same.get("memory_limit") or {}).get("oom_kills", 0) == 0


def test_the_teachers_sentences_on_the_machines_are_the_load_benchmarks():
    """The prose under the table: the AVX-512 class's moves over a second and its two rounds' crossing of the bigram
    line, and the earlier version's two 95th percentiles on the AVX2 machine."""
    text = re.sub(r"\s+", " ", (ROOT / "docs" / "teaching.md").read_text("utf-8"))
    _, fast = _same_class("bench_load_compare_avx512", "cuts")
    assert fast["move_p95_s"] < 0.5 and f"({fast['moves_over_1s']} of {fast['moves']:,} took over a second)".replace(
        ",", " ") in text
    trainers = len(fast["trainings_s"]) // 2
    assert len(fast["bigram_s"]) == 2 * trainers == 10  # each trainer's two trainings, one after the other
    for round_, words in ((fast["bigram_s"][0::2], "in the first round"), (fast["bigram_s"][1::2], "in the next")):
        assert f"after {min(round_):.0f}–{max(round_):.0f} s {words}" in text
    _, again = _same_class("bench_load_switch", "cuts")  # the same version, in the run that compared the interval
    assert f"after {min(again['bigram_s']):.0f}–{max(again['bigram_s']):.0f} s in a second run of this version" in text
    assert again["matmul_ceiling_gflops"] < fast["matmul_ceiling_gflops"]
    _, slow = _same_class("bench_load_compare", "cuts")
    assert slow["move_p95_s"] < 1.0 and f"{min(slow['trainings_s']) / 60:.1f}".startswith("8.")
    firsts = [_same_class(name, "before")[1]["move_p95_s"] for name in ("bench_load_compare_first",
                                                                         "bench_load_compare")]
    assert f"a 95th percentile of {firsts[0]:.2f} s and {firsts[1]:.2f} s" in text
    # the README says it in words, by the same two rows
    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text("utf-8"))
    assert "class of 30 within half a second and a slower one within a second" in readme
