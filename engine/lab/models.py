"""The models the Lab holds, and what a page does with one: uploads, generation, attention maps, position tables.

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

import torch

from engine import budget
from engine.checkpoint import SHIPPED_MODEL, checkpoint_from_bytes, load_checkpoint
from engine.corpus import Corpus, CorpusError, corpus_from_bytes, decode_text
from engine.gpt import GPT, GPTConfig, config_params
from engine.rng import uses_global_rng
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


def weights_id(model: GPT) -> str:
    """16 hex digits of the SHA-256 of the model's weights and config: equal ids mean equal models."""
    h = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True).encode("utf-8"))
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
        return cls(model, result.tokenizer, result.summary(), "trained", weights_id(model), result.stopped)


def load_shipped(path: str | Path = SHIPPED_MODEL, device: str = "cpu") -> LabModel:
    """Loads the app's shipped checkpoint folder as a :class:`LabModel` (source "shipped").

    Raises:
        CheckpointError: if the folder is missing or its files are broken (see ``engine.checkpoint``).
    """
    ckpt = load_checkpoint(path, device=device)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "shipped", weights_id(ckpt.model))


def read_checkpoint_upload(data: bytes, name: str = "upload") -> LabModel:
    """An uploaded single-file checkpoint (``checkpoint_to_bytes``) as a :class:`LabModel` on the CPU.

    The file is checked from its header before anything is allocated (``engine.checkpoint``):
    over-the-caps sizes, shapes that differ from the declared config, NaN/inf weights are refused.

    Raises:
        CheckpointError: for anything that is not such a checkpoint; ``reason`` is a stable key
            and the message (for logs) starts with ``name``.
    """
    ckpt = checkpoint_from_bytes(data, device="cpu", where=name)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "uploaded", weights_id(ckpt.model))


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
    ``budget.MAX_TEXT_BYTES``), empty, NUL bytes (binary), UTF-8, then the number of distinct
    characters (at most ``budget.MAX_VOCAB``: the vocabulary sets the embedding and logits
    sizes), and only then the corpus (records, split, token ids).

    Args:
        data: the file's bytes.
        name: its file name (the corpus name).
    """
    if len(data) > budget.MAX_TEXT_BYTES:
        return UploadResult(None, "too_large", len(data), budget.MAX_TEXT_BYTES)
    if not data.strip():
        return UploadResult(None, "empty")
    if b"\x00" in data:
        return UploadResult(None, "binary")
    try:
        text = decode_text(data, name)
    except CorpusError as exc:
        return UploadResult(None, "not_utf8", detail=str(exc))
    distinct = len(set(text))
    if distinct > budget.MAX_VOCAB:
        return UploadResult(None, "vocab", distinct, budget.MAX_VOCAB)
    try:
        return UploadResult(corpus_from_bytes(data, name))
    except CorpusError as exc:
        return UploadResult(None, "too_short", detail=str(exc))


# ---------------------------------------------------------------------------------------------
# Using a model: generation and attention maps
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prompt:
    """How a prompt reaches the model.

    Attributes:
        ids: token ids, never empty.
        kept: the prompt without unknown characters.
        unknown: dropped characters, in order of first appearance.
        started_from: "prompt", "newline" (nothing known: the model starts from a newline) or
            "first_character" (nothing known and no newline in the vocabulary).
        cropped: how many leading characters the model does not see (it reads the last block_size).
    """

    ids: tuple[int, ...]
    kept: str
    unknown: tuple[str, ...]
    started_from: str
    cropped: int


def prepare_prompt(tokenizer: CharTokenizer, prompt: str, block_size: int) -> Prompt:
    """Unknown characters dropped, an empty prompt replaced, the context's crop counted.

    Args:
        tokenizer: the model's vocabulary.
        prompt: the reader's text.
        block_size: the model's context_length.
    """
    unknown = tokenizer.unknown_chars(prompt)
    ids = tokenizer.encode(prompt, errors="drop")
    kept = tokenizer.decode(ids)
    started_from = "prompt"
    if not ids:
        if "\n" in tokenizer.stoi:
            ids, started_from = [tokenizer.stoi["\n"]], "newline"
        else:
            ids, started_from = [0], "first_character"
    return Prompt(tuple(ids), kept, tuple(unknown), started_from, max(0, len(ids) - block_size))


@dataclass(frozen=True)
class Generation:
    """A continued prompt: :class:`Prompt` plus the new characters.

    Attributes:
        prompt: how the prompt reached the model.
        new: the generated characters only.
        greedy: True when temperature 0 picked the most likely character at each step.
    """

    prompt: Prompt
    new: str
    greedy: bool

    @property
    def text(self) -> str:
        """The kept prompt followed by the new characters."""
        return self.prompt.kept + self.new


class NonFiniteLogitsError(ValueError):
    """The model's logits hold NaN or infinite values, so no character can be sampled from them."""


def generate(
    lab_model: LabModel,
    prompt: str,
    max_new_tokens: int = 60,
    temperature: float = 0.8,
    top_k: int | None = 20,
    seed: int = 0,
) -> Generation:
    """Continues a prompt with a model, as the engine documents (``GPT.generate``).

    Unknown characters are dropped and reported; a prompt longer than block_size is fed to the
    model cropped to its last block_size characters (``GPT.generate`` crops at every step).
    Temperature 0 means greedy: the most likely character at each step (deterministic, and a
    small model often repeats itself then); any temperature > 0 samples from a private generator
    seeded with ``seed``, so the same settings give the same text. The logits of the prompt are
    checked before anything is sampled: a model whose weights overflow is reported, not sampled.

    Raises:
        ValueError: for a negative temperature or max_new_tokens, or top_k < 1.
        NonFiniteLogitsError: if the model's logits are NaN or infinite.
    """
    model = lab_model.model
    info = prepare_prompt(lab_model.tokenizer, prompt, model.config.block_size)
    device = next(model.parameters()).device
    idx = torch.tensor([info.ids], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad():
        was_training = model.training
        model.eval()
        logits = model(idx[:, -model.config.block_size :]).logits  # (1, T', V) with T' <= block_size
        model.train(was_training)
    if not bool(torch.isfinite(logits).all()):
        raise NonFiniteLogitsError("the model's logits hold NaN or infinite values")
    generator = torch.Generator(device=device).manual_seed(seed)
    try:
        out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator)
    except RuntimeError as exc:  # torch.multinomial on NaN/inf probabilities, past the checked prompt
        raise NonFiniteLogitsError(f"sampling failed: {exc}") from exc
    new = lab_model.tokenizer.decode(out[0, idx.size(1) :].tolist())  # (T + n,) -> the n new ids
    return Generation(info, new, temperature == 0)


@dataclass(frozen=True)
class AttentionMaps:
    """Every layer's and head's attention weights on a line.

    Attributes:
        attn_weights: float32 (n_layer, n_head, T, T) on the CPU; row i: how query i spreads its
            attention over keys 0..i. T is 0 when no character of the line is known.
        tokens: the T characters read.
        unknown: dropped characters.
        cut: known characters left out at the end.
    """

    attn_weights: torch.Tensor
    tokens: tuple[str, ...]
    unknown: tuple[str, ...]
    cut: int

    @property
    def self_weight(self) -> float:
        """Mean weight a query puts on itself (the diagonal), over layers, heads and positions; NaN when T = 0."""
        if self.attn_weights.size(-1) == 0:
            return float("nan")
        return float(self.attn_weights.diagonal(dim1=-2, dim2=-1).mean())

    @property
    def row_sum(self) -> float:
        """Mean sum of a row of weights (1 up to float rounding); NaN when T = 0."""
        if self.attn_weights.size(-1) == 0:
            return float("nan")
        return float(self.attn_weights.sum(-1).mean())


@torch.no_grad()
def attention_maps(lab_model: LabModel, line: str, max_len: int = 32) -> AttentionMaps:
    """Every layer's and head's attention weights on a line (the manual attention path).

    Args:
        lab_model: the model.
        line: the text to read; unknown characters are dropped, and only its first
            ``min(max_len, block_size)`` known characters are used.
        max_len: the longest line drawn (keeps the heatmaps readable).
    """
    model, tokenizer = lab_model.model, lab_model.tokenizer
    unknown = tuple(tokenizer.unknown_chars(line))
    ids = tokenizer.encode(line, errors="drop")
    limit = min(max_len, model.config.block_size)
    cut = max(0, len(ids) - limit)
    ids = ids[:limit]
    c = model.config
    if not ids:
        return AttentionMaps(torch.zeros(c.n_layer, c.n_head, 0, 0), (), unknown, cut)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        out = model(torch.tensor([ids], dtype=torch.long, device=device), return_weights=True)
    finally:
        model.train(was_training)
    # n_layer x (1, nh, T, T) -> (n_layer, nh, T, T)
    weights = torch.stack([w[0] for w in out.attn_weights]).float().cpu()
    return AttentionMaps(weights, tuple(tokenizer.decode(ids)), unknown, cut)


@dataclass(frozen=True)
class PositionTables:
    """A model's learned position table next to the one it started from.

    Attributes:
        trained, untrained: float32 (block_size, n_embd) on the CPU.
        seed: the seed of the untrained table.
        neighbour_sim_trained, neighbour_sim_untrained: mean cosine similarity of neighbouring
            rows (training makes nearby positions alike, random init does not); NaN for one row.
    """

    trained: torch.Tensor
    untrained: torch.Tensor
    seed: int
    neighbour_sim_trained: float
    neighbour_sim_untrained: float


def _neighbour_sim(table: torch.Tensor) -> float:
    if table.size(0) < 2:
        return float("nan")
    unit = torch.nn.functional.normalize(table, dim=1)  # (block_size, n_embd), rows of length 1
    return float((unit[:-1] * unit[1:]).sum(dim=1).mean())  # cos(row t, row t+1), averaged


def position_tables(lab_model: LabModel, seed: int | None = None) -> PositionTables | None:
    """The learned position table of a model next to the table an untrained model starts with.

    Args:
        lab_model: the model; None is returned unless ``pos_encoding == "learned"``.
        seed: the seed of the untrained model; default: the training seed from the summary
            (the table the trained one actually started from), else 1337.
    """
    config = lab_model.config
    if config.pos_encoding != "learned":
        return None
    if seed is None:
        train_config = lab_model.summary.get("train_config")
        stored = train_config.get("seed", 1337) if isinstance(train_config, dict) else 1337
        seed = stored if isinstance(stored, int) and not isinstance(stored, bool) else 1337
    untrained = _initial_position_table(config, seed)  # (block_size, n_embd)
    trained = lab_model.model.pos_emb.weight.detach().float().cpu()  # (block_size, n_embd)
    return PositionTables(trained, untrained, seed, _neighbour_sim(trained), _neighbour_sim(untrained))


@uses_global_rng
def _initial_position_table(config: GPTConfig, seed: int) -> torch.Tensor:
    """``pos_emb`` of a GPT built after ``torch.manual_seed(seed)``, as ``train`` builds it: (block_size, n_embd)."""
    torch.manual_seed(seed)
    return GPT(config).pos_emb.weight.detach().float()

