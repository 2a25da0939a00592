"""Page 8: the GPT lab — train the course's GPT in the page, generate, look inside, run the lesson's experiments.

The layout only: the rules live in ``engine.lab.settings`` (ranges, head counts, checks and caps),
the panels and the words for the engine's keys in ``ui.lab_panels``.
"""

import functools
import hashlib
from pathlib import Path

import plotly.graph_objects as go
import streamlit as st

from engine import budget, chapter, gpt
from engine.checkpoint import SHIPPED_MODEL, CheckpointError, checkpoint_to_bytes
from engine.corpus import MISSING_TANG_ASSET, load_corpus
from engine.device import describe_device, pick_device, release_free_memory
from engine.diagrams import lab as diagrams
from engine.figures import lab as figures
from engine.lab import experiments as lab_experiments
from engine.lab import models
from engine.lab import settings as rules
from engine.lab.jobs import TrainingJob
from engine.lab.runner import LabRunner
from engine.sections import multi_head
from engine.training import train
from ui import lab_panels as panels
from ui import page, url
from ui.diagram import diagram
from ui.i18n import _, ngettext

CORPORA = ("tang", "tang300", "song100", "upload")
OWN, SHIPPED = "own", "shipped"
JOB_TOKEN = "lab_job_token"
POLL_S = 1.0


def corpus_label(name: str) -> str:
    return {"tang": _("All Tang poems (tang, about 56 000)"), "tang300": _("313 Tang poems (tang300)"),
            "song100": _("Song ci (song100)"), "upload": _("upload a UTF-8 text file")}[name]


# --- cached resources -------------------------------------------------------------------------------------------
@st.cache_resource
def runner() -> LabRunner:
    """The app-wide runner: registry of finished models, experiment cache, one training at a time."""
    return LabRunner(max_concurrent=1, registry_size=6)


@st.cache_resource(show_spinner=False)
def builtin_corpus(name: str):
    corpus = load_corpus(name)
    release_free_memory()  # the load's transient buffers: about 50 MB for the full Tang corpus
    return corpus


@st.cache_resource(show_spinner=False)
def shipped_model(path: str) -> tuple[models.LabModel | None, CheckpointError | None]:
    """The model that ships with the app, or why it is not available."""
    if not Path(path).exists():
        return None, None
    try:
        return models.load_shipped(path), None
    except CheckpointError as exc:
        return None, exc


@st.cache_data(show_spinner=False, max_entries=64)
def generated(model_id: str, prompt: str, length: int, temperature: float, top_k: int, seed: int,
              _model: models.LabModel) -> models.Generation | None:
    try:
        return models.generate(_model, prompt, length, temperature, top_k or None, seed)
    except models.NonFiniteLogitsError:
        return None


@st.cache_resource(show_spinner=False, max_entries=32)
def attention_view(model_id: str, line: str, max_len: int, _model: models.LabModel, text: tuple[tuple[str, str], ...]
                   ) -> tuple[models.AttentionMaps, go.Figure | None]:
    maps = models.attention_maps(_model, line, max_len)
    if not maps.tokens:
        return maps, None
    return maps, figures.attention_slider(maps.attn_weights, maps.tokens, dict(text))


@st.cache_resource(show_spinner=False, max_entries=32)
def next_char_view(model_id: str, prompt: str, temperature: float, top_k: int, seed: int, _model: models.LabModel,
                   text: tuple[tuple[str, str], ...], attn_text: tuple[tuple[str, str], ...]
                   ) -> tuple[models.NextCharProbs, go.Figure, go.Figure] | None:
    """The next character's distribution and the last position's attention, and their figures; None if not finite."""
    try:
        probs = models.next_char_probs(_model, prompt, temperature, top_k, seed)
    except models.NonFiniteLogitsError:
        return None
    looked = models.last_position_attention(_model, prompt)
    bars = figures.next_char_figure(probs.candidates, probs.probs, probs.sampled, probs.temperatures,
                                    probs.by_temperature, probs.top_ks, probs.by_top_k, dict(text))
    attention = figures.last_attention_figure(looked.attn_weights, looked.tokens, dict(attn_text))
    return probs, bars, attention


@st.cache_data(show_spinner=False, max_entries=16)
def gpt_diagram(model_id: str, _model: models.LabModel, shapes: tuple[tuple[str, tuple[int, ...]], ...],
                words: tuple[tuple[str, str], ...]) -> str:
    """DOT source of the GPT block diagram of the model in use, with the shapes of its last forward pass."""
    w, sh = dict(words), dict(shapes)
    position = {"learned": w["learned"], "sinusoidal": w["sinusoidal"], "rope": w["rope"], "none": w["none"]}
    labels = diagrams.LabLabels(
        tokens=w["tokens"], tok_emb="tok_emb", position=position[_model.config.pos_encoding], block=w["block"],
        ln_1="ln_1 (LayerNorm)", attn=w["attn"], ln_2="ln_2 (LayerNorm)", mlp=w["mlp"], residual=w["residual"],
        ln_f="ln_f (LayerNorm)", lm_head="lm_head", softmax="softmax", probs=w["probs"],
        params=lambda n: ngettext("{n:,} parameter", "{n:,} parameters", n).format(n=n),
        total=lambda n: ngettext("{n:,} parameter in all", "{n:,} parameters in all", n).format(n=n))
    return diagrams.lab(labels, diagrams.LabShapes(idx=sh["idx"], residual=sh["residual"], logits=sh["logits"],
                                                   attn_weights=sh["attn_weights"]),
                        diagrams.gpt_parts(_model.model))


@st.cache_resource(show_spinner=False, max_entries=8)
def positions_view(model_id: str, _model: models.LabModel, text: tuple[tuple[str, str], ...]
                   ) -> tuple[models.PositionTables, go.Figure] | None:
    tables = models.position_tables(_model)
    if tables is None:
        return None
    return tables, figures.position_tables_figure(tables.trained, tables.untrained, dict(text))


@st.cache_data(show_spinner=False, max_entries=4)
def checkpoint_file(model_id: str, _model: models.LabModel) -> bytes:
    return checkpoint_to_bytes(_model.model, _model.tokenizer, _model.summary)


@st.cache_data(show_spinner=False)
def results_file(path: str, mtime: float) -> dict | None:
    return lab_experiments.load_results(path)


@st.cache_data(show_spinner=False)
def dropout_price():
    return rules.dropout_price()


@st.cache_data(show_spinner=False)
def dropout_loss(path: str, mtime: float):
    return rules.dropout_loss(path)


def read_shipped(reader, path) -> tuple[object | None, bool]:
    """A measurement file that ships with the app, read by the cached ``reader(path, mtime)`` (a new file is read
    again): ``(value, False)``, ``(None, False)`` when the file is absent, ``(None, True)`` when it cannot be read
    (``reader`` raised ValueError)."""
    if not path.exists():
        return None, False
    try:
        return reader(str(path), path.stat().st_mtime), False
    except ValueError:
        return None, True


@st.cache_data(show_spinner=False)
def lesson_param_counts():
    return [multi_head.param_counts(chapter.LESSON_N_EMBD, n) for n in (1, 4, 8)]


def corpus_upload(data: bytes, name: str) -> models.UploadResult:
    """Reads an uploaded text file once per content (the result lives in this session only)."""
    digest = hashlib.sha256(data).hexdigest()
    held = st.session_state.get("lab_corpus_upload")
    if held is None or held[0] != digest:
        held = (digest, models.read_corpus_upload(data, name))
        st.session_state["lab_corpus_upload"] = held
    return held[1]


def apply_preset(name: str) -> None:
    """Button callback: the quick or course preset into the controls."""
    config, training = gpt.PRESETS[name], rules.PRESET_TRAINING[name]
    st.session_state.update({
        "lab_n_layer": config.n_layer, "lab_n_embd": config.n_embd, "lab_n_head": config.n_head,
        "lab_block": config.block_size, "lab_dropout": config.dropout, "lab_pos": config.pos_encoding,
        "lab_causal": True, "lab_seed": rules.DEFAULT_SEED, "lab_steps": training["steps"],
        "lab_batch": training["batch_size"], "lab_lr": training["learning_rate"],
    })


def set_job_token(token: str) -> None:
    """Keep a running training's token in the URL (``lab_job_token``), so that a reload finds it again."""
    if token:
        st.query_params[JOB_TOKEN] = token
    elif JOB_TOKEN in st.query_params:
        del st.query_params[JOB_TOKEN]


def current_job() -> TrainingJob | None:
    """This session's training, or the one its token (kept in the URL) names when the reader reloaded."""
    job = st.session_state.get("lab_job")
    token = st.query_params.get(JOB_TOKEN, "")  # checked by the runner: 32 characters naming a kept job, else None
    if job is None and token:
        job = lab_runner.reattach(token, panels.owner_alive() or (lambda: True))
        if isinstance(job, TrainingJob):
            st.session_state["lab_job"] = job
        else:
            set_job_token("")
            job = None
    return job


def collect_finished_job() -> None:
    """A finished training of this session becomes the reader's model (once)."""
    job = st.session_state.get("lab_job")
    if job is None or st.session_state.get("lab_collected") == job.token or not job.snapshot().finished:
        return
    st.session_state["lab_collected"] = job.token
    set_job_token("")
    if job.result is not None:
        st.session_state["lab_own"] = job.result
        st.session_state["lab_use"] = OWN


def training_fragment() -> None:
    job = st.session_state.get("lab_job")
    if job is not None:
        panels.training_panel(job, st.session_state.get("lab_collected") == job.token)


page.header()
lab_runner = runner()
current_job()
collect_finished_job()

# --- 1. corpus ----------------------------------------------------------------------------------------------------
page.prose("corpus")
corpus_name = st.radio(_("Training text"), CORPORA, horizontal=True, format_func=corpus_label,
                       index=0, key="lab_corpus", bind="query-params")
corpus = None
if corpus_name == "upload":
    uploaded = st.file_uploader(_("A UTF-8 text file (at most {mb:.0f} MB)").format(
                                    mb=budget.MAX_TEXT_BYTES / panels.MB),
                                key="lab_upload", max_upload_size=max(1, budget.MAX_TEXT_BYTES // panels.MB))
    if uploaded is None:
        st.info(_("Choose a file to train on; until then the training controls wait for it."))
    else:
        outcome = corpus_upload(uploaded.getvalue(), uploaded.name)
        if outcome.problem:
            st.error(_("This file cannot be used: {reason}").format(reason=panels.upload_text(outcome)),
                     icon=":material/error:")
        corpus = outcome.corpus
else:
    with st.spinner(_("Loading the corpus …")):
        corpus = builtin_corpus(corpus_name)
if corpus is not None:
    if corpus.message == MISSING_TANG_ASSET:
        st.warning(_("The Tang corpus file is missing from this copy of the app (assets/corpus); the Lab uses "
                     "English text from Python's documentation instead."), icon=":material/info:")
    elif corpus.message:
        st.warning(_("The Chinese poems are not installed on this server (Debian package fortunes-zh); the Lab "
                     "uses English text from Python's documentation instead."), icon=":material/info:")
    stats = corpus.vocab_stats
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(_("characters"), f"{len(corpus.text):,}")
    m2.metric(_("records"), f"{len(corpus.records):,}")
    m3.metric(_("distinct characters"), f"{stats.distinct_chars:,}")
    n_train, n_val = len(corpus.train_ids), len(corpus.val_ids)
    m4.metric(_("train / val tokens"), f"{panels.compact(n_train)} / {panels.compact(n_val)}")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(_("vocabulary (tokens)"), f"{stats.vocab_size:,}")
    m2.metric(_("validation coverage"), f"{stats.val_coverage:.2%}",
              help=_("Share of the validation characters that have their own token."))
    m3.metric(_("unknown tokens (val)"), f"{stats.val_unk_rate:.2%}")
    m4.metric(_("unknown tokens (train)"), f"{stats.train_unk_rate:.2%}")
    if stats.has_unk:
        st.caption(_("Characters seen fewer than {min_count} times in the training split share one unknown token "
                     "(shown as �; generation never writes it): {kept:,} characters keep their own token, "
                     "{pooled:,} rarer ones are pooled.").format(min_count=stats.min_count, kept=stats.vocab_size - 1,
                                                                 pooled=stats.distinct_chars - (stats.vocab_size - 1)))
    else:
        st.caption(_("Every character of this text has its own token: no unknown token."))
    corpus_baselines = panels.baselines_for(corpus)
    st.markdown(_("**What counting alone scores on this split** (a model must go below these to have learned "
                  "anything): unigram (character frequency) {uni}; bigram (the previous character) {bi}.").format(
        uni=panels.nats_text(corpus_baselines.unigram.val_nats), bi=panels.nats_text(corpus_baselines.bigram.val_nats)))
    st.caption(_("The first record of the text:"))
    st.code(corpus.records[0].body[:400], language=None)

# --- 2. controls ----------------------------------------------------------------------------------------------------
page.prose("controls")
b1, b2, b3 = st.columns([1, 1, 3])
b1.button(_("Quick preset"), key="lab_preset_quick", on_click=apply_preset, args=("quick",), icon=":material/bolt:")
b2.button(_("Course preset"), key="lab_preset_course", on_click=apply_preset, args=("course",),
          icon=":material/school:")
b3.caption(_("Training runs on **{device}** (CUDA, then Apple MPS, then CPU), one training at a time on this "
             "server.").format(device=describe_device(pick_device())))
quick = gpt.PRESETS["quick"]
c1, c2, c3, c4 = st.columns(4)
n_layer = int(c1.slider("n_layer", *rules.N_LAYERS, step=1,
                        value=quick.n_layer, key="lab_n_layer", bind="query-params"))
n_embd = int(c2.selectbox("n_embd", rules.N_EMBDS, index=rules.N_EMBDS.index(quick.n_embd),
                          key="lab_n_embd", bind="query-params"))
pos_encoding = c3.selectbox(_("position encoding"), gpt.POS_ENCODINGS,
                            index=gpt.POS_ENCODINGS.index(quick.pos_encoding), key="lab_pos", bind="query-params")
heads = rules.head_choices(n_embd, pos_encoding)
default_heads = rules.default_heads(n_embd, pos_encoding)
if st.session_state.get("lab_n_head", default_heads) not in heads:  # kept from another n_embd or encoding
    st.session_state["lab_n_head"] = default_heads
n_head = int(c4.selectbox(_("n_head (divisors of n_embd)"), heads, index=heads.index(default_heads),
                          key="lab_n_head", bind="query-params"))
c1, c2, c3, c4 = st.columns(4)
block_size = int(c1.selectbox("block_size", rules.BLOCK_SIZES,
                              index=rules.BLOCK_SIZES.index(quick.block_size), key="lab_block", bind="query-params"))
dropout = float(c2.slider("dropout", *rules.DROPOUT, step=0.05,
                          value=quick.dropout, key="lab_dropout", bind="query-params"))
causal = c3.checkbox(_("causal mask"), value=True, key="lab_causal", bind="query-params",
                     help=_("Off: every position sees the whole window, including its own answer (see section 6)."))
seed = url.int_input(c4, _("seed"), *rules.SEEDS, step=1, value=rules.DEFAULT_SEED, key="lab_seed")
price = dropout_price()
if price is not None and 256 in price.speedup:
    st.caption(_("Dropout has a price on a CPU: on the attention weights it keeps PyTorch off its fused attention "
                 "kernel. Course preset, batch {batch}, measured on {cpu}: {both_on:,.0f} tokens/s with dropout 0.1 "
                 "everywhere, {attn_off:,.0f} with attention dropout off, {both_off:,.0f} with both off; attention "
                 "dropout off alone is {t128:.2f}× faster at T = {block} and {t256:.2f}× at T = 256.").format(
        batch=price.batch_size, cpu=price.cpu, both_on=price.both_on, attn_off=price.attn_off,
        both_off=price.both_off, block=price.block_size, t128=price.speedup[price.block_size],
        t256=price.speedup[256]))
measured_loss, unreadable = read_shipped(dropout_loss, rules.DROPOUT_RESULTS_FILE)
if unreadable:
    st.caption(_("The shipped measurements of dropout's effect on the validation loss cannot be read."))
if measured_loss is not None:
    st.caption(panels.dropout_loss_text(measured_loss, gpt.PRESETS["course"]))
c1, c2, c3, _c4 = st.columns(4)
quick_training = rules.PRESET_TRAINING["quick"]
steps = url.int_input(c1, _("steps"), *rules.STEPS, step=50, value=quick_training["steps"], key="lab_steps")
batch_size = int(c2.selectbox(_("batch size"), rules.BATCH_SIZES,
                              index=rules.BATCH_SIZES.index(quick_training["batch_size"]),
                              key="lab_batch", bind="query-params"))
learning_rate = float(c3.select_slider(_("peak learning rate"), rules.LEARNING_RATES,
                                       value=quick_training["learning_rate"], key="lab_lr", bind="query-params"))

plan = rules.plan_training(gpt.GPTConfig(block_size=block_size, n_embd=n_embd, n_head=n_head, n_layer=n_layer,
                                   dropout=dropout, pos_encoding=pos_encoding, causal=causal),
                       corpus, steps, batch_size, learning_rate, seed)
for problem in plan.problems:
    st.error(panels.problem_text(problem), icon=":material/block:")
if plan.fitting_batch is not None and plan.fitting_batch < batch_size:
    st.info(_("With these settings, batch size {batch} fits.").format(batch=plan.fitting_batch))
st.caption(panels.estimate_caption(plan))

job = st.session_state.get("lab_job")
running = job is not None and not job.snapshot().finished
clicked = st.button(_("Train"), key="lab_train", type="primary", icon=":material/play_arrow:",
                    disabled=running or not plan.ok)
if clicked and not running and plan.ok:
    submitted = lab_runner.submit(plan, corpus, owner_alive=panels.owner_alive())
    if submitted.reused:
        st.session_state["lab_own"] = submitted.model
        st.session_state["lab_use"] = OWN
        st.session_state["lab_notice"] = True
    else:
        st.session_state["lab_job"] = submitted.job
        set_job_token(submitted.job.token)
    st.rerun()  # redraw with the Train button disabled and the progress polling
if st.session_state.pop("lab_notice", None):
    st.success(_("A model with exactly these settings on this text was trained before on this server: reusing it."),
               icon=":material/recycling:")

# --- 3. training ----------------------------------------------------------------------------------------------------
page.prose("training")
st.fragment(run_every=POLL_S if running else None)(training_fragment)()
page.show_code(TrainingJob._work, train, LabRunner.submit)

# --- the current model ----------------------------------------------------------------------------------------------
shipped, shipped_error = shipped_model(str(SHIPPED_MODEL))
if shipped_error is not None:
    st.warning(_("The shipped model could not be loaded: {reason}").format(
        reason=panels.checkpoint_text(shipped_error)))
d1, d2 = st.columns(2)
ckpt_file = d2.file_uploader(_("Load a checkpoint downloaded from this page"), key="lab_ckpt_upload",
                             max_upload_size=max(1, budget.MAX_CHECKPOINT_BYTES // panels.MB))
if ckpt_file is not None:
    data = ckpt_file.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    if st.session_state.get("lab_ckpt_digest") != digest:
        st.session_state["lab_ckpt_digest"] = digest
        try:
            st.session_state["lab_own"] = models.read_checkpoint_upload(data, ckpt_file.name)
            st.session_state["lab_use"] = OWN
            st.session_state["lab_ckpt_error"] = None
        except CheckpointError as exc:
            st.session_state["lab_ckpt_error"] = exc
    if st.session_state.get("lab_ckpt_error") is not None:
        d2.error(_("This checkpoint cannot be loaded: {reason}").format(
            reason=panels.checkpoint_text(st.session_state["lab_ckpt_error"])), icon=":material/error:")
    else:
        d2.success(_("Loaded {name}.").format(name=panels.plain(ckpt_file.name)), icon=":material/check_circle:")
own = st.session_state.get("lab_own")
choices = [c for c, m in ((OWN, own), (SHIPPED, shipped)) if m is not None]
current = None
if choices:
    if st.session_state.get("lab_use") not in choices:
        st.session_state["lab_use"] = choices[0]
    use = d1.radio(_("Model used below"), choices, horizontal=True,
                   format_func=lambda c: _("your model") if c == OWN else _("the shipped model"),
                   index=0, key="lab_use", bind="query-params")
    current = own if use == OWN else shipped
    if use == OWN:
        origin = {"trained": _("trained"), "uploaded": _("uploaded")}.get(current.source, current.source)
        whose = _("Your model ({origin})").format(origin=origin)
    else:
        whose = _("The model shipped with the app")
    d1.caption(whose + ": " + panels.describe_model(current))
    model_corpus = current.summary.get("corpus")
    model_val = current.summary.get("final_val_loss")
    if model_corpus in CORPORA and model_corpus != "upload" and isinstance(model_val, int | float):
        d1.caption(panels.versus_baselines(float(model_val), panels.baselines_for(builtin_corpus(model_corpus))))
    d1.download_button(_("Download this model (.safetensors)"),
                       data=functools.partial(checkpoint_file, current.model_id, current),
                       file_name=f"gpt_lab_{current.model_id}.safetensors", mime="application/octet-stream",
                       key="lab_download", on_click="ignore", icon=":material/download:")
else:
    d1.info(_("No model yet: no trained model ships with this copy of the app. Train one above (the quick preset "
              "takes about a minute) or load a checkpoint."), icon=":material/info:")

diagram_slot = st.container()  # the GPT diagram, filled once the prompt below gives it a forward pass to show

# --- 4. generate ------------------------------------------------------------------------------------------------------
page.prose("generate")
# A form: generating hundreds of characters takes a second or two on a CPU, so it runs when the reader asks.
with st.form("lab_generate_form", border=False):
    c1, c2, c3, c4, c5 = st.columns([3, 2, 1, 2, 1])
    prompt = c1.text_input(_("prompt"), value=chapter.LESSON_PROMPT, key="lab_prompt", bind="query-params")
    temperature = float(c2.slider(_("temperature (0 = greedy)"), *rules.TEMPERATURE, step=0.05,
                                  value=0.8, key="lab_temp", bind="query-params"))
    top_k = url.int_input(c3, _("top-k (0 = all)"), *rules.TOP_K, step=1, value=20, key="lab_top_k")
    length = int(c4.slider(_("new characters"), *rules.GENERATE_LENGTH, step=1,
                           value=64, key="lab_length", bind="query-params"))
    gen_seed = url.int_input(c5, _("sampling seed"), *rules.SEEDS, step=1, value=0, key="lab_gen_seed")
    st.form_submit_button(_("Generate"), key="lab_generate", icon=":material/edit_note:", disabled=current is None)
if current is not None:
    out = generated(current.model_id, prompt, length, temperature, top_k, gen_seed, current)
    if out is None:
        st.error(_("This model's predictions are not finite numbers (NaN or infinity), so nothing can be generated."))
    else:
        info = out.prompt
        if info.unknown:
            st.warning(_("Not in this model's vocabulary, so left out of the prompt: {chars}").format(
                chars=panels.plain(" ".join(info.unknown[:30])) + (" …" if len(info.unknown) > 30 else "")),
                icon=":material/text_select_move_back_word:")
        if info.started_from != "prompt":
            start = _("newline") if info.started_from == "newline" else _("first character of its vocabulary")
            st.info(_("Nothing of the prompt is in the vocabulary: the model starts from a {start}.").format(
                start=start))
        if info.cropped:
            st.info(_("The prompt has {known} known characters; the model reads only the last {block} (its "
                      "block_size), so the first {cropped} do not influence it.").format(
                known=len(info.ids), block=current.config.block_size, cropped=info.cropped))
        kept = f"**{panels.plain(info.kept)}**" if info.kept else ""
        st.markdown(kept + panels.plain(out.new).replace("\n", "  \n"))
        mode = _("greedy") if out.greedy else _("temperature {t:g}").format(t=temperature)
        k_text = _("all characters") if top_k == 0 else _("top-k {k}").format(k=top_k)
        st.caption(_("{mode} · {k} · seed {seed} · {n} new characters").format(mode=mode, k=k_text, seed=gen_seed,
                                                                               n=len(out.new)))
if current is not None:
    cfg = current.config
    prompt_len = len(models.prepare_prompt(current.tokenizer, prompt, cfg.block_size).ids)
    cache_steps = gpt.kv_cache_steps(prompt_len, length, cfg.block_size, cfg.causal)
    st.markdown("#### " + _("The KV cache while these characters were written"))
    st.plotly_chart(figures.kv_cache_figure(cache_steps, {
        "title": "", "reused": _("keys/values reused from the cache"), "computed": _("computed at this step"),
        "step": _("generation step"), "keys": _("keys per layer and head"),
        "slide": _("the window slides")}), key="lab_kv_cache")
    reused = sum(r.reused for r in cache_steps)
    total = sum(r.reused + r.computed for r in cache_steps)
    st.caption(_("To predict a character the model needs a key and a value for every character in its window. With "
                 "the KV cache it computes them for the newest character only and reuses the others ({reused:,} of "
                 "{total:,} here, in each of {layers} layers × {heads} heads). Past block_size ({block}) the window "
                 "slides: every position shifts, so the whole window is computed again at each step. The text is "
                 "the same with or without the cache.").format(
        reused=reused, total=max(total, 1), layers=cfg.n_layer, heads=cfg.n_head, block=cfg.block_size)
        if cfg.causal else _("A model without the causal mask lets every position see later ones, so nothing can "
                             "be reused: every step computes the whole window."))

    st.markdown("#### " + _("The next character"))
    bar_text = {"title": _("What the model predicts after your prompt"),
                "x": _("probability"), "y": _("candidate next character"),
                "temperature": _("temperature (top-k as set above): "),
                "top_k": _("top-k (temperature as set above): "),
                "all": _("all"), "sampled": _("sampled: {char}")}
    looked_text = {"title": _("Where attention looked from the last character"), "layer": _("layer"),
                   "key": _("character read (position:character)"), "mean": _("mean of the heads"),
                   "head": _("head {head}"), "layer_label": _("layer {layer}")}
    view = next_char_view(current.model_id, prompt, temperature, top_k, gen_seed, current, tuple(bar_text.items()),
                          tuple(looked_text.items()))
    if view is None:
        st.error(_("This model's predictions are not finite numbers (NaN or infinity), so nothing can be generated."))
    else:
        probs, bars, looked = view
        n1, n2 = st.columns([1, 1])
        n1.plotly_chart(bars, key="lab_next_char")
        n1.caption(_("The {n} most likely characters after the prompt, with the character sampled at your settings "
                     "(seed {seed}) highlighted: the first character of the text above. The sliders redraw the "
                     "bars for other temperatures (keeping your top-k) and other top-k (keeping your temperature). "
                     "The unknown token is never a candidate.").format(n=len(probs.candidates), seed=gen_seed))
        n2.plotly_chart(looked, key="lab_next_char_attention")
        n2.caption(_("The last character's attention weights in each layer, over the {chars} characters the model "
                     "read: where it looked to make this prediction. The slider shows each head; the first step "
                     "averages them.").format(chars=probs.shapes["idx"][1]))
        words = {"tokens": _("character ids"), "learned": _("learned position table"),
                 "sinusoidal": _("sinusoidal position table"), "rope": _("RoPE (rotates q and k)"),
                 "none": _("no position information"), "block": _("Transformer block"),
                 "attn": _("causal multi-head attention"), "mlp": _("MLP (feed-forward)"),
                 "residual": _("residual"), "probs": _("next-character probabilities")}
        with diagram_slot.expander(_("The model in use, block by block"), icon=":material/account_tree:"):
            diagram(gpt_diagram(current.model_id, current, tuple(probs.shapes.items()), tuple(words.items())),
                    width="content", alt=_("Diagram: the model in use block by block, from the characters to the "
                                           "probabilities of the next one, with each part's shape and parameters."))
            st.caption(_("The shapes are those of the forward pass on your prompt ({chars} characters); the counts "
                         "are this model's parameters per part.").format(chars=probs.shapes["idx"][1]))
page.show_code(models.generate, models.prepare_prompt, gpt.GPT.generate, models.next_char_probs,
               models.last_position_attention)

# --- 5. look inside ---------------------------------------------------------------------------------------------------
page.prose("inside")
line = st.text_input(_("a line to read"), value=chapter.LESSON_LINE + "，黄河入海流。",
                     key="lab_line", bind="query-params")
if current is not None:
    max_len = figures.attention_line_length(current.config.n_layer, current.config.n_head)
    attn_text = {"title": "attn_weights", "step": _("layer {layer} · head {head}"),
                 "query": _("query (position:character)"), "key": _("key")}
    maps, attn_figure = attention_view(current.model_id, line, max_len, current, tuple(attn_text.items()))
    if maps.unknown:
        st.warning(_("Not in the vocabulary, left out: {chars}").format(
            chars=panels.plain(" ".join(maps.unknown[:30]))))
    if maps.cut:
        st.info(_("Only the first {shown} known characters are drawn ({cut} left out), so that the {maps} maps stay "
                  "readable.").format(shown=len(maps.tokens), cut=maps.cut,
                                      maps=current.config.n_layer * current.config.n_head))
    if attn_figure is None:
        st.warning(_("No character of this line is in the model's vocabulary: nothing to draw."))
    else:
        st.plotly_chart(attn_figure, key="lab_attention")
        w = maps.attn_weights
        st.markdown(_("{layers} layers × {heads} heads on {chars} characters · every row sums to {row:.4f} · mean "
                      "weight a query puts on itself: {diag:.3f}").format(
            layers=w.shape[0], heads=w.shape[1], chars=w.shape[2], row=maps.row_sum, diag=maps.self_weight))
    page.prose("positions")
    pos_text = {"trained": _("pos_emb after training"), "untrained": _("pos_emb before training (same seed)"),
                "sim_trained": _("cosine similarity of positions, trained"),
                "sim_untrained": _("cosine similarity of positions, untrained"),
                "position": _("position"), "dimension": _("dimension")}
    tables = positions_view(current.model_id, current, tuple(pos_text.items()))
    if tables is None:
        st.info(_("This model uses pos_encoding “{pos}”: it has no learned position table.").format(
            pos=current.config.pos_encoding))
    else:
        stats, pos_figure = tables
        st.plotly_chart(pos_figure, key="lab_positions")
        st.markdown(_("mean cosine similarity of neighbouring positions: trained **{trained:.3f}**, before training "
                      "**{untrained:.3f}** (seed {seed})").format(trained=stats.neighbour_sim_trained,
                                                                  untrained=stats.neighbour_sim_untrained,
                                                                  seed=stats.seed))
page.show_code(models.attention_maps, models.position_tables)

# --- 6. experiments -------------------------------------------------------------------------------------------------
page.prose("experiments")
results, unreadable = read_shipped(results_file, lab_experiments.RESULTS_FILE)
if unreadable:
    st.warning(_("The shipped results file cannot be read."))
if results is None:
    st.info(_("No precomputed results ship with this copy: run `python -m engine.lab.experiments` or rerun below."))
else:
    s, machine = results["settings"], results["machine"]
    st.caption(_("Shipped results: `{command}` · {steps} steps of batch {batch} × block_size {block} per run, peak "
                 "learning rate {lr:g} · {corpus} · {cpu} ({threads} threads, {device}) · {minutes:.1f} min in all"
                 ).format(command=results["command"], steps=s["steps"], batch=s["batch_size"],
                          block=s["base_model"]["block_size"], lr=s["learning_rate"], corpus=results["corpus"]["name"],
                          cpu=machine["cpu"], threads=machine["torch_threads"], device=machine["device"],
                          minutes=results["total_wall_s"] / 60)
               + ("" if results.get("complete") else _(" · INCOMPLETE: the command did not finish")))
    done_seeds = sorted({seed for e in results["experiments"].values() for seed in e.get("seeds", [])
                         if seed is not None})
    if done_seeds:
        st.caption(_("Every run was trained with the seeds {seeds}; the table gives the mean ± standard deviation over "
                     "them, and a difference between two runs counts as real when it exceeds the seed noise (rule "
                     "below each table).").format(seeds=", ".join(map(str, done_seeds))))
rerun_steps = url.int_input(st, _("steps per run for a live rerun"), *rules.RERUN_STEPS, step=10, value=100,
                            key="lab_rerun_steps")
live = st.session_state.get("lab_exp_live", {})
for name in lab_experiments.EXPERIMENTS:
    st.markdown(f"#### {panels.experiment_title(name)}")
    if name == "causal":
        page.prose("causal")
    shown = live.get(name) or (results or {}).get("experiments", {}).get(name)
    if shown is not None:
        if name in live:
            st.caption(_("Your live rerun: {steps} steps of batch {batch} on {corpus}.").format(
                steps=shown["steps"], batch=shown["batch_size"], corpus=shown["corpus"]))
        shown_corpus = shown.get("corpus")
        panels.show_experiment(shown, f"lab_exp_{name}", panels.baselines_for(
            builtin_corpus(shown_corpus) if shown_corpus in CORPORA and shown_corpus != "upload" else
            (corpus if corpus is not None and corpus.name == shown_corpus else None)))
        if name == "heads":
            same = len({r["params"] for r in shown["runs"]}) == 1
            st.markdown(_("parameters: {counts}").format(counts=", ".join(f"{r['params']:,}" for r in shown["runs"])))
            page.verdict(same, _("same parameter count for every head count"), _("parameter counts differ"))
            counts = lesson_param_counts()
            page.chapter_check(_("one attention layer at n_embd 32: qkv parameters for 1, 4, 8 heads"),
                               [c.qkv for c in counts], [chapter.LESSON_QKV_PARAMS] * 3)
        if name == "causal":
            panels.show_causal_details(shown)
    jobs = st.session_state.setdefault("lab_exp_jobs", {})
    exp_running = name in jobs and not jobs[name].snapshot().finished
    if st.button(_("Rerun live with {steps} steps per run (batch {batch})").format(steps=rerun_steps,
                                                                                   batch=rules.RERUN_BATCH),
                 key=f"lab_rerun_experiment_{name}", disabled=exp_running or corpus is None,
                 icon=":material/replay:") and not exp_running:
        if corpus is not None and corpus.max_block_size >= lab_experiments.Run("").config().block_size:
            exp_job, cached = lab_runner.submit_experiment(name, corpus, rerun_steps, rules.RERUN_BATCH, seed,
                                                           owner_alive=panels.owner_alive())
            if cached is not None:
                st.session_state.setdefault("lab_exp_live", {})[name] = cached
            else:
                jobs[name] = exp_job
            st.rerun()  # redraw with the button disabled and the progress polling
        else:
            st.error(_("This text is too short for the course model's block_size of 128."))
    st.fragment(run_every=POLL_S if exp_running else None)(panels.experiment_panel)(name)
page.show_code(lab_experiments.run_experiment, lab_experiments.train_run, lab_experiments.loss_by_position)

page.check_yourself()
