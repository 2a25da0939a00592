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

Position information is chosen by ``GPTConfig.pos_encoding``: "learned" (GPT-2's absolute
position table, added to the token embeddings in ``GPT.embed``), "none" (no position
information: the permutation experiment shows what the causal mask alone leaks), "sinusoidal"
(the fixed table of Vaswani et al., 2017, added in ``GPT.embed``) or "rope" (RoFormer, Su et al.,
2021: q and k rotated inside ``CausalSelfAttention``, nothing added to the input). The tables and
rotations come from ``engine.positions``. Only "learned" is limited to block_size positions.

Dropout has two rates, kept apart as in nanoGPT's modules: ``attn_dropout`` on the attention weights
(inside SDPA, or after the softmax on the manual path) and ``resid_dropout`` on the embeddings and
on both residual branches. Attention-weight dropout is the expensive one: it pushes SDPA off its fused
kernel onto the math path, which also stores the T x T weights (``python -m engine.bench train``
prices each setting). A config that gives only ``dropout`` (every checkpoint written before
the split) uses it for both.

Generation (``GPT.generate``) keeps a KV cache by default: see :class:`KVCache` for what is reused,
and for the window slide past block_size. It draws every token by one rule, :func:`sampling_probs`
(temperature, top-k, top-p), which the Lab's next-character view shows; :func:`eval_mode` is the one
way to run a model without dropout and give it back in the mode it was in.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from engine import positions

POS_ENCODINGS = ("learned", "none", "sinusoidal", "rope")
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
    ``dropout``". So ``GPTConfig(dropout=0.1)``, ``preset(name, dropout=p)`` and the config dicts of
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
    pos_encoding: str = "learned"  # "learned" absolute (GPT-2), "none", "sinusoidal" (fixed table) or "rope" (rotary)
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
        if self.pos_encoding not in POS_ENCODINGS:
            raise ValueError(f"pos_encoding must be one of {POS_ENCODINGS}, got {self.pos_encoding!r}")
        if self.pos_encoding == "rope" and (self.n_embd // self.n_head) % 2:
            raise ValueError(
                f"rope rotates pairs of dimensions, so head_dim = n_embd // n_head must be even; "
                f"got {self.n_embd} // {self.n_head} = {self.n_embd // self.n_head}"
            )

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


PRESETS: dict[str, GPTConfig] = {
    # The lesson's model: 4 heads of 32 dimensions, 4 layers, 128 tokens of context. No dropout: the course
    # training sees each window of the Tang corpus about once, and the dropout experiment
    # (assets/lab_dropout.json, made by the experiments command's earlier version named in the README; shown in the Lab)
    # found no rate that lowers the validation loss beyond the seed noise. Dropout pays off when a small
    # text is seen many times over (tang300).
    "course": GPTConfig(block_size=128, n_embd=128, n_head=4, n_layer=4, dropout=0.0),
    # The Lab's one-click training: a smaller model and context, no dropout for the course preset's reason.
    "quick": GPTConfig(block_size=64, n_embd=64, n_head=4, n_layer=2, dropout=0.0),
    # For tests: about 27k parameters at vocab_size 16, no dropout so runs are deterministic.
    "tiny": GPTConfig(vocab_size=16, block_size=16, n_embd=32, n_head=4, n_layer=2, dropout=0.0),
}


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
    and RoPE tables are non-persistent buffers, so absent. ``prefix`` goes before each name ("blocks.0.attn.").
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
    if config.pos_encoding == "learned":
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


def preset(name: str, **overrides) -> GPTConfig:
    """A named preset ("course", "quick", "tiny"), with fields replaced by ``overrides``.

    Raises:
        ValueError: for an unknown name or an invalid override.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return GPTConfig(**{**PRESETS[name].to_dict(), **overrides})


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
        self.rope = config.pos_encoding == "rope"
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
            q, k, v: float (B, n_head, T, head_dim) each; q and k rotated by their positions with "rope".
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

    def _manual_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Scaled dot-product attention written out; q, k, v are (B, nh, T, hs)."""
        T, head_dim = q.size(-2), q.size(-1)
        attn_scores = q @ k.transpose(-2, -1) / math.sqrt(head_dim)  # (B, nh, T, hs) @ (B, nh, hs, T) -> (B, nh, T, T)
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
        if last_only or T == 1:
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
        if config.pos_encoding == "learned":
            self.pos_emb = nn.Embedding(config.block_size, config.n_embd)  # row t: the vector of position t
        elif config.pos_encoding == "sinusoidal":
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
            if self.config.pos_encoding == "learned":
                total -= self.pos_emb.weight.numel()
        return total

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embeddings plus position information: int64 (B, T) -> float (B, T, C).

        The tokens sit at positions start..start+T-1 (``start`` > 0 when a KV cache already holds
        the earlier ones). "learned" adds row t of ``pos_emb`` at position t; "sinusoidal" adds row t
        of the fixed table times ``SINUSOIDAL_SCALE`` (computed by formula past block_size); "none"
        and "rope" add nothing (rope acts in attention).

        Raises:
            ValueError: with "learned", if start + T > block_size (the table has no row for later positions).
        """
        T = idx.size(1)
        end = start + T
        x = self.tok_emb(idx)  # (B, T) -> (B, T, C)
        if self.config.pos_encoding == "learned":
            positions.check_learned_positions(end, self.config.block_size)
            pos = torch.arange(start, end, device=idx.device)  # (T,)
            x = x + self.pos_emb(pos)  # (B, T, C) + (T, C) -> (B, T, C)
        elif self.config.pos_encoding == "sinusoidal":
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
            idx: int64 (B, T) token ids, T >= 1 (T <= block_size with "learned"), ids < vocab_size.
            targets: int64 (B, T) next-token ids, or None.
            return_weights: use the manual attention path and return every layer's weights.

        Returns:
            GPTOutput(logits (B, T, vocab_size), loss or None, list of n_layer (B, nh, T, T) or None).

        Raises:
            ValueError: if idx is not 2-d, is empty, or T > block_size with "learned" positions (crop
                the prompt first: ``generate`` does it for you).
        """
        if idx.dim() != 2:
            raise ValueError(f"idx must have shape (B, T), got {tuple(idx.shape)}")
        B, T = idx.size()
        if T == 0:
            raise ValueError("idx holds no tokens (T = 0)")
        if T > self.config.block_size and self.config.pos_encoding == "learned":
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

    def new_cache(self, batch_size: int) -> KVCache:
        """An empty :class:`KVCache` for ``batch_size`` sequences, on the model's device and dtype."""
        weight = self.lm_head.weight
        return KVCache(self.config, batch_size, device=weight.device, dtype=weight.dtype)

    @torch.no_grad()
    def forward_cached(self, idx: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Next-token logits of the last position, computing keys/values only for the new tokens.

        ``idx`` holds the tokens at positions cache.length .. cache.length + T - 1; their keys and
        values are added to ``cache`` in every layer, the earlier ones are read from it. Only the last
        position goes through the last block's MLP, ``ln_f`` and ``lm_head``: generation needs no more.

        Args:
            idx: int64 (B, T), T >= 1, ids < vocab_size, with cache.length + T <= block_size.
            cache: from :meth:`new_cache`; updated in place (its ``length`` grows by T).

        Returns:
            float (B, vocab_size): the logits at the last position, equal (to float rounding) to
            ``self(all tokens so far).logits[:, -1]``.

        Raises:
            ValueError: if the model is not causal, idx is not (B, T) with T >= 1, the batch size
                differs from the cache's, or the tokens would pass block_size.
        """
        if idx.dim() != 2 or idx.size(1) == 0:
            raise ValueError(f"idx must be (B, T) with T >= 1, got {tuple(idx.shape)}")
        if idx.size(0) != cache.batch_size:
            raise ValueError(f"idx has batch size {idx.size(0)} but the cache was made for {cache.batch_size}")
        start, T = cache.length, idx.size(1)
        if start + T > self.config.block_size:
            raise ValueError(
                f"{start} cached + {T} new tokens pass block_size {self.config.block_size}; "
                f"recompute the window in a new cache (generate does)"
            )
        x = self.embed(idx, start=start)  # (B, T, C)
        last = len(self.blocks) - 1
        for layer, block in enumerate(self.blocks):
            x = block.forward_cached(x, cache.k[layer], cache.v[layer], start, last_only=layer == last)
        cache.length = start + T
        return self.lm_head(self.ln_f(x[:, -1]))  # (B, 1, C) -> (B, C) -> (B, vocab_size)

    @torch.no_grad()
    def generate(
        self,
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
        vocab_size = self.config.vocab_size
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
        block_size = self.config.block_size
        use_cache = use_cache and self.config.causal
        prompt_len = idx.size(1)
        with eval_mode(self):
            cache = self.new_cache(idx.size(0)) if use_cache and max_new_tokens else None
            for _ in range(max_new_tokens):
                allowed = not_banned
                if allowed_next is not None:
                    rule = allowed_next(idx[:, prompt_len:])  # (B, n) so far -> bool (B or 1, V), or None
                    if rule is None:
                        break
                    allowed = allowed & rule.to(device=idx.device, dtype=torch.bool)  # (B or 1, V)
                if cache is None:
                    idx_cond = idx[:, -block_size:]  # (B, <= block_size)
                    logits = self(idx_cond).logits[:, -1, :]  # (B, T, V) -> (B, V): last position only
                elif _reuses_cache(cache.length, idx.size(1), block_size):
                    logits = self.forward_cached(idx[:, -1:], cache)  # the one new token: (B, 1) -> (B, V)
                else:  # first step, or the window slid: compute the last block_size tokens afresh
                    cache.length = 0
                    logits = self.forward_cached(idx[:, -block_size:], cache)  # (B, <= block_size) -> (B, V)
                idx_next = sample_next(logits, temperature, top_k, top_p, generator, allowed)  # (B, 1)
                idx = torch.cat((idx, idx_next), dim=1)  # (B, T) -> (B, T + 1)
        return idx


class KVCache:
    """Keys and values of the tokens already read, per layer and per head, for generation.

    When the model predicts the next token, every earlier token's key and value would come out the
    same as at the previous step: a causal layer's output at position t depends on positions <= t
    only. So they are computed once, stored here, and each step computes q, k, v for the new token
    alone; its query attends to the stored keys. The uncached path recomputes all of them every step.

    The window slide. A model reads at most block_size tokens, so past that the uncached path crops
    to the last block_size and numbers them 0..block_size-1 again. After such a slide the stored
    keys and values are stale for three reasons: every token's position dropped by one (the learned
    and sinusoidal tables add a different row; RoPE turns q and k by different angles), the oldest
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
    """For each step of ``GPT.generate(use_cache=True)``, how many keys/values are reused vs computed.

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

    ``GPT.generate`` draws from these probabilities and the Lab's next-character view shows them, so
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
        temperature, top_k, top_p, use_cache: see ``GPT.generate``; the tokenizer's unknown token (if it has
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
    out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, seed=seed, use_cache=use_cache,
                         banned_ids=() if unk_id is None else (unk_id,), top_p=top_p)
    return prompt + tokenizer.decode(out[0, idx.size(1) :].tolist())
