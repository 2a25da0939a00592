"""Section 3 of the Lab: this reader's training, polled while it runs: progress, live loss chart, Stop."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from engine import budget
from engine.baselines import Baselines
from engine.figures import lab as figures
from engine.lab.jobs import Snapshot, TrainingJob, first_below, steps_by_cap
from ui.i18n import _, ngettext
from ui.lab.corpus import baseline_lines, baselines_for, versus_baselines
from ui.lab.session import LabSession
from ui.lab.words import duration_text, eta_text, fill, queued_text
from ui.numbers import colon, plotly_separators

#: Seconds between two redraws of a running job's progress.
POLL_S = 1.0


def stop_text(snap: Snapshot) -> str:
    """Why a stopped job stopped."""
    return {
        "while_queued": _("Stopped while queued: nothing was trained."),
        "owner_left": _("Stopped because its reader left the page; what it learned is kept."),
        "wall_cap": fill(_("Stopped at the time limit of {cap}; what it learned is kept."),
            cap=duration_text(budget.MAX_JOB_WALL_S)),
    }.get(snap.stop_reason, _("Stopped."))


def loss_labels() -> figures.LossLabels:
    """The live loss chart's words."""
    return figures.LossLabels(title=_("Loss while training"), batch=_("batch loss"), train=_("train loss"),
                              val=_("val loss"), step=_("step"), loss=_("cross-entropy (nats)"),
                              crossed=_("below the bigram line"), separators=plotly_separators(), colon=colon())


def crossing_text(step: int, seconds: float) -> str:
    """The moment the validation loss went below the bigram line: its step and the training's time then."""
    return fill(_("Below the bigram line from step {step:,} on, after {time} of training: from there the model "
                  "predicts the next character better than counting which character follows which."),
                step=step, time=duration_text(seconds))


def loss_alt(snap: Snapshot, baselines: Baselines | None, crossing: tuple[int, float, float] | None) -> str:
    """The live loss chart's text alternative: what it shows and the values read from it, in the reader's language.

    Args:
        snap: the job's progress (its history gives the last evaluation, its batch losses the last step).
        baselines: the counting baselines drawn as dashed lines, or None.
        crossing: :func:`first_below` of the history and the bigram line, or None.
    """
    parts = [fill(_("Line chart “{title}”: the batch loss, the train loss and the val loss in nats against the "
                    "step, over {steps:,} planned steps."), title=loss_labels().title, steps=snap.steps)]
    if snap.history:
        step, train_loss, val_loss = snap.history[-1]
        parts.append(fill(_("Last evaluation at step {step:,}: train loss {train:.4f}, val loss {val:.4f}."),
                          step=step, train=train_loss, val=val_loss))
    elif snap.step_losses:
        parts.append(fill(_("No evaluation yet; batch loss at step {step:,}: {loss:.4f}."),
                          step=len(snap.step_losses), loss=snap.step_losses[-1]))
    if baselines is not None:
        parts.append(fill(_("Dashed lines: the unigram val loss {unigram:.2f} and the bigram val loss {bigram:.2f}."),
                          unigram=baselines.unigram.val_nats, bigram=baselines.bigram.val_nats))
        if crossing is not None:
            parts.append(fill(_("The val loss is below the bigram line from step {step:,} on ({val:.4f})."),
                              step=crossing[0], val=crossing[1]))
        elif snap.history:
            parts.append(_("The val loss has not gone below the bigram line."))
    return " ".join(parts)


def followers_text(followers: int) -> str:
    """What a training that other readers follow too tells each of them, with how many others there are."""
    return fill(ngettext("{n} other reader follows this training: they asked for exactly these settings on this "
                         "text, so the server trains it once for you all. Stop takes you out of it; it goes on for "
                         "them.",
                         "{n} other readers follow this training: they asked for exactly these settings on this "
                         "text, so the server trains it once for you all. Stop takes you out of it; it goes on for "
                         "them.", followers), n=followers)


def training_panel(job: TrainingJob, collected: bool, baselines: Baselines | None,
                   on_stop: Callable[[], None] | None = None, followers: int = 0) -> None:
    """Progress, live loss chart and Stop of this session's training.

    Args:
        job: this session's training job.
        collected: whether the page already took the finished job's model (else it reruns once).
        baselines: the counting baselines of the job's training text (dashed lines), or None.
        on_stop: the Stop button's callback (default: ``job.stop``; the page passes ``LabSession.stop_training``,
            which only takes this reader out of a training that others follow too).
        followers: how many other readers follow the job (``LabSession.followers``).
    """
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(queued_text(snap), icon=":material/hourglass_top:")
    label = {"queued": _("waiting for a free slot"),
             "running": fill(_("step {step} / {steps} · {rate:,.0f} tokens/s · {eta}"),
                 step=snap.step, steps=snap.steps, rate=snap.tokens_per_s, eta=eta_text(snap.eta_s)),
             "done": fill(_("done: {step} steps in {seconds:.1f} s"), step=snap.step, seconds=snap.elapsed_s),
             "stopped": fill(_("stopped after {step} of {steps} steps ({seconds:.1f} s)"),
                 step=snap.step, steps=snap.steps, seconds=snap.elapsed_s),
             "error": _("failed")}[snap.state]
    st.progress(snap.step / max(1, snap.steps), text=label)
    capped_at = steps_by_cap(snap, job.max_wall_s)
    if capped_at is not None:
        st.warning(fill(_("At the pace measured so far, the time limit of {cap} stops this training at about step "
                          "{step:,} of {steps:,}; it keeps what it learned by then."),
                        cap=duration_text(job.max_wall_s), step=capped_at, steps=snap.steps),
                   icon=":material/timer:")
    if snap.state == "error":
        st.error(fill(_("Training failed: {error}"), error=snap.error))
    crossing = None if baselines is None else first_below(snap.history, snap.eval_elapsed_s,
                                                          baselines.bigram.val_nats)
    if snap.history or snap.step_losses:
        st.plotly_chart(figures.loss_chart(snap.history, snap.step_losses, snap.steps, loss_labels(),
                                           baselines=baseline_lines(baselines),
                                           crossing=None if crossing is None else crossing[:2]),
                        key="lab_live_chart", alt=loss_alt(snap, baselines, crossing))
    if crossing is not None:
        st.success(crossing_text(crossing[0], crossing[2]), icon=":material/trending_down:")
    if snap.history:
        step, train_loss, val_loss = snap.history[-1]
        st.markdown(fill(_("last evaluation (step {step}): train loss **{train:.4f}**, val loss **{val:.4f}**"),
            step=step, train=train_loss, val=val_loss))
        st.caption(versus_baselines(val_loss, baselines))
    if not snap.finished:
        if followers:
            st.caption(followers_text(followers))
        st.button(_("Stop"), key="lab_stop", icon=":material/stop_circle:", on_click=on_stop or job.stop,
                  help=_("Takes you out of this training; it goes on for the others.") if followers else
                  _("Ends the run after the current step; the model keeps what it has learned."))
    elif snap.state == "stopped" and (job.result is None or snap.stop_reason in ("owner_left", "wall_cap")):
        st.warning(stop_text(snap))
    if snap.finished and not collected:
        st.rerun()


def training_section(lab: LabSession) -> None:
    """This session's training in a fragment that polls every :data:`POLL_S` seconds while it runs, and the notice
    of a reader who left a training that others follow."""

    if lab.pop_left_notice():
        st.info(_("You left the training; it goes on for the other readers who follow it. Train again to follow "
                  "it once more, or change a setting to train your own."), icon=":material/logout:")

    def fragment() -> None:
        if lab.left_pending:  # Stop took this reader out of a shared training: the whole page, Train enabled again
            st.rerun()
        job = lab.job
        if job is not None:
            training_panel(job, lab.collected, lab.job_baselines(job, baselines_for), on_stop=lab.stop_training,
                           followers=lab.followers())

    st.fragment(run_every=POLL_S if lab.training else None)(fragment)()
