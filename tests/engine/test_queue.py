"""The Lab's training queue: first come first served, its place known, one job per browser, reclaimed only there."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from engine.corpus import corpus_from_bytes
from engine.lab import jobs as J
from engine.lab import runner as R
from engine.lab import settings as S
from engine.lab.experiments import rerun as P
from engine.presets import preset
from engine.training import TrainConfig

TEXT = "\n\n".join(f"白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼{i % 7}。" for i in range(30))
LONG = TrainConfig(steps=100_000, batch_size=2, learning_rate=3e-3, warmup_steps=2, eval_interval=100_000,
                   eval_iters=1, device="cpu")


class HeldJob(J.Job):
    """A job whose work only records when it started and waits until it is stopped (no model, no torch)."""

    started: list[HeldJob]

    def __init__(self, runner, started: list, name: str, **options):
        super().__init__(runner, steps=1, **options)
        self.started, self.name = started, name

    def _work(self, progress, should_stop):
        self.started.append(self)
        while not should_stop():
            time.sleep(0.005)
        return None, True


def wait_state(job, state, timeout=20.0):
    deadline = time.monotonic() + timeout
    while job.snapshot().state != state and time.monotonic() < deadline:
        time.sleep(0.005)
    assert job.snapshot().state == state, job.snapshot().state


@pytest.fixture(scope="module")
def corpus():
    return corpus_from_bytes(TEXT.encode("utf-8"), "poems.txt")


def submit(runner, corpus, n_layer=1, **options):
    plan = S.TrainingPlan(preset("tiny", n_layer=n_layer, vocab_size=corpus.vocab_size), LONG, None, (), None)
    return runner.submit(plan, corpus, **options)


@pytest.mark.parametrize("trial", range(5))
def test_first_queued_is_served_first(trial):
    """Five readers queue behind a running training; each freed slot goes to the one who waited longest, whatever
    the thread timing (before: whoever polled first won, and the first queued was served last in 3 of 5 trials)."""
    runner, started = R.LabRunner(max_concurrent=1), []
    holder = HeldJob(runner, started, "holder").start()
    wait_state(holder, "running")
    queued = []
    for i in range(5):
        queued.append(HeldJob(runner, started, f"reader {i}").start())
        time.sleep(0.001 * ((trial * 7 + i * 3) % 5))  # a different interleaving in each trial
    assert [j.snapshot().position for j in queued] == [1, 2, 3, 4, 5]
    assert all(j.snapshot().state == "queued" for j in queued) and runner.waiting_count() == 5
    for job in [holder, *queued]:
        wait_state(job, "running")
        job.stop()
        assert job.join(10)
    assert [j.name for j in started] == ["holder"] + [f"reader {i}" for i in range(5)]
    assert runner.running_count() == 0 and runner.waiting_count() == 0


def test_leaving_the_queue_moves_everyone_behind_up():
    runner, started = R.LabRunner(max_concurrent=1), []
    holder = HeldJob(runner, started, "holder").start()
    wait_state(holder, "running")
    a, b, c = (HeldJob(runner, started, n).start() for n in "abc")
    assert [j.snapshot().position for j in (a, b, c)] == [1, 2, 3]
    b.stop()
    assert b.join(10) and b.snapshot().stop_reason == "while_queued" and b.snapshot().position == 0
    assert [j.snapshot().position for j in (a, c)] == [1, 2]
    for job in (holder, a, c):
        wait_state(job, "running")
        assert job.snapshot().position == 0
        job.stop()
        job.join(10)
    assert [j.name for j in started] == ["holder", "a", "c"]


def test_one_browser_holds_at_most_one_queued_or_running_training(corpus):
    runner = R.LabRunner(max_concurrent=1)
    first = submit(runner, corpus, browser_id="browser-1").job
    with pytest.raises(R.BrowserBusy) as busy:  # a second tab of the same browser
        submit(runner, corpus, n_layer=2, browser_id="browser-1")
    assert busy.value.job is first and runner.waiting_count() + runner.running_count() == 1
    other = submit(runner, corpus, n_layer=2, browser_id="browser-2").job  # another reader queues as before
    with pytest.raises(R.BrowserBusy):
        runner.submit_rerun("heads", "heads_1", corpus, P.rerun_budget(P.RERUN_STEPS[0]), (1,), 2,
                            browser_id="browser-2")
    first.stop()
    assert J.wait_until_finished(first, 30).finished
    wait_state(other, "running")
    again = submit(runner, corpus, n_layer=3, browser_id="browser-1").job  # its first job ended: it may queue again
    assert again.snapshot().position == 1
    for job in (other, again):
        job.stop()
        assert J.wait_until_finished(job, 30).finished


def test_two_tabs_submitting_at_once_get_one_place(corpus):
    runner = R.LabRunner(max_concurrent=1)
    start, results = threading.Barrier(8), []

    def tab(n_layer):
        start.wait()
        try:
            results.append(submit(runner, corpus, n_layer=1 + n_layer % 3, browser_id="one-browser").job)
        except R.BrowserBusy as exc:
            results.append(exc)

    threads = [threading.Thread(target=tab, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    jobs = [r for r in results if isinstance(r, J.Job)]
    assert len(jobs) == 1 and all(r.job is jobs[0] for r in results if isinstance(r, R.BrowserBusy))
    jobs[0].stop()
    assert J.wait_until_finished(jobs[0], 30).finished


def test_a_shared_link_cannot_take_a_job_over_from_another_browser(corpus):
    """The reader's tab closes; within the grace time someone else opens the link with the job's token. Only the
    same browser (its reload) gets the job back, by token or by browser alone."""
    owner = {"alive": True}
    runner = R.LabRunner(max_concurrent=1)
    job = submit(runner, corpus, browser_id="reader", owner_alive=lambda: owner["alive"], orphan_grace_s=30).job
    wait_state(job, "running")
    assert runner.reattach(job.token, lambda: True, browser_id="reader") is None  # its reader is still there
    owner["alive"] = False  # the tab closed
    assert runner.reattach(job.token, lambda: True, browser_id="stranger") is None
    assert runner.reattach(job.token, lambda: True) is None  # a session without a browser id
    assert runner.reclaim("stranger", lambda: True) is None and runner.reclaim(None, lambda: True) is None
    assert job.snapshot().state == "running"  # nothing was handed over
    assert runner.reclaim("reader", lambda: True, kind=J.PairedRerunJob) is None  # not the kind asked for
    assert runner.reclaim("reader", lambda: True) is job  # the reader's reload, no token needed
    job.stop()
    assert J.wait_until_finished(job, 30).finished


def test_the_same_training_asked_twice_is_trained_once_and_followed_by_both(corpus):
    """A second reader who asks for exactly the settings of a running training follows that job instead of queuing
    it again; their Stop takes only them out of it; it ends when its last follower leaves or goes."""
    alive = {"a": True, "b": True}
    runner = R.LabRunner(max_concurrent=1)
    started = submit(runner, corpus, browser_id="a", owner_alive=lambda: alive["a"], orphan_grace_s=0.3)
    job = started.job
    wait_state(job, "running")
    followed = submit(runner, corpus, browser_id="b", owner_alive=lambda: alive["b"])
    assert followed.joined and not started.joined and followed.job is job
    assert job.browser_ids == ("a", "b") and runner.running_count() + runner.waiting_count() == 1
    assert runner.browser_job("b") is job  # it counts as b's training: no second one from that browser
    with pytest.raises(R.BrowserBusy):
        submit(runner, corpus, n_layer=2, browser_id="b")
    unknown = submit(runner, corpus)  # without a browser id, readers cannot be told apart: a job of its own
    assert not unknown.joined and unknown.job is not job and unknown.job.snapshot().position == 1
    unknown.job.stop()
    assert job.leave("stranger") and job.browser_ids == ("a", "b")  # not an owner: nothing changes
    assert job.leave("a") and not job.stop_event.is_set()  # a leaves; it goes on for b
    assert job.browser_ids == ("b",) and job.browser_id == "a" and runner.browser_job("a") is None
    assert runner.reclaim("a", lambda: True) is None  # a's reload does not take back what a left
    assert submit(runner, corpus, browser_id="a").joined and job.browser_ids == ("b", "a")  # a follows it again
    alive["b"] = False  # b's tab closed: b's reload takes b's place over (and closes too), a's place stays a's
    assert runner.reclaim("b", lambda: alive["b"]) is job and job.browser_ids == ("b", "a")
    assert not job.leave("a") and J.wait_until_finished(job, 30).stop_reason == "by_reader"  # the last one there
    assert not job.add_owner(lambda: True, "c") and runner.running_count() == 0


def test_a_followed_training_ends_when_every_follower_has_gone(corpus):
    alive = {"a": True, "b": True}
    runner = R.LabRunner(max_concurrent=1)
    job = submit(runner, corpus, browser_id="a", owner_alive=lambda: alive["a"], orphan_grace_s=0.3).job
    assert submit(runner, corpus, browser_id="b", owner_alive=lambda: alive["b"]).job is job
    wait_state(job, "running")
    alive["a"] = False
    time.sleep(0.6)  # past the grace time: b is still there
    assert job.snapshot().state == "running" and job.owner_present()
    alive["b"] = False
    assert J.wait_until_finished(job, 30).stop_reason == "owner_left"


def test_a_finished_job_lets_go_of_its_text(corpus):
    runner = R.LabRunner(max_concurrent=1)
    job = submit(runner, corpus, browser_id="reader").job
    assert job.corpus is corpus
    job.stop()
    assert J.wait_until_finished(job, 30).finished and job.join(10)
    assert job.corpus is None  # the runner keeps jobs findable; an upload must not live on with them
    assert dataclasses.is_dataclass(job.key) and job.key.corpus  # the fingerprint stays, for the registry


def test_the_browser_id_is_the_xsrf_token_whatever_its_mask(monkeypatch):
    """Streamlit re-masks its XSRF cookie on every response; the Lab's browser id must not change with the mask,
    must differ between browsers, and must not be the token itself."""
    import types

    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    from ui.lab import session

    cookies = {}
    monkeypatch.setattr(session, "st", types.SimpleNamespace(context=types.SimpleNamespace(cookies=cookies)))
    monkeypatch.setattr(session.runtime, "exists", lambda: True)
    token, other = b"\x01" * 16, b"\x02" * 16
    ids = []
    for raw in (generate_xsrf_token_string(token, 1700000000), generate_xsrf_token_string(token, 1700000000),
                generate_xsrf_token_string(other, 1700000000)):
        cookies[session.XSRF_COOKIE_NAME] = raw
        ids.append(session.browser_id())
    assert ids[0] == ids[1] != ids[2] and len(ids[0]) == 32 and token.hex() not in ids[0]
    for garbage in ("", "2|zz|zz|1", "nonsense", "2|00"):
        cookies[session.XSRF_COOKIE_NAME] = garbage
        assert session.browser_id() is None
    cookies.clear()
    assert session.browser_id() is None


def test_a_reload_finds_the_job_by_browser_and_the_url_keeps_no_token(monkeypatch, corpus):
    """LabSession on the runner: the job is never written into the URL (an old link's token is dropped), the same
    browser's reload takes the job over once the first session is gone, another browser's session does not."""
    from ui.lab import session

    runner = R.LabRunner(max_concurrent=1)
    who = {"browser": "reader-browser"}
    alive = {"first": True}
    monkeypatch.setattr(session, "browser_id", lambda: who["browser"])
    monkeypatch.setattr(session, "owner_alive", lambda: (lambda: alive["first"]))
    first_state, first_query = {}, {session.JOB_TOKEN: "0" * 32}
    first = session.LabSession(runner, first_state, first_query)
    plan = S.TrainingPlan(preset("tiny", n_layer=1, vocab_size=corpus.vocab_size), LONG, None, (), None)
    first.start_training(plan, corpus)
    job = first.job
    assert job is not None and first_query == {}  # nothing to share in the URL
    first.start_training(plan, corpus)  # the same browser again (a second click, another tab)
    assert first.pop_busy_notice("training") and not first.pop_busy_notice("training")
    monkeypatch.setattr(session, "owner_alive", lambda: (lambda: True))
    alive["first"] = False  # the tab closed
    who["browser"] = "someone-elses-browser"
    assert session.LabSession(runner, {}, {session.JOB_TOKEN: job.token}).job is None  # a shared link, token and all
    who["browser"] = "reader-browser"
    assert session.LabSession(runner, {}, {}).job is job  # the reader's own reload
    job.stop()
    assert J.wait_until_finished(job, 30).finished


def test_a_session_follows_the_same_training_and_its_stop_only_leaves_it(monkeypatch, corpus):
    from ui.lab import session

    runner = R.LabRunner(max_concurrent=1)
    who = {"browser": "first"}
    monkeypatch.setattr(session, "browser_id", lambda: who["browser"])
    monkeypatch.setattr(session, "owner_alive", lambda: (lambda: True))
    plan = S.TrainingPlan(preset("tiny", n_layer=1, vocab_size=corpus.vocab_size), LONG, None, (), None)
    first, second = session.LabSession(runner, {}, {}), session.LabSession(runner, {}, {})
    first.start_training(plan, corpus)
    assert not first.pop_join_notice() and first.followers() == 0
    who["browser"] = "second"
    second.start_training(plan, corpus)
    job = second.job
    assert job is first.job and second.pop_join_notice() and not second.pop_join_notice()
    assert first.followers() == second.followers() == 1 and second.training
    second.stop_training()  # the second reader's Stop: out of it, the first goes on
    assert second.left_pending and second.pop_left_notice() and not second.left_pending
    assert second.job is None and not second.training and not job.stop_event.is_set() and first.followers() == 0
    who["browser"] = "first"
    first.stop_training()
    assert not first.left_pending and J.wait_until_finished(job, 30).stop_reason == "by_reader"
    assert first.job is job  # a reader who stops alone keeps the job, and what it learned


@pytest.mark.parametrize("value, nice", [("10", 10), ("0", 0), ("19", 19), ("20", J.DEFAULT_TRAINING_NICE),
                                         ("-5", J.DEFAULT_TRAINING_NICE), ("ten", J.DEFAULT_TRAINING_NICE),
                                         (" 7 ", 7), ("", J.DEFAULT_TRAINING_NICE)])
def test_the_operators_nice_value_is_a_whole_number_up_to_19(value, nice):
    assert J.training_nice({J.TRAINING_NICE_ENV: value}) == nice
    assert J.training_nice({}) == J.DEFAULT_TRAINING_NICE


@pytest.mark.skipif(not hasattr(__import__("os"), "setpriority"), reason="no setpriority on this system")
def test_a_job_thread_lowers_its_own_priority_and_its_torch_threads_inherit_it():
    """The nice value is the thread's on Linux: the job's thread and the intra-op threads its matmuls start take it,
    the process's main thread keeps its own."""
    import os
    import sys

    import torch

    if not sys.platform.startswith("linux"):
        assert J.lower_thread_priority(10) is None
        return
    main_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, object] = {}

    def work():
        seen["after"] = J.lower_thread_priority(max(main_nice, 0) + 5)
        seen["tid"] = threading.get_native_id()
        a = torch.randn(256, 256)
        for _ in range(20):
            a = torch.tanh(a @ a)  # starts this thread's intra-op workers, if the build has any
        seen["threads"] = {tid: int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])
                           for tid in os.listdir("/proc/self/task")}

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    expected = min(max(main_nice, 0) + 5, J.MAX_NICE)
    assert seen["after"] == expected
    assert seen["threads"][str(seen["tid"])] == expected
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_nice
    assert J.lower_thread_priority(0) is None  # 0: left as it is
