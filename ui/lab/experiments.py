"""Section 6 of the Lab: the lesson's exercises as the shipped runs answer them, and the reader's paired reruns.

The answers come from ``assets/lab_exercises.json`` (``engine.lab.results.read_exercises``): per exercise a table
of the runs, a table of the paired differences from the course model, the runs' validation loss during training
(mean over the seeds), one sentence per comparison chosen by its verdict, where along the window a difference
comes from, the counting baseline, and for the runs without the mask their losses by position and samples.
Under each, the reader's paired rerun of one comparison (``ui.lab.rerun``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from babel.lists import format_list

from engine import chapter, positions
from engine.baselines import Baselines
from engine.corpus import Corpus
from engine.figures import lab as figures
from engine.gpt import SINUSOIDAL_SCALE
from engine.lab import experiments as lab_experiments
from engine.lab.experiments.measurement import SAMPLE_TEMPERATURE, SAMPLE_TOP_K
from engine.lab.experiments.stats import ALPHA, POWER, paired_comparison
from engine.lab.results import (
    VERDICTS,
    ExerciseRun,
    ExercisesFile,
    ExerciseSummary,
    History,
    PairedDifference,
    PositionCurve,
    Samples,
)
from engine.sections import multi_head
from engine.tokenizer import UNK
from ui import gates, page
from ui import positions as ui_positions
from ui.i18n import _, current_language, ngettext
from ui.lab import rerun as ui_rerun
from ui.lab import shipped
from ui.lab.corpus import baselines_for, shipped_corpus
from ui.lab.session import LabSession
from ui.lab.verdicts import seeds_text, verdict_sentence
from ui.lab.words import fill, run_name
from ui.numbers import colon, integer, num, plotly_separators, semicolon
from ui.questions import lab as lab_questions

#: The run every exercise compares with, as each exercise names it (``engine.lab.experiments.EXERCISES``).
_COURSE = {"heads": "heads_4", "positions": positions.LEARNED.key, "no_mask": "causal"}
#: Exercise run keys (``engine.lab.experiments.EXERCISE_RUNS``) -> the older sets' keys that ``run_name`` names
#: (a position run ``pos_<key>`` is named by its encoding's key).
_OLDER_KEYS = {"heads_1": "heads_1", "heads_8": "heads_8", "no_mask_learned": "no_mask", "no_mask_rope": "no_mask_rope",
               **{f"pos_{enc.key}": enc.key for enc in positions.ENCODINGS}}
#: A window's first positions, against which "along the window" compares the rest: block_size // EARLY_SHARE.
EARLY_SHARE = 8


#: An absolute path of some machine (POSIX or Windows), as a command line may record it.
_MACHINE_PATH = re.compile(r"(?<![\w.])(?:/|[A-Za-z]:\\)[^\s`'\"]*")


def repository_paths(command: str) -> str:
    """``command`` with every absolute path cut to its part inside the repository (``…/assets/x.json`` ->
    ``assets/x.json``) or to its file name: no page shows a path of the machine that recorded a file."""
    def cut(match: re.Match) -> str:
        parts = re.split(r"[\\/]", match.group(0))
        for top in ("assets", "runs", "engine", "docs"):
            if top in parts:
                return "/".join(parts[parts.index(top):])
        return parts[-1]
    return _MACHINE_PATH.sub(cut, command)


def exercise_title(name: str) -> str:
    """The heading of an exercise (``engine.lab.experiments.EXERCISES`` key); the positions exercise names its
    encodings, those of its runs (``ui.positions``), in the registry's order."""
    if name == "positions":
        keys = {lab_experiments.EXERCISE_RUNS[k].config().pos_encoding for k in lab_experiments.EXERCISES[name].runs}
        names = [ui_positions.name(enc.key) for enc in positions.ENCODINGS if enc.key in keys]
        return fill(_("The lesson's exercise 3 · position information: {encodings}"),
                    encodings=format_list(names, locale=current_language()))
    return {
        "heads": _("The lesson's exercise 2 · 1, 4 or 8 heads at n_embd 128"),
        "no_mask": _("Beyond the lesson's exercises · training without the causal mask"),
    }.get(name, name)


def exercise_run_name(exercise: str, key: str) -> str:
    """The label of configuration ``key`` in ``exercise``; the course model is named by what the exercise varies."""
    if key == "course":
        return run_name(_COURSE.get(exercise, key))
    return run_name(_OLDER_KEYS.get(key, key))


def window_growth(runs: Sequence[ExerciseRun], references: Sequence[ExerciseRun],
                  split: int) -> PairedDifference | None:
    """How a run's difference from the reference changes along the window, seed by seed.

    For each seed both have, the difference of the by-position losses (run − reference) is averaged over the first
    ``split`` positions (early) and over the rest (late); the growth of that seed is ``|late| − |early|`` (nats,
    positive: the gap widens along the window). The growths are compared with 0 as any paired difference is
    (``engine.lab.experiments.stats.paired_comparison``: mean, Student's t interval over the seeds, verdict).

    Returns:
        The comparison of ``|early|`` (as ``a``) with ``|late|`` (as ``b``) over the shared seeds, or None when they
        share no seed or a window is shorter than two positions.
    """
    by_seed = {r.seed: r.val_loss_by_position for r in references}
    early, late = {}, {}
    for r in runs:
        ref = by_seed.get(r.seed)
        if ref is None or len(ref) != len(r.val_loss_by_position) or not 0 < split < len(ref):
            continue
        diff = [b - a for a, b in zip(ref, r.val_loss_by_position, strict=True)]
        early[r.seed] = abs(sum(diff[:split]) / split)
        late[r.seed] = abs(sum(diff[split:]) / (len(diff) - split))
    return paired_comparison("early", "late", early, late) if early else None


def along_window_sentence(c: PairedDifference, curve: PositionCurve, run: str, reference: str,
                          growth: PairedDifference | None = None) -> str | None:
    """Where along the window a detected difference comes from: its first positions against the rest.

    The difference "grows" (or "shrinks") only where the seeds' growth interval (:func:`window_growth`) lies
    above (or below) 0; where it holds 0, or with a single seed, the sentence says no trend is detected, with
    the interval. None for a comparison without a detected difference (its by-position wiggles are noise) or
    without curves.
    """
    if c.verdict not in VERDICTS[:2] or curve.difference is None:
        return None
    block = len(curve.difference)
    split = max(1, block // EARLY_SHARE)
    early, late = curve.mean_difference(0, split), curve.mean_difference(split)
    if early is None or late is None:
        return None
    values = {"run": run, "reference": reference, "early": early, "late": late, "split_last": split - 1,
              "split": split, "last": block - 1}
    interval = None if growth is None else growth.t_interval
    if interval is not None:
        values.update(growth=growth.mean, low=interval[0], high=interval[1], level=1 - ALPHA,
                      seeds=seeds_text(growth.seeds))
    if interval is not None and interval[0] > 0:
        template = _("Along the window, the gap between {run} and {reference} grows: {early:+.3f} nats on average "
                     "at positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; it widens by "
                     "{growth:+.3f} nats over the seeds {seeds} ({level:.0%} interval {low:+.3f} … {high:+.3f}).")
    elif interval is not None and interval[1] < 0:
        template = _("Along the window, the gap between {run} and {reference} shrinks: {early:+.3f} nats on average "
                     "at positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; it narrows by "
                     "{growth:+.3f} nats over the seeds {seeds} ({level:.0%} interval {low:+.3f} … {high:+.3f}).")
    elif interval is not None:
        template = _("Along the window, the gap between {run} and {reference} shows no trend these seeds can detect: "
                     "{early:+.3f} nats on average at positions 0 … {split_last}, {late:+.3f} at positions {split} … "
                     "{last}; its change, {growth:+.3f} nats over the seeds {seeds}, has a {level:.0%} interval "
                     "{low:+.3f} … {high:+.3f}, which holds 0.")
    else:
        template = _("Along the window, the gap between {run} and {reference}: {early:+.3f} nats on average at "
                     "positions 0 … {split_last}, {late:+.3f} at positions {split} … {last}; one seed cannot tell a "
                     "trend from the seed-to-seed spread.")
    return fill(template, **values) + " " + window_signs_sentence(run, reference, interval is not None)


def window_signs_sentence(run: str, reference: str, with_change: bool) -> str:
    """Which minus which in :func:`along_window_sentence`: the differences are the run's loss minus the
    reference's (``PositionCurve.difference``), the change is ``|late| − |early|`` per seed (:func:`window_growth`)."""
    if with_change:
        return fill(_("(Each difference is the validation loss of {run} minus that of {reference}; the change is the "
                      "size of the later difference minus the size of the first one, |late| − |early|, seed by "
                      "seed, so a positive change is a widening gap.)"), run=run, reference=reference)
    return fill(_("(Each difference is the validation loss of {run} minus that of {reference}.)"), run=run,
                reference=reference)


def bigram_sentence(runs: Sequence[tuple[str, ExerciseRun]], bigram: float) -> str:
    """Whether every run ends below the counting bigram on the whole validation split, naming the closest one.

    Args:
        runs: (name in the reader's language, run) of every seed of every configuration shown.
        bigram: the bigram's validation loss on the same split (nats).
    """
    above = [(name, r) for name, r in runs if r.val_loss >= bigram]
    if not above:
        name, highest = max(runs, key=lambda item: item[1].val_loss)
        return fill(_("Every run ends below the bigram's {bigram:.3f} nats on the whole validation split: the highest, "
                      "{run} with the seed {seed}, at {val:.3f} nats."), bigram=bigram, run=name, seed=highest.seed,
                    val=highest.val_loss)
    listed = semicolon().join(fill(_("{run}, seed {seed}: {val:.3f}"), run=name, seed=r.seed, val=r.val_loss)
                       for name, r in above)
    return fill(ngettext("{count} of {total} runs ends at or above the bigram's {bigram:.3f} nats, so it has learned "
                         "no more than counting: {runs}.",
                         "{count} of {total} runs end at or above the bigram's {bigram:.3f} nats, so they have "
                         "learned no more than counting: {runs}.", len(above)),
                count=len(above), total=len(runs), bigram=bigram, runs=listed)


def sinusoidal_note(exercise: ExerciseSummary) -> str | None:
    """Where the fixed sinusoidal table ends behind no position information at all (both detectably worse than the
    course model, the table more so), a sentence that says so and names the one thing that sets it apart here: the
    table is fixed and scaled by ``engine.gpt.SINUSOIDAL_SCALE``. None otherwise."""
    sinus, none = exercise.comparison("pos_sinusoidal"), exercise.comparison("pos_none")
    if sinus is None or none is None or sinus.verdict != VERDICTS[1] or none.verdict != VERDICTS[1] \
            or not sinus.mean > none.mean:
        return None
    return fill(_("Here the fixed sinusoidal table ends behind no position information at all ({sinus:+.3f} against "
                  "{none:+.3f} nats from the course model). These runs do not say why; what sets the table apart is "
                  "that the model cannot change it and that the app adds it scaled by {scale:g} (page 7 shows the "
                  "table), so a learner should not read this as a verdict on sinusoidal encodings in general."),
                sinus=sinus.mean, none=none.mean, scale=SINUSOIDAL_SCALE)


def _other_positions(losses: Sequence[float]) -> float:
    """Mean validation loss over every position but the last."""
    others = losses[:-1] or losses
    return sum(others) / len(others)


def no_mask_sentences(exercise: ExerciseSummary, bigram: float | None) -> list[str]:
    """What the runs without the mask measured beside the masked one, position by position, chosen by the numbers.

    One sentence per run without the mask (whether it copies: lower than the masked model before the last
    position, not lower at the last one), then the last position against the bigram when it is known.
    """
    curves = {c.key: c for c in exercise.by_position}
    masked = curves.get(exercise.reference)
    if masked is None:
        return []
    lines, finals = [], []
    for key in exercise.runs:
        curve = curves.get(key)
        if key == exercise.reference or curve is None:
            continue
        name = exercise_run_name(exercise.name, key)
        other, final = _other_positions(curve.mean), curve.mean[-1]
        values = {"run": name, "other": other, "masked": _other_positions(masked.mean), "final": final,
                  "masked_final": masked.mean[-1], "second_last": len(curve.mean) - 2}
        if other < values["masked"] and final >= values["masked_final"]:
            template = _("**{run}**: {other:.3f} nats on average at positions 0 … {second_last} (with the mask: "
                         "{masked:.3f}), {final:.3f} at the last position (with the mask: {masked_final:.3f}): it "
                         "copies the next character wherever it can see it, and cannot at the last position, the "
                         "one generation uses.")
        else:
            template = _("**{run}**: {other:.3f} nats on average at positions 0 … {second_last} (with the mask: "
                         "{masked:.3f}), {final:.3f} at the last position (with the mask: {masked_final:.3f}): no "
                         "copy shows at this budget.")
        lines.append(fill(template, **values))
        finals.append(fill(_("{run}: {final:.3f}"), run=name, final=final))
    if bigram is not None and finals:
        worse = all(curves[k].mean[-1] > bigram for k in exercise.runs if k != exercise.reference and k in curves)
        template = (_("At the last position the runs without the mask do worse than the bigram's {bigram:.3f} nats "
                      "({finals}): for generation they are worse than counting.") if worse else
                    _("At the last position not every run without the mask does worse than the bigram's {bigram:.3f} "
                      "nats ({finals})."))
        lines.append(fill(template, bigram=bigram, finals=semicolon().join(finals)))
    return lines


@dataclass(frozen=True)
class ExerciseWords:
    """The words of an exercise's tables and charts, in the reader's language."""

    run: str
    params: str
    val: str
    per_seed: str
    last: str
    differences: str
    effect: str
    detectable: str
    verdict: str
    verdicts: tuple[tuple[str, str], ...]
    curves: figures.PositionCurvesLabels
    log_curves: figures.ByPositionLabels
    training: figures.SeedCurvesLabels
    log_training: figures.SeedCurvesLabels


def exercise_words() -> ExerciseWords:
    """The words of :func:`exercise_tables` and the exercises' charts."""
    return ExerciseWords(
        run=_("run"), params=_("params"), val=_("val loss (mean)"), per_seed=_("val loss per seed"),
        last=_("val, last pos."), differences=_("Δ per seed"),
        effect=fill(_("Δ mean ({level:.0%} interval)"), level=1 - ALPHA),
        detectable=_("smallest detectable"), verdict=_("verdict"),
        verdicts=((VERDICTS[0], _("better")), (VERDICTS[1], _("worse")), (VERDICTS[2], _("no detectable difference")),
                  (VERDICTS[3], _("too few seeds"))),
        curves=figures.PositionCurvesLabels(
            loss_title=_("Validation loss by position, mean over the seeds"),
            difference_title=_("Difference from the course model by position (below 0: lower loss there)"),
            position=_("position in the window"), loss=_("val loss (nats)"), difference=_("Δ (nats)"),
            separators=plotly_separators(), colon=colon()),
        log_curves=figures.ByPositionLabels(
            title=_("Validation loss by position, mean over the seeds"),
            position=_("position in the window (the last one is what generation uses)"),
            loss=_("val loss (nats, log scale)"), separators=plotly_separators(), colon=colon()),
        training=figures.SeedCurvesLabels(
            title=_("Validation loss during training, mean over the seeds"), step=_("step"),
            loss=_("val loss (nats)"), separators=plotly_separators(), colon=colon()),
        log_training=figures.SeedCurvesLabels(
            title=_("Validation loss during training, mean over the seeds"), step=_("step"),
            loss=_("val loss (nats, log scale)"), separators=plotly_separators(), colon=colon()))


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def exercise_tables(data: ExercisesFile, exercise: ExerciseSummary, words: ExerciseWords
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs' table and the paired differences' table of one exercise, every cell in the reader's number format.

    Runs: one row per configuration (parameters, validation loss over the whole split, mean and per seed, and at
    the last position). Differences: one row per configuration compared with the reference (b − reference per
    seed, their mean with its t interval, the smallest detectable difference, the verdict).
    """
    w = words
    rows = []
    for key in exercise.runs:
        runs = data.runs_of(key)
        if not runs:
            continue
        rows.append({w.run: exercise_run_name(exercise.name, key), w.params: integer(runs[0].params),
                     w.val: num(_mean([r.val_loss for r in runs]), 3),
                     w.per_seed: " · ".join(num(r.val_loss, 3) for r in runs),
                     w.last: num(_mean([r.val_loss_by_position[-1] for r in runs]), 3)})
    verdicts = dict(w.verdicts)
    pairs = [{w.run: exercise_run_name(exercise.name, c.b),
              w.differences: " · ".join(fill("{d:+.3f}", d=d) for d in c.differences),
              w.effect: fill("{d:+.3f}", d=c.mean) + ("" if c.t_interval is None else fill(
                  " ({low:+.3f} … {high:+.3f})", low=c.t_interval[0], high=c.t_interval[1])),
              w.detectable: "—" if c.detectable is None else num(c.detectable, 3),
              w.verdict: verdicts.get(c.verdict, c.verdict)} for c in exercise.comparisons]
    return pd.DataFrame(rows), pd.DataFrame(pairs)


@st.cache_resource(show_spinner=False, max_entries=16)
def position_figure(exercise: ExerciseSummary, names: tuple[str, ...], words: ExerciseWords,
                    bigram: tuple[tuple[str, float], ...]) -> go.Figure:
    """The loss-by-position chart of one exercise: two panels (loss, difference) or, without the mask, a log axis."""
    curves = {c.key: c for c in exercise.by_position}
    keys = [k for k in exercise.runs if k in curves]
    if exercise.name == "no_mask":
        return figures.loss_by_position_figure([curves[k].mean for k in keys], names, words.log_curves,
                                               baselines=dict(bigram))
    return figures.position_curves_figure([curves[k].mean for k in keys], [curves[k].difference for k in keys],
                                          names, words.curves, baselines=dict(bigram))


def position_alt(exercise: ExerciseSummary) -> str:
    """The loss-by-position chart in words: each configuration's loss at the first, middle and last position."""
    curves = [c for key in exercise.runs for c in exercise.by_position if c.key == key]
    if not curves:
        return ""
    block = len(curves[0].mean)
    middle = block // 2
    items = semicolon().join(fill(_("{run}: {first:.3f} at position 0, {middle:.3f} at {mid}, {last:.3f} at {end}"),
                           run=exercise_run_name(exercise.name, c.key), first=c.mean[0], middle=c.mean[middle],
                           mid=middle, last=c.mean[-1], end=block - 1) for c in curves)
    return fill(_("Chart of the validation loss at each position 0 … {end} of the window, mean over the seeds {seeds}, "
                  "with the bigram as a dashed line: {items}."), end=block - 1,
                seeds=seeds_text(exercise.seeds_complete), items=items)


def exercise_histories(data: ExercisesFile, exercise: ExerciseSummary) -> list[tuple[str, tuple[ExerciseRun, ...]]]:
    """(name in the reader's language, every seed's run) of each configuration of ``exercise`` the file holds, in the
    exercise's order: the runs the tables average, whose loss curves the training chart draws."""
    return [(exercise_run_name(exercise.name, key), data.runs_of(key)) for key in exercise.runs if data.runs_of(key)]


@st.cache_resource(show_spinner=False, max_entries=16)
def training_figure(histories: tuple[tuple[History, ...], ...], names: tuple[str, ...],
                    seed_names: tuple[tuple[str, ...], ...], labels: figures.SeedCurvesLabels,
                    bigram: tuple[tuple[str, float], ...], log_y: bool) -> go.Figure:
    """The training chart of one exercise: each configuration's validation loss (nats) against the step, the mean
    over its seeds solid and each seed faint (``figures.seed_curves_figure``), the bigram dashed; a log axis for
    the runs without the mask, which end near 0."""
    return figures.seed_curves_figure(histories, names, seed_names, labels, baselines=dict(bigram), log_y=log_y)


def training_alt(data: ExercisesFile, exercise: ExerciseSummary, bigram: float | None) -> str:
    """The training chart in words: each configuration's mean validation loss (nats) at the first and last
    evaluation step, and the bigram's line."""
    items = []
    for name, runs in exercise_histories(data, exercise):
        steps, means = figures.mean_val_curve([r.history for r in runs])
        if steps:
            items.append(fill(_("{run}: {first:.3f} at step {first_step}, {last:.3f} at step {last_step}"), run=name,
                              first=means[0], first_step=integer(steps[0]), last=means[-1],
                              last_step=integer(steps[-1])))
    if not items:
        return ""
    seeds = sorted({r.seed for _name, runs in exercise_histories(data, exercise) for r in runs})
    text = fill(_("Chart of the validation loss against the optimizer step during training, mean over the seeds "
                  "{seeds}: {items}."), seeds=seeds_text(seeds), items=semicolon().join(items))
    if bigram is None:
        return text
    return text + " " + fill(_("The dashed line is the bigram's {bigram:.3f} nats."), bigram=bigram)


def show_training(data: ExercisesFile, exercise: ExerciseSummary, words: ExerciseWords, bigram: float | None,
                  line: tuple[tuple[str, float], ...]) -> None:
    """The shipped runs' training curves of one exercise, with what their points are."""
    shown = exercise_histories(data, exercise)
    if not any(r.history.step for _name, runs in shown for r in runs):
        return
    log_y = exercise.name == "no_mask"
    figure = training_figure(tuple(tuple(r.history for r in runs) for _name, runs in shown),
                             tuple(name for name, _runs in shown),
                             tuple(tuple(fill(_("seed {seed}"), seed=r.seed) for r in runs) for _name, runs in shown),
                             words.log_training if log_y else words.training, line, log_y)
    st.caption(_("How the runs trained: each point is the trainer's estimate of the validation loss on a few "
                 "validation batches at that evaluation, so it differs slightly from the table's loss over the whole "
                 "validation split. Thick line: the mean over the seeds; thin lines: each seed."))
    st.plotly_chart(figure, key=f"lab_exercise_{exercise.name}_training", alt=training_alt(data, exercise, bigram))


def _one_line(text: str) -> str:
    """A sample on one line: " / " for a line break, " // " for blank lines."""
    return re.sub(r"\n+", lambda m: " / " if len(m.group()) == 1 else " // ", text)


def show_samples(pairs: Sequence[tuple[str, Samples]]) -> None:
    """Greedy and sampled continuations of the lesson's prompt, one paragraph per run."""
    if not pairs:
        return
    st.caption(fill(_("Samples from “{prompt}” (/ a line break, // blank lines): greedy, then sampled at temperature "
                      "{temperature:g}, top-k {top_k}."), prompt=pairs[0][1].prompt, temperature=SAMPLE_TEMPERATURE,
                    top_k=SAMPLE_TOP_K))
    for name, s in pairs:
        st.markdown(fill(_("**{run}** · greedy: {greedy}  \nsampled: {sampled}"), run=name,
                         greedy=_one_line(s.greedy), sampled=_one_line(s.sampled)))
    if any(UNK in text for _name, s in pairs for text in (s.greedy, s.sampled)):
        st.caption(fill(_("Where a sample shows {unk}, its model wrote the unknown token: the command that made these "
                          "samples let it; generation on this page leaves it out."), unk=UNK))


@st.cache_data(show_spinner=False)
def lesson_param_counts():
    """The lesson's qkv parameter counts of one attention layer at n_embd 32 for 1, 4 and 8 heads."""
    return [multi_head.param_counts(chapter.LESSON_N_EMBD, n) for n in (1, 4, 8)]


def heads_details(params: Sequence[int]) -> None:
    """Exercise 2's parameter counts: the same for every head count, as the lesson's layer shows."""
    st.markdown(fill(_("parameters: {counts}"), counts=", ".join(integer(p) for p in params)))
    page.verdict(len(set(params)) == 1, _("same parameter count for every head count"), _("parameter counts differ"))
    counts = lesson_param_counts()
    page.chapter_check(_("qkv parameters of one attention layer for 1, 4 and 8 heads at the lesson's n_embd 32"),
                       [c.qkv for c in counts], [chapter.LESSON_QKV_PARAMS] * 3, source="lesson")


def budget_caption(data: ExercisesFile, exercise: ExerciseSummary) -> str:
    """What the exercise table's losses are and the training budget behind them, beside the shipped model's (whose
    longer training is why its loss is lower than the course runs' here)."""
    text = fill(_("Validation loss over the whole validation split, in nats, after {steps} steps of batch {batch} per "
                  "run; the course model is the reference, trained with the same seeds {seeds}."),
                steps=integer(data.steps), batch=data.batch_size, seeds=seeds_text(exercise.seeds_complete))
    shipped_budget = shipped.training_budget()
    if shipped_budget is None or shipped_budget[0] * shipped_budget[1] <= data.steps * data.batch_size:
        return text
    steps, batch = shipped_budget
    return text + " " + fill(_("The shipped model has the course model's sizes but trained {steps} steps of batch "
                               "{batch}, {factor} times as many windows, so its loss is lower."),
                             steps=integer(steps), batch=batch,
                             factor=integer(round(steps * batch / (data.steps * data.batch_size))))


def show_exercise(data: ExercisesFile, exercise: ExerciseSummary, baselines: Baselines | None) -> None:
    """One exercise's answer: the tables, the training curves, the verdicts, where along the window, the bigram,
    the loss-by-position chart, samples."""
    words = exercise_words()
    runs_table, pairs_table = exercise_tables(data, exercise, words)
    st.caption(budget_caption(data, exercise))
    page.static_table(runs_table)
    reference = exercise_run_name(exercise.name, exercise.reference)
    if not pairs_table.empty and exercise.name != "no_mask":  # without the mask a lower loss is the copy, not better
        st.caption(fill(_("Paired by seed: Δ is a run's validation loss minus that of {reference} with the same seed "
                          "(negative: lower, better)."), reference=reference))
        page.static_table(pairs_table)
    bigram = None if baselines is None else baselines.bigram.val_nats
    line = () if bigram is None else ((fill(_("bigram (val {nats:.2f})"), nats=bigram), bigram),)
    show_training(data, exercise, words, bigram, line)
    curves = {c.key: c for c in exercise.by_position}
    lines = []
    for c in exercise.comparisons:
        name = exercise_run_name(exercise.name, c.b)
        lines.append(verdict_sentence(c, name, reference))
        growth = window_growth(data.runs_of(c.b), data.runs_of(exercise.reference),
                               max(1, data.block_size // EARLY_SHARE))
        along = along_window_sentence(c, curves[c.b], name, reference, growth) if c.b in curves else None
        if along is not None:
            lines.append(along)
    if exercise.name == "no_mask":
        lines = no_mask_sentences(exercise, bigram)
    elif bigram is not None:
        shown = [(exercise_run_name(exercise.name, key), r) for key in exercise.runs for r in data.runs_of(key)]
        if shown:
            lines.append(bigram_sentence(shown, bigram))
    note = sinusoidal_note(exercise)
    if note is not None:
        lines.append(note)
    st.markdown("\n".join(f"- {line}" for line in lines))
    if exercise.name == "heads":
        heads_details([data.runs_of(key)[0].params for key in exercise.runs if data.runs_of(key)])
    names = tuple(exercise_run_name(exercise.name, c.key) for key in exercise.runs for c in exercise.by_position
                  if c.key == key)
    if names:
        st.plotly_chart(position_figure(exercise, names, words, line), key=f"lab_exercise_{exercise.name}_positions",
                        alt=position_alt(exercise))
    if exercise.name == "no_mask" and exercise.seeds_complete:
        seed = exercise.seeds_complete[0]
        st.caption(fill(_("The samples of the seed {seed}."), seed=seed))
        show_samples([(exercise_run_name(exercise.name, r.key), r.samples) for key in exercise.runs
                      for r in data.runs_of(key) if r.seed == seed])


def exercises_notes(data: ExercisesFile) -> None:
    """How the shipped runs were trained and where, and the method of the paired comparisons."""
    threads = sorted({r.torch_threads for r in data.runs})
    dropout = sorted({r.config.dropout for r in data.runs})
    with page.technical_details():  # the recording of the runs: the workshop, one click away
        shipped_runs_caption(data, threads, dropout)
    method_caption()


def shipped_runs_caption(data: ExercisesFile, threads: Sequence[int], dropout: Sequence[float]) -> None:
    """How and where the shipped runs were trained: the command (machine paths cut to the repository's), budget,
    seeds, devices and run time."""
    st.caption(fill(
        _("Shipped results: `{command}` · {steps} steps of batch {batch} × block_size {block} per run, peak learning "
          "rate {lr:g} after {warmup} warm-up steps, dropout {dropout} · {corpus}, validation over the whole split "
          "({val_tokens:,} characters) · seeds {seeds} · {runs} runs on {devices} ({cpu}; threads per run: "
          "{threads}) · {hours:.1f} h of run time added up"),
        command=repository_paths(data.commands[-1]) if data.commands else "python -m engine.lab.experiments",
        steps=integer(data.steps),
        batch=data.batch_size, block=data.block_size, lr=data.learning_rate, warmup=data.warmup_steps,
        dropout=", ".join(fill("{d:g}", d=d) for d in dropout), corpus=data.corpus, val_tokens=data.val_tokens,
        seeds=seeds_text(data.seeds), runs=len(data.runs), devices=", ".join(data.devices),
        cpu=", ".join(dict.fromkeys(r.cpu for r in data.runs)), threads=", ".join(integer(t) for t in threads),
        hours=data.wall_s / 3600)
        + ("" if data.complete else fill(_(" · INCOMPLETE: {done} of {planned} runs so far"), done=len(data.runs),
                                         planned=data.planned)))


def method_caption() -> None:
    """The method of the paired comparisons, which the verdicts below follow (in the reading path)."""
    st.caption(fill(_("The runs of one seed start from the same weights where the shapes allow and see the same "
                      "batches, so each configuration is compared with the course model seed by seed. The interval is "
                      "Student's t {level:.0%} interval of the mean difference over the seeds; a difference counts "
                      "when the interval leaves out 0. “Smallest detectable” is the difference a paired t test at "
                      "{alpha:.0%} would find with probability {power:.0%}, given the spread and number of seeds."),
                    level=1 - ALPHA, alpha=ALPHA, power=POWER))


def experiments_section(lab: LabSession, corpus: Corpus | None) -> None:
    """Every exercise: the shipped runs' answer behind its question, then the reader's paired rerun of one of its
    comparisons (``ui.lab.rerun``).

    Args:
        lab: this reader's state (paired reruns).
        corpus: the training text chosen in section 1 (reruns train on it), or None.
    """
    data, unreadable = shipped.exercises()
    if unreadable:
        st.warning(_("The shipped results file cannot be read."))
    if data is None:
        st.info(_("No precomputed results ship with this copy: run `python -m engine.lab.experiments`, or rerun a "
                  "comparison below."))
    else:
        exercises_notes(data)
    baselines = None if data is None else baselines_for(shipped_corpus(data.corpus, corpus))
    own_baselines = None if corpus is None else baselines_for(corpus)
    steps = ui_rerun.steps_control()
    for name in lab_experiments.EXERCISES:
        st.markdown(f"#### {exercise_title(name)}")
        if name == "no_mask":
            page.prose("causal")
        exercise = None if data is None else data.exercise(name)
        asked = lab_questions.BY_EXERCISE.get(name)
        revealed = exercise is not None and (asked is None or gates.gate(asked, **lab_questions.FACTS[name](data)))
        if revealed:
            show_exercise(data, exercise, baselines)
        names = {key: exercise_run_name(name, key) for key in lab_experiments.EXERCISES[name].runs}
        ui_rerun.rerun(lab, name, data, corpus, steps, names, revealed, own_baselines)
