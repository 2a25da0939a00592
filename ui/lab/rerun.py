"""The Lab's paired rerun of one comparison of an exercise: its budget, its button and progress, and its answer
beside the shipped runs' one.

The rerun (``engine.lab.experiments.rerun``) trains the exercise's reference and one configuration the reader picks
over the shipped runs' seeds, paired as they were, for far fewer windows; the page says how its budget differs,
shows each seed's difference and the paired verdict, and puts the shipped verdict for the same pair beside it once the
exercise's question is answered.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from engine import budget
from engine.baselines import Baselines
from engine.corpus import Corpus
from engine.lab.experiments import rerun as lab_rerun
from engine.lab.experiments.rerun import PairedRerun, comparable, shipped_comparison
from engine.lab.results import ExercisesFile, PairedDifference
from ui import page, url
from ui.i18n import _
from ui.lab.controls import problem_text
from ui.lab.session import LabSession
from ui.lab.train import POLL_S
from ui.lab.verdicts import seeds_text, verdict_sentence
from ui.lab.words import busy_text, duration_text, eta_text, fill, queued_text
from ui.numbers import integer, num

#: The key of the steps control every exercise's rerun shares.
STEPS_KEY = "lab_rerun_steps"


def budget_sentence(plan: lab_rerun.RerunPlan, data: ExercisesFile | None) -> str:
    """What the rerun trains and measures, how that differs from the shipped runs, and its time estimate."""
    b = plan.budget
    text = fill(_("Your rerun: for each of the seeds {seeds}, two runs (the course model and the configuration you "
                  "pick) of {steps} steps of batch {batch}, so {windows} windows per run, each measured on the first "
                  "{val} windows of the validation split."), seeds=seeds_text(lab_rerun.RERUN_SEEDS),
                steps=integer(b.steps), batch=b.batch_size, windows=integer(b.steps * b.batch_size),
                val=integer(lab_rerun.RERUN_VAL_WINDOWS))
    if data is not None:
        text += " " + fill(_("The shipped runs trained {steps} steps of batch {batch} ({windows} windows, {factor} "
                             "times yours) and were measured on the whole split."), steps=integer(data.steps),
                           batch=data.batch_size, windows=integer(data.steps * data.batch_size),
                           factor=num(data.steps * data.batch_size / (b.steps * b.batch_size), 0))
    text += " " + _("As in the shipped runs and with their seeds, both runs of a seed start from the same weights and "
                    "see the same batches, so the difference within a seed comes from the configuration, not from "
                    "another draw of weights or batches.")
    if plan.seconds is not None:
        text += " " + fill(_("A cautious count gives {time} on a server that is not busy, and a run is often much "
                             "shorter; but this is no upper bound: a busier server takes longer, and a rerun still "
                             "running at {cap} stops there and compares the seeds it finished."),
                           time=duration_text(plan.seconds), cap=duration_text(budget.MAX_JOB_WALL_S))
    if plan.over_cap:
        text += " " + fill(_("The cautious count puts these {runs} runs over the limit of {limit}: on a busy server "
                             "the rerun may stop before its last seed."), runs=plan.runs,
                           limit=duration_text(budget.MAX_JOB_WALL_S))
    return text


def measure_words(measure: str) -> str:
    """What a rerun's losses are, for its table's caption."""
    if measure == "last_position":
        return _("Validation loss at the window's last position, in nats, where a model without the causal mask "
                 "cannot read its target.")
    return _("Validation loss over every position of the measured windows, in nats.")


def rerun_table(result: PairedRerun, names: dict[str, str]) -> pd.DataFrame:
    """One row per seed: the reference's and the compared run's loss on the rerun's measure, and their difference Δ
    (compared minus reference), every cell in the reader's number format."""
    c = result.comparison
    reference, run = names[result.reference], names[result.key]
    rows = []
    for seed, delta in zip(c.seeds, c.differences, strict=True):
        rows.append({_("seed"): integer(seed),
                     reference: num(result.run(result.reference, seed).measured(result.measure), 3),
                     run: num(result.run(result.key, seed).measured(result.measure), 3),
                     "Δ": fill("{d:+.3f}", d=delta)})
    return pd.DataFrame(rows)


def verdict_lines(result: PairedRerun, shipped: PairedDifference | None, names: dict[str, str],
                  data: ExercisesFile | None, revealed: bool, baselines: Baselines | None) -> list[str]:
    """The rerun's verdict, the shipped one beside it (once ``revealed``), whether they agree, and where the runs
    stand against the bigram."""
    run, reference = names[result.key], names[result.reference]
    prefix = _("At the window's last position: ") if result.measure == "last_position" else ""
    lines = [_("**Your rerun** · ") + prefix + verdict_sentence(result.comparison, run, reference)]
    if shipped is not None and data is not None and revealed:
        lines.append(fill(_("**The shipped runs** ({steps} steps of batch {batch}) · "), steps=integer(data.steps),
                          batch=data.batch_size) + prefix + verdict_sentence(shipped, run, reference))
        if shipped.verdict == result.comparison.verdict:
            lines.append(_("Both reach the same verdict."))
        else:
            share = result.steps * result.batch_size / (data.steps * data.batch_size)
            lines.append(fill(_("The verdicts differ: your runs saw {share:.0%} of the shipped runs' windows, so they "
                                "compare the two models earlier in their training (and on fewer windows)."),
                              share=share))
    elif shipped is not None and not revealed:
        lines.append(_("Answer the question above to see the shipped runs' verdict beside yours."))
    if result.measure == "last_position":
        others = {k: result.mean_of(k, "other_positions_loss") for k in (result.reference, result.key)}
        lines.append(fill(_("Over the positions before the last, {run} scores {loss:.3f} nats and {reference} "
                            "{ref_loss:.3f}: there, without the mask, the target is in view."), run=run,
                          loss=others[result.key], reference=reference, ref_loss=others[result.reference]))
    if baselines is not None:
        mean = (result.mean_of(result.reference, "val_loss") + result.mean_of(result.key, "val_loss")) / 2
        bigram = baselines.bigram.val_nats
        template = (_("After {steps} steps, the runs average {loss:.3f} nats over every position, above the bigram's "
                      "{bigram:.3f} on the whole split: these are models early in their training.") if mean > bigram
                    else _("After {steps} steps, the runs average {loss:.3f} nats over every position, below the "
                           "bigram's {bigram:.3f} on the whole split."))
        lines.append(fill(template, steps=integer(result.steps), loss=mean, bigram=bigram))
    return lines


def show_result(result: PairedRerun, data: ExercisesFile | None, names: dict[str, str], revealed: bool,
                baselines: Baselines | None) -> None:
    """The finished rerun: its table, its verdict and the shipped one beside it."""
    st.caption(fill(_("Your last rerun: {run} against {reference}, {steps} steps of batch {batch} per run on {corpus}, "
                      "{windows} windows measured."), run=names[result.key], reference=names[result.reference],
                    steps=integer(result.steps), batch=result.batch_size, corpus=result.corpus,
                    windows=integer(result.val_windows)) + " " + measure_words(result.measure))
    if not result.complete:
        st.warning(fill(_("This rerun stopped after {done} of its {planned} seeds; the comparison uses the seeds it "
                          "finished."), done=len(result.seeds), planned=len(result.planned_seeds)))
    page.static_table(rerun_table(result, names))
    shipped = None if data is None else shipped_comparison(data, result.exercise, result.key)
    st.markdown("\n".join(f"- {line}" for line in verdict_lines(result, shipped, names, data, revealed, baselines)))


def progress_panel(lab: LabSession, exercise: str, names: dict[str, str]) -> None:
    """Progress of this reader's rerun of ``exercise`` (polled while it runs)."""
    job = lab.rerun_job(exercise)
    if job is None:
        return
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(queued_text(snap), icon=":material/hourglass_top:")
    elif snap.state == "running":
        seed = job.seeds[min(snap.run_index // 2, len(job.seeds) - 1)]
        st.progress(snap.fraction, text=fill(
            _("run {index} of {count} ({run}, seed {seed}): step {step} / {steps} · {eta}"), index=snap.run_index + 1,
            count=snap.run_count, run=names.get(snap.run_key, snap.run_key), seed=seed, step=snap.step,
            steps=snap.steps, eta=eta_text(snap.eta_s)))
        st.button(_("Stop"), key=f"lab_stop_rerun_{exercise}", on_click=job.stop)
    elif snap.state == "error":
        st.error(fill(_("The rerun failed: {error}"), error=snap.error))
    elif snap.state == "stopped" and job.result is None:
        st.warning(_("Rerun stopped; nothing was kept."))
    if lab.collect_rerun(exercise):
        st.rerun()


def steps_control() -> int:
    """The steps per run of every exercise's rerun (one control, above the exercises)."""
    low, high = lab_rerun.RERUN_STEPS
    return url.int_input(st, _("steps per run for your paired rerun"), low, high, step=100,
                         value=lab_rerun.RERUN_DEFAULT_STEPS, key=STEPS_KEY)


def rerun(lab: LabSession, exercise: str, data: ExercisesFile | None, corpus: Corpus | None, steps: int,
          names: dict[str, str], revealed: bool, baselines: Baselines | None) -> None:
    """One exercise's paired rerun: the configuration to compare, the budget and estimate, the button, the progress
    and the last result.

    Args:
        lab: this reader's state (jobs and results).
        exercise: a key of ``engine.lab.experiments.EXERCISES``.
        data: the shipped results, or None.
        corpus: the training text chosen in section 1 (the rerun trains on it), or None.
        steps: each run's steps (:func:`steps_control`).
        names: every run key of the exercise -> its name in the reader's language.
        revealed: whether the exercise's question is answered (the shipped verdict is shown beside the rerun's).
        baselines: the counting baselines of ``corpus``, or None.
    """
    st.markdown("**" + _("Rerun one comparison yourself") + "**")
    options = comparable(exercise)
    key = st.selectbox(_("configuration to compare with the course model"), options,
                       format_func=lambda k: names.get(k, k), key=f"lab_rerun_{exercise}_run")
    plan = lab_rerun.plan_rerun(exercise, key, corpus, steps)
    st.caption(budget_sentence(plan, data))
    running = lab.rerunning(exercise)
    if st.button(fill(_("Rerun {run} against the course model: {runs} runs of {steps} steps"), run=names[key],
                      runs=plan.runs, steps=integer(steps)),
                 key=f"lab_rerun_experiment_{exercise}", disabled=running or not plan.ok,
                 icon=":material/replay:") and not running and plan.ok:
        lab.start_rerun(exercise, key, corpus, steps)
        st.rerun()  # redraw with the button disabled and the progress polling
    for problem in plan.problems:  # why the button is off, beside it (three exercises: no three red boxes)
        st.caption(problem_text(problem))
    with page.slot():  # a note that comes and goes keeps the fragment below in its place
        if lab.pop_busy_notice(exercise):
            st.warning(busy_text(), icon=":material/tab:")
    st.fragment(run_every=POLL_S if running else None)(progress_panel)(lab, exercise, names)
    result = lab.live_result(exercise)
    if result is not None:
        show_result(result, data, names, revealed, baselines)
