"""Section 2 of the Lab: the model's sizes and the training's settings, what dropout costs, the Train button."""

from __future__ import annotations

import functools

import streamlit as st

from engine import budget, gpt, positions
from engine.corpus import Corpus
from engine.device import describe_device, pick_device
from engine.lab import settings as rules
from engine.lab.results import PRICE_DROPOUT, DropoutLoss
from engine.presets import DEFAULT_PRESET, PRESETS, preset
from ui import page, url
from ui.i18n import _, current_language
from ui.lab import shipped
from ui.lab.session import LabSession
from ui.lab.words import busy_text, duration_text, fill, position_name, prose
from ui.numbers import SLIDER_FORMAT, integer, significant

MB = budget.MB


def rate_text():
    """The learning-rate slider's ``format_func``: ``0,0003`` in French and German, as few digits as the rate has
    (bound to the reader's language now: Streamlit may call it outside the script's run)."""
    return functools.partial(significant, digits=1, lang=current_language())


def problem_text(problem: rules.Problem) -> str:
    """Why a training may not start, for one ``engine.lab.settings.Problem``."""
    key, value, limit = problem.key, problem.value, problem.limit
    if key == "no_corpus":
        return _("There is no usable training text yet.")
    if key == "block_size":
        return fill(_("block_size {value} is longer than this text allows: its shorter split allows at most "
                 "{limit}."), value=int(value), limit=int(limit))
    if key == "memory":
        return fill(_("This training would need about {value:,.0f} MB of memory; one reader's training may use at most "
                 "{limit:,.0f} MB on this server. Lower the batch size, block_size, n_embd or n_layer."
                 ), value=value / MB, limit=limit / MB)
    if key == "time":
        return fill(_("This training would take about {value}; a training may run at most {limit}. Lower the steps or "
                 "the model's size."), value=duration_text(value), limit=duration_text(limit))
    return fill(_("{setting} {value:,} is over this server's limit of {limit:,}."),
        setting=key, value=int(value), limit=int(limit))


def estimate_caption(plan: rules.TrainingPlan) -> str:
    """Parameters, memory and time a training would take, as far as they are known."""
    est = plan.estimate
    if est is None:
        return ""
    return fill(_("{params:,} parameters · head_dim {head_dim} · {tokens:,} tokens per step · evaluation every {every} "
             "steps · about {memory:,.0f} MB of memory (limit {limit:,.0f} MB) and about {time} of training on a "
             "server that is not busy: not an upper bound, a busier server takes longer, and a training stops at "
             "{cap} at the latest, keeping what it learned"
             ), params=est.params, head_dim=plan.model.head_dim,
                      tokens=plan.train.batch_size * plan.model.block_size, every=plan.train.eval_interval,
                      memory=est.memory_bytes / MB, limit=budget.MAX_TRAINING_BYTES / MB,
                      time=duration_text(est.seconds), cap=duration_text(budget.MAX_JOB_WALL_S))


def dropout_loss_text(loss: DropoutLoss, course: gpt.GPTConfig) -> str:
    """The measured trade-off of dropout in the course preset's training, and the preset's rates.

    Args:
        loss: the shipped dropout experiment (``engine.lab.results.dropout_loss``).
        course: the course preset (``engine.presets.PRESETS["course"].model``), whose rates the text states.
    """

    def cell(key: str) -> str:
        run = loss.run(key)
        return fill(_("{loss:.3f} ± {std:.3f} nats at {rate:,.0f} tokens/s"),
            loss=run.val_loss_mean, std=run.val_loss_std, rate=run.tokens_per_s)

    both = loss.run("dropout_both")
    measured = fill(
        _("Validation loss after the course preset's training ({steps} steps of batch {batch}, peak learning "
                 "rate {lr:g}, {corpus}), mean ± standard deviation over the seeds {seeds}, with the tokens/s of "
                 "the training steps ({cpu}, threads: {threads}): no dropout {none}; residual dropout {resid:g} "
                 "only {resid_only}; dropout {both:g} everywhere {everywhere}."),
        steps=integer(loss.steps), batch=loss.batch_size, lr=loss.learning_rate, corpus=loss.corpus,
        seeds=", ".join(map(str, loss.seeds)), cpu=loss.cpu, threads=loss.threads, none=cell("dropout_0"),
        resid=loss.run("dropout_resid").resid_dropout, resid_only=cell("dropout_resid"), both=both.attn_dropout,
        everywhere=cell("dropout_both"))
    rates = {"attn": course.attn_dropout_rate, "resid": course.resid_dropout_rate}
    chosen = next((r for r in loss.runs if (r.attn_dropout, r.resid_dropout) == tuple(rates.values())),
                  loss.run("dropout_0"))
    if loss.dropout_helps:
        choice = fill(_("Dropout lowers the validation loss by more than the seed noise within this budget; the course "
                   "preset trains with attention dropout {attn:g} and residual dropout {resid:g}."), **rates)
    else:
        choice = fill(_("No dropout setting lowers the validation loss by more than the seed noise within this budget, "
                   "so the course preset trains with attention dropout {attn:g} and residual dropout {resid:g}: "
                   "{speedup:.2f}× the tokens/s of dropout {both:g} everywhere."),
            **rates, both=both.attn_dropout, speedup=chosen.tokens_per_s / both.tokens_per_s)
    return f"{measured} {choice}"


#: The longer sequence length at which the dropout note quotes the training benchmark's speed-up.
LONG_T = 256


def controls_prose() -> None:
    """Section 2's prose (the course preset's measured speed is in the section's technical details)."""
    prose("controls")


def dropout_notes() -> None:
    """What dropout costs in speed (the training benchmark) and buys in loss (the dropout experiment)."""
    price = shipped.dropout_price()
    at_long = None if price is None else price.speedup_at(LONG_T)
    if price is not None and at_long is not None:
        st.caption(fill(
            _("Dropout has a price on a CPU: on the attention weights it keeps PyTorch off its fused attention "
                     "kernel. Course preset, batch {batch}, measured on {cpu}: {both_on:,.0f} tokens/s with dropout "
                     "{rate:g} everywhere, {attn_off:,.0f} with attention dropout off, {both_off:,.0f} with both off; "
                     "attention dropout off alone is {t128:.2f}× faster at T = {block} and {t256:.2f}× at T = {long}."
                     ), batch=price.batch_size, cpu=price.cpu, both_on=price.both_on, attn_off=price.attn_off,
                              both_off=price.both_off, block=price.block_size,
                              t128=price.speedup_at(price.block_size), t256=at_long, rate=PRICE_DROPOUT,
                              long=LONG_T))
    measured, unreadable = shipped.dropout_loss()
    if unreadable:
        st.caption(_("The shipped measurements of dropout's effect on the validation loss cannot be read."))
    if measured is not None:
        st.caption(dropout_loss_text(measured, preset("course")))


def training_controls(lab: LabSession, corpus: Corpus | None) -> rules.TrainingPlan:
    """The presets, the model's and the training's controls, the plan's problems and estimate, the Train button.

    Returns:
        The training plan of the controls' values.
    """
    b1, b2, b3 = st.columns([1, 1, 3])
    b1.button(_("Quick preset"), key="lab_preset_quick", on_click=lab.apply_preset, args=("quick",),
              icon=":material/bolt:")
    b2.button(_("Course preset"), key="lab_preset_course", on_click=lab.apply_preset, args=("course",),
              icon=":material/school:")
    b3.caption(fill(_("Training runs on **{device}**, the first this server has of CUDA, Apple MPS and the CPU, one "
                      "training at a time."), device=describe_device(pick_device())))
    quick = preset(DEFAULT_PRESET)
    c1, c2, c3, c4 = st.columns(4)
    n_layer = int(c1.slider("n_layer", *rules.N_LAYERS, step=1,
                            value=quick.n_layer, key="lab_n_layer", bind="query-params"))
    n_embd = int(c2.selectbox("n_embd", rules.N_EMBDS, index=rules.N_EMBDS.index(quick.n_embd),
                              key="lab_n_embd", bind="query-params"))
    # the link holds the encoding's own name (rope), the selector its name in the reader's language
    pos_encoding = url.choice(c3.selectbox, _("position encoding"), tuple(enc.key for enc in positions.ENCODINGS),
                              key="lab_pos", default=quick.pos_encoding, format_func=position_name)
    heads = rules.head_choices(n_embd, pos_encoding)
    default_heads = rules.default_heads(n_embd, pos_encoding)
    lab.keep_heads(heads, default_heads)
    n_head = int(c4.selectbox(_("n_head (divisors of n_embd)"), heads, index=heads.index(default_heads),
                              key="lab_n_head", bind="query-params"))
    c1, c2, c3, c4 = st.columns(4)
    block_size = int(c1.selectbox("block_size", rules.BLOCK_SIZES, index=rules.BLOCK_SIZES.index(quick.block_size),
                                  key="lab_block", bind="query-params"))
    dropout = float(c2.slider("dropout", *rules.DROPOUT, step=0.05,
                              value=quick.dropout, key="lab_dropout", bind="query-params", format=SLIDER_FORMAT))
    causal = c3.checkbox(_("causal mask"), value=True, key="lab_causal", bind="query-params",
                         help=_("Off: every position sees the whole window, including its own answer (see "
                                "section 6)."))
    seed = url.int_input(c4, _("seed"), *rules.SEEDS, step=1, value=rules.DEFAULT_SEED, key="lab_seed")
    with page.technical_details():  # throughput and its measurements: the workshop, out of the reading path
        dropout_notes()
    c1, c2, c3, _c4 = st.columns(4)
    quick_training = PRESETS[DEFAULT_PRESET].training
    steps = url.int_input(c1, _("steps"), *rules.STEPS, step=50, value=quick_training.steps, key="lab_steps")
    batch_size = int(c2.selectbox(_("batch size"), rules.BATCH_SIZES,
                                  index=rules.BATCH_SIZES.index(quick_training.batch_size),
                                  key="lab_batch", bind="query-params"))
    learning_rate = float(c3.select_slider(_("peak learning rate"), rules.LEARNING_RATES,
                                           value=quick_training.learning_rate, key="lab_lr", bind="query-params",
                                           format_func=rate_text()))

    plan = rules.plan_training(gpt.GPTConfig(block_size=block_size, n_embd=n_embd, n_head=n_head, n_layer=n_layer,
                                             dropout=dropout, pos_encoding=pos_encoding, causal=causal),
                               corpus, steps, batch_size, learning_rate, seed)
    for problem in plan.problems:
        st.error(problem_text(problem), icon=":material/block:")
    if plan.fitting_batch is not None and plan.fitting_batch < batch_size:
        st.info(fill(_("With these settings, batch size {batch} fits."), batch=plan.fitting_batch))
    st.caption(estimate_caption(plan))

    running = lab.training
    clicked = st.button(_("Train"), key="lab_train", type="primary", icon=":material/play_arrow:",
                        disabled=running or not plan.ok)
    if clicked and not running and plan.ok:
        lab.start_training(plan, corpus)
        st.rerun()  # redraw with the Train button disabled and the progress polling
    with page.slot():  # a note that comes and goes keeps what follows in its place
        if lab.pop_busy_notice("training"):
            st.warning(busy_text(), icon=":material/tab:")
    if lab.pop_join_notice():
        st.info(_("Another reader's training with exactly these settings on this text is already queued or running: "
                  "you follow it, and its model becomes yours too when it ends."), icon=":material/group:")
    if lab.pop_reuse_notice():
        st.success(_("A model with exactly these settings on this text was trained before on this server: reusing "
                     "it."), icon=":material/recycling:")
    return plan
