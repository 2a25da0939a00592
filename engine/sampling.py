"""Generation from the course's GPT: the sampling rule, the KV cache, and text in, text out.

:func:`generate_ids` extends a prompt token by token, each drawn by one rule, :func:`sampling_probs`
(temperature, top-k, top-p; Holtzman et al., 2019, for top-p), which the Lab's next-character view shows too.
It keeps a KV cache by default (:class:`KVCache`: what is reused, and why the window's slide past block_size
ends the reuse); :func:`forward_cached` is the model's forward pass on the new tokens only, and
:func:`kv_cache_steps` counts what each step reuses. The model itself is ``engine.gpt``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.gpt import GPT, GPTConfig, eval_mode


class KVCache:
    """Keys and values of the tokens already read, per layer and per head, for generation.

    When the model predicts the next token, every earlier token's key and value would come out the
    same as at the previous step: a causal layer's output at position t depends on positions <= t
    only. So they are computed once, stored here, and each step computes q, k, v for the new token
    alone; its query attends to the stored keys. The uncached path recomputes all of them every step.

    The window slide. A model reads at most block_size tokens, so past that the uncached path crops
    to the last block_size and numbers them 0..block_size-1 again. After such a slide the stored
    keys and values are stale for three reasons: every token's position dropped by one (the learned
    and sinusoidal tables add a different row; RoPE turns q and k by different angles; ALiBi's bias depends
    on distances only, so it alone would not change), the oldest
    token left the window (from the second layer on, every stored key and value was computed by
    attending to it), and there is no room left. So once a sequence is longer than block_size the
    cached path empties the cache and recomputes the whole window at every step: the same work as
    the uncached path except ``lm_head`` and the last block's MLP on one position, and the same
    tokens. With no position encoding the last two reasons still hold (only a one-layer model
    without position encoding could keep its keys, in a ring buffer; the course's models have four
    layers). Only inside the block is the cache a gain (:func:`kv_cache_steps` counts both regimes).

    Attributes:
        k, v: lists of n_layer float tensors (B, n_head, block_size, head_dim), preallocated;
            positions 0..length-1 are filled. Keys are stored after the RoPE rotation.
        length: number of positions filled (0..block_size).
        batch_size: B.
    """

    def __init__(self, config: GPTConfig, batch_size: int, device: torch.device | str = "cpu",
                 dtype: torch.dtype = torch.float32):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        shape = (batch_size, config.n_head, config.block_size, config.head_dim)  # (B, nh, block_size, hs)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.length = 0
        self.batch_size = batch_size


def _reuses_cache(cached: int, seq_len: int, block_size: int) -> bool:
    """Whether a step can read the cache: it holds every token but the newest, and the sequence fits the block."""
    return 0 < cached == seq_len - 1 and seq_len <= block_size


@dataclass(frozen=True)
class KVCacheStep:
    """What one generation step does with the KV cache, per layer and per head.

    Attributes:
        step: 0-based index of the token being predicted.
        seq_len: tokens in the sequence before this step's token is appended.
        window_start: index of the first token the model reads (seq_len - block_size when the window slid, else 0).
        reused: keys (and as many values) read from the cache without computing them.
        computed: keys (and values) computed at this step.
    """

    step: int
    seq_len: int
    window_start: int
    reused: int
    computed: int


def kv_cache_steps(prompt_len: int, max_new_tokens: int, block_size: int, causal: bool = True) -> list[KVCacheStep]:
    """For each step of ``generate_ids(model, ..., use_cache=True)``, how many keys/values are reused vs computed.

    The data for a "cache growing" figure. It follows the rule ``generate`` follows: the first step
    computes the (cropped) prompt; each later step computes one key/value and reuses the others while
    the sequence fits in block_size; once it is longer, every step recomputes the whole window (see
    :class:`KVCache`). A non-causal model reuses nothing. The counts hold in every layer and head.

    Args:
        prompt_len: tokens in the prompt (>= 1).
        max_new_tokens: steps (>= 0).
        block_size: the model's context length (>= 1).
        causal: False for a model built with ``causal=False``.

    Returns:
        max_new_tokens :class:`KVCacheStep` rows; ``reused + computed`` is the window's length.

    Raises:
        ValueError: if prompt_len or block_size < 1 or max_new_tokens < 0.
    """
    if prompt_len < 1 or block_size < 1 or max_new_tokens < 0:
        raise ValueError(
            "need prompt_len >= 1, block_size >= 1, max_new_tokens >= 0; "
            f"got {prompt_len}, {block_size}, {max_new_tokens}"
        )
    rows, cached = [], 0
    for step in range(max_new_tokens):
        seq_len = prompt_len + step
        window = min(seq_len, block_size)
        if causal and _reuses_cache(cached, seq_len, block_size):
            reused, computed = cached, 1
        else:
            reused, computed = 0, window
        cached = window if causal else 0
        rows.append(KVCacheStep(step, seq_len, seq_len - window, reused, computed))
    return rows


def check_sampling(temperature: float, top_k: int | None, top_p: float) -> None:
    """Checks the settings of :func:`sampling_probs`.

    Raises:
        ValueError: unless temperature is a finite number >= 0, top_k is None or an integer >= 1
            and top_p is a number in (0, 1] (the message names the value).
    """
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) or not math.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
    if isinstance(top_p, bool) or not isinstance(top_p, int | float) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be a number in (0, 1], got {top_p!r}")


def sampling_probs(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """The probability of each next token under the project's one sampling rule.

    :func:`generate_ids` draws from these probabilities and the Lab's next-character view shows them, so
    the two cannot disagree. In order:

    1. ids where ``allowed`` is False get probability 0 (the unknown token, a poem form's mask);
    2. temperature 0 puts all the mass on the most likely allowed id (greedy);
    3. otherwise the logits are divided by the temperature (below 1: sharper, above 1: flatter);
    4. top-k keeps the k most likely allowed ids (exactly k; all of them when fewer are allowed);
    5. top-p keeps, of those, the smallest set of the most likely ids whose probabilities add up
       to at least top_p, and always the most likely one (nucleus sampling, Holtzman et al., 2019,
       "The Curious Case of Neural Text Degeneration");
    6. a softmax over what is kept.

    Args:
        logits: float (..., V) unnormalised scores, e.g. (B, V) or (V,).
        temperature: >= 0; 0 means greedy.
        top_k: None keeps every id; values above V keep every id.
        top_p: in (0, 1]; 1 keeps every id.
        allowed: bool tensor broadcastable to (..., V), or None (every id allowed).

    Returns:
        float32 (float64 for float64 logits) (..., V): rows sum to 1, zeros outside the kept set.

    Raises:
        ValueError: for settings :func:`check_sampling` refuses, a logit that is NaN or infinite, a
            row with no allowed id, or a temperature so small that logits / temperature overflows
            (use 0 for greedy).
    """
    check_sampling(temperature, top_k, top_p)
    if not torch.isfinite(logits).all():
        raise ValueError("the model's logits are not finite (NaN or inf): its weights have diverged")
    x = logits if logits.dtype == torch.float64 else logits.float()  # (..., V)
    neg_inf = float("-inf")
    n_allowed = x.size(-1)
    if allowed is not None:
        allowed = allowed.to(device=x.device, dtype=torch.bool).expand_as(x)  # (..., V)
        n_allowed = allowed.sum(-1)  # (...,)
        if not bool((n_allowed > 0).all()):
            raise ValueError("no token is allowed at this step: the mask of allowed ids is all False")
        x = x.masked_fill(~allowed, neg_inf)
    if temperature == 0:
        return F.one_hot(x.argmax(dim=-1), x.size(-1)).to(x.dtype)  # (..., V)
    scaled = x / temperature  # (..., V)
    if bool(torch.isnan(scaled).any() | torch.isposinf(scaled).any()) \
            or bool((torch.isfinite(scaled).sum(-1) < n_allowed).any()):
        raise ValueError(f"temperature {temperature} is too small: logits / temperature overflows; use 0 for greedy")
    if top_k is not None and top_k < x.size(-1):
        top = torch.topk(scaled, top_k, dim=-1).indices  # (..., k); disallowed ids (-inf) only when fewer are allowed
        keep = torch.zeros_like(scaled, dtype=torch.bool).scatter_(-1, top, True)  # (..., V)
        scaled = scaled.masked_fill(~keep, neg_inf)
    probs = torch.softmax(scaled, dim=-1)  # (..., V)
    if top_p < 1:
        sorted_probs, order = probs.sort(dim=-1, descending=True)  # (..., V) each, most likely first
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V): mass of the more likely ids; 0 for the first
        keep = torch.empty_like(before, dtype=torch.bool).scatter_(-1, order, before < top_p)  # back to id order
        probs = torch.softmax(scaled.masked_fill(~keep, neg_inf), dim=-1)  # (..., V)
    return probs


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    allowed: torch.Tensor | None = None,
) -> torch.Tensor:
    """One id per row drawn by the rule of :func:`sampling_probs`: logits (B, V) -> int64 (B, 1), (V,) -> (1,).

    Temperature 0 takes the most likely allowed id without a random draw (so ``generator`` is
    untouched); otherwise one draw per row from ``generator`` (the global RNG when it is None).

    Raises:
        ValueError: as :func:`sampling_probs`.
    """
    probs = sampling_probs(logits, temperature, top_k, top_p, allowed)
    if temperature == 0:
        return probs.argmax(dim=-1, keepdim=True)
    return torch.multinomial(probs, num_samples=1, generator=generator)


def generate_text(
    model: GPT,
    tokenizer,
    prompt: str,
    max_new_tokens: int = 100,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    use_cache: bool = True,
    top_p: float = 1.0,
) -> str:
    """Text in, text out: the prompt followed by ``max_new_tokens`` generated characters.

    Args:
        model: a GPT whose vocabulary matches ``tokenizer``.
        tokenizer: a ``CharTokenizer``; the prompt is encoded with errors="strict".
        prompt: the start of the text; an empty prompt starts the model from a newline (when the
            vocabulary has one), which is not repeated in the result.
        temperature, top_k, top_p, use_cache: see :func:`generate_ids`; the tokenizer's unknown token (if it has
            one) is never emitted.
        seed: seeds a private generator, so the same seed gives the same text; None seeds it from
            the operating system (different text each call). The global RNG is never used.

    Raises:
        ValueError: for characters outside the vocabulary (named in the message), an empty prompt
            when the vocabulary has no newline, or an invalid sampling setting.
    """
    start = prompt
    if not start:
        if "\n" not in tokenizer.stoi:
            raise ValueError("the prompt is empty and the vocabulary has no newline to start from")
        start = "\n"
    device = next(model.parameters()).device
    idx = torch.tensor([tokenizer.encode(start)], dtype=torch.long, device=device)  # (1, T)
    unk_id = getattr(tokenizer, "unk_id", None)
    out = generate_ids(model, idx, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed, use_cache=use_cache,
                         banned_ids=() if unk_id is None else (unk_id,), top_p=top_p)
    return prompt + tokenizer.decode(out[0, idx.size(1) :].tolist())


def new_cache(model: GPT, batch_size: int) -> KVCache:
    """An empty :class:`KVCache` for ``batch_size`` sequences of ``model``, on the model's device and dtype."""
    weight = model.lm_head.weight
    return KVCache(model.config, batch_size, device=weight.device, dtype=weight.dtype)


@torch.no_grad()
def forward_cached(model: GPT, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Next-token logits of the last position, computing keys/values only for the new tokens.

    ``idx`` holds the tokens at positions cache.length .. cache.length + T - 1; their keys and
    values are added to ``cache`` in every layer, the earlier ones are read from it. Only the last
    position goes through the last block's MLP, ``ln_f`` and ``lm_head``: generation needs no more.

    Args:
        idx: int64 (B, T), T >= 1, ids < vocab_size, with cache.length + T <= block_size.
        cache: from :func:`new_cache`; updated in place (its ``length`` grows by T).

    Returns:
        float (B, vocab_size): the logits at the last position, equal (to float rounding) to
        ``model(all tokens so far).logits[:, -1]``.

    Raises:
        ValueError: if the model is not causal, idx is not (B, T) with T >= 1, the batch size
            differs from the cache's, or the tokens would pass block_size.
    """
    if idx.dim() != 2 or idx.size(1) == 0:
        raise ValueError(f"idx must be (B, T) with T >= 1, got {tuple(idx.shape)}")
    if idx.size(0) != cache.batch_size:
        raise ValueError(f"idx has batch size {idx.size(0)} but the cache was made for {cache.batch_size}")
    start, T = cache.length, idx.size(1)
    if start + T > model.config.block_size:
        raise ValueError(
            f"{start} cached + {T} new tokens pass block_size {model.config.block_size}; "
            f"recompute the window in a new cache (generate does)"
        )
    x = model.embed(idx, start=start)  # (B, T, C)
    last = len(model.blocks) - 1
    for layer, block in enumerate(model.blocks):
        x = block.forward_cached(x, cache.k[layer], cache.v[layer], start, last_only=layer == last)
    cache.length = start + T
    return model.lm_head(model.ln_f(x[:, -1]))  # (B, 1, C) -> (B, C) -> (B, vocab_size)


@torch.no_grad()
def generate_ids(
    model: GPT,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
    seed: int | None = None,
    banned_ids: Sequence[int] = (),
    top_p: float = 1.0,
    allowed_next: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """Extends each row of ``idx`` by up to ``max_new_tokens`` sampled tokens.

    The model runs in eval mode (no dropout) and is put back in its previous mode afterwards.
    Each new token is predicted from the last block_size tokens only (a longer sequence is
    cropped, so positions always run 0..block_size-1 within the window), and drawn by
    :func:`sample_next` (the rule of :func:`sampling_probs`: banned and disallowed ids, then
    temperature, top-k and top-p).

    With ``use_cache`` (the default) keys and values are kept per layer and per head
    (:class:`KVCache`): while the sequence fits in block_size each step computes them for the one
    new token and reuses the others; once the window slides, every step recomputes the whole
    window (see :class:`KVCache` for why), so the tokens are those of the uncached path, which
    runs the full forward pass on the cropped window at every step. A non-causal model
    (``causal=False``) is never cached. :func:`kv_cache_steps` lists what each step reuses.

    Random draws come from ``generator``, else from a private generator seeded with ``seed``,
    else from a private generator seeded from the operating system's entropy (different every
    call); never from the global RNG.

    Args:
        idx: int64 (B, T) prompt ids, T >= 1 (any length).
        max_new_tokens: most tokens to add (>= 0); fewer only when ``allowed_next`` stops.
        temperature: 0 picks the most likely token (greedy, deterministic, no random draw);
            > 0 divides the logits before sampling (below 1: sharper, above 1: flatter).
        top_k: keep only the k most likely tokens before sampling; values above vocab_size keep
            every token; None keeps all.
        generator: a ``torch.Generator`` on the model's device, for reproducible samples.
        use_cache: reuse keys/values between steps (same tokens, faster); False runs the full
            forward pass on the window at every step.
        seed: seeds the private generator when ``generator`` is None.
        banned_ids: token ids never emitted (probability 0 at every step, and greedy picks among
            the others): e.g. ``(tokenizer.unk_id,)``, the unknown token that stands for rare
            characters and has no character to show.
        top_p: nucleus sampling's mass in (0, 1]; 1 keeps every token (see :func:`sampling_probs`).
        allowed_next: called before each step with the int64 (B, n) tokens generated so far
            (n = 0 at the first step); returns a bool mask broadcastable to (B, vocab_size) of the
            ids allowed at this step, or None to stop generating. This is how a caller imposes a
            form (e.g. a poem's line lengths) inside the sampling loop.

    Returns:
        int64 (B, T + n) with n <= max_new_tokens: the prompt followed by the new ids (all
        < vocab_size, none in ``banned_ids``, each allowed by ``allowed_next`` at its step).

    Raises:
        ValueError: for an empty prompt, a negative max_new_tokens, sampling settings that
            :func:`check_sampling` refuses, ``banned_ids`` outside [0, vocab_size) or covering the
            whole vocabulary, a step where no id is allowed, or logits that are not finite (a
            diverged model, or a temperature so small that logits / temperature overflows: use
            0 for greedy).
    """
    if idx.dim() != 2 or idx.size(1) == 0:
        raise ValueError(f"idx must be (B, T) with T >= 1, got {tuple(idx.shape)}")
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be >= 0, got {max_new_tokens}")
    check_sampling(temperature, top_k, top_p)
    banned = sorted({int(i) for i in banned_ids})
    vocab_size = model.config.vocab_size
    if banned and (banned[0] < 0 or banned[-1] >= vocab_size or len(banned) >= vocab_size):
        raise ValueError(f"banned_ids must be ids in [0, {vocab_size}) leaving one allowed, got {banned}")
    not_banned = torch.ones(vocab_size, dtype=torch.bool, device=idx.device)  # (V,)
    not_banned[banned] = False
    if generator is None:
        generator = torch.Generator(device=idx.device)
        if seed is None:
            generator.seed()  # from the OS's entropy source, not the global RNG
        else:
            generator.manual_seed(seed)
    block_size = model.config.block_size
    use_cache = use_cache and model.config.causal
    prompt_len = idx.size(1)
    with eval_mode(model):
        cache = new_cache(model, idx.size(0)) if use_cache and max_new_tokens else None
        for _ in range(max_new_tokens):
            allowed = not_banned
            if allowed_next is not None:
                rule = allowed_next(idx[:, prompt_len:])  # (B, n) so far -> bool (B or 1, V), or None
                if rule is None:
                    break
                allowed = allowed & rule.to(device=idx.device, dtype=torch.bool)  # (B or 1, V)
            if cache is None:
                idx_cond = idx[:, -block_size:]  # (B, <= block_size)
                logits = model(idx_cond).logits[:, -1, :]  # (B, T, V) -> (B, V): last position only
            elif _reuses_cache(cache.length, idx.size(1), block_size):
                logits = forward_cached(model, idx[:, -1:], cache)  # the one new token: (B, 1) -> (B, V)
            else:  # first step, or the window slid: compute the last block_size tokens afresh
                cache.length = 0
                logits = forward_cached(model, idx[:, -block_size:], cache)  # (B, <= block_size) -> (B, V)
            idx_next = sample_next(logits, temperature, top_k, top_p, generator, allowed)  # (B, 1)
            idx = torch.cat((idx, idx_next), dim=1)  # (B, T) -> (B, T + 1)
    return idx
