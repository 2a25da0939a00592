"""The model the Lab's later sections use: the reader's own or the shipped one, its checkpoint, its diagram."""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

from engine import budget
from engine.checkpoint import SHIPPED_MODEL, CheckpointError, checkpoint_to_bytes
from engine.diagrams import lab as diagrams
from engine.lab import models
from engine.lab.models import LabModel
from ui import positions, url
from ui.diagram import diagram
from ui.i18n import _, ngettext
from ui.lab import shipped as shipped_files
from ui.lab.corpus import baselines_for, shipped_corpus, versus_baselines
from ui.lab.session import OWN, LabSession
from ui.lab.words import fill, plain, position_name, upload_help
from ui.numbers import colon, integer


@st.cache_resource(show_spinner=False, max_entries=2)
def shipped_model(path: str) -> tuple[LabModel | None, CheckpointError | None]:
    """The model that ships with the app, or why it is not available."""
    if not Path(path).exists():
        return None, None
    try:
        return models.load_shipped(path), None
    except CheckpointError as exc:
        return None, exc


@st.cache_data(show_spinner=False, max_entries=4)
def checkpoint_file(model_id: str, _model: LabModel) -> bytes:
    """The model as a safetensors checkpoint, made when the reader downloads it."""
    return checkpoint_to_bytes(_model.model, _model.tokenizer, _model.summary)


def checkpoint_text(error: CheckpointError) -> str:
    """Why an uploaded checkpoint cannot be loaded (from its stable ``reason``)."""
    return {
        "missing": _("the file is empty."),
        "format": _("it is not a checkpoint downloaded from this page."),
        "config": _("its description (model sizes or vocabulary) is invalid."),
        "summary": _("its training summary (losses, steps, seed) is invalid."),
        "too_large": _("its model is larger than this server allows."),
        "shapes": _("its weights do not match the model it describes."),
        "not_finite": _("its weights hold NaN or infinite values."),
        "mismatch": _("its files do not belong together."),
    }.get(error.reason, _("the file is damaged or not a checkpoint."))


def describe_model(model: LabModel, whole: shipped_files.WholeSplit | None = None) -> str:
    """One line: size, parameters, vocabulary, steps and losses of a model, e.g. for a caption.

    Args:
        model: the model.
        whole: its loss over the whole validation split when measured (the shipped model's), shown instead of the
            training's last estimate; without it the losses are said to be the 10-batch estimates they are.
    """
    c = model.config
    parts = [fill(_("n_layer {n_layer}, n_head {n_head}, n_embd {n_embd}, block_size {block}, {pos}"),
        n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd, block=c.block_size,
        pos=position_name(c.pos_encoding))]
    if not c.causal:
        parts[0] += _(", no causal mask")
    parts.append(fill(_("{params:,} parameters"), params=model.params))
    parts.append(fill(_("vocabulary {size}"), size=integer(model.tokenizer.vocab_size)))
    s = model.summary
    if isinstance(s.get("steps_done"), int):
        corpus = str(s.get("corpus", "?"))
        steps = (_("{steps} steps (stopped) on {corpus}") if s.get("stopped") else _("{steps} steps on {corpus}"))
        parts.append(fill(steps, steps=integer(s["steps_done"]), corpus=corpus))
    if whole is not None:
        parts.append(fill(_("validation loss over the whole validation split {val:.3f} ({windows:,} windows)"),
                          val=whole.val_loss, windows=whole.windows))
    elif isinstance(s.get("final_val_loss"), int | float) and isinstance(s.get("final_train_loss"), int | float):
        iters = s.get("train_config", {}).get("eval_iters") if isinstance(s.get("train_config"), dict) else None
        parts.append(fill(_("train loss {train:.3f}, val loss {val:.3f} (estimated on {batches} batches)"),
                          train=s["final_train_loss"], val=s["final_val_loss"],
                          batches=integer(iters) if isinstance(iters, int) else "?"))
    return " · ".join(parts)


def choose_model(lab: LabSession) -> LabModel | None:
    """The shipped model's note, the checkpoint uploader, the model chooser and its caption, the download.

    Returns:
        The model the later sections use, or None when there is none yet.
    """
    shipped, shipped_error = shipped_model(str(SHIPPED_MODEL))
    if shipped_error is not None:
        st.warning(fill(_("The shipped model could not be loaded: {reason}"), reason=checkpoint_text(shipped_error)))
    d1, d2 = st.columns(2)
    ckpt_mb = budget.upload_widget_mb(budget.MAX_CHECKPOINT_BYTES)  # the one limit, in the widget's unit
    ckpt_file = d2.file_uploader(fill(_("Load a checkpoint downloaded from this page (at most {mb} MB)"),
                                      mb=integer(ckpt_mb)), key="lab_ckpt_upload", max_upload_size=ckpt_mb,
                                 help=upload_help(ckpt_mb))
    if ckpt_file is not None:
        error = lab.checkpoint_upload(ckpt_file.getvalue(), ckpt_file.name, models.read_checkpoint_upload)
        if error is not None:
            d2.error(fill(_("This checkpoint cannot be loaded: {reason}"), reason=checkpoint_text(error)),
                     icon=":material/error:")
        else:
            d2.success(fill(_("Loaded {name}."), name=plain(ckpt_file.name)), icon=":material/check_circle:")
    choices = lab.model_choices(shipped)
    if not choices:
        d1.info(_("No model yet: no trained model ships with this copy of the app. Train one above (the quick preset "
                  "is the smallest) or load a checkpoint."), icon=":material/info:")
        return None
    # the link holds the choice's own name (shipped), the radio its label in the reader's language
    use = url.choice(d1.radio, _("Model used below"), choices, key="lab_use", default=choices[0],
                     format_func=lambda c: _("your model") if c == OWN else _("the shipped model"), horizontal=True)
    current = lab.own_model if use == OWN else shipped
    if use == OWN:
        origin = {"trained": _("trained"), "uploaded": _("uploaded")}.get(current.source, current.source)
        whose = fill(_("Your model ({origin})"), origin=origin)
    else:
        whose = _("The model shipped with the app")
    whole = shipped_files.whole_split() if use != OWN else None
    d1.caption(whose + colon() + describe_model(current, whole))
    model_val = whole.val_loss if whole is not None else current.summary.get("final_val_loss")
    base = shipped_corpus(current.summary.get("corpus"))
    if base is not None and isinstance(model_val, int | float):
        d1.caption(versus_baselines(float(model_val), baselines_for(base)))
    d1.download_button(_("Download this model (.safetensors)"),
                       data=functools.partial(checkpoint_file, current.model_id, current),
                       file_name=f"gpt_lab_{current.model_id}.safetensors", mime="application/octet-stream",
                       key="lab_download", on_click="ignore", icon=":material/download:")
    return current


@st.cache_data(show_spinner=False, max_entries=16)
def gpt_diagram(model_id: str, _model: LabModel, shapes: tuple[tuple[str, tuple[int, ...]], ...],
                words: tuple[tuple[str, str], ...]) -> str:
    """DOT source of the GPT block diagram of the model in use, with the shapes of its last forward pass."""
    w, sh = dict(words), dict(shapes)
    labels = diagrams.LabLabels(
        tokens=w["tokens"], tok_emb="tok_emb", position=w["position"], block=w["block"],
        ln_1="ln_1 (LayerNorm)", attn=w["attn"], ln_2="ln_2 (LayerNorm)", mlp=w["mlp"], residual=w["residual"],
        ln_f="ln_f (LayerNorm)", lm_head="lm_head", softmax="softmax", probs=w["probs"],
        params=lambda n: fill(ngettext("{n:,} parameter", "{n:,} parameters", n), n=n),
        total=lambda n: fill(ngettext("{n:,} parameter in all", "{n:,} parameters in all", n), n=n))
    return diagrams.lab(labels, diagrams.LabShapes(idx=sh["idx"], residual=sh["residual"], logits=sh["logits"],
                                                   attn_weights=sh["attn_weights"]),
                        diagrams.gpt_parts(_model.model))


def model_diagram(slot, model: LabModel, shapes: dict[str, tuple[int, ...]]) -> None:
    """The model in use, block by block, in ``slot`` (above the generation section), with a forward pass's shapes."""
    words = {"tokens": _("character ids"), "position": positions.part(model.config.pos_encoding),
             "block": _("Transformer block"),
             "attn": _("causal multi-head attention"), "mlp": _("MLP (feed-forward)"),
             "residual": _("residual"), "probs": _("next-character probabilities")}
    with slot.expander(_("The model in use, block by block"), icon=":material/account_tree:"):
        diagram(gpt_diagram(model.model_id, model, tuple(shapes.items()), tuple(words.items())),
                width="content", alt=_("Diagram: the model in use block by block, from the characters to the "
                                       "probabilities of the next one, with each part's shape and parameters."))
        st.caption(fill(_("The shapes are those of the forward pass on your prompt ({chars} characters); the counts "
                     "are this model's parameters per part."), chars=shapes["idx"][1]))
