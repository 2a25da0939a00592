"""engine.bench.queue: what one job's polled snapshots become, and a whole run at a few steps (no timing asserted)."""

import json

from engine.bench import queue as Q
from engine.lab.jobs import Snapshot


def _snap(state: str, step: int, elapsed: float, eta: float | None, history=(), times=()) -> Snapshot:
    return Snapshot(state=state, step=step, steps=100, elapsed_s=elapsed, eta_s=eta, history=history,
                    eval_elapsed_s=times)


def test_a_job_record_measures_the_wait_the_crossing_and_the_estimates_error():
    record = Q.JobRecord(seed=7, estimate_before_s=30.0)
    record.observe(_snap("queued", 0, 0.0, None), 5.0)
    record.observe(_snap("running", 10, 4.0, 72.0), 14.0)  # started 10 s after the click
    record.observe(_snap("running", 30, 12.0, 40.0), 22.0)
    record.observe(_snap("running", 60, 24.0, 16.0), 34.0)
    history = ((0, 6.0, 6.0), (50, 5.0, 5.1), (100, 4.5, 4.6))
    record.observe(_snap("done", 100, 40.0, None, history, (0.0, 20.0, 40.0)), 50.0)
    record.observe(_snap("done", 100, 40.0, None, history, (0.0, 20.0, 40.0)), 51.0)  # a later poll changes nothing
    row = record.row(bigram=5.15)
    assert row["wait_s"] == 10.0 and row["end_s"] == 50.0 and row["training_s"] == 40.0
    assert (row["bigram_step"], row["bigram_training_s"], row["bigram_click_s"]) == (50, 20.0, 30.0)
    # at 10 % the estimate said 72 s left and 36 s were left: +100 %; at 25 %: 40 against 28; at 50 %: 16 against 16
    assert row["estimate_errors"]["0.10"] == 1.0
    assert abs(row["estimate_errors"]["0.25"] - (40 / 28 - 1)) < 1e-12 and row["estimate_errors"]["0.50"] == 0.0
    assert row["estimate_before_error"] == 30 / 40 - 1 and row["final_val_loss"] == 4.6
    assert Q.JobRecord(seed=1, estimate_before_s=1.0).started_s is None


def test_a_run_with_two_policies_writes_every_job(tmp_path, capsys):
    out = tmp_path / "queue.json"
    assert Q.main(["--trainers", "2", "--policies", "1,2", "--steps", "2", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [p["max_concurrent"] for p in data["policies"]] == [1, 2]
    for policy in data["policies"]:
        assert [j["seed"] for j in policy["jobs"]] == [1337, 1338]
        assert all(j["state"] == "done" and j["steps_done"] == 2 for j in policy["jobs"])
        assert policy["makespan_s"] == max(j["end_s"] for j in policy["jobs"])
    first = data["policies"][0]["jobs"]
    assert first[1]["wait_s"] > 0  # one slot: the second waited for the first
    assert data["machine"]["cpu"] and data["ceiling_gflops"]["before"] > 0
    assert "max_concurrent = 2" in capsys.readouterr().out
