"""The course's character-level GPT (lesson "multi-head attention and positional encoding").

A decoder-only Transformer in the GPT-2 layout (Radford et al., 2019), written after the
lesson's ``gpt.py`` and nanoGPT: token embedding + position information, ``n_layer`` pre-LayerNorm
blocks (causal multi-head self-attention, then an MLP, each on a residual path), a final
LayerNorm and a linear head giving next-character logits.

Attention has two paths that give the same output (tests hold them equal to 1e-5):

* the default path calls ``F.scaled_dot_product_attention`` (a fused kernel; dropout on the
  attention weights only in training);
* the manual path writes out ``attn_scores = q @ k^T / sqrt(head_dim)``, the causal mask,
  the softmax and ``attn_weights @ v``; it runs when the attention weights are asked for.

Position information is chosen by ``GPTConfig.pos_encoding``, a key of ``engine.positions.ENCODINGS``,
and the model asks that record what to do: add a table to the token embeddings in ``GPT.embed`` (GPT-2's
trained table, Radford et al., 2019; or the fixed sinusoidal one of Vaswani et al., 2017), rotate q and k
inside ``CausalSelfAttention`` (RoPE: Su et al., 2021, RoFormer), add a bias to the attention scores (ALiBi:
Press, Smith & Lewis, 2022, "Train Short, Test Long"), or nothing at all (the permutation experiment shows what
the causal mask alone leaks; Haviv et al., 2022). The tables, rotations and biases come from
``engine.positions``. Only a trained table limits a model to block_size positions.

Dropout has two rates, kept apart as in nanoGPT's modules: ``attn_dropout`` on the attention weights
(inside SDPA, or after the softmax on the manual path) and ``resid_dropout`` on the embeddings and
on both residual branches. Attention-weight dropout is the expensive one: it pushes SDPA off its fused
kernel onto the math path, which also stores the T x T weights (``python -m engine.bench train``
prices each setting). A config that gives only ``dropout`` (every checkpoint written before
the split) uses it for both.

Generation, its sampling rule and the KV cache are ``engine.sampling``'s (the blocks' ``forward_cached``
is the attention it reads the cache with); :func:`eval_mode` is the one way to run a model without dropout
and give it back in the mode it was in.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from engine import positions

#: The sinusoidal table (entries in [-1, 1]) is multiplied by this before it is added: the token embeddings
#: start with std 0.02, and a table 50 times louder would drown which character sits where (an untrained
#: model then hardly tells "白日依山尽" from "山依日白尽"). Vaswani et al. (2017, section 3.4) balance the two
#: the other way round, multiplying the embeddings by sqrt(d_model).
SINUSOIDAL_SCALE = 0.02


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and switches of the GPT. Frozen, so it can key a cache.

    Dropout rates: ``attn_dropout`` (attention weights) and ``resid_dropout`` (embeddings and the
    two residual branches of every block) are each in [0, 1) or None, and None means "use
    ``dropout``". So ``GPTConfig(dropout=0.1)``, ``engine.presets.preset(name, dropout=p)`` and the config dicts of
    older checkpoints (which hold ``dropout`` only) set both; read the rates in force from
    :attr:`attn_dropout_rate` and :attr:`resid_dropout_rate`.

    Raises:
        ValueError: if a size is not positive, n_embd is not divisible by n_head, a dropout rate is
            outside [0, 1), or pos_encoding is unknown (the message names the values).
    """

    vocab_size: int = 2500  # distinct characters; set from the corpus tokenizer before training
    block_size: int = 128  # context_length: the most tokens the model reads at once
    n_embd: int = 128  # width of the residual stream (d_model)
    n_head: int = 4  # num_heads; head_dim = n_embd // n_head
    n_layer: int = 4  # number of Transformer blocks
    dropout: float = 0.1  # the rate of attn_dropout and resid_dropout when they are None (training only)
    bias: bool = True  # biases in Linear layers and LayerNorm (the lesson counts them: qkv 3168 at n_embd 32)
    pos_encoding: str = positions.LEARNED.key  # a key of engine.positions.ENCODINGS; GPT-2's learned table by default
    causal: bool = True  # mask future positions; False lets every token see the whole block
    attn_dropout: float | None = None  # on the attention weights (training only); None: dropout
    resid_dropout: float | None = None  # on the embeddings and both residual branches (training only); None: dropout

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_embd", "n_head", "n_layer"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(
                f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head}); "
                f"{self.n_embd} % {self.n_head} = {self.n_embd % self.n_head}"
            )
        for name in ("dropout", "attn_dropout", "resid_dropout"):
            value = getattr(self, name)
            if name != "dropout" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if self.encoding.rotates_qk and (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"{self.pos_encoding} rotates pairs of dimensions, so head_dim = n_embd // n_head must be even; "
                f"got {self.n_embd} // {self.n_head} = {self.n_embd // self.n_head}"
            )

    @property
    def encoding(self) -> positions.PositionEncoding:
        """The record of ``pos_encoding`` (what it adds, rotates or biases); ValueError for an unknown key."""
        return positions.encoding(self.pos_encoding)

    @property
    def head_dim(self) -> int:
        """Width of one head: n_embd // n_head."""
        return self.n_embd // self.n_head

    @property
    def attn_dropout_rate(self) -> float:
        """Dropout probability on the attention weights in training: ``attn_dropout``, else ``dropout``."""
        return float(self.dropout if self.attn_dropout is None else self.attn_dropout)

    @property
    def resid_dropout_rate(self) -> float:
        """Dropout probability on the embeddings and residual branches in training.

        ``resid_dropout`` if set, else ``dropout``.
        """
        return float(self.dropout if self.resid_dropout is None else self.resid_dropout)

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GPTConfig:
        """Inverse of ``to_dict``; raises ``ValueError`` for unknown or invalid fields.

        A dict written before attention and residual dropout were split holds ``dropout`` only; it
        loads with both rates equal to it.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown GPTConfig field(s): {unknown}")
        return cls(**data)


def count_params(module: nn.Module) -> int:
    """Number of scalar parameters of ``module`` (every tensor in ``module.parameters()``).

    The counter of a built module (``GPT.num_params`` uses it); a size known before anything is built
    comes from :func:`param_shapes` and :func:`config_params`, which the tests hold equal to it.
    """
    return sum(p.numel() for p in module.parameters())


def _linear_shapes(prefix: str, d_in: int, d_out: int, bias: bool) -> dict[str, tuple[int, ...]]:
    """``nn.Linear(d_in, d_out)``'s state_dict shapes: weight (d_out, d_in), bias (d_out,)."""
    return {f"{prefix}.weight": (d_out, d_in), **({f"{prefix}.bias": (d_out,)} if bias else {})}


def _layer_norm_shapes(prefix: str, n_embd: int, bias: bool) -> dict[str, tuple[int, ...]]:
    """``nn.LayerNorm(n_embd)``'s state_dict shapes: weight (n_embd,), bias (n_embd,)."""
    return {f"{prefix}.weight": (n_embd,), **({f"{prefix}.bias": (n_embd,)} if bias else {})}


def attention_shapes(config: GPTConfig, prefix: str = "") -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor :class:`CausalSelfAttention` stores in its ``state_dict``.

    ``qkv``: (3 * n_embd, n_embd) and (3 * n_embd,), the query, key and value projections of every head
    side by side; ``proj``: (n_embd, n_embd) and (n_embd,). Biases only with ``config.bias``; the mask
    and the RoPE and ALiBi tables are non-persistent buffers, so absent. ``prefix`` goes before each name
    ("blocks.0.attn.").
    """
    C = config.n_embd
    qkv = _linear_shapes(f"{prefix}qkv", C, 3 * C, config.bias)  # W_query | W_key | W_value, (3C, C)
    return qkv | _linear_shapes(f"{prefix}proj", C, C, config.bias)


def param_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor a :class:`GPT` with ``config`` stores, in ``state_dict`` order.

    Read from the config, not from a model: building one, even on the ``meta`` device (whose Python
    kernels import PyTorch's compiler stack on first use), is not needed to know its sizes, so a
    checkpoint's shapes and a planned model's size are checked before anything is built. The tests
    hold it equal to ``GPT(config).state_dict()``'s shapes for every position encoding and bias setting.
    Every stored tensor is a parameter (the buffers are non-persistent), so this is also the parameter list.
    """
    C, V = config.n_embd, config.vocab_size
    shapes = {"tok_emb.weight": (V, C)}
    if config.encoding.trained_table:
        shapes["pos_emb.weight"] = (config.block_size, C)
    for i in range(config.n_layer):
        block = f"blocks.{i}."
        shapes |= _layer_norm_shapes(f"{block}ln_1", C, config.bias)
        shapes |= attention_shapes(config, f"{block}attn.")
        shapes |= _layer_norm_shapes(f"{block}ln_2", C, config.bias)
        shapes |= _linear_shapes(f"{block}mlp.fc", C, 4 * C, config.bias)
        shapes |= _linear_shapes(f"{block}mlp.proj", 4 * C, C, config.bias)
    shapes |= _layer_norm_shapes("ln_f", C, config.bias)
    shapes["lm_head.weight"] = (V, C)
    return shapes


def config_params(config: GPTConfig) -> int:
    """Parameters of a GPT with this config (sum of :func:`param_shapes`' sizes; nothing is built)."""
    return sum(math.prod(shape) for shape in param_shapes(config).values())


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Puts ``model`` in eval mode (dropout off) for the ``with`` block, then back in the mode it was in.

    The project's one way to run a model for inference or measurement without changing what its
    owner left: the previous mode is restored even when the block raises.

    Yields:
        ``model`` itself.
    """
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention with one Linear for q, k and v (lesson section "several heads").

    ``qkv`` maps n_embd -> 3 * n_embd; the result is split into q, k, v and each is cut into
    n_head heads of head_dim by view/transpose; ``proj`` mixes the re-joined heads. The parameter
    count does not depend on n_head (n_embd 32: qkv 32*96 + 96 = 3168, proj 32*32 + 32 = 1056).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.causal = config.causal
        self.dropout = config.attn_dropout_rate  # SDPA's dropout_p in training
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)  # W_query | W_key | W_value
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.attn_dropout_rate)  # on the manual path's weights
        self.resid_dropout = nn.Dropout(config.resid_dropout_rate)
        if config.causal:
            # mask[i, j] is True where query i may look at key j (j <= i). Not persistent: it is
            # rebuilt from the config, so checkpoints hold weights only.
            mask = torch.ones(config.block_size, config.block_size, dtype=torch.bool).tril()
            self.register_buffer("mask", mask, persistent=False)
        self.rope = config.encoding.rotates_qk
        self.alibi = config.encoding.biases_scores
        if self.alibi:
            # ALiBi's -m_h * |i - j| for queries and keys < block_size, (n_head, block_size, block_size); fixed, so not
            # persistent. Longer sequences compute theirs on the fly (see _score_bias).
            self.register_buffer("score_bias", positions.alibi_bias(config.block_size, config.n_head), persistent=False)
        if self.rope:
            # cos/sin of the angles t * theta_i for t < block_size, (block_size, head_dim // 2) each; fixed, so
            # not persistent. Longer sequences compute theirs on the fly (see _rope_cos_sin).
            cos, sin = positions.rope_cos_sin(config.block_size, config.head_dim)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, x: torch.Tensor, return_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attends over the sequence.

        Args:
            x: float tensor (B, T, C) with C = n_embd and T <= block_size.
            return_weights: if True, take the manual path and also return the attention weights.

        Returns:
            y: (B, T, C) context vectors after ``proj`` (and residual dropout in training).
            attn_weights: (B, n_head, T, T) softmax weights (rows sum to 1, before attention
                dropout) if ``return_weights``, else None.
        """
        B, T, C = x.size()
        q, k, v = self._split_heads(x, start=0)  # 3 x (B, nh, T, hs)
        if return_weights:
            context_vec, attn_weights = self._manual_attention(q, k, v)
        elif self.alibi:  # the bias and the mask in one float attn_mask, (nh, T, T) broadcast over B
            context_vec = F.scaled_dot_product_attention(
                q, k, v, attn_mask=self._attn_mask(0, T, q.dtype), dropout_p=self.dropout if self.training else 0.0
            )  # (B, nh, T, hs)
            attn_weights = None
        else:
            context_vec = F.scaled_dot_product_attention(
                q, k, v, is_causal=self.causal, dropout_p=self.dropout if self.training else 0.0
            )  # (B, nh, T, hs)
            attn_weights = None
        y = context_vec.transpose(1, 2).contiguous().view(B, T, C)  # (B, nh, T, hs) -> (B, T, nh, hs) -> (B, T, C)
        return self.resid_dropout(self.proj(y)), attn_weights

    def _split_heads(self, x: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v of the tokens at positions start..start+T-1, cut into heads (and rotated by RoPE).

        The one head split of the uncached pass (``start`` 0) and of the cached one (``start`` = the
        tokens already cached), so both see the same q, k, v for the same token at the same position.

        Args:
            x: float (B, T, C) with C = n_embd.
            start: absolute position of the first token (>= 0).

        Returns:
            q, k, v: float (B, n_head, T, head_dim) each; q and k rotated by their positions when the encoding
                rotates them.
        """
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)  # (B, T, 3C) -> 3 x (B, T, C)
        head_dim = C // self.n_head
        q = q.view(B, T, self.n_head, head_dim).transpose(1, 2)  # (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
        k = k.view(B, T, self.n_head, head_dim).transpose(1, 2)  # (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
        v = v.view(B, T, self.n_head, head_dim).transpose(1, 2)  # (B, T, C) -> (B, T, nh, hs) -> (B, nh, T, hs)
        if self.rope:  # rotate each head's q and k by their absolute positions; v is left as it is
            cos, sin = self._rope_cos_sin(start, start + T)  # (T, hs/2) each
            q = positions.rotate_pairs(q, cos, sin)  # (B, nh, T, hs)
            k = positions.rotate_pairs(k, cos, sin)  # (B, nh, T, hs)
        return q, k, v

    def _rope_cos_sin(self, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's cos/sin for positions start..end-1, (end - start, hs/2) each; computed past the cached block_size."""
        if end <= self.rope_cos.size(0):
            return self.rope_cos[start:end], self.rope_sin[start:end]
        cos, sin = positions.rope_cos_sin(range(start, end), 2 * self.rope_cos.size(1))
        return cos.to(self.rope_cos.device), sin.to(self.rope_sin.device)

    def _score_bias(self, start: int, end: int) -> torch.Tensor:
        """ALiBi's bias of the queries at positions start..end-1 on the keys 0..end-1: (nh, end - start, end).

        Read from the buffer inside block_size, computed by ``positions.alibi_bias`` past it.
        """
        if end <= self.score_bias.size(-1):
            return self.score_bias[:, start:end, :end]
        return positions.alibi_bias(range(start, end), self.n_head, end).to(self.score_bias.device)

    def _attn_mask(self, start: int, end: int, dtype: torch.dtype) -> torch.Tensor:
        """SDPA's float ``attn_mask`` for queries start..end-1 and keys 0..end-1: the score bias, -inf where masked.

        Returns:
            (nh, end - start, end) of ``dtype``; with the causal mask, key j > query i gets -inf.
        """
        mask = self._score_bias(start, end).to(dtype)  # (nh, Tq, Tk)
        if self.causal:
            query = torch.arange(start, end, device=mask.device)  # (Tq,)
            future = torch.arange(end, device=mask.device)[None, :] > query[:, None]  # (1, Tk) > (Tq, 1) -> (Tq, Tk)
            mask = mask.masked_fill(future, float("-inf"))  # (nh, Tq, Tk)
        return mask

    def _manual_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention written out (scores, ALiBi's bias if any, mask, softmax); q, k, v are (B, nh, T, hs)."""
        T, head_dim = q.size(-2), q.size(-1)
        attn_scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
        if self.alibi:
            attn_scores = attn_scores + self._score_bias(0, T).to(attn_scores.dtype)  # (B, nh, T, T) + (nh, T, T)
        if self.causal:
            # past block_size (sinusoidal, rope, none) the cached mask is too small: build one for T
            mask = (self.mask[:T, :T] if T <= self.mask.size(0)
                    else torch.ones(T, T, dtype=torch.bool, device=q.device).tril())
            attn_scores = attn_scores.masked_fill(~mask, float("-inf"))
        attn_weights = torch.softmax(attn_scores, dim=-1)  # (B, nh, T, T), rows sum to 1
        context_vec = self.attn_dropout(attn_weights) @ v  # (B, nh, T, T) @ (B, nh, T, hs) -> (B, nh, T, hs)
        return context_vec, attn_weights

    def forward_cached(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, start: int, last_only: bool = False
    ) -> torch.Tensor:
        """Attention for new tokens at positions start..start+T-1, reading earlier keys/values from a cache.

        The new tokens' keys and values (after the RoPE rotation, when there is one) are written into
        ``k_cache``/``v_cache`` at positions start..start+T-1; each new query then attends to the
        cached positions 0..start+T-1 (causally). Inference only: no dropout, no weights returned.

        Args:
            x: float (B, T, C), the new tokens' inputs (after ``ln_1``).
            k_cache, v_cache: float (B, n_head, block_size, head_dim) buffers; positions < start
                hold the keys/values of earlier tokens, computed by earlier calls.
            start: position of the first new token, 0 <= start and start + T <= block_size.
            last_only: compute the output of the last new position only (keys and values are still
                computed for all T); the last block of a prompt pass needs no more.

        Returns:
            float (B, T, C), or (B, 1, C) with ``last_only``: context vectors after ``proj``.

        Raises:
            ValueError: if the model is not causal (a cache cannot stay exact when earlier tokens see
                later ones) or start + T exceeds the cache.
        """
        B, T, C = x.size()
        end = start + T
        if not self.causal:
            raise ValueError("a KV cache needs a causal model: without the mask earlier tokens see later ones")
        if start < 0 or end > k_cache.size(2):
            raise ValueError(f"positions {start}..{end - 1} do not fit a cache of {k_cache.size(2)} positions")
        q, k, v = self._split_heads(x, start)  # 3 x (B, nh, T, hs), at positions start..end-1
        k_cache[:, :, start:end] = k  # (B, nh, T, hs) into positions start..end-1
        v_cache[:, :, start:end] = v
        keys, values = k_cache[:, :, :end], v_cache[:, :, :end]  # (B, nh, end, hs): every position so far
        if self.alibi:  # the bias of the queries kept (the last one, or all T) on every key so far, masked
            first = end - 1 if last_only or T == 1 else start
            q = q[:, :, first - start:]  # (B, nh, T, hs) -> (B, nh, end - first, hs)
            mask = self._attn_mask(first, end, q.dtype)  # (nh, end - first, end)
            context_vec = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)  # (B, nh, end - first, hs)
        elif last_only or T == 1:
            # the last query sees every key up to itself: no mask
            q = q[:, :, -1:]  # (B, nh, T, hs) -> (B, nh, 1, hs)
            context_vec = F.scaled_dot_product_attention(q, keys, values)  # (B, nh, 1, hs)
        elif start == 0:
            context_vec = F.scaled_dot_product_attention(q, keys, values, is_causal=True)  # (B, nh, T, hs)
        else:  # query start+i sees keys 0..start+i
            mask = self.mask[start:end, :end]  # (T, end), True where allowed
            context_vec = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)  # (B, nh, T, hs)
        T_out = context_vec.size(2)
        # (B, nh, T', hs) -> transpose -> (B, T', nh, hs) -> view -> (B, T', C)
        y = context_vec.transpose(1, 2).contiguous().view(B, T_out, C)
        return self.proj(y)


class MLP(nn.Module):
    """Position-wise feed-forward layer: n_embd -> 4 n_embd -> GELU -> n_embd."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.resid_dropout_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) -> (B, T, C)."""
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm Transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, return_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(B, T, C) -> (B, T, C), plus the attention weights (B, nh, T, T) or None."""
        attn_out, attn_weights = self.attn(self.ln_1(x), return_weights=return_weights)
        x = x + attn_out
        x = x + self.mlp(self.ln_2(x))
        return x, attn_weights

    def forward_cached(
        self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, start: int, last_only: bool = False
    ) -> torch.Tensor:
        """(B, T, C) -> (B, T, C), or (B, 1, C) with ``last_only``; see ``CausalSelfAttention.forward_cached``."""
        attn_out = self.attn.forward_cached(self.ln_1(x), k_cache, v_cache, start, last_only)
        if last_only:
            x = x[:, -1:]  # (B, T, C) -> (B, 1, C): the only residual row still needed
        x = x + attn_out
        return x + self.mlp(self.ln_2(x))


class GPTOutput(NamedTuple):
    """What ``GPT.forward`` returns (a tuple, so ``model(idx)[0]`` is the logits).

    Attributes:
        logits: float (B, T, vocab_size), unnormalised next-token scores.
        loss: scalar float tensor, mean cross-entropy in nats over B*T targets; None without targets.
        attn_weights: with ``return_weights``, a list of n_layer tensors (B, n_head, T, T); else None.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None
    attn_weights: list[torch.Tensor] | None


class GPT(nn.Module):
    """The course's character-level GPT.

    Weights start as in GPT-2 / nanoGPT: normal(0, 0.02) for Linear and Embedding weights, zero
    biases, and the Linear layers that write into the residual stream (``attn.proj``,
    ``mlp.proj``) scaled down by 1/sqrt(2 * n_layer).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        if config.encoding.trained_table:
            self.pos_emb = nn.Embedding(config.block_size, config.n_embd)  # row t: the vector of position t
        elif config.encoding.adds_table:
            # fixed table, rebuilt from the config, so not in the state_dict; scaled (see SINUSOIDAL_SCALE)
            table = SINUSOIDAL_SCALE * positions.sinusoidal_table(config.block_size, config.n_embd)  # (block_size, C)
            self.register_buffer("pos_table", table, persistent=False)
        self.drop = nn.Dropout(config.resid_dropout_rate)  # on the embeddings
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, param in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(param, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self, include_embeddings: bool = True) -> int:
        """Number of parameters; without the token and position tables if ``include_embeddings`` is False."""
        total = count_params(self)
        if not include_embeddings:
            total -= self.tok_emb.weight.numel()
            if self.config.encoding.trained_table:
                total -= self.pos_emb.weight.numel()
        return total

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embeddings plus position information: int64 (B, T) -> float (B, T, C).

        The tokens sit at positions start..start+T-1 (``start`` > 0 when a KV cache already holds
        the earlier ones). A trained table (learned) adds row t of ``pos_emb`` at position t; the fixed one
        (sinusoidal) adds row t of its table times ``SINUSOIDAL_SCALE`` (computed by formula past block_size);
        the other encodings add nothing (RoPE and ALiBi act in attention).

        Raises:
            ValueError: with a trained table, if start + T > block_size (no row for later positions).
        """
        T = idx.size(1)
        end = start + T
        x = self.tok_emb(idx)  # (B, T) -> (B, T, C)
        encoding = self.config.encoding
        if encoding.trained_table:
            positions.check_learned_positions(end, self.config.block_size)
            pos = torch.arange(start, end, device=idx.device)  # (T,)
            x = x + self.pos_emb(pos)  # (B, T, C) + (T, C) -> (B, T, C)
        elif encoding.adds_table:
            if end <= self.pos_table.size(0):
                table = self.pos_table[start:end]  # (T, C)
            else:  # past block_size: the same formula, computed for these positions
                table = SINUSOIDAL_SCALE * positions.sinusoidal_encoding(range(start, end), self.config.n_embd)
                table = table.to(x.device)  # (T, C)
            x = x + table  # (B, T, C) + (T, C) -> (B, T, C)
        return self.drop(x)

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_weights: bool = False
    ) -> GPTOutput:
        """Next-token logits for every position, and the loss if ``targets`` are given.

        Args:
            idx: int64 (B, T) token ids, T >= 1 (T <= block_size with a trained table), ids < vocab_size.
            targets: int64 (B, T) next-token ids, or None.
            return_weights: use the manual attention path and return every layer's weights.

        Returns:
            GPTOutput(logits (B, T, vocab_size), loss or None, list of n_layer (B, nh, T, T) or None).

        Raises:
            ValueError: if idx is not 2-d, is empty, or T > block_size with a trained position table (crop
                the prompt first: ``generate`` does it for you).
        """
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        B, T = idx.size()
        if T == 0:
            raise ValueError("idx holds no tokens (T = 0)")
        if self.config.encoding.limited_to_block and T > self.config.block_size:
            raise ValueError(
                f"sequence of {T} tokens is longer than block_size {self.config.block_size}: the learned position "
                f"table has no row for positions {self.config.block_size}..{T - 1}; "
                f"keep the last {self.config.block_size} tokens (generate crops the prompt this way)"
            )
        x = self.embed(idx)  # (B, T, C)
        weights: list[torch.Tensor] = []
        for block in self.blocks:
            x, attn_weights = block(x, return_weights=return_weights)
            if return_weights:
                weights.append(attn_weights)
        logits = self.lm_head(self.ln_f(x))  # (B, T, C) -> (B, T, vocab_size)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))  # (B*T, V) vs (B*T,)
        return GPTOutput(logits, loss, weights if return_weights else None)
