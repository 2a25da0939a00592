"""Section 6 of the Lab: the lesson's experiments, shipped results or the reader's live reruns, and their reruns."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from engine import chapter
from engine.baselines import Baselines
from engine.corpus import Corpus
from engine.figures import lab as figures
from engine.lab import settings as rules
from engine.lab.experiments import EXPERIMENTS
from engine.lab.results import ExperimentResult, ResultsFile, experiment_result
from engine.sections import multi_head
from engine.tokenizer import UNK
from ui import page, url
from ui.i18n import _
from ui.lab import shipped
from ui.lab.corpus import baselines_for, shipped_corpus
from ui.lab.session import LabSession
from ui.lab.train import POLL_S
from ui.lab.words import busy_text, eta_text, fill, nats_text, queued_text, run_name
from ui.numbers import integer, num, plotly_separators


def experiment_title(name: str) -> str:
    """The heading of an experiment (``engine.lab.experiments.EXPERIMENTS`` key)."""
    return {
        "heads": _("Exercise 2 · 1 vs 4 vs 8 heads at n_embd 128"),
        "positions": _("Exercise 3 · position information: none, learned, RoPE, sinusoidal"),
        "causal": _("Beyond the lesson · training without the causal mask"),
    }.get(name, name)


@dataclass(frozen=True)
class TableWords:
    """The results table's column names and the curves' words, in the reader's language."""

    run: str
    params: str
    train: str
    val: str
    std: str
    ppl: str
    seeds: str
    last: str
    s: str
    curves: figures.CurvesLabels


def table_words() -> TableWords:
    """The words of :func:`experiment_view`."""
    return TableWords(
        run=_("run"), params=_("params"), train=_("train"), val=_("val"), std=_("± std"), ppl=_("val perplexity"),
        seeds=_("seeds"), last=_("val, last pos."), s=_("s"),
        curves=figures.CurvesLabels(title=_("val loss (solid) and train loss (dotted)"), val=_("val"),
                                    train=_("train"), step=_("step"), loss=_("loss (nats)"),
                                    separators=plotly_separators()))


@st.cache_resource(show_spinner=False, max_entries=32)
def experiment_view(experiment: ExperimentResult, names: tuple[str, ...], words: TableWords,
                    baselines: tuple[tuple[str, float, float], ...]) -> tuple[go.Figure, pd.DataFrame]:
    """The curves figure and the table of one experiment's results, every cell written in the reader's number format.

    ``baselines``: (label, train, val nats) of the counting baselines, drawn as dashed lines.
    """
    w = words
    rows = [{w.run: name, w.params: integer(r.params), w.train: num(r.train_loss, 3), w.val: num(r.val_loss, 3),
             w.std: "—" if r.val_std is None else num(r.val_std, 3), w.ppl: num(math.exp(r.val_loss), 1),
             w.seeds: integer(r.n_seeds), w.last: num(r.last_position_loss, 3), w.s: num(r.wall_s, 0)}
            for r, name in zip(experiment.runs, names, strict=True)]
    table = pd.DataFrame(rows)
    if not experiment.several_seeds:
        table = table.drop(columns=[w.std, w.seeds])  # one seed: no spread to show
    figure = figures.experiment_curves([r.history for r in experiment.runs], names, w.curves,
                                       baselines={label: val_nats for label, _train, val_nats in baselines})
    return figure, table


def comparison_lines(experiment: ExperimentResult) -> list[str]:
    """One line per pair of runs: the difference of mean validation losses and whether it exceeds the seed noise."""
    lines = []
    for c in experiment.comparisons:
        if c.exceeds_noise is None:
            continue
        verdict = _("**more than the seed noise**") if c.exceeds_noise else _("within the seed noise")
        lines.append(fill(_("{b} − {a}: {delta:+.3f} nats; noise bound {noise:.3f}: {verdict}"),
            b=run_name(c.b), a=run_name(c.a), delta=c.delta, noise=c.noise, verdict=verdict))
    return lines


def show_experiment(experiment: ExperimentResult, key: str, baselines: Baselines | None = None) -> None:
    """Curves and table of one experiment, side by side, with the counting baselines and the seed comparisons."""
    names = tuple(run_name(r.key) for r in experiment.runs)
    w = table_words()
    rows = () if baselines is None else (
        (_("unigram (counting)"), baselines.unigram.train_nats, baselines.unigram.val_nats),
        (_("bigram (counting)"), baselines.bigram.train_nats, baselines.bigram.val_nats))
    figure, table = experiment_view(experiment, names, w, rows)
    left, right = st.columns([1, 1])
    left.plotly_chart(figure, key=f"{key}_curves")
    seeds = experiment.seeds
    if len(seeds) > 1:
        left.caption(fill(_("Curves of seed {seed}; the table gives the mean and standard deviation over {n} seeds "
                       "({seeds})."), seed=seeds[0], n=len(seeds), seeds=", ".join(map(str, seeds))))
    right.caption(_("Final losses in nats; “val” is measured on the same validation windows for every run and seed, "
                    "“val, last pos.” at the last position of the window only (the one generation uses); s is the "
                    "wall time of the run. The counting baselines score the same split."))
    column = st.column_config.TextColumn  # cells are written in the reader's number format (ui.numbers)
    right.dataframe(table, hide_index=True, key=f"{key}_table", column_config={
        w.params: column(help=_("parameters")),
        w.train: column(help=_("final train loss (nats)")),
        w.val: column(help=_("validation loss (nats), mean over seeds")),
        w.std: column(help=_("standard deviation over seeds (nats)")),
        w.ppl: column(help=_("exp(val): as uncertain as a uniform choice among this many characters")),
        w.seeds: column(help=_("trainings with different seeds")),
        w.last: column(help=_("validation loss at the last position only")),
        w.s: column(help=_("wall time of the run in seconds")),
    })
    if baselines is not None:
        right.markdown(fill(_("Counting on the same split (the dashed lines): unigram {uni}; bigram {bi}."),
                            uni=nats_text(baselines.unigram.val_nats), bi=nats_text(baselines.bigram.val_nats)))
    lines = comparison_lines(experiment)
    if lines:
        right.markdown("\n".join(f"- {line}" for line in lines))
        right.caption(_("A difference counts as more than the seed noise when |Δ mean| > 2·√(std_a²/n_a + "
                        "std_b²/n_b) (twice the standard error of the difference). With so few seeds the standard "
                        "deviations are themselves uncertain: this is a rough screen, not a significance test, and "
                        "a flagged difference of a few hundredths of a nat is weak evidence."))


def show_causal_details(shown: ExperimentResult) -> None:
    """The no-mask experiment's per-position losses and samples."""
    names = [run_name(r.key) for r in shown.runs]
    st.plotly_chart(figures.loss_by_position_figure([r.loss_by_position for r in shown.runs], names,
                                                    figures.ByPositionLabels(
        title=_("Validation loss by position"),
        position=_("position in the window (the last one is what generation uses)"),
        loss=_("val loss (nats, log scale)"), separators=plotly_separators())), key="lab_exp_positions_loss")
    for r, name in zip(shown.runs, names, strict=True):
        others = r.loss_by_position[:-1] or r.loss_by_position
        st.markdown(fill(
            _("{run}: val loss over positions 0 … {last} **{mean:.3f}** · at the last position **{final:.3f}**"
                      ), run=name, last=len(others) - 1, mean=sum(others) / len(others),
                               final=r.loss_by_position[-1]))
    for line in causal_outcome(shown):
        st.markdown(line)
    sampled = [(r, name) for r, name in zip(shown.runs, names, strict=True) if r.samples is not None]
    if not sampled:
        return
    st.caption(fill(
        _("Samples from “{prompt}” (/ a line break, // blank lines): greedy, then sampled at temperature 0.8, "
                 "top-k 20."), prompt=sampled[0][0].samples.prompt))
    for r, name in sampled:
        greedy, sampled_text = (re.sub(r"\n+", lambda m: " / " if len(m.group()) == 1 else " // ", text)
                                for text in (r.samples.greedy, r.samples.sampled))
        st.markdown(fill(_("**{run}** · greedy: {greedy}  \nsampled: {sampled}"), run=name, greedy=greedy,
                                                                                  sampled=sampled_text))
    if any(UNK in text for r, _name in sampled for text in (r.samples.greedy, r.samples.sampled)):
        st.caption(fill(_("Where a sample shows {unk}, its model wrote the unknown token: the command that made these "
                     "samples let it; generation on this page leaves it out."), unk=UNK))


def _other_positions(losses: tuple[float, ...]) -> float:
    """Mean validation loss over every position but the last."""
    others = losses[:-1] or losses
    return sum(others) / len(others)


def causal_outcome(shown: ExperimentResult) -> list[str]:
    """What the runs without the mask measured beside the masked one, each sentence chosen by the numbers."""
    keys = {r.key for r in shown.runs}
    if not {"causal", "no_mask"} <= keys:
        return []
    masked, free = shown.run("causal"), shown.run("no_mask")
    values = {"free": num(free.train_loss, 3), "masked": num(masked.train_loss, 3)}
    if free.train_loss < masked.train_loss:
        lines = [fill(_("Without the mask, the learned-table model's training loss ends lower than the masked model's "
                   "({free} vs {masked} nats)."), **values)]
    else:
        lines = [fill(_("Without the mask, the learned-table model's training loss ends no lower than the masked "
                   "model's ({free} vs {masked} nats): within this budget it has not found the copy."), **values)]
    if "no_mask_rope" in keys:
        rope = shown.run("no_mask_rope")
        other, masked_other = _other_positions(rope.loss_by_position), _other_positions(masked.loss_by_position)
        final, masked_final = rope.loss_by_position[-1], masked.loss_by_position[-1]
        values = {"last": integer(len(rope.loss_by_position) - 2), "other": num(other, 3),
                  "masked": num(masked_other, 3), "final": num(final, 3), "masked_final": num(masked_final, 3)}
        cheats = other < masked_other and final >= masked_final
        if cheats:
            lines.append(fill(
                _("With RoPE and no mask, the validation loss over positions 0 … {last} falls to {other} nats "
                           "(masked: {masked}) while at the last position it is {final} (masked: {masked_final}): the "
                           "copy works everywhere but where generation reads."), **values))
        else:
            lines.append(fill(_("With RoPE and no mask, the validation loss over positions 0 … {last} is {other} nats "
                           "(masked: {masked}) and {final} at the last position (masked: {masked_final}): within "
                           "this budget the copy does not show."), **values))
    return lines


@st.cache_data(show_spinner=False)
def lesson_param_counts():
    """The lesson's qkv parameter counts of one attention layer at n_embd 32 for 1, 4 and 8 heads."""
    return [multi_head.param_counts(chapter.LESSON_N_EMBD, n) for n in (1, 4, 8)]


def heads_details(shown: ExperimentResult) -> None:
    """Exercise 2's parameter counts: the same for every head count, as the lesson's layer shows."""
    st.markdown(fill(_("parameters: {counts}"), counts=", ".join(integer(r.params) for r in shown.runs)))
    page.verdict(shown.same_params, _("same parameter count for every head count"), _("parameter counts differ"))
    counts = lesson_param_counts()
    page.chapter_check(_("one attention layer at n_embd 32: qkv parameters for 1, 4, 8 heads"),
                       [c.qkv for c in counts], [chapter.LESSON_QKV_PARAMS] * 3)


def rerun_panel(lab: LabSession, name: str) -> None:
    """Progress of a live rerun of one experiment (polled while it runs)."""
    job = lab.rerun_job(name)
    if job is None:
        return
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(queued_text(snap), icon=":material/hourglass_top:")
    elif snap.state == "running":
        st.progress(snap.fraction, text=fill(_("run {index} of {count} ({run}): step {step} / {steps} · {eta}"),
            index=snap.run_index + 1, count=snap.run_count, run=run_name(snap.run_key), step=snap.step,
            steps=snap.steps, eta=eta_text(snap.eta_s)))
        st.button(_("Stop"), key=f"lab_stop_experiment_{name}", on_click=job.stop)
    elif snap.state == "error":
        st.error(fill(_("The rerun failed: {error}"), error=snap.error))
    elif snap.state == "stopped":
        st.warning(_("Rerun stopped; nothing was kept."))
    if lab.collect_rerun(name):
        st.rerun()


def results_notes(results: ResultsFile) -> None:
    """Where the shipped results come from, and the seeds they were trained with."""
    st.caption(fill(
        _("Shipped results: `{command}` · {steps} steps of batch {batch} × block_size {block} per run, peak "
                 "learning rate {lr:g} · {corpus} · {cpu} ({threads} threads, {device}) · {minutes:.1f} min in all"
                 ), command=results.command, steps=results.steps, batch=results.batch_size,
                          block=results.block_size, lr=results.learning_rate, corpus=results.corpus,
                          cpu=results.cpu, threads=results.threads, device=results.device,
                          minutes=results.total_wall_s / 60)
               + ("" if results.complete else _(" · INCOMPLETE: the command did not finish")))
    if results.seeds:
        st.caption(fill(
            _("Every run was trained with the seeds {seeds}; the table gives the mean ± standard deviation over "
                     "them, and a difference between two runs counts as real when it exceeds the seed noise (rule "
                     "below each table)."), seeds=", ".join(map(str, results.seeds))))


def experiments_section(lab: LabSession, corpus: Corpus | None, seed: int) -> None:
    """Every experiment: its shipped or live results, its details, its rerun button and the rerun's progress.

    Args:
        lab: this reader's state (live reruns).
        corpus: the training text chosen in section 1 (reruns train on it), or None.
        seed: the seed of section 2's controls (the reruns' seed).
    """
    results, unreadable = shipped.experiment_results()
    if unreadable:
        st.warning(_("The shipped results file cannot be read."))
    if results is None:
        st.info(_("No precomputed results ship with this copy: run `python -m engine.lab.experiments` or rerun "
                  "below."))
    else:
        results_notes(results)
    rerun_steps = url.int_input(st, _("steps per run for a live rerun"), *rules.RERUN_STEPS, step=10, value=100,
                                key="lab_rerun_steps")
    for name in EXPERIMENTS:
        st.markdown(f"#### {experiment_title(name)}")
        if name == "causal":
            page.prose("causal")
        live = lab.live_result(name)
        shown = experiment_result(live) if live is not None else (results.get(name) if results else None)
        if shown is not None:
            if live is not None:
                st.caption(fill(_("Your live rerun: {steps} steps of batch {batch} on {corpus}."),
                    steps=shown.steps, batch=shown.batch_size, corpus=shown.corpus))
            show_experiment(shown, f"lab_exp_{name}", baselines_for(shipped_corpus(shown.corpus, corpus)))
            if name == "heads":
                heads_details(shown)
            if name == "causal":
                show_causal_details(shown)
        running = lab.rerunning(name)
        if st.button(fill(_("Rerun live with {steps} steps per run (batch {batch})"), steps=rerun_steps,
                                                                                       batch=rules.RERUN_BATCH),
                     key=f"lab_rerun_experiment_{name}", disabled=running or corpus is None,
                     icon=":material/replay:") and not running:
            if corpus is not None and corpus.max_block_size >= rules.RERUN_BLOCK_SIZE:
                lab.start_rerun(name, corpus, rerun_steps, seed)
                st.rerun()  # redraw with the button disabled and the progress polling
            else:
                st.error(fill(_("This text is too short for the course model's block_size of {block}."),
                    block=integer(rules.RERUN_BLOCK_SIZE)))
        with page.slot():  # a note that comes and goes keeps the fragment below in its place
            if lab.pop_busy_notice(name):
                st.warning(busy_text(), icon=":material/tab:")
        st.fragment(run_every=POLL_S if running else None)(rerun_panel)(lab, name)
