"""docs/performance.md is what `python -m engine.bench docs` makes of assets/bench_*.json: regenerated here and
compared with the committed file, so the document cannot drift from the results files."""

import json
import os
import re
import shutil
import time
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
           "trainings_unfinished": 1, "load_average": {"before": [0.2, 0.3, 0.3], "after": [1.9, 1.5, 1.0]}}
    same = {**row, "same_settings": True, "trainings_s": [150.0] * 5, "trainings_unfinished": 0,
            "bigram_s": [101.4, None, 99.0, 99.0, 99.0]}
    later = {**row, "readers": 20, "trainings_unfinished": 2, "trainings_unfinished_at": [71, None]}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_load.json").write_text(json.dumps(
        {"machine": machine, "app_root": "/work/x", "minutes": 10, "trainers": 2, "think_s": 4.0, "arrival_s": 20.0,
         "classes": [row, same, later]}))
    text = docs.render(tmp_path)
    assert "| 20 | own | 585 (465) | 546 550 | 0.12 / 0.85 (131 of 3429) | 262 563 (2: 71 %, queued) |" in text
    assert "| 30 | own | 585 (465) | 546 550 | 0.12 / 0.85 (131 of 3429) | 262 563 (1) | — | 0.2–1.9 |" in text
    assert ("| 30 | same | 585 (465) | 546 550 | 0.12 / 0.85 (131 of 3429) | 150 150 150 150 150 (0) | 101 — 99 99 99 "
            "| 0.2–1.9 |") in text
    assert "/work/" not in text


def test_a_profiled_class_says_where_the_interpreter_lock_went(tmp_path):
    row = {"readers": 30, "wall_s": 740.2, "class_peak_mb": 590.0, "before_class_mb": 480.0,
           "per_minute_peak_mb": [560.0], "move_p50_s": 0.3, "move_p95_s": 1.9, "moves_over_1s": 500, "moves": 3000,
           "trainings_s": [600.0], "trainings_unfinished": 0, "load_average": {"before": [1.0], "after": [1.5]},
           "same_settings": True, "gil": {"rate_hz": 50, "samples": 33000, "held_s": 660.0, "held_share": 0.892,
                                          "by_area": {"charts (Plotly)": 0.41, "the Lab's training": 0.3}}}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_load_profile.json").write_text(json.dumps(
        {"machine": machine, "minutes": 12, "trainers": 5, "think_s": 4.0, "arrival_s": 20.0, "classes": [row]}))
    text = docs.render(tmp_path)
    assert "## Where a class's time goes on the server" in text
    assert "--profile" in text
    assert ("the class of 30 (\"same\") worked (py-spy, 50 samples a second of the thread holding it): held 89% of "
            "the class's 740 s, of which charts (Plotly) 41%; the Lab's training 30%.") in text


def test_variants_side_by_side_name_their_checkout_and_variables_and_each_pages_moves(tmp_path):
    row = {"readers": 30, "wall_s": 600.0, "class_peak_mb": 585.0, "per_minute_peak_mb": [560.0], "move_p50_s": 0.33,
           "move_p95_s": 2.14, "moves_over_1s": 412, "moves": 2246, "trainings_s": [595.0], "trainings_unfinished": 0,
           "bigram_s": [501.0], "load_average": {"before": [0.6], "after": [1.5]}, "same_settings": True,
           "variant": {"label": "before", "app_root": "before", "env": {}},
           "moves_by_page": {"dropout": {"moves": 332, "p50_s": 1.14, "p95_s": 3.606, "over_1s": 179},
                             "self-attention": {"moves": 338, "p50_s": 0.204, "p95_s": 1.008, "over_1s": 19}}}
    nice = {**row, "move_p95_s": 1.53, "matmul_ceiling_gflops": 171.3, "variant": {"label": "nice", "app_root": "after",
                                                    "env": {"ATTENTION_TRAINING_NICE": "10"}},
            "moves_by_page": {"dropout": {"moves": 340, "p50_s": 0.5, "p95_s": 1.2, "over_1s": 30}}}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_load_compare.json").write_text(json.dumps(
        {"machine": machine, "app_root": None, "minutes": 8, "trainers": 5, "think_s": 4.0, "arrival_s": 20.0,
         "classes": [row, nice]}))
    text = docs.render(tmp_path)
    assert "| variant | readers | trainers' settings |" in text
    assert "| before (before) | 30 | same | 585 | 560 | 0.33 / 2.14 (412 of 2246) | 595 (0) | 501 | 0.6–1.5 |" in text
    assert ("| nice (after, `ATTENTION_TRAINING_NICE=10`; ceiling 171 GFLOP/s before it) | 30 | same | 585 | 560 | "
            "0.33 / 1.53 (412 of 2246) |") in text
    assert "| page | before (before) | nice (after, `ATTENTION_TRAINING_NICE=10`) |" in text
    assert "| dropout | 1.14 / 3.606 (179 of 332) | 0.5 / 1.2 (30 of 340) |" in text
    assert "| self-attention | 0.204 / 1.008 (19 of 338) | — |" in text


def test_a_class_under_a_memory_limit_says_what_the_limit_did(tmp_path):
    row = {"readers": 25, "class_peak_mb": 590.0, "before_class_mb": 480.0, "per_minute_peak_mb": [560.0],
           "move_p50_s": 0.06, "move_p95_s": 0.3, "moves_over_1s": 2, "moves": 3000, "trainings_s": [200.0],
           "trainings_unfinished": 0, "load_average": {"before": [1.0], "after": [1.5]}, "same_settings": True,
           "memory_limit": {"limit_mb": 600, "cgroup": "v1", "charged_peak_mb": 599.6, "limit_hits": 1234,
                            "oom_kills": 0}}
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_load_limited.json").write_text(json.dumps(
        {"machine": machine, "minutes": 12, "trainers": 5, "think_s": 4.0, "arrival_s": 20.0, "classes": [row]}))
    text = docs.render(tmp_path)
    assert "## A class on one server under a container's memory limit" in text
    assert "--memory-limit-mb 600" in text
    assert ("under a hard memory limit of 600 MB (a cgroup v1, as a container holds an app): the group's charged "
            "peak 600 MB") in text
    assert "the limit reached 1,234 times, 0 processes killed." in text
    (tmp_path / "bench_load_limited.json").rename(tmp_path / "bench_load_busy.json")
    data = json.loads((tmp_path / "bench_load_busy.json").read_text("utf-8"))
    (tmp_path / "bench_load_busy.json").write_text(json.dumps({**data, "busy_cores": 1}))
    text = docs.render(tmp_path)
    assert "## A class on one server busy with other work" in text
    assert "each class 12 min; 1 of the machine's cores kept busy by other work (a matmul loop each) the whole run." \
        in text


def test_busy_cores_keep_cores_busy_until_the_block_ends():
    from tools import bench_load
    with bench_load.busy_cores(1) as procs:
        time.sleep(1.5)
        assert [p.poll() for p in procs] == [None]
        with open(f"/proc/{procs[0].pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        assert int(fields[11]) > 0  # it has used CPU time of its own
    assert procs[0].poll() is not None


def test_the_memory_limit_writes_the_limit_and_reads_the_groups_counters(tmp_path, monkeypatch):
    from tools import bench_load
    v1 = tmp_path / "memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712")
    monkeypatch.setattr(bench_load.MemoryLimit, "V2", tmp_path / "none")
    monkeypatch.setattr(bench_load.MemoryLimit, "V1", v1)
    limit = bench_load.MemoryLimit(600, "bench_load_1")
    group = v1 / "bench_load_1"
    assert (group / "memory.limit_in_bytes").read_text() == str(600 * 2**20)
    limit.enter()
    assert (group / "cgroup.procs").read_text() == str(os.getpid())
    (group / "memory.max_usage_in_bytes").write_text(str(590 * 2**20))
    (group / "memory.failcnt").write_text("17")
    (group / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert limit.summary() == {"limit_mb": 600, "cgroup": "v1", "charged_peak_mb": 590.0, "limit_hits": 17,
                               "oom_kills": 1}
    v2 = tmp_path / "unified"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io memory pids\n")
    monkeypatch.setattr(bench_load.MemoryLimit, "V2", v2)
    limit = bench_load.MemoryLimit(690, "bench_load_2")
    assert (v2 / "bench_load_2" / "memory.max").read_text() == str(690 * 2**20)
    (v2 / "bench_load_2" / "memory.events").write_text("low 0\nhigh 0\nmax 5\noom 0\noom_kill 0\n")
    assert limit.summary()["cgroup"] == "v2" and limit.summary()["limit_hits"] == 5
    monkeypatch.setattr(bench_load.MemoryLimit, "V2", tmp_path / "none")
    monkeypatch.setattr(bench_load.MemoryLimit, "V1", tmp_path / "none")
    with pytest.raises(RuntimeError, match="no memory cgroup"):
        bench_load.MemoryLimit(600, "bench_load_3")


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


def test_the_notebook_benchmark_renders_its_run_and_reads_what_the_notebook_printed(tmp_path):
    from tools import bench_notebook

    values = bench_notebook.printed(["unigram.val_loss = 6.1", "bigram.val_loss = 5.2", "steps = [0, 100, 200]",
                                     "val_loss = [8.6, 5.6, 5.0]", "  ≈ [1.0] ✓", "best_val_loss = 5.0",
                                     "stopped_early_at = null", 'generated = "白日"', "a = not json"])
    assert values["val_loss"] == [8.6, 5.6, 5.0] and values["stopped_early_at"] is None and "a" not in values
    cells = [{"first_line": "lab_training(...)", "seconds": 150.25}, {"first_line": "x", "seconds": None}]
    row = bench_notebook.summary({"corpus_records": ["a"] * 3000, "model": {"n_layer": 2, "n_embd": 64,
                                  "block_size": 64}, "training": {"steps": 2300, "batch_size": 16}}, 170.04, cells,
                                 values)
    assert row["last_below_bigram"] and row["training_cell_s"] == 150.2 and row["generated_chars"] == 2
    machine = json.loads((ROOT / "assets" / "bench_train.json").read_text("utf-8"))["machine"]
    (tmp_path / "bench_notebook.json").write_text(json.dumps({"machine": machine, "lang": "en", "notebook": row}))
    text = docs.render(tmp_path)
    assert "a slice of 3,000 poems, n_layer 2, n_embd 64, block_size 64, 2,300 steps of batch 16" in text
    assert "| 170 | 150 | 8.6000 / 5.0000 / 5.0000 | 5.2000 / 6.1000 | ran all its steps |" in text
    cell = type("Cell", (), {"metadata": {"execution": {"iopub.execute_input": "2026-12-06T04:00:00.000000Z",
                                                        "shell.execute_reply": "2026-12-06T04:02:30.500000Z"}}})
    assert bench_notebook.cell_seconds(cell) == 150.5


def test_no_process_of_the_load_benchmark_but_the_server_maps_pytorch():
    """Under a memory limit, the pages of PyTorch's library the server reads are charged to the server only when
    no other process of the benchmark has them mapped: the dispatcher and the client never import torch."""
    import subprocess
    import sys
    code = ("import sys, engine.bench.__main__, engine.bench.load, tools.bench_load\n"
            "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
            "facts = tools.bench_load.machine_facts()\n"
            "assert facts['ceiling'] > 0 and facts['machine']['cores'] >= 1 and 'torch' not in sys.modules\n"
            "assert any(line.startswith('machine: ') for line in facts['header'])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
