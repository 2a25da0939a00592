"""Page 8: the GPT lab — train the course's GPT in the page, generate, look inside, run the lesson's experiments."""

import functools
import hashlib
import os
import re
from pathlib import Path

import pandas as pd
import streamlit as st

from engine import chapter, lab
from engine import gpt as G
from engine import lab_experiments as X
from engine.corpus import load_corpus
from engine.device import describe_device, pick_device
from engine.figures import lab as LF
from engine.sections import multi_head
from engine.training import CheckpointError, TrainConfig, checkpoint_to_bytes, train
from ui import page
from ui.nav import PAGES

PAGE = "lab"
INFO = next(p for p in PAGES if p.url_path == "lab")
CORPORA = {"Tang poems (tang300)": "tang300", "Song ci (song100)": "song100", "upload a UTF-8 text file": "upload"}
CORPUS_LABELS = list(CORPORA)
N_LAYERS = (1, 8)
N_EMBDS = [16, 32, 48, 64, 96, 128, 192, 256]
BLOCK_SIZES = [8, 16, 32, 64, 128, 256]
BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64]
LEARNING_RATES = [1e-4, 3e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2]
STEPS = (1, 5000)
#: The "quick" button: the quick model preset with these training settings. On this project's 2-core CPU
#: (one training thread, other jobs running) 300 steps took 44 s in engine.lab and about a minute in the page.
QUICK_TRAIN = {"lab_steps": 400, "lab_batch": 16, "lab_lr": 2e-3}
#: The "course" button: the lesson's model and 1000 steps of the course's batch size.
COURSE_TRAIN = {"lab_steps": 1000, "lab_batch": 16, "lab_lr": 1e-3}
DEFAULT_SEED = 1337
OWN, SHIPPED = "your model", "the shipped model"
POLL_S = 1.0
DEFAULT_PROMPT = "白日"
DEFAULT_LINE = "白日依山尽，黄河入海流。"
RERUN_BATCH = 8


# --- cached resources -------------------------------------------------------------------------------------------
@st.cache_resource
def runner() -> lab.LabRunner:
    """The app-wide runner: registry of finished models, experiment cache, one training at a time.

    On a CPU the job thread leaves one core to the server (a single thread on a 2-core machine).
    """
    return lab.LabRunner(max_concurrent=1, registry_size=6, threads=max(1, (os.cpu_count() or 1) - 1))


@st.cache_resource(show_spinner="Loading the corpus …")
def builtin_corpus(name: str):
    return load_corpus(name)


@st.cache_resource(show_spinner="Loading the shipped model …")
def shipped_model(path: str) -> tuple[lab.LabModel | None, str | None]:
    """The model that ships with the app, or the reason it is not available."""
    if not Path(path).exists():
        return None, None
    try:
        return lab.load_shipped(path), None
    except CheckpointError as exc:
        return None, str(exc)


@st.cache_data(show_spinner="Generating …", max_entries=64)
def generated(model_id: str, prompt: str, length: int, temperature: float, top_k: int, seed: int,
              _model: lab.LabModel) -> dict:
    with lab.torch_threads(1):
        return lab.generate(_model, prompt, length, temperature, top_k or None, seed)


@st.cache_data(show_spinner=False, max_entries=32)
def attention_view(model_id: str, line: str, max_len: int, _model: lab.LabModel) -> tuple[dict, dict | None]:
    with lab.torch_threads(1):
        maps = lab.attention_maps(_model, line, max_len)
    if not maps["tokens"]:
        return maps, None
    return maps, LF.attention_slider(maps["attn_weights"], maps["tokens"], "attn_weights").to_plotly_json()


@st.cache_data(show_spinner=False, max_entries=8)
def positions_view(model_id: str, _model: lab.LabModel) -> tuple[dict, dict] | None:
    tables = lab.position_tables(_model)
    if tables is None:
        return None
    stats = {k: tables[k] for k in ("seed", "neighbour_sim_trained", "neighbour_sim_untrained")}
    return stats, LF.position_tables_figure(tables["trained"], tables["untrained"]).to_plotly_json()


@st.cache_data(show_spinner=False, max_entries=4)
def checkpoint_file(model_id: str, _model: lab.LabModel) -> bytes:
    return checkpoint_to_bytes(_model.model, _model.tokenizer, _model.summary)


@st.cache_data(show_spinner=False)
def results_file(path: str, mtime: float) -> dict | None:
    return X.load_results(path)


@st.cache_data(show_spinner=False)
def experiment_view(experiment: dict) -> tuple[dict, pd.DataFrame]:
    """The curves figure (as a Plotly dict) and the table of one experiment's results."""
    table = pd.DataFrame([{
        "run": r["label"], "params": r["params"], "train": r["final_train_loss"], "val": r["final_val_loss"],
        "val, last pos.": r["last_position_val_loss"], "s": r["wall_s"],
    } for r in experiment["runs"]])
    figure = LF.experiment_curves({**experiment, "title": "val loss (solid) and train loss (dotted)"})
    return figure.to_plotly_json(), table


@st.cache_data(show_spinner=False)
def lesson_qkv_params() -> list[int]:
    return [multi_head.param_counts(chapter.LESSON_N_EMBD, n)["qkv"] for n in (1, 4, 8)]


def parameters(config: G.GPTConfig) -> int:
    return lab.count_params(config)


def corpus_upload(data: bytes, name: str) -> lab.UploadResult:
    """Reads an uploaded text file once per content (the result lives in this session only)."""
    digest = hashlib.sha256(data).hexdigest()
    held = st.session_state.get("lab_corpus_upload")
    if held is None or held[0] != digest:
        held = (digest, lab.read_corpus_upload(data, name))
        st.session_state["lab_corpus_upload"] = held
    return held[1]


def apply_preset(name: str) -> None:
    """Button callback: the quick or course preset into the controls."""
    config = G.PRESETS[name]
    st.session_state.update({
        "lab_n_layer": config.n_layer, "lab_n_embd": config.n_embd, "lab_n_head": config.n_head,
        "lab_block": config.block_size, "lab_dropout": config.dropout, "lab_pos": config.pos_encoding,
        "lab_causal": True, "lab_seed": DEFAULT_SEED, **(QUICK_TRAIN if name == "quick" else COURSE_TRAIN),
    })


def collect_finished_job() -> None:
    """A finished training of this session becomes the reader's model (once)."""
    job = st.session_state.get("lab_job")
    if job is None or st.session_state.get("lab_collected") == id(job) or not job.snapshot().finished:
        return
    st.session_state["lab_collected"] = id(job)
    if job.result is not None:
        st.session_state["lab_own"] = job.result
        st.session_state["lab_use"] = OWN


def training_panel() -> None:
    """Progress, live loss chart and Stop of this session's training (polled while it runs)."""
    job = st.session_state.get("lab_job")
    if job is None:
        return
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(snap.message, icon=":material/hourglass_top:")
    label = {"queued": "waiting for a free slot",
             "running": f"step {snap.step} / {snap.steps} · {snap.tokens_per_s:,.0f} tokens/s · "
                        f"{lab.describe_eta(snap.eta_s)}",
             "done": f"done: {snap.step} steps in {snap.elapsed_s:.1f} s",
             "stopped": f"stopped after {snap.step} of {snap.steps} steps ({snap.elapsed_s:.1f} s)",
             "error": "failed"}[snap.state]
    st.progress(snap.step / max(1, snap.steps), text=label)
    if snap.state == "error":
        st.error(f"Training failed: {snap.message}")
    if snap.history or snap.step_losses:
        st.plotly_chart(LF.loss_chart(snap.history, snap.step_losses, snap.steps), key="lab_live_chart")
    if snap.history:
        step, train_loss, val_loss = snap.history[-1]
        st.markdown(f"last evaluation (step {step}): train loss **{train_loss:.4f}**, val loss **{val_loss:.4f}**")
    if not snap.finished:
        st.button("Stop", key="lab_stop", icon=":material/stop_circle:", on_click=job.stop,
                  help="Ends the run after the current step; the model keeps what it has learned.")
    elif snap.state == "stopped" and job.result is None:
        st.warning(snap.message or "Stopped before the first step: nothing was learned.")
    if snap.finished and st.session_state.get("lab_collected") != id(job):
        st.rerun()


def experiment_panel(name: str) -> None:
    """Progress of a live rerun of one experiment (polled while it runs)."""
    job = st.session_state.get("lab_exp_jobs", {}).get(name)
    if job is None:
        return
    snap = job.snapshot()
    if snap.state == "queued":
        st.info(snap.message, icon=":material/hourglass_top:")
    elif snap.state == "running":
        st.progress(snap.fraction, text=f"run {snap.run_index + 1} of {snap.run_count} ({snap.run_label}): step "
                                        f"{snap.step} / {snap.steps} · {lab.describe_eta(snap.eta_s)}")
        st.button("Stop", key=f"lab_stop_experiment_{name}", on_click=job.stop)
    elif snap.state == "error":
        st.error(f"The rerun failed: {snap.message}")
    elif snap.state == "stopped":
        st.warning("Rerun stopped; nothing was kept.")
    if snap.finished and job.result is not None:
        st.session_state.setdefault("lab_exp_live", {})[name] = job.result
        del st.session_state["lab_exp_jobs"][name]
        st.rerun()


def show_experiment(experiment: dict, key: str) -> None:
    """Curves and table of one experiment, side by side."""
    figure, table = experiment_view(experiment)
    left, right = st.columns([1, 1])
    left.plotly_chart(figure, key=f"{key}_curves")
    right.caption("Final losses in nats; “val, last pos.” is the validation loss at the last position of the "
                  "window only (the one generation uses); s is the wall time of the run.")
    right.dataframe(table, hide_index=True, key=f"{key}_table", column_config={
        "params": st.column_config.NumberColumn(format="localized", help="parameters"),
        "train": st.column_config.NumberColumn(format="%.3f", help="final train loss (nats)"),
        "val": st.column_config.NumberColumn(format="%.3f", help="final validation loss (nats)"),
        "val, last pos.": st.column_config.NumberColumn(format="%.3f", help="validation loss at the last position only"),
        "s": st.column_config.NumberColumn(format="%.0f", help="wall time of the run in seconds"),
    })


page.header("8 · GPT lab", INFO.section, PAGE)
collect_finished_job()
lab_runner = runner()

# --- 1. corpus ----------------------------------------------------------------------------------------------------
page.prose(PAGE, "corpus")
corpus_label = st.radio("Training text", CORPUS_LABELS, horizontal=True,
                        key=bound("lab_corpus", CORPUS_LABELS[0], options=CORPUS_LABELS))
corpus = None
if CORPORA[corpus_label] == "upload":
    uploaded = st.file_uploader("A UTF-8 text file (at most 20 MB)", key="lab_upload", max_upload_size=25)
    if uploaded is None:
        st.info("Choose a file to train on; until then the training controls wait for it.")
    else:
        outcome = corpus_upload(uploaded.getvalue(), uploaded.name)
        if outcome.error:
            st.error(f"This file cannot be used: {outcome.error}", icon=":material/error:")
        corpus = outcome.corpus
else:
    corpus = builtin_corpus(CORPORA[corpus_label])
if corpus is not None:
    if corpus.message:
        st.warning(corpus.message, icon=":material/info:")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("characters", f"{len(corpus.text):,}")
    m2.metric("vocabulary (distinct characters)", f"{corpus.vocab_size:,}")
    m3.metric("records", f"{len(corpus.records):,}")
    m4.metric("train / val tokens", f"{len(corpus.train_ids):,} / {len(corpus.val_ids):,}")
    st.caption("The first record of the text:")
    st.code(corpus.records[0].body[:400], language=None)

# --- 2. controls ----------------------------------------------------------------------------------------------------
page.prose(PAGE, "controls")
b1, b2, b3 = st.columns([1, 1, 3])
b1.button("Quick preset", key="lab_preset_quick", on_click=apply_preset, args=("quick",), icon=":material/bolt:")
b2.button("Course preset", key="lab_preset_course", on_click=apply_preset, args=("course",), icon=":material/school:")
device = pick_device()
threads = lab_runner.threads if device.type == "cpu" else None
b3.caption(f"Training runs on **{describe_device(device)}** (CUDA, then Apple MPS, then CPU)"
           + (f"; a training uses {threads} thread{'s' if threads > 1 else ''}, leaving the rest to the web server."
              if threads else "."))
quick = G.PRESETS["quick"]
c1, c2, c3, c4 = st.columns(4)
n_layer = int(c1.slider("n_layer", *N_LAYERS, step=1, key=bound("lab_n_layer", quick.n_layer, lo=N_LAYERS[0], hi=N_LAYERS[1])))
n_embd = int(c2.selectbox("n_embd", N_EMBDS, key=bound("lab_n_embd", quick.n_embd, options=N_EMBDS)))
pos_encoding = c3.selectbox("position encoding", list(G.POS_ENCODINGS),
                            key=bound("lab_pos", quick.pos_encoding, options=list(G.POS_ENCODINGS)))
heads = [h for h in range(1, n_embd + 1) if n_embd % h == 0 and (pos_encoding != "rope" or (n_embd // h) % 2 == 0)]
key_heads = bound("lab_n_head", quick.n_head if quick.n_head in heads else heads[0], options=heads)
if st.session_state.get(key_heads) not in heads:
    st.session_state[key_heads] = quick.n_head if quick.n_head in heads else heads[0]
n_head = int(c4.selectbox("n_head (divisors of n_embd)", heads, key=key_heads))
c1, c2, c3, c4 = st.columns(4)
block_size = int(c1.selectbox("block_size", BLOCK_SIZES, key=bound("lab_block", quick.block_size, options=BLOCK_SIZES)))
dropout = float(c2.slider("dropout", 0.0, 0.5, step=0.05, key=bound("lab_dropout", quick.dropout, lo=0.0, hi=0.5)))
causal = c3.checkbox("causal mask", key=bound("lab_causal", True),
                     help="Off: every position sees the whole window, including its own answer (see section 6).")
seed = int(c4.number_input("seed", 0, 99_999, step=1, key=bound("lab_seed", DEFAULT_SEED, lo=0, hi=99_999)))
c1, c2, c3, _ = st.columns(4)
steps = int(c1.number_input("steps", *STEPS, step=50, key=bound("lab_steps", QUICK_TRAIN["lab_steps"], lo=STEPS[0], hi=STEPS[1])))
batch_size = int(c2.selectbox("batch size", BATCH_SIZES, key=bound("lab_batch", QUICK_TRAIN["lab_batch"], options=BATCH_SIZES)))
learning_rate = float(c3.select_slider("peak learning rate", LEARNING_RATES,
                                       key=bound("lab_lr", QUICK_TRAIN["lab_lr"], options=LEARNING_RATES)))

model_config = G.GPTConfig(vocab_size=corpus.vocab_size if corpus is not None else 1, block_size=block_size,
                           n_embd=n_embd, n_head=n_head, n_layer=n_layer, dropout=dropout,
                           pos_encoding=pos_encoding, causal=causal)
train_config = TrainConfig(steps=steps, batch_size=batch_size, learning_rate=learning_rate,
                           warmup_steps=min(50, steps // 10), eval_interval=max(1, steps // 12), eval_iters=5,
                           seed=seed)
problems = []
if corpus is None:
    problems.append("There is no usable training text yet.")
elif block_size > corpus.max_block_size:
    problems.append(f"block_size {block_size} is longer than this text allows: its validation split has "
                    f"{len(corpus.val_ids)} characters, so at most {corpus.max_block_size}.")
for problem in problems:
    st.error(problem, icon=":material/block:")
st.caption(f"{parameters(model_config):,} parameters · head_dim {n_embd // n_head} · "
           f"{batch_size * block_size:,} tokens per step · evaluation every {train_config.eval_interval} steps")

job = st.session_state.get("lab_job")
running = job is not None and not job.snapshot().finished
clicked = st.button("Train", key="lab_train", type="primary", icon=":material/play_arrow:",
                    disabled=running or bool(problems))
if clicked and not running and not problems:
    submitted = lab_runner.submit(model_config, train_config, corpus)
    if submitted.reused:
        st.session_state["lab_own"] = submitted.model
        st.session_state["lab_use"] = OWN
        st.session_state["lab_notice"] = ("A model with exactly these settings on this text was trained before on "
                                          "this server: reusing it.")
    else:
        st.session_state["lab_job"] = submitted.job
    st.rerun()  # redraw with the Train button disabled and the progress polling
if notice := st.session_state.pop("lab_notice", None):
    st.success(notice, icon=":material/recycling:")

# --- 3. training ----------------------------------------------------------------------------------------------------
page.prose(PAGE, "training")
st.fragment(run_every=POLL_S if running else None)(training_panel)()
page.show_code(lab.TrainingJob._work, train, lab.LabRunner.submit)

# --- the current model ----------------------------------------------------------------------------------------------
shipped, shipped_error = shipped_model(str(lab.SHIPPED_MODEL))
if shipped_error:
    st.warning(f"The shipped model could not be loaded: {shipped_error}")
d1, d2 = st.columns(2)
ckpt_file = d2.file_uploader("Load a checkpoint downloaded from this page", key="lab_ckpt_upload", max_upload_size=64)
if ckpt_file is not None:
    data = ckpt_file.getvalue()
    digest = hashlib.sha256(data).hexdigest()
    if st.session_state.get("lab_ckpt_digest") != digest:
        st.session_state["lab_ckpt_digest"] = digest
        try:
            st.session_state["lab_own"] = lab.read_checkpoint_upload(data, ckpt_file.name)
            st.session_state["lab_use"] = OWN
            st.session_state["lab_ckpt_error"] = None
        except CheckpointError as exc:
            st.session_state["lab_ckpt_error"] = str(exc)
    if st.session_state.get("lab_ckpt_error"):
        d2.error(f"This checkpoint cannot be loaded: {st.session_state['lab_ckpt_error']}", icon=":material/error:")
    else:
        d2.success(f"Loaded {ckpt_file.name}.", icon=":material/check_circle:")
own = st.session_state.get("lab_own")
choices = [c for c, m in ((OWN, own), (SHIPPED, shipped)) if m is not None]
current = None
if choices:
    if st.session_state.get("lab_use") not in choices:
        st.session_state["lab_use"] = choices[0]
    use = d1.radio("Model used below", choices, horizontal=True, key=bound("lab_use", choices[0], options=choices))
    current = own if use == OWN else shipped
    d1.caption(f"{'Your model' if use == OWN else 'Shipped model'} ({current.source}): {current.describe()}")
    d1.download_button("Download this model (.safetensors)", data=functools.partial(checkpoint_file, current.model_id, current),
                       file_name=f"gpt_lab_{current.model_id}.safetensors", mime="application/octet-stream",
                       key="lab_download", on_click="ignore", icon=":material/download:")
else:
    d1.info("No model yet: no trained model ships with this copy of the app. Train one above (the quick preset "
            "takes about a minute) or load a checkpoint.", icon=":material/info:")

# --- 4. generate ------------------------------------------------------------------------------------------------------
page.prose(PAGE, "generate")
# A form: generating hundreds of characters takes a second or two on a CPU, so it runs when the reader asks.
with st.form("lab_generate_form", border=False):
    c1, c2, c3, c4, c5 = st.columns([3, 2, 1, 2, 1])
    prompt = c1.text_input("prompt", key=bound("lab_prompt", DEFAULT_PROMPT))
    temperature = float(c2.slider("temperature (0 = greedy)", 0.0, 2.0, step=0.05,
                                  key=bound("lab_temp", 0.8, lo=0.0, hi=2.0)))
    top_k = int(c3.number_input("top-k (0 = all)", 0, 5000, step=1, key=bound("lab_top_k", 20, lo=0, hi=5000)))
    length = int(c4.slider("new characters", 1, 300, step=1, key=bound("lab_length", 64, lo=1, hi=300)))
    gen_seed = int(c5.number_input("sampling seed", 0, 99_999, step=1, key=bound("lab_gen_seed", 0, lo=0, hi=99_999)))
    st.form_submit_button("Generate", key="lab_generate", icon=":material/edit_note:", disabled=current is None)
if current is not None:
    out = generated(current.model_id, prompt, length, temperature, top_k, gen_seed, current)
    if out["unknown"]:
        st.warning(f"Not in this model's vocabulary, so left out of the prompt: {' '.join(out['unknown'][:30])}"
                   f"{' …' if len(out['unknown']) > 30 else ''}", icon=":material/text_select_move_back_word:")
    if out["started_from"] != "prompt":
        st.info(f"Nothing of the prompt is in the vocabulary: the model starts from a {out['started_from']}.")
    if out["cropped"]:
        st.info(f"The prompt has {len(out['ids'])} known characters; the model reads only the last "
                f"{current.config.block_size} (its block_size), so the first {out['cropped']} do not influence it.")
    st.markdown((f"**{out['kept']}**" if out["kept"] else "") + out["new"].replace("\n", "  \n"))
    st.caption(f"{'greedy' if temperature == 0 else f'temperature {temperature:g}'} · "
               f"{'all characters' if top_k == 0 else f'top-k {top_k}'} · seed {gen_seed} · {len(out['new'])} new characters")
page.show_code(lab.generate, lab.prepare_prompt, G.GPT.generate)

# --- 5. look inside ---------------------------------------------------------------------------------------------------
page.prose(PAGE, "inside")
line = st.text_input("a line to read", key=bound("lab_line", DEFAULT_LINE))
if current is not None:
    max_len = LF.attention_line_length(current.config.n_layer, current.config.n_head)
    maps, attn_figure = attention_view(current.model_id, line, max_len, current)
    if maps["unknown"]:
        st.warning(f"Not in the vocabulary, left out: {' '.join(maps['unknown'][:30])}")
    if maps["cut"]:
        st.info(f"Only the first {len(maps['tokens'])} known characters are drawn ({maps['cut']} left out), so that "
                f"the {current.config.n_layer * current.config.n_head} maps stay readable.")
    if attn_figure is None:
        st.warning("No character of this line is in the model's vocabulary: nothing to draw.")
    else:
        st.plotly_chart(attn_figure, key="lab_attention")
        w = maps["attn_weights"]
        diag = float(w.diagonal(dim1=-2, dim2=-1).mean())
        st.markdown(f"{w.shape[0]} layers × {w.shape[1]} heads on {w.shape[2]} characters · every row sums to "
                    f"{float(w.sum(-1).mean()):.4f} · mean weight a query puts on itself: {diag:.3f}")
    page.prose(PAGE, "positions")
    tables = positions_view(current.model_id, current)
    if tables is None:
        st.info(f"This model uses pos_encoding “{current.config.pos_encoding}”: it has no learned position table.")
    else:
        stats, pos_figure = tables
        st.plotly_chart(pos_figure, key="lab_positions")
        st.markdown(f"mean cosine similarity of neighbouring positions: trained **{stats['neighbour_sim_trained']:.3f}**, "
                    f"before training **{stats['neighbour_sim_untrained']:.3f}** (seed {stats['seed']})")
page.show_code(lab.attention_maps, lab.position_tables)

# --- 6. experiments ----------------------------------------------------------------------------------------------------
page.prose(PAGE, "experiments")
try:
    results = results_file(str(X.RESULTS_FILE), X.RESULTS_FILE.stat().st_mtime) if X.RESULTS_FILE.exists() else None
except ValueError as exc:
    results = None
    st.warning(f"The shipped results file cannot be read: {exc}")
if results is None:
    st.info("No precomputed results ship with this copy: run `python -m engine.lab_experiments` or rerun below.")
else:
    s = results["settings"]
    st.caption(f"Shipped results: `{results['command']}` · {s['steps']} steps of batch {s['batch_size']} × "
               f"block_size {s['base_model']['block_size']} per run, peak learning rate {s['learning_rate']:g} · "
               f"{results['corpus']['name']} · {results['machine']['cpu']} ({results['machine']['torch_threads']} "
               f"threads, {results['machine']['device']}) · {results['total_wall_s'] / 60:.1f} min in all"
               f"{'' if results.get('complete') else ' · INCOMPLETE: the command did not finish'}")
rerun_steps = int(st.number_input("steps per run for a live rerun", 10, 1000, step=10,
                                  key=bound("lab_rerun_steps", 100, lo=10, hi=1000)))
live = st.session_state.get("lab_exp_live", {})
for name, experiment in X.EXPERIMENTS.items():
    st.markdown(f"#### {experiment.title}")
    if name == "causal":
        page.prose(PAGE, "causal")
    shown = live.get(name) or (results or {}).get("experiments", {}).get(name)
    if shown is not None:
        if name in live:
            st.caption(f"Your live rerun: {shown['steps']} steps of batch {shown['batch_size']} on {shown['corpus']}.")
        show_experiment(shown, f"lab_exp_{name}")
        if name == "heads":
            same = len({r["params"] for r in shown["runs"]}) == 1
            st.markdown("parameters: " + ", ".join(f"{r['params']:,}" for r in shown["runs"]))
            st.badge("same parameter count for every head count" if same else "parameter counts differ",
                     icon=":material/check_circle:" if same else ":material/error:", color="green" if same else "red")
            page.chapter_check("one attention layer at n_embd 32: qkv parameters for 1, 4, 8 heads",
                               lesson_qkv_params(), [chapter.LESSON_QKV_PARAMS] * 3)
        if name == "causal":
            st.plotly_chart(LF.loss_by_position_figure(shown["runs"]), key="lab_exp_positions_loss")
            for r in shown["runs"]:
                others = r["loss_by_position"][:-1]
                st.markdown(f"{r['label']}: val loss over positions 0 … {len(others) - 1} **{sum(others) / len(others):.3f}**"
                            f" · at the last position **{r['last_position_val_loss']:.3f}**")
            st.caption(f"Samples from “{shown['runs'][0]['samples']['prompt']}” (/ a line break, // blank lines): "
                       "greedy, then sampled at temperature 0.8, top-k 20.")
            for r in shown["runs"]:
                greedy, sampled = (re.sub(r"\n+", lambda m: " / " if len(m.group()) == 1 else " // ", r["samples"][k])
                                   for k in ("greedy", "sampled"))
                st.markdown(f"**{r['label']}** · greedy: {greedy}  \nsampled: {sampled}")
    jobs = st.session_state.setdefault("lab_exp_jobs", {})
    exp_running = name in jobs and not jobs[name].snapshot().finished
    if st.button(f"Rerun live with {rerun_steps} steps per run (batch {RERUN_BATCH})", key=f"lab_rerun_experiment_{name}",
                 disabled=exp_running or corpus is None, icon=":material/replay:") and not exp_running:
        if corpus is not None and corpus.max_block_size >= X.Run("").config().block_size:
            exp_job, cached = lab_runner.submit_experiment(name, corpus, rerun_steps, RERUN_BATCH, seed)
            if cached is not None:
                st.session_state.setdefault("lab_exp_live", {})[name] = cached
            else:
                jobs[name] = exp_job
            st.rerun()  # redraw with the button disabled and the progress polling
        else:
            st.error("This text is too short for the course model's block_size of 128.")
    st.fragment(run_every=POLL_S if exp_running else None)(experiment_panel)(name)
page.show_code(X.run_experiment, X.train_run, X.loss_by_position)

page.check_yourself(PAGE)
