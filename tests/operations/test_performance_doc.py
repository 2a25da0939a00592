"""docs/performance.md is what `python -m engine.bench docs` makes of assets/bench_*.json: regenerated here and
compared with the committed file, so the document cannot drift from the results files."""

import json
import re
import shutil
from pathlib import Path

import pytest

from engine.bench import docs

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_document_is_the_generated_one():
    assert (ROOT / "docs" / "performance.md").read_text("utf-8") == docs.render(), (
        "docs/performance.md is out of date: run python -m engine.bench docs")


def test_every_results_file_has_its_section_and_its_numbers():
    text = docs.render()
    for path in sorted((ROOT / "assets").glob("bench_*.json")):
        assert f"`assets/{path.name}`" in text
    train = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))
    for row in train["rows"]:
        assert f"| {row['tokens_per_s']:,.0f} | {row['pct_of_ceiling']:.1f} % |" in text
    generate = json.loads((ROOT / "assets" / "bench_generate.json").read_text("utf-8"))
    assert f"{generate['results']['within_block']['speedup']:.2f}×" in text
    assert not re.search(r"(^|[^A-Za-z0-9_.])/(home|root|tmp|work|Users)/", text)  # no machine's path


def test_a_changed_file_changes_the_document_and_an_unknown_one_is_listed(tmp_path):
    for path in (ROOT / "assets").glob("bench_*.json"):
        shutil.copy(path, tmp_path / path.name)
    data = json.loads((tmp_path / "bench_generate.json").read_text("utf-8"))
    data["results"]["within_block"]["speedup"] = 7.25
    data["model"] = "/home/someone/checkout/assets/models/course_tang"
    (tmp_path / "bench_generate.json").write_text(json.dumps(data))
    machine = json.loads((tmp_path / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_future.json").write_text(json.dumps({"created": "2027-01-02T00:00:00", "machine": machine}))
    text = docs.render(tmp_path)
    assert "7.25×" in text and "4.96×" not in text
    assert "`course_tang`" in text and "/home/" not in text
    assert "## future" in text and "`assets/bench_future.json`" in text and "Measured 2027-01-02" in text


def test_the_load_benchmark_renders_its_classes(tmp_path):
    row = {"readers": 30, "class_peak_mb": 585.2, "before_class_mb": 465.0, "per_minute_peak_mb": [546.0, 550.4],
           "move_p50_s": 0.12, "move_p95_s": 0.85, "moves_over_1s": 131, "moves": 3429, "trainings_s": [262.0, 563.0],
           "load_average": {"before": [0.2, 0.3, 0.3], "after": [1.9, 1.5, 1.0]}}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_load.json").write_text(json.dumps(
        {"machine": machine, "app_root": "/work/x", "minutes": 10, "trainers": 2, "think_s": 4.0, "arrival_s": 20.0,
         "classes": [row]}))
    text = docs.render(tmp_path)
    assert "| 30 | 585 (465) | 546 550 | 0.12 / 0.85 (131 of 3429) | 262 563 | 0.2–1.9 |" in text
    assert "/work/" not in text


def test_a_damaged_file_is_named(tmp_path):
    (tmp_path / "bench_train.json").write_text("{not json")
    with pytest.raises(ValueError, match="bench_train.json"):
        docs.render(tmp_path)


def test_the_queue_benchmark_renders_every_job_and_each_policys_ends(tmp_path):
    job = {"seed": 1337, "state": "done", "stop_reason": "", "steps_done": 1800, "steps": 1800, "wait_s": 0.2,
           "training_s": 171.6, "end_s": 172.9, "bigram_step": 1260, "bigram_training_s": 158.0,
           "bigram_click_s": 158.2, "final_val_loss": 5.1461, "estimate_errors": {"0.10": -0.29, "0.25": -0.17},
           "estimate_before_s": 400.0, "estimate_before_error": 1.33}
    late = {**job, "seed": 1338, "wait_s": 173.0, "end_s": 342.0, "bigram_step": None, "bigram_training_s": None,
            "bigram_click_s": None}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_queue.json").write_text(json.dumps(
        {"benchmark": "queue", "machine": machine, "preset": "quick", "steps": 1800, "trainers": 2, "corpus": "tang",
         "bigram_val": 5.17312, "cap_s": 900, "policies": [{"max_concurrent": 1, "jobs": [job, late],
                                                             "makespan_s": 342.0, "mean_end_s": 257.45}]}))
    text = docs.render(tmp_path)
    assert "| 1 | 1337 | 0 | 158 / 158 | 172 / 173 | 1,800 of 1,800 | 5.146 | -29 % / -17 % / — |" in text
    assert "| 1 | 1338 | 173 | — / — | 172 / 342 |" in text and "| 1 | 342 | 257 |" in text
    assert "bigram val loss 5.1731" in text


def test_the_preset_candidates_render_a_row_per_seed(tmp_path):
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    job = {"seed": 1338, "steps_done": 2400, "bigram_step": 1440, "bigram_training_s": 97.2, "training_s": 160.4,
           "final_val_loss": 4.9104}
    (tmp_path / "bench_preset.json").write_text(json.dumps(
        {"benchmark": "preset", "machine": machine, "what": "the model, several seeds", "corpus": "tang",
         "bigram_val": 5.17312, "candidates": [{"steps": 2400, "jobs": [job, {**job, "seed": 1339, "bigram_step": None,
                                                                            "bigram_training_s": None}]}]}))
    text = docs.render(tmp_path)
    assert "| 2,400 | 1338 | 1,440, 97 | 160 | 4.910 |" in text and "| 2,400 | 1339 | — | 160 | 4.910 |" in text
    assert "The model, several seeds; corpus tang, bigram val loss 5.1731." in text
