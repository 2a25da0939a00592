"""Looking inside a Lab model: attention maps on a line, the learned position table, and the next character
(its probabilities under temperature, top-k and top-p, and where the last position's attention looked).

Every function runs the model in eval mode on a prompt prepared by ``engine.lab.generation.prepare_prompt``
and returns frozen dataclasses with stable keys, never sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.gpt import GPT, GPTConfig, GPTOutput, eval_mode
from engine.lab.generation import NonFiniteLogitsError, Prompt, banned_ids, prepare_prompt

#: Where a model comes from.
from engine.lab.models import LabModel
from engine.lab.poem_forms import PoemForm, poem_rule
from engine.rng import uses_global_rng
from engine.sampling import check_sampling, sample_next, sampling_probs
from engine.tokenizer import CharTokenizer


@dataclass(frozen=True)
class AttentionMaps:
    """Every layer's and head's attention weights on a line.

    Attributes:
        attn_weights: float32 (n_layer, n_head, T, T) on the CPU; row i: how query i spreads its
            attention over keys 0..i. T is 0 when the model reads nothing of the line.
        tokens: the T characters read, as typed (``Prompt.kept``: where the model reads its unknown
            token, the character the reader typed, not U+FFFD).
        unknown: the characters outside the vocabulary, in order of first appearance.
        cut: characters the model reads that are left out at the end.
        as_unk: True when the unknown characters are read as the unknown token (drawn), False when
            they are dropped (``Prompt.as_unk``).
    """

    attn_weights: torch.Tensor
    tokens: tuple[str, ...]
    unknown: tuple[str, ...]
    cut: int
    as_unk: bool

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

    The line reaches the model as a prompt does (:func:`prepare_prompt`, the rule generation follows):
    unknown characters read as the unknown token (a vocabulary with one) or dropped; a line the model
    reads nothing of draws nothing (no newline put in its place).

    Args:
        lab_model: the model.
        line: the text to read, at most ``settings.MAX_PROMPT_CHARS`` characters; only the first
            ``min(max_len, block_size)`` characters the model reads are used.
        max_len: the longest line drawn (keeps the heatmaps readable).

    Raises:
        ValueError: for a line longer than ``settings.MAX_PROMPT_CHARS``.
    """
    model, tokenizer = lab_model.model, lab_model.tokenizer
    info = prepare_prompt(tokenizer, line, model.config.block_size)
    ids, chars = (info.ids, info.kept) if info.started_from == "prompt" else ((), "")
    limit = min(max_len, model.config.block_size)
    cut = max(0, len(ids) - limit)
    ids, chars = ids[:limit], chars[:limit]
    c = model.config
    if not ids:
        return AttentionMaps(torch.zeros(c.n_layer, c.n_head, 0, 0), (), info.unknown, cut, info.as_unk)
    device = next(model.parameters()).device
    with eval_mode(model):
        out = model(torch.tensor([ids], dtype=torch.long, device=device), return_weights=True)
    # n_layer x (1, nh, T, T) -> (n_layer, nh, T, T)
    weights = torch.stack([w[0] for w in out.attn_weights]).float().cpu()
    return AttentionMaps(weights, tuple(chars), info.unknown, cut, info.as_unk)


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
        lab_model: the model; None is returned unless its encoding has a trained table (learned).
        seed: the seed of the untrained model; default: the training seed from the summary
            (the table the trained one actually started from), else 1337.
    """
    config = lab_model.config
    if not config.encoding.trained_table:
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



# ---------------------------------------------------------------------------------------------
# The next character: its probabilities under temperature, top-k and top-p, and where attention looked
# ---------------------------------------------------------------------------------------------

#: Temperatures of the next-character view's slider (the page's own value is added).
VIEW_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
#: Top-k values of its slider; 0 means all characters (the page's own value is added).
VIEW_TOP_KS = (1, 2, 3, 5, 10, 20, 40, 0)
#: Top-p values of its slider; 1 keeps every character (the page's own value is added).
VIEW_TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


@dataclass(frozen=True)
class NextCharProbs:
    """The model's distribution over the character after a prompt, under several samplings.

    Attributes:
        context: the characters the model read, as typed (the kept prompt, cropped to its last block_size).
        candidates: the characters drawn, most likely first: the ``n`` most likely plus the sampled
            one if it is not among them. The unknown token is never a candidate.
        temperatures: temperatures of ``by_temperature``'s rows (ascending; 0 = greedy).
        top_ks: top-k values of ``by_top_k``'s rows (ascending, 0 = all last).
        by_temperature: float32 (len(temperatures), len(candidates)): the probability of each
            candidate at each temperature, with the page's top-k and top-p.
        by_top_k: float32 (len(top_ks), len(candidates)): at each top-k, with the page's
            temperature and top-p.
        temperature, top_k: the page's settings (0 top-k: all), one row of each table.
        probs: float32 (len(candidates),): the probabilities at the page's settings.
        sampled: index into ``candidates`` of the character sampled at the page's settings with
            ``seed`` (the first character ``generate`` writes with the same settings).
        shapes: {"idx", "residual", "logits", "attn_weights"}: the tensor shapes of this forward
            pass, (1, T), (1, T, n_embd), (1, T, vocab_size), (1, n_head, T, T).
        top_p: the page's top-p (1: all), one row of ``by_top_p``.
        top_ps: top-p values of ``by_top_p``'s rows (ascending, 1 last).
        by_top_p: float32 (len(top_ps), len(candidates)): at each top-p, with the page's
            temperature and top-k.
    """

    context: str
    candidates: tuple[str, ...]
    temperatures: tuple[float, ...]
    top_ks: tuple[int, ...]
    by_temperature: torch.Tensor
    by_top_k: torch.Tensor
    temperature: float
    top_k: int
    probs: torch.Tensor
    sampled: int
    shapes: dict
    top_p: float = 1.0
    top_ps: tuple[float, ...] = ()
    by_top_p: torch.Tensor | None = None


@dataclass(frozen=True)
class LastPositionAttention:
    """Where each layer's attention looked when the model predicted the next character.

    Attributes:
        attn_weights: float32 (n_layer, n_head, T) on the CPU: the last query's row of every
            layer's and head's weights over the T characters read (each row sums to 1).
        tokens: the T characters read, as typed (where the model reads its unknown token, the
            character the reader typed).
    """

    attn_weights: torch.Tensor
    tokens: tuple[str, ...]

    @property
    def head_mean(self) -> torch.Tensor:
        """float32 (n_layer, T): the weights averaged over heads (rows still sum to 1)."""
        return self.attn_weights.mean(dim=1)


@torch.no_grad()
def _last_forward(lab_model: LabModel, prompt: str) -> tuple[Prompt, torch.Tensor, GPTOutput]:
    """The prompt as :func:`generate` feeds it (idx (1, T), T <= block_size) and the eval-mode forward with weights."""
    model = lab_model.model
    info = prepare_prompt(lab_model.tokenizer, prompt, model.config.block_size)
    device = next(model.parameters()).device
    ids = info.ids[-model.config.block_size:]
    idx = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T), T <= block_size
    with eval_mode(model):
        out = model(idx, return_weights=True)
    return info, idx, out


def _read_as_typed(info: Prompt, tokenizer: CharTokenizer, block_size: int) -> str:
    """The characters of ``info`` the model reads (its last block_size ids), as the reader typed them: the typed
    character where it reads its unknown token; the newline or first character it starts from otherwise."""
    if info.started_from != "prompt":
        return tokenizer.decode(info.ids[-block_size:])
    return info.kept[-block_size:]  # one character per id: ids[-block_size:]


@torch.no_grad()
def next_char_probs(
    lab_model: LabModel,
    prompt: str,
    temperature: float = 0.8,
    top_k: int = 20,
    seed: int = 0,
    n: int = 20,
    temperatures: tuple[float, ...] = VIEW_TEMPERATURES,
    top_ks: tuple[int, ...] = VIEW_TOP_KS,
    top_p: float = 1.0,
    top_ps: tuple[float, ...] = VIEW_TOP_PS,
    form: PoemForm | None = None,
) -> NextCharProbs:
    """The probability of every candidate next character after ``prompt``, as ``generate`` samples it.

    The prompt reaches the model as in :func:`generate` (unknown characters read as the unknown
    token or dropped, cropped to block_size), and the probabilities are
    ``engine.sampling.sampling_probs``, the rule generation draws from: the unknown token (and, with a
    ``form``, what the form does not allow first) excluded, then temperature (below 1 sharpens,
    above 1 flattens), top-k (the k most likely characters) and top-p (the fewest most likely
    characters holding top_p of the probability), renormalised.

    Args:
        temperature, top_k, top_p, seed, form: the page's sampling settings (top_k 0: all characters).
        n: how many of the most likely allowed characters to draw (1 to 200).
        temperatures, top_ks, top_ps: the sliders' values; the page's own are added.

    Raises:
        ValueError: for a temperature < 0 or not finite, top_k < 0, top_p outside (0, 1], n outside
            [1, 200], a slider value outside those ranges, or a prompt over ``settings.MAX_PROMPT_CHARS``.
        FormError: as :func:`poem_rule`.
        NonFiniteLogitsError: if the model's logits are NaN or infinite.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0: all), got {top_k!r}")
    check_sampling(temperature, top_k or None, top_p)
    for t in temperatures:
        check_sampling(t, None, 1.0)
    for k in top_ks:
        check_sampling(1.0, k or None, 1.0)
    for q in top_ps:
        check_sampling(1.0, None, q)
    if not 1 <= n <= 200:
        raise ValueError(f"n must be in [1, 200], got {n}")
    tokenizer = lab_model.tokenizer
    vocab_size = lab_model.config.vocab_size
    allowed = torch.ones(vocab_size, dtype=torch.bool)  # (V,)
    allowed[list(banned_ids(tokenizer))] = False
    if form is not None:
        kept = prepare_prompt(tokenizer, prompt, lab_model.config.block_size).kept
        rule, _ = poem_rule(tokenizer, form, kept)
        allowed &= rule(torch.zeros(1, 0, dtype=torch.long))  # the first step's mask (the prompt leaves lines to write)
    info, idx, out = _last_forward(lab_model, prompt)
    logits = out.logits[0, -1].float().cpu()  # (1, T, V) -> (V,): the prediction after the last character
    if not bool(torch.isfinite(logits).all()):
        raise NonFiniteLogitsError("the model's logits hold NaN or infinite values")
    vocab = int(allowed.sum())
    temps = tuple(sorted({float(t) for t in temperatures} | {float(temperature)}))
    ks = tuple(sorted({int(k) for k in top_ks if k <= vocab} | {int(top_k) if top_k <= vocab else 0},
                      key=lambda k: (k == 0, k)))
    ps = tuple(sorted({float(q) for q in top_ps} | {float(top_p)}))

    def probs_at(t: float, k: int, q: float) -> torch.Tensor:
        return sampling_probs(logits, t, k or None, q, allowed)  # (V,)

    current = probs_at(temperature, top_k, top_p)  # (V,)
    generator = torch.Generator().manual_seed(seed)
    sampled_id = int(sample_next(logits, temperature, top_k or None, top_p, generator, allowed))  # generate's 1st draw
    order = torch.argsort(logits.masked_fill(~allowed, float("-inf")), descending=True)[: min(n, vocab)].tolist()
    if sampled_id not in order:
        order.append(sampled_id)
    columns = torch.tensor(order)  # (n_candidates,)
    by_t = torch.stack([probs_at(t, top_k, top_p)[columns] for t in temps])  # (len(temps), n_c)
    by_k = torch.stack([probs_at(temperature, k, top_p)[columns] for k in ks])  # (len(ks), n_c)
    by_p = torch.stack([probs_at(temperature, top_k, q)[columns] for q in ps])  # (len(ps), n_c)
    weights = out.attn_weights[0]  # layer 0: (1, nh, T, T)
    shapes = {"idx": tuple(idx.shape), "residual": (*idx.shape, lab_model.model.ln_f.weight.shape[0]),
              "logits": tuple(out.logits.shape), "attn_weights": tuple(weights.shape)}
    return NextCharProbs(
        context=_read_as_typed(info, tokenizer, lab_model.config.block_size),
        candidates=tuple(tokenizer.decode([i]) for i in order),
        temperatures=temps,
        top_ks=ks,
        by_temperature=by_t,
        by_top_k=by_k,
        temperature=float(temperature),
        top_k=int(top_k),
        probs=current[columns],
        sampled=order.index(sampled_id),
        shapes=shapes,
        top_p=float(top_p),
        top_ps=ps,
        by_top_p=by_p,
    )


@torch.no_grad()
def last_position_attention(lab_model: LabModel, prompt: str) -> LastPositionAttention:
    """Each layer's and head's attention from the last position of ``prompt`` (the one that predicts).

    The prompt reaches the model as in :func:`generate`. A non-causal model's last row also
    covers every position (there is nothing after it).

    Returns:
        :class:`LastPositionAttention` with weights (n_layer, n_head, T).

    Raises:
        ValueError: for a prompt longer than ``settings.MAX_PROMPT_CHARS``.
    """
    info, _, out = _last_forward(lab_model, prompt)
    # n_layer x (1, nh, T, T) -> (n_layer, nh, T): the last query's row
    rows = torch.stack([w[0, :, -1, :] for w in out.attn_weights]).float().cpu()
    return LastPositionAttention(rows, tuple(_read_as_typed(info, lab_model.tokenizer, lab_model.config.block_size)))
