"""The GPT Lab page's panels and words: what ``engine.lab`` returns as data and keys, said to the reader.

``views/lab.py`` keeps the page's layout and calls these. Every visible string goes through
:func:`ui.i18n._`; the engine's stable keys (job states, stop reasons, refusal keys, upload
problems, checkpoint reasons, experiment and run keys) are translated here and nowhere else.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

from engine import budget
from engine.baselines import Baselines, corpus_baselines
from engine.checkpoint import CheckpointError
from engine.corpus import BUILTIN_CORPORA, Corpus
from engine.device import release_free_memory
from engine.figures import lab as LF
from engine.gpt import GPTConfig
from engine.lab.jobs import ExperimentJob, Snapshot, TrainingJob
from engine.lab.models import LabModel, UploadResult, corpus_fingerprint
from engine.lab.settings import DropoutLoss, Problem, TrainingPlan
from ui.i18n import _, ngettext

MB = budget.MB


# --- the reader's session ------------------------------------------------------------------------------------------
def owner_alive() -> Callable[[], bool] | None:
    """A callable that tells a job whether this reader's session is still connected (Streamlit's runtime).

    None where there is no Streamlit runtime (``AppTest``, scripts): the job then lives until it
    ends or reaches its wall-time cap.
    """
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not runtime.exists():
        return None
    instance, session_id = runtime.get_instance(), ctx.session_id
    return lambda: instance.is_active_session(session_id)


# --- baselines -------------------------------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _baselines(name: str, fingerprint: str, _corpus: Corpus) -> Baselines:
    baselines = corpus_baselines(_corpus)
    release_free_memory()  # the counting's transient arrays
    return baselines


def baselines_for(corpus: Corpus | None) -> Baselines | None:
    """The unigram and bigram baselines of a corpus, counted once per built-in corpus (or uploaded text)."""
    if corpus is None:
        return None
    fingerprint = "" if corpus.name in BUILTIN_CORPORA else corpus_fingerprint(corpus)
    return _baselines(corpus.name, fingerprint, corpus)


def baseline_lines(baselines: Baselines | None) -> dict[str, float]:
    """``{label: val nats}`` of the two baselines, for the dashed lines of the loss charts."""
    if baselines is None:
        return {}
    return {_("unigram (val {nats:.2f})").format(nats=baselines.unigram.val_nats): baselines.unigram.val_nats,
            _("bigram (val {nats:.2f})").format(nats=baselines.bigram.val_nats): baselines.bigram.val_nats}


def nats_text(nats: float) -> str:
    """"4.483 nats (perplexity 88.5)"."""
    return _("{nats:.3f} nats (perplexity {ppl:,.1f})").format(nats=nats, ppl=math.exp(min(nats, 50.0)))


def versus_baselines(val_loss: float, baselines: Baselines | None) -> str:
    """One sentence: a validation loss beside the unigram and bigram validation losses, in nats and perplexity."""
    if baselines is None:
        return ""
    uni, bi = baselines.unigram.val_nats, baselines.bigram.val_nats
    if val_loss < bi:
        verdict = _("below the bigram line: the model has learned more than which character follows which")
    elif val_loss < uni:
        verdict = _("between the two lines: better than counting characters, not yet better than counting pairs")
    else:
        verdict = _("above the unigram line: no better than counting characters")
    return _("val {val} · unigram {uni} · bigram {bi}: {verdict}.").format(
        val=nats_text(val_loss), uni=nats_text(uni), bi=nats_text(bi), verdict=verdict)


# --- words for the engine's keys ------------------------------------------------------------------------------------
def experiment_title(name: str) -> str:
    """The heading of an experiment (``engine.lab.experiments.EXPERIMENTS`` key)."""
    return {
        "heads": _("Exercise 2 · 1 vs 4 vs 8 heads at n_embd 128"),
        "positions": _("Exercise 3 · position information: none, learned, RoPE, sinusoidal"),
        "causal": _("Beyond the lesson · training without the causal mask"),
    }.get(name, name)


def run_name(key: str) -> str:
    """The label of an experiment run (a ``Run.key``)."""
    return {
        "heads_1": _("1 head of 128"),
        "heads_4": _("4 heads of 32 (course)"),
        "heads_8": _("8 heads of 16"),
        "none": _("none"),
        "learned": _("learned (course)"),
        "rope": _("RoPE"),
        "sinusoidal": _("sinusoidal"),
        "causal": _("causal mask (course)"),
        "no_mask": _("no causal mask"),
        "no_mask_rope": _("no causal mask, RoPE"),
    }.get(key, key)


def eta_text(seconds: float | None) -> str:
    """"about 1 min 05 s left", "about 12 s left" or "estimating time left …"."""
    if seconds is None:
        return _("estimating time left …")
    seconds = max(0, round(seconds))
    if seconds >= 60:
        return _("about {minutes} min {seconds:02d} s left").format(minutes=seconds // 60, seconds=seconds % 60)
    return _("about {seconds} s left").format(seconds=seconds)


def duration_text(seconds: float) -> str:
    """"12 s", "4 min" or "3.2 h" for an estimate."""
    if seconds < 90:
        return _("{seconds:.0f} s").format(seconds=seconds)
    if seconds < 5400:
        return _("{minutes:.0f} min").format(minutes=seconds / 60)
    return _("{hours:.1f} h").format(hours=seconds / 3600)


def problem_text(problem: Problem) -> str:
    """Why a training may not start, for one ``engine.lab.settings.Problem``."""
    key, value, limit = problem.key, problem.value, problem.limit
    if key == "no_corpus":
        return _("There is no usable training text yet.")
    if key == "block_size":
        return _("block_size {value} is longer than this text allows: its shorter split allows at most "
                 "{limit}.").format(value=int(value), limit=int(limit))
    if key == "memory":
        return _("This training would need about {value:,.0f} MB of memory; one reader's training may use at most "
                 "{limit:,.0f} MB on this server. Lower the batch size, block_size, n_embd or n_layer."
                 ).format(value=value / MB, limit=limit / MB)
    if key == "time":
        return _("This training would take about {value}; a training may run at most {limit}. Lower the steps or "
                 "the model's size.").format(value=duration_text(value), limit=duration_text(limit))
    return _("{setting} {value:,} is over this server's limit of {limit:,}.").format(
        setting=key, value=int(value), limit=int(limit))


def upload_text(outcome: UploadResult) -> str:
    """Why an uploaded text cannot be used."""
    messages = {
        "empty": _("the file is empty."),
        "binary": _("the file holds NUL bytes, so it looks binary, not text."),
        "not_utf8": _("it is not UTF-8 text; save it as UTF-8 and try again."),
        "too_short": _("the text is too short to split into training and validation parts."),
        "too_large": _("{value:.1f} MB is over this server's limit of {limit:.0f} MB."),
        "vocab": _("it has {value:,} distinct characters; a model here may have at most {limit:,} "
                   "(each one adds a row to the embedding and a column to every prediction)."),
    }
    text = messages.get(outcome.problem, _("it cannot be read."))
    if outcome.problem == "too_large":
        return text.format(value=outcome.value / MB, limit=outcome.limit / MB)
    return text.format(value=outcome.value, limit=outcome.limit)


def checkpoint_text(error: CheckpointError) -> str:
    """Why an uploaded checkpoint cannot be loaded (from its stable ``reason``)."""
    return {
        "missing": _("the file is empty."),
        "format": _("it is not a checkpoint downloaded from this page."),
        "config": _("its description (model sizes or vocabulary) is invalid."),
        "too_large": _("its model is larger than this server allows."),
        "shapes": _("its weights do not match the model it describes."),
        "not_finite": _("its weights hold NaN or infinite values."),
        "mismatch": _("its files do not belong together."),
    }.get(error.reason, _("the file is damaged or not a checkpoint."))


def describe_model(model: LabModel) -> str:
    """One line: size, parameters, vocabulary, steps and losses of a model, e.g. for a caption."""
    c = model.config
    parts = [_("n_layer {n_layer}, n_head {n_head}, n_embd {n_embd}, block_size {block}, {pos}").format(
        n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, block=c.block_size, pos=c.pos_encoding)]
    if not c.causal:
        parts[0] += _(", no causal mask")
    parts.append(_("{params:,} parameters").format(params=model.params))
    parts.append(_("vocabulary {size}").format(size=model.tokenizer.vocab_size))
    s = model.summary
    if isinstance(s.get("steps_done"), int):
        corpus = str(s.get("corpus", "?"))
        steps = (_("{steps} steps (stopped) on {corpus}") if s.get("stopped") else _("{steps} steps on {corpus}"))
        parts.append(steps.format(steps=s["steps_done"], corpus=corpus))
    if isinstance(s.get("final_val_loss"), int | float) and isinstance(s.get("final_train_loss"), int | float):
        parts.append(_("train loss {train:.3f}, val loss {val:.3f}").format(train=s["final_train_loss"],
                                                                            val=s["final_val_loss"]))
    return " · ".join(parts)


def estimate_caption(plan: TrainingPlan) -> str:
    """Parameters, memory and time a training would take, as far as they are known."""
    est = plan.estimate
    if est is None:
        return ""
    return _("{params:,} parameters · head_dim {head_dim} · {tokens:,} tokens per step · evaluation every {every} "
             "steps · about {memory:,.0f} MB of memory (limit {limit:,.0f} MB) and {time} of training (limit {cap})"
             ).format(params=est.params, head_dim=plan.model.head_dim,
                      tokens=plan.train.batch_size * plan.model.block_size, every=plan.train.eval_interval,
                      memory=est.memory_bytes / MB, limit=budget.MAX_TRAINING_BYTES / MB,
                      time=duration_text(est.seconds), cap=duration_text(budget.MAX_JOB_WALL_S))


def dropout_loss_text(loss: DropoutLoss, course: GPTConfig) -> str:
    """The measured trade-off of dropout in the course preset's training, and the preset's rates.

    Args:
        loss: the shipped dropout experiment (``engine.lab.settings.dropout_loss``).
        course: the course preset (``engine.gpt.PRESETS["course"]``), whose rates the text states.
    """

    def cell(key: str) -> str:
        run = loss.run(key)
        return _("{loss:.3f} ± {std:.3f} nats at {rate:,.0f} tokens/s").format(
            loss=run.val_loss_mean, std=run.val_loss_std, rate=run.tokens_per_s)

    both = loss.run("dropout_both")
    measured = _("Validation loss after the course preset's training ({steps} steps of batch {batch}, peak learning "
                 "rate {lr:g}, {corpus}), mean ± standard deviation over the seeds {seeds}, with the tokens/s of "
                 "the training steps ({cpu}, threads: {threads}): no dropout {none}; residual dropout {resid:g} "
                 "only {resid_only}; dropout {both:g} everywhere {everywhere}.").format(
        steps=loss.steps, batch=loss.batch_size, lr=loss.learning_rate, corpus=loss.corpus,
        seeds=", ".join(map(str, loss.seeds)), cpu=loss.cpu, threads=loss.threads, none=cell("dropout_0"),
        resid=loss.run("dropout_resid").resid_dropout, resid_only=cell("dropout_resid"), both=both.attn_dropout,
        everywhere=cell("dropout_both"))
    rates = {"attn": course.attn_dropout_rate, "resid": course.resid_dropout_rate}
    chosen = next((r for r in loss.runs if (r.attn_dropout, r.resid_dropout) == tuple(rates.values())),
                  loss.run("dropout_0"))
    if loss.dropout_helps:
        choice = _("Dropout lowers the validation loss by more than the seed noise within this budget; the course "
                   "preset trains with attention dropout {attn:g} and residual dropout {resid:g}.").format(**rates)
    else:
        choice = _("No dropout setting lowers the validation loss by more than the seed noise within this budget, "
                   "so the course preset trains with attention dropout {attn:g} and residual dropout {resid:g}: "
                   "{speedup:.2f}× the tokens/s of dropout {both:g} everywhere.").format(
            **rates, both=both.attn_dropout, speedup=chosen.tokens_per_s / both.tokens_per_s)
    return f"{measured} {choice}"


def stop_text(snap: Snapshot) -> str:
    """Why a stopped job stopped."""
    return {
        "while_queued": _("Stopped while queued: nothing was trained."),
        "owner_left": _("Stopped because its reader left the page; what it learned is kept."),
        "wall_cap": _("Stopped at the time limit of {cap}; what it learned is kept.").format(
            cap=duration_text(budget.MAX_JOB_WALL_S)),
    }.get(snap.stop_reason, _("Stopped."))


def queued_text(snap: Snapshot) -> str:
    """Why a job waits."""
    return ngettext("Queued: this server trains at most {limit} model at once and {running} is training now; "
                    "yours starts as soon as a slot is free.",
                    "Queued: this server trains at most {limit} models at once and {running} are training now; "
                    "yours starts as soon as a slot is free.", snap.limit
                    ).format(limit=snap.limit, running=snap.running)


# --- panels ---------------------------------------------------------------------------------------------------------
def loss_chart_text() -> dict[str, str]:
    """The live loss chart's words."""
    return {"title": _("Loss while training"), "batch": _("batch loss"), "train": _("train loss"),
            "val": _("val loss"), "step": _("step"), "loss": _("cross-entropy (nats)")}


def training_panel(job: TrainingJob, collected: bool) -> None:
    """Progress, live loss chart and Stop of this session's training (polled while it runs).

    Args:
        job: this session's training job.
        collected: whether the page already took the finished job's model (else it reruns once).
    """
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(queued_text(snap), icon=":material/hourglass_top:")
    label = {"queued": _("waiting for a free slot"),
             "running": _("step {step} / {steps} · {rate:,.0f} tokens/s · {eta}").format(
                 step=snap.step, steps=snap.steps, rate=snap.tokens_per_s, eta=eta_text(snap.eta_s)),
             "done": _("done: {step} steps in {seconds:.1f} s").format(step=snap.step, seconds=snap.elapsed_s),
             "stopped": _("stopped after {step} of {steps} steps ({seconds:.1f} s)").format(
                 step=snap.step, steps=snap.steps, seconds=snap.elapsed_s),
             "error": _("failed")}[snap.state]
    st.progress(snap.step / max(1, snap.steps), text=label)
    if snap.state == "error":
        st.error(_("Training failed: {error}").format(error=snap.error))
    baselines = baselines_for(job.corpus)
    if snap.history or snap.step_losses:
        st.plotly_chart(LF.loss_chart(snap.history, snap.step_losses, snap.steps, loss_chart_text(),
                                      baselines=baseline_lines(baselines)), key="lab_live_chart")
    if snap.history:
        step, train_loss, val_loss = snap.history[-1]
        st.markdown(_("last evaluation (step {step}): train loss **{train:.4f}**, val loss **{val:.4f}**").format(
            step=step, train=train_loss, val=val_loss))
        st.caption(versus_baselines(val_loss, baselines))
    if not snap.finished:
        st.button(_("Stop"), key="lab_stop", icon=":material/stop_circle:", on_click=job.stop,
                  help=_("Ends the run after the current step; the model keeps what it has learned."))
    elif snap.state == "stopped" and (job.result is None or snap.stop_reason in ("owner_left", "wall_cap")):
        st.warning(stop_text(snap))
    if snap.finished and not collected:
        st.rerun()


def experiment_panel(name: str) -> None:
    """Progress of a live rerun of one experiment (polled while it runs)."""
    job: ExperimentJob | None = st.session_state.get("lab_exp_jobs", {}).get(name)
    if job is None:
        return
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(queued_text(snap), icon=":material/hourglass_top:")
    elif snap.state == "running":
        st.progress(snap.fraction, text=_("run {index} of {count} ({run}): step {step} / {steps} · {eta}").format(
            index=snap.run_index + 1, count=snap.run_count, run=run_name(snap.run_key), step=snap.step,
            steps=snap.steps, eta=eta_text(snap.eta_s)))
        st.button(_("Stop"), key=f"lab_stop_experiment_{name}", on_click=job.stop)
    elif snap.state == "error":
        st.error(_("The rerun failed: {error}").format(error=snap.error))
    elif snap.state == "stopped":
        st.warning(_("Rerun stopped; nothing was kept."))
    if snap.finished and job.result is not None:
        st.session_state.setdefault("lab_exp_live", {})[name] = job.result
        del st.session_state["lab_exp_jobs"][name]
        st.rerun()


def _val(run: dict) -> tuple[float, float | None, int]:
    """A run's validation loss for the table: mean, std (None for one seed) and seed count.

    Runs of a seeded results file are compared on ``fixed_val_loss`` (the same windows for every run),
    older files and live reruns on what they have.
    """
    n = int(run.get("n_seeds", 1))
    if "fixed_val_loss_mean" in run:
        return run["fixed_val_loss_mean"], run["fixed_val_loss_std"] if n > 1 else None, n
    return run.get("fixed_val_loss", run["final_val_loss"]), None, 1


@st.cache_resource(show_spinner=False, max_entries=32)
def _experiment_view(experiment: dict, lang_names: tuple[str, ...], text: tuple[tuple[str, str], ...],
                     baselines: tuple[tuple[str, float, float], ...]) -> tuple[go.Figure, pd.DataFrame]:
    """The curves figure and the table of one experiment's results, in the reader's words.

    ``baselines``: (label, train nats, val nats) rows added under the runs.
    """
    columns = dict(text)
    rows = []
    for r, name in zip(experiment["runs"], lang_names, strict=True):
        val, std, n = _val(r)
        rows.append({columns["run"]: name, columns["params"]: r["params"],
                     columns["train"]: r.get("final_train_loss_mean", r["final_train_loss"]), columns["val"]: val,
                     columns["std"]: std, columns["ppl"]: math.exp(val), columns["seeds"]: n,
                     columns["last"]: r.get("last_position_val_loss_mean", r["last_position_val_loss"]),
                     columns["s"]: r["wall_s"]})
    for label, train_nats, val_nats in baselines:
        rows.append({columns["run"]: label, columns["params"]: None, columns["train"]: train_nats,
                     columns["val"]: val_nats, columns["std"]: None, columns["ppl"]: math.exp(val_nats),
                     columns["seeds"]: None, columns["last"]: None, columns["s"]: None})
    table = pd.DataFrame(rows)
    if all(int(r.get("n_seeds", 1)) == 1 for r in experiment["runs"]):
        table = table.drop(columns=[columns["std"], columns["seeds"]])  # one seed: no spread to show
    figure = LF.experiment_curves(experiment["runs"], lang_names, {
        "title": columns["title"], "val": columns["val"], "train": columns["train"], "step": columns["step"],
        "loss": columns["loss"]}, baselines={label: val_nats for label, _train, val_nats in baselines})
    return figure, table


def comparison_lines(experiment: dict) -> list[str]:
    """One line per pair of runs: the difference of mean validation losses and whether it exceeds the seed noise."""
    lines = []
    for c in experiment.get("comparisons", []):
        if c["exceeds_noise"] is None:
            continue
        verdict = _("**more than the seed noise**") if c["exceeds_noise"] else _("within the seed noise")
        lines.append(_("{b} − {a}: {delta:+.3f} nats; noise bound {noise:.3f}: {verdict}").format(
            b=run_name(c["b"]), a=run_name(c["a"]), delta=c["delta_mean"], noise=c["noise"], verdict=verdict))
    return lines


def show_experiment(experiment: dict, key: str, baselines: Baselines | None = None) -> None:
    """Curves and table of one experiment, side by side, with the counting baselines and the seed comparisons."""
    names = tuple(run_name(r["key"]) for r in experiment["runs"])
    text = {"title": _("val loss (solid) and train loss (dotted)"), "run": _("run"), "params": _("params"),
            "train": _("train"), "val": _("val"), "std": _("± std"), "ppl": _("val perplexity"),
            "seeds": _("seeds"), "last": _("val, last pos."), "s": _("s"), "step": _("step"),
            "loss": _("loss (nats)")}
    rows = () if baselines is None else (
        (_("unigram (counting)"), baselines.unigram.train_nats, baselines.unigram.val_nats),
        (_("bigram (counting)"), baselines.bigram.train_nats, baselines.bigram.val_nats))
    figure, table = _experiment_view(experiment, names, tuple(text.items()), rows)
    left, right = st.columns([1, 1])
    left.plotly_chart(figure, key=f"{key}_curves")
    seeds = [s for s in experiment.get("seeds", []) if s is not None]
    if len(seeds) > 1:
        left.caption(_("Curves of seed {seed}; the table gives the mean and standard deviation over {n} seeds "
                       "({seeds}).").format(seed=seeds[0], n=len(seeds), seeds=", ".join(map(str, seeds))))
    right.caption(_("Final losses in nats; “val” is measured on the same validation windows for every run and seed, "
                    "“val, last pos.” at the last position of the window only (the one generation uses); s is the "
                    "wall time of the run. The counting baselines score the same split."))
    right.dataframe(table, hide_index=True, key=f"{key}_table", column_config={
        text["params"]: st.column_config.NumberColumn(format="localized", help=_("parameters")),
        text["train"]: st.column_config.NumberColumn(format="%.3f", help=_("final train loss (nats)")),
        text["val"]: st.column_config.NumberColumn(format="%.3f", help=_("validation loss (nats), mean over seeds")),
        text["std"]: st.column_config.NumberColumn(format="%.3f", help=_("standard deviation over seeds (nats)")),
        text["ppl"]: st.column_config.NumberColumn(format="%.1f", help=_("exp(val): as uncertain as a uniform choice "
                                                                         "among this many characters")),
        text["seeds"]: st.column_config.NumberColumn(format="%d", help=_("trainings with different seeds")),
        text["last"]: st.column_config.NumberColumn(format="%.3f", help=_("validation loss at the last position only")),
        text["s"]: st.column_config.NumberColumn(format="%.0f", help=_("wall time of the run in seconds")),
    })
    lines = comparison_lines(experiment)
    if lines:
        right.markdown("\n".join(f"- {line}" for line in lines))
        right.caption(_("A difference counts as more than the seed noise when |Δ mean| > 2·√(std_a²/n_a + "
                        "std_b²/n_b) (twice the standard error of the difference). With so few seeds the standard "
                        "deviations are themselves uncertain: this is a rough screen, not a significance test, and "
                        "a flagged difference of a few hundredths of a nat is weak evidence."))


def show_causal_details(shown: dict) -> None:
    """The no-mask experiment's per-position losses and samples."""
    names = [run_name(r["key"]) for r in shown["runs"]]
    st.plotly_chart(LF.loss_by_position_figure(shown["runs"], names, {
        "title": _("Validation loss by position"),
        "position": _("position in the window (the last one is what generation uses)"),
        "loss": _("val loss (nats, log scale)")}), key="lab_exp_positions_loss")
    for r, name in zip(shown["runs"], names, strict=True):
        others = r["loss_by_position"][:-1]
        st.markdown(_("{run}: val loss over positions 0 … {last} **{mean:.3f}** · at the last position **{final:.3f}**"
                      ).format(run=name, last=len(others) - 1, mean=sum(others) / len(others),
                               final=r["last_position_val_loss"]))
    st.caption(_("Samples from “{prompt}” (/ a line break, // blank lines): greedy, then sampled at temperature 0.8, "
                 "top-k 20.").format(prompt=shown["runs"][0]["samples"]["prompt"]))
    for r, name in zip(shown["runs"], names, strict=True):
        greedy, sampled = (re.sub(r"\n+", lambda m: " / " if len(m.group()) == 1 else " // ", r["samples"][k])
                           for k in ("greedy", "sampled"))
        st.markdown(_("**{run}** · greedy: {greedy}  \nsampled: {sampled}").format(run=name, greedy=greedy,
                                                                                  sampled=sampled))


def plain(text: str) -> str:
    """``text`` with Markdown's special characters escaped, so a prompt from a link is shown, never rendered."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)


def compact(n: int) -> str:
    """A count short enough for a metric tile: 3.27 M, 357 k, 980."""
    if n >= 1_000_000:
        return f"{n / 1e6:.2f} M"
    if n >= 10_000:
        return f"{n / 1e3:.0f} k"
    return f"{n:,}"
