"""The models the Lab holds: trained, uploaded or shipped, and the uploads a reader sends (a checkpoint, a text).

What a page does with a model lives beside this module, one concern each: ``generation`` (prompts and
continuations), ``poem_forms`` (forms imposed while sampling), ``loops`` (where greedy decoding repeats itself)
and ``internals`` (attention maps, the position table, the next character's odds).

:class:`LabModel` is what a page keeps for a reader: a trained, uploaded or shipped model with its
tokenizer, training summary and a content id (SHA-256 of the weights), so caches keyed by that id
can never mix two readers' different models. Everything a reader sends (a text, a checkpoint, a
prompt) is checked and bounded here before anything is allocated; results are frozen dataclasses
with stable keys, never sentences.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from engine import budget
from engine.checkpoint import SHIPPED_MODEL, checkpoint_from_bytes, load_checkpoint
from engine.corpus import Corpus, CorpusError, corpus_from_text, decode_text
from engine.gpt import GPT, GPTConfig, config_params
from engine.tokenizer import CharTokenizer
from engine.training import TrainResult

#: Where a model comes from.


SOURCES = ("trained", "uploaded", "shipped")


def corpus_fingerprint(corpus: Corpus) -> str:
    """First 16 hex digits of the SHA-256 of the corpus's training text (UTF-8).

    Two corpora with the same text (and hence the same records, split and vocabulary) get the
    same fingerprint, whatever their names.
    """
    return hashlib.sha256(corpus.text.encode("utf-8")).hexdigest()[:16]


def weights_id(model: GPT, tokenizer: CharTokenizer) -> str:
    """16 hex digits of the SHA-256 of everything that sets a model's output: config, vocabulary, weights.

    Equal ids mean equal models: caches of generated text and attention maps are keyed by it, so two
    checkpoints with the same weights and different vocabularies (the same ids, other characters) get two ids.
    """
    h = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True).encode("utf-8"))
    h.update(tokenizer.to_json().encode("utf-8", "surrogatepass"))
    for name, tensor in model.state_dict().items():  # a fixed order: the module's registration order
        h.update(name.encode("utf-8"))
        h.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class LabModel:
    """A model the Lab can use: trained here, uploaded, or shipped with the app.

    Attributes:
        model: the GPT, in eval mode (on the device it was trained or loaded on).
        tokenizer: its character vocabulary.
        summary: JSON-ready training summary (losses, steps, wall time, history ...), as in checkpoints.
        source: one of :data:`SOURCES`.
        model_id: :func:`weights_id`; caches of generations and attention maps are keyed by it.
        stopped: True when training was stopped before its last step.
    """

    model: GPT
    tokenizer: CharTokenizer
    summary: dict
    source: str
    model_id: str
    stopped: bool = False

    @property
    def config(self) -> GPTConfig:
        """The model's GPTConfig."""
        return self.model.config

    @property
    def params(self) -> int:
        """Parameters of the model (``engine.gpt.config_params``)."""
        return config_params(self.config)

    @classmethod
    def from_result(cls, result: TrainResult) -> LabModel:
        """Wraps a ``TrainResult`` (source "trained")."""
        model = result.model
        return cls(model, result.tokenizer, result.summary(), "trained", weights_id(model, result.tokenizer),
                   result.stopped)


def load_shipped(path: str | Path = SHIPPED_MODEL, device: str = "cpu") -> LabModel:
    """Loads the app's shipped checkpoint folder as a :class:`LabModel` (source "shipped").

    Raises:
        CheckpointError: if the folder is missing or its files are broken (see ``engine.checkpoint``).
    """
    ckpt = load_checkpoint(path, device=device)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "shipped", weights_id(ckpt.model, ckpt.tokenizer))


def read_checkpoint_upload(data: bytes, name: str = "upload") -> LabModel:
    """An uploaded single-file checkpoint (``checkpoint_to_bytes``) as a :class:`LabModel` on the CPU.

    The file is checked from its header before anything is allocated (``engine.checkpoint``):
    over-the-caps sizes, shapes that differ from the declared config, NaN/inf weights are refused.

    Raises:
        CheckpointError: for anything that is not such a checkpoint; ``reason`` is a stable key
            and the message (for logs) starts with ``name``.
    """
    ckpt = checkpoint_from_bytes(data, device="cpu", where=name)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "uploaded", weights_id(ckpt.model, ckpt.tokenizer))


@dataclass(frozen=True)
class UploadResult:
    """What the corpus upload handler returns: a corpus, or why there is none.

    Attributes:
        corpus: the corpus, or None.
        problem: None, or a stable key: "empty", "too_large" (over ``budget.MAX_TEXT_BYTES``),
            "binary", "not_utf8", "vocab" (over ``budget.MAX_VOCAB`` distinct characters) or
            "too_short" (a split would be under 2 characters).
        value, limit: the measured size and the cap for "too_large" (bytes) and "vocab" (characters).
        detail: the ``CorpusError`` text for logs, or "".
    """

    corpus: Corpus | None
    problem: str | None = None
    value: int = 0
    limit: int = 0
    detail: str = ""


def read_corpus_upload(data: bytes, name: str) -> UploadResult:
    """The page's handler for an uploaded text file: checks sizes first, never raises for bad content.

    Order of the checks, each before anything larger is built: byte size (at most
    ``budget.MAX_TEXT_BYTES``), then the text decoded once (``engine.corpus.decode_text``: UTF-8, or
    UTF-16/32 with a byte-order mark; empty, not decodable, NUL characters), the number of distinct
    characters (at most ``budget.MAX_VOCAB``: the vocabulary sets the embedding and logits sizes), and
    only then the corpus (records as offsets into the text, split, token ids). What the result holds is
    the text, its token ids (int32) and one offset per record, a few times the file's size.

    Args:
        data: the file's bytes.
        name: its file name (the corpus name).
    """
    if len(data) > budget.MAX_TEXT_BYTES:
        return UploadResult(None, "too_large", len(data), budget.MAX_TEXT_BYTES)
    try:
        text = decode_text(data, name, budget.MAX_TEXT_BYTES)
    except CorpusError as exc:
        problem = exc.reason if exc.reason in ("empty", "binary", "not_utf8") else "not_utf8"
        return UploadResult(None, problem, detail=str(exc))
    distinct = len(set(text))
    if distinct > budget.MAX_VOCAB:
        return UploadResult(None, "vocab", distinct, budget.MAX_VOCAB)
    try:
        return UploadResult(corpus_from_text(text, name))
    except CorpusError as exc:
        return UploadResult(None, "too_short", detail=str(exc))
