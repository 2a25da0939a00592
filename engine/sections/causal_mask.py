"""Section 3, causal mask: the experiments behind the page.

Source: chapter ``003`` ("Mécanismes d'attention"), sections on causal attention
(masking after the softmax and renormalising vs masking scores with -inf),
``torch.triu``/``torch.tril``, the compact ``CausalAttention`` class and
``register_buffer``. The fully masked row is the classic pitfall of padding
masks (every position of a row hidden gives 0/0 in the softmax).

``python -m engine.sections.causal_mask [--out PATH]`` records :func:`buffer_demo`'s meta table in
:data:`BUFFER_DEMO_FILE` (see :func:`meta_buffers` for why the server reads a recording).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from engine import attention as A
from engine import chapter
from engine.rng import uses_global_rng

_log = logging.getLogger(__name__)

#: Ways to keep a fully masked row from turning into NaN, by stable key (see :func:`masked_row_demo`):
#: no guard (-inf), the most negative finite float, ``nan_to_num`` after the softmax, the diagonal kept visible.
GUARDS: tuple[str, ...] = ("none", "finite_min", "nan_to_num", "keep_diagonal")
#: Stable column keys of :attr:`Leakage.table`.
LEAKAGE_COLUMNS: tuple[str, ...] = ("token_index", "max_diff_causal", "changed_causal", "max_diff_full", "changed_full")
#: Stable column keys of :func:`buffer_demo`'s table.
BUFFER_COLUMNS: tuple[str, ...] = (
    "holder", "state_dict_keys", "in_state_dict", "in_named_buffers", "weights_device", "mask_device", "forward_ok",
    "forward_result",
)
#: The type of each column of :func:`buffer_demo`'s table, as a recording must hold it.
BUFFER_COLUMN_TYPES: dict[str, type] = {
    "holder": str, "state_dict_keys": str, "in_state_dict": bool, "in_named_buffers": bool, "weights_device": str,
    "mask_device": str, "forward_ok": bool, "forward_result": str,
}
#: The recording of ``buffer_demo("meta")`` the server shows (written by :data:`BUFFER_DEMO_COMMAND`).
BUFFER_DEMO_FILE = Path(__file__).resolve().parents[2] / "assets" / "buffer_demo.json"
#: The recording's format tag, and the command that writes it.
BUFFER_DEMO_FORMAT = "buffer-demo/1"
BUFFER_DEMO_COMMAND = "python -m engine.sections.causal_mask"
#: The mask size of :func:`buffer_demo`'s table (its default ``context_length``, the chapter's six tokens).
BUFFER_CONTEXT_LENGTH = 6
#: Bounds a recording is checked against before it is parsed: file size (bytes), characters per text cell.
MAX_BUFFER_FILE_BYTES, MAX_BUFFER_CELL_CHARS = 65_536, 2_000
#: What a ``torch.triu`` mask does, as :attr:`TriuMask.kind` (see :func:`triu_explorer`).
TRIU_KINDS: tuple[str, ...] = ("causal", "fully_masked_rows", "hides_diagonal", "leaks_future", "hides_nothing")


@dataclass(frozen=True)
class TwoWays:
    """The chapter's two masking routes (see :func:`mask_two_ways`).

    Attributes:
        attn_scores: (T, T) unscaled scores as given.
        attn_weights: (T, T) softmax of all scores / sqrt(d_k).
        mask_simple: (T, T) float, ones on and below the diagonal (``tril``).
        masked_simple: (T, T) ``attn_weights * mask_simple``.
        row_sums: (T, 1) row sums of ``masked_simple`` (``keepdim=True``: the divisor that broadcasts along rows).
        masked_simple_norm: (T, T) ``masked_simple`` renormalised (route 1).
        mask: (T, T) bool, True strictly above the diagonal (``triu(diagonal=1)``).
        masked_scores: (T, T) scores with -inf where ``mask``.
        attn_weights_causal: (T, T) softmax of the masked scores / sqrt(d_k) (route 2).
        max_abs_diff: largest |route 1 - route 2|.
    """

    attn_scores: Tensor
    attn_weights: Tensor
    mask_simple: Tensor
    masked_simple: Tensor
    row_sums: Tensor
    masked_simple_norm: Tensor
    mask: Tensor
    masked_scores: Tensor
    attn_weights_causal: Tensor
    max_abs_diff: float


@dataclass(frozen=True)
class Leakage:
    """The leakage test of :func:`leakage_test`.

    Attributes:
        table: one row per output row, columns :data:`LEAKAGE_COLUMNS`: ``max_diff_*`` the largest
            change of its context vector, ``changed_*`` whether it is nonzero, with the causal mask
            (``causal``) and without a mask (``full``).
        changed_rows: the rows that changed with the mask, in order.
        leaks: True when a row before the perturbed token changed (the mask would leak).
    """

    table: pd.DataFrame
    changed_rows: tuple[int, ...]
    leaks: bool


@dataclass(frozen=True)
class TriuMask:
    """``torch.triu(ones, diagonal=k)`` read as a mask (see :func:`triu_explorer`).

    Attributes:
        mask: (T, T) float32 0/1, 1 = hidden.
        visible_per_row: how many keys each row sees.
        fully_masked_rows: rows that see nothing.
        hides_diagonal: a token cannot see itself.
        future_visible: future tokens a row may see at most.
        is_causal: k = 1.
        kind: one of :data:`TRIU_KINDS`, what matters most about this mask.
    """

    mask: Tensor
    visible_per_row: tuple[int, ...]
    fully_masked_rows: tuple[int, ...]
    hides_diagonal: bool
    future_visible: int
    is_causal: bool
    kind: str


@dataclass(frozen=True)
class MaskedRow:
    """A row hidden entirely, with a guard (see :func:`masked_row_demo`).

    Attributes:
        mask: (T, T) bool, True = hidden.
        attn_weights: (T, T), NaN in the hidden row when no guard applies.
        nan_rows: rows holding a NaN.
        row_weights: (T,) the hidden row's weights.
    """

    mask: Tensor
    attn_weights: Tensor
    nan_rows: tuple[int, ...]
    row_weights: Tensor


@uses_global_rng
def v2_scores(inputs: Tensor, seed: int = 789, d_out: int = 2) -> Tensor:
    """Unscaled scores ``queries @ keys.T`` of a SelfAttention_v2 built after ``manual_seed(seed)``.

    The chapter reuses its ``sa_v2`` (seed 789, d_out 2) for the causal section.

    Args:
        inputs: (T, d_in) float32.
        seed: ``torch.manual_seed`` before building the module.
        d_out: size of queries and keys.

    Returns:
        (T, T) attn_scores (no grad).

    Raises:
        ValueError: on a non-positive ``d_out`` or a non-2-d input.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    torch.manual_seed(seed)
    sa_v2 = A.SelfAttention_v2(inputs.shape[1], d_out)
    with torch.no_grad():
        queries = sa_v2.W_query(inputs)  # (T, d_in) -> (T, d_out)
        keys = sa_v2.W_key(inputs)  # (T, d_out)
        return queries @ keys.T  # (T, d_out) @ (d_out, T) -> (T, T)


def mask_two_ways(attn_scores: Tensor, d_k: int) -> TwoWays:
    """Causal weights twice: softmax, zero the future, renormalise — and -inf before the softmax.

    Chapter section "applying a causal attention mask". Renormalising the
    surviving weights of row i divides exp(s_ij / sqrt(d_k)) by the sum over
    j <= i only, which is exactly the softmax over the visible positions, so both
    routes give the same matrix (up to float rounding).

    Args:
        attn_scores: (T, T) unscaled scores.
        d_k: key size used in the 1/sqrt(d_k) scale (2 in the chapter).

    Returns:
        :class:`TwoWays`.

    Raises:
        ValueError: if ``attn_scores`` is not square 2-d or ``d_k < 1``.
    """
    if attn_scores.dim() != 2 or attn_scores.shape[0] != attn_scores.shape[1]:
        raise ValueError(f"attn_scores must be (T, T), got shape {tuple(attn_scores.shape)}")
    if d_k < 1:
        raise ValueError(f"d_k must be positive, got {d_k}")
    T = attn_scores.shape[0]
    attn_weights = torch.softmax(attn_scores / d_k**0.5, dim=-1)  # (T, T)
    mask_simple = torch.tril(torch.ones(T, T))  # (T, T), 1 on and below the diagonal
    masked_simple = attn_weights * mask_simple  # (T, T), future weights zeroed
    row_sums = masked_simple.sum(dim=-1, keepdim=True)  # (T, 1)
    masked_simple_norm = masked_simple / row_sums  # (T, T), rows sum to 1 again
    mask = A.causal_mask(T)  # (T, T) bool, True strictly above the diagonal
    masked_scores = attn_scores.masked_fill(mask, float("-inf"))  # (T, T)
    attn_weights_causal = torch.softmax(masked_scores / d_k**0.5, dim=-1)  # (T, T)
    return TwoWays(
        attn_scores=attn_scores,
        attn_weights=attn_weights,
        mask_simple=mask_simple,
        masked_simple=masked_simple,
        row_sums=row_sums,  # (T, 1), as it divides
        masked_simple_norm=masked_simple_norm,
        mask=mask,
        masked_scores=masked_scores,
        attn_weights_causal=attn_weights_causal,
        max_abs_diff=float((masked_simple_norm - attn_weights_causal).abs().max()),
    )


@uses_global_rng
def leakage_test(inputs: Tensor, token_index: int, delta: float, seed: int = 123, d_out: int = 2) -> Leakage:
    """Perturb one token's embedding and see which output rows move, with and without the mask.

    A ``CausalAttention`` (dropout 0) is built after ``manual_seed(seed)``; the
    same projections without a mask (a ``SelfAttention_v2`` loaded with its
    weights) serve as the contrast. ``delta`` is added to every coordinate of
    token ``token_index``. With the mask, rows before that token are bitwise
    unchanged: their scores never see the token's key and its value is
    multiplied by an exact 0.

    Args:
        inputs: (T, d_in) float32.
        token_index: the token perturbed, in [0, T).
        delta: amount added to each coordinate of that token's embedding.
        seed: seed of the projections.
        d_out: size of queries, keys and values.

    Returns:
        :class:`Leakage`; "changed" means a nonzero difference.

    Raises:
        ValueError: if ``token_index`` is outside [0, T) or the input is not 2-d.
    """
    if inputs.dim() != 2:
        raise ValueError(f"inputs must be (T, d_in), got shape {tuple(inputs.shape)}")
    T, d_in = inputs.shape
    if not 0 <= token_index < T:
        raise ValueError(f"token_index must be in [0, {T}), got {token_index}")
    torch.manual_seed(seed)
    causal = A.CausalAttention(d_in, d_out, context_length=T, dropout=0.0)
    full = A.SelfAttention_v2(d_in, d_out)
    full.load_state_dict({k: v for k, v in causal.state_dict().items() if k != "mask"})
    perturbed = inputs.clone()
    perturbed[token_index] += delta
    with torch.no_grad():
        causal_diff = causal(perturbed.unsqueeze(0)) - causal(inputs.unsqueeze(0))  # (1, T, d_in) -> (1, T, d_out)
        causal_diff = causal_diff.squeeze(0)  # (1, T, d_out) -> (T, d_out)
        full_diff = full(perturbed) - full(inputs)  # (T, d_out)
    causal_max = causal_diff.abs().amax(dim=-1)  # (T,)
    full_max = full_diff.abs().amax(dim=-1)  # (T,)
    changed = causal_max > 0  # (T,)
    table = pd.DataFrame(
        dict(zip(LEAKAGE_COLUMNS, (range(T), causal_max.double().numpy(), changed.numpy(),
                                   full_max.double().numpy(), (full_max > 0).numpy()), strict=True))
    )
    changed_rows = tuple(int(i) for i in torch.nonzero(changed).flatten())
    return Leakage(table, changed_rows, bool(changed[:token_index].any()))


def triu_explorer(context_length: int, diagonal: int) -> TriuMask:
    """``torch.triu(ones, diagonal=k)`` read as a mask (1 = hidden), and what it lets each row see.

    k = 1 is the causal mask; k <= 0 also hides the token itself (row 0 then hides
    everything: a fully masked row); k >= 2 lets each token see k - 1 future
    tokens; k >= T hides nothing; k <= -(T - 1) hides everything.

    Args:
        context_length: T, size of the square matrix.
        diagonal: k, the offset passed to ``torch.triu``.

    Returns:
        :class:`TriuMask`; its ``kind`` is, in this order of precedence, "causal" (k = 1),
        "fully_masked_rows", "hides_diagonal", "leaks_future" (k >= 2), else "hides_nothing".

    Raises:
        ValueError: if ``context_length < 1``.
    """
    if context_length < 1:
        raise ValueError(f"context_length must be positive, got {context_length}")
    mask = torch.triu(torch.ones(context_length, context_length), diagonal=diagonal)  # (T, T)
    visible = tuple(int(v) for v in (mask == 0).sum(dim=-1))  # (T,) keys each row sees
    fully_masked = tuple(i for i, v in enumerate(visible) if v == 0)
    future_visible = max(0, min(diagonal - 1, context_length - 1))
    if diagonal == 1:
        kind = "causal"
    elif fully_masked:
        kind = "fully_masked_rows"
    elif diagonal <= 0:
        kind = "hides_diagonal"
    elif future_visible > 0:
        kind = "leaks_future"
    else:
        kind = "hides_nothing"
    return TriuMask(mask, visible, fully_masked, diagonal <= 0, future_visible, diagonal == 1, kind)


def masked_row_demo(attn_scores: Tensor, row: int, guard: str, d_k: int = 2) -> MaskedRow:
    """Hide every position of one row (as a padding mask would) and apply a guard against NaN.

    With the plain -inf fill, that row's softmax is exp(-inf)/sum = 0/0 = NaN,
    and the NaN spreads to its context vector and, in training, to every gradient.
    Guards:

    * ``"none"``: fill with -inf; the row is NaN.
    * ``"finite_min"``: fill with ``torch.finfo(dtype).min`` instead of -inf;
      the row becomes uniform (it silently attends to every position) but stays finite.
    * ``"nan_to_num"``: keep -inf, replace NaN weights by 0; the row's
      context vector is 0.
    * ``"keep_diagonal"``: never mask position (i, i); the row attends to itself.

    Args:
        attn_scores: (T, T) unscaled scores.
        row: the row whose every position is hidden (on top of the causal mask).
        guard: one of :data:`GUARDS`.
        d_k: key size for the 1/sqrt(d_k) scale.

    Returns:
        :class:`MaskedRow`.

    Raises:
        ValueError: on an unknown guard or a row outside [0, T).
    """
    if guard not in GUARDS:
        raise ValueError(f"unknown guard {guard!r}; choose one of {GUARDS}")
    T = attn_scores.shape[0]
    if not 0 <= row < T:
        raise ValueError(f"row must be in [0, {T}), got {row}")
    mask = A.causal_mask(T).clone()  # (T, T) bool
    mask[row] = True  # every key hidden from this query
    if guard == "keep_diagonal":
        mask &= ~torch.eye(T, dtype=torch.bool)  # (T, T): position (i, i) always visible
    fill = torch.finfo(attn_scores.dtype).min if guard == "finite_min" else float("-inf")
    masked_scores = attn_scores.masked_fill(mask, fill)  # (T, T)
    attn_weights = torch.softmax(masked_scores / d_k**0.5, dim=-1)  # (T, T)
    if guard == "nan_to_num":
        attn_weights = torch.nan_to_num(attn_weights, nan=0.0)
    nan_rows = tuple(int(i) for i in torch.nonzero(torch.isnan(attn_weights).any(dim=-1)).flatten())
    return MaskedRow(mask, attn_weights, nan_rows, attn_weights[row])


class CausalAttentionPlainMask(A.CausalAttention):
    """Counter-example: :class:`engine.attention.CausalAttention` with the mask as a plain attribute.

    Same parameters and forward; only ``self.mask`` is an ordinary tensor
    attribute instead of a registered buffer, so ``.to()`` leaves it where it
    was and ``state_dict()`` does not contain it.
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        mask = self._buffers.pop("mask")  # unregister the buffer ...
        self.mask = mask  # ... and keep the same tensor as a plain attribute


class CausalAttentionNonPersistent(A.CausalAttention):
    """:class:`engine.attention.CausalAttention` with ``register_buffer(..., persistent=False)``.

    The mask still follows ``.to()``, but is left out of ``state_dict()`` (it is
    rebuilt by ``__init__`` anyway).
    """

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False):
        super().__init__(d_in, d_out, context_length, dropout, qkv_bias)
        mask = self._buffers.pop("mask")
        self.register_buffer("mask", mask, persistent=False)


#: The three ways of holding the mask compared by :func:`buffer_demo`, by stable key: the chapter's
#: ``register_buffer``, ``register_buffer(persistent=False)``, and a plain attribute ``self.mask = ...``.
MASK_HOLDERS: dict[str, type[A.CausalAttention]] = {
    "buffer": A.CausalAttention,
    "buffer_nonpersistent": CausalAttentionNonPersistent,
    "plain_attribute": CausalAttentionPlainMask,
}


@uses_global_rng
def buffer_demo(target: str | torch.device = "meta", context_length: int = BUFFER_CONTEXT_LENGTH) -> pd.DataFrame:
    """Where the mask goes with ``.to(target)`` and whether it is saved, for each way of holding it.

    On a machine without a GPU, ``target="meta"`` (tensors with shapes but no
    data) shows the same thing as ``"cuda"`` would: parameters and buffers move,
    a plain attribute stays on the CPU, and the forward pass then fails with a
    device-mismatch ``RuntimeError``.

    Args:
        target: device passed to ``module.to``: "meta", "cuda", "cpu", ...
        context_length: size of the mask.

    Returns:
        DataFrame, one row per entry of :data:`MASK_HOLDERS`, columns :data:`BUFFER_COLUMNS`:
        ``holder`` (its key), ``state_dict_keys`` (comma-separated), ``in_state_dict``,
        ``in_named_buffers``, ``weights_device`` and ``mask_device`` after ``.to()``, ``forward_ok``
        and ``forward_result`` (the output shape, e.g. "(2, 6, 2)", or "RuntimeError: " and
        PyTorch's first line).
    """
    rows = []
    for holder, cls in MASK_HOLDERS.items():
        torch.manual_seed(123)
        module = cls(3, 2, context_length, 0.0)
        keys = ", ".join(module.state_dict().keys())
        in_state = "mask" in module.state_dict()
        buffers = [name for name, _ in module.named_buffers()]
        module.to(target)
        x = torch.rand(2, context_length, 3, device=target)  # (b, T, d_in)
        try:
            with torch.no_grad():
                out = module(x)  # (b, T, d_out)
            ok, result = True, str(tuple(out.shape))
        except RuntimeError as err:
            ok, result = False, f"RuntimeError: {str(err).splitlines()[0]}"
        rows.append((holder, keys, in_state, "mask" in buffers, str(module.W_query.weight.device),
                     str(module.mask.device), ok, result))
    return pd.DataFrame(rows, columns=list(BUFFER_COLUMNS))


@dataclass(frozen=True)
class BufferRecording:
    """A recording of ``buffer_demo("meta")`` read back by :func:`read_buffer_demo`.

    Attributes:
        table: the DataFrame :func:`buffer_demo` returned, same columns (:data:`BUFFER_COLUMNS`), order and dtypes.
        torch_version: ``torch.__version__`` of the process that recorded it (PyTorch's error text is in the table).
        command: the command that regenerates it.
    """

    table: pd.DataFrame
    torch_version: str
    command: str


@dataclass(frozen=True)
class MetaBuffers:
    """The meta-device table the page shows (see :func:`meta_buffers`).

    Attributes:
        table: ``buffer_demo("meta")``'s DataFrame, recorded or run live.
        recorded_with: the PyTorch version of the recording, None when the table was run live.
    """

    table: pd.DataFrame
    recorded_with: str | None


def buffer_demo_record() -> dict:
    """``buffer_demo("meta")`` as the JSON object :func:`read_buffer_demo` reads back.

    Returns:
        ``{"format", "command", "torch", "target", "context_length", "columns", "rows"}``; ``rows`` holds one
        object per holder, keyed by :data:`BUFFER_COLUMNS`, with plain ``str``/``bool`` values.
    """
    table = buffer_demo("meta")
    rows = [{column: BUFFER_COLUMN_TYPES[column](value) for column, value in zip(BUFFER_COLUMNS, row, strict=True)}
            for row in table.itertuples(index=False, name=None)]
    return {"format": BUFFER_DEMO_FORMAT, "command": BUFFER_DEMO_COMMAND, "torch": torch.__version__,
            "target": "meta", "context_length": BUFFER_CONTEXT_LENGTH, "columns": list(BUFFER_COLUMNS), "rows": rows}


def _text(value: object, name: str) -> str:
    """``value`` if it is a ``str`` of at most :data:`MAX_BUFFER_CELL_CHARS` characters; ValueError otherwise."""
    if not isinstance(value, str) or len(value) > MAX_BUFFER_CELL_CHARS:
        raise ValueError(f"{name} must be a string of at most {MAX_BUFFER_CELL_CHARS} characters, got {value!r:.80}")
    return value


def read_buffer_demo(path: str | Path = BUFFER_DEMO_FILE) -> BufferRecording:
    """Read and check a recording written by :func:`buffer_demo_record` (``python -m engine.sections.causal_mask``).

    The file is bounded (:data:`MAX_BUFFER_FILE_BYTES`) before it is read, then every field is checked: the format
    tag, ``target`` "meta", ``context_length`` :data:`BUFFER_CONTEXT_LENGTH` (the default the page runs), the
    columns :data:`BUFFER_COLUMNS` in order, one row per holder of :data:`MASK_HOLDERS` in order, each cell of its
    :data:`BUFFER_COLUMN_TYPES` type (a bool is not taken for a string, nor 0/1 for a bool), ``torch`` and
    ``command`` strings.

    Returns:
        The :class:`BufferRecording`, its table equal to the one :func:`buffer_demo` returned.

    Raises:
        FileNotFoundError: if there is no such file.
        ValueError: if the file is too large, not UTF-8 JSON, or any field is missing or of the wrong type.
    """
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BUFFER_FILE_BYTES:
        raise ValueError(f"{path}: {size} bytes, more than a recording's {MAX_BUFFER_FILE_BYTES}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid UTF-8 JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != BUFFER_DEMO_FORMAT:
        raise ValueError(f"{path}: not a {BUFFER_DEMO_FORMAT} recording")
    if data.get("target") != "meta":
        raise ValueError(f"{path}: target must be 'meta', got {data.get('target')!r:.80}")
    length = data.get("context_length")
    if type(length) is not int or length != BUFFER_CONTEXT_LENGTH:
        raise ValueError(f"{path}: context_length must be {BUFFER_CONTEXT_LENGTH}, got {length!r:.80}")
    if data.get("columns") != list(BUFFER_COLUMNS):
        raise ValueError(f"{path}: columns must be {list(BUFFER_COLUMNS)}, got {data.get('columns')!r:.200}")
    rows = data.get("rows")
    if not isinstance(rows, list) or len(rows) != len(MASK_HOLDERS):
        raise ValueError(f"{path}: rows must be a list of {len(MASK_HOLDERS)} objects, one per mask holder")
    cells = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != set(BUFFER_COLUMNS):
            missing = sorted(set(BUFFER_COLUMNS) - set(row)) if isinstance(row, dict) else list(BUFFER_COLUMNS)
            extra = sorted(set(row) - set(BUFFER_COLUMNS)) if isinstance(row, dict) else []
            raise ValueError(f"{path}: row {i} must hold the columns {list(BUFFER_COLUMNS)} "
                             f"(missing {missing}, unexpected {extra!r:.200})")
        for column, kind in BUFFER_COLUMN_TYPES.items():
            if kind is bool and not isinstance(row[column], bool):
                raise ValueError(f"{path}: row {i}, {column} must be true or false, got {row[column]!r:.80}")
            if kind is str:
                _text(row[column], f"{path}: row {i}, {column}")
        cells.append(tuple(row[column] for column in BUFFER_COLUMNS))
    holders = [row[0] for row in cells]
    if holders != list(MASK_HOLDERS):
        raise ValueError(f"{path}: holders must be {list(MASK_HOLDERS)} in that order, got {holders}")
    return BufferRecording(pd.DataFrame(cells, columns=list(BUFFER_COLUMNS)),
                           _text(data.get("torch"), f"{path}: torch"), _text(data.get("command"), f"{path}: command"))


def meta_buffers(path: str | Path | None = None) -> MetaBuffers:
    """``buffer_demo("meta")``'s table: the recording at ``path`` (default :data:`BUFFER_DEMO_FILE`) when the running
    PyTorch made it, else run live.

    Running modules on the meta device makes PyTorch import its compiler stack (``torch._dynamo``, SymPy:
    its Python meta kernels are wrapped by ``torch._disable_dynamo``), hundreds of modules a server would
    otherwise never load; the recording shows the same table without it, and the test suite reruns the code
    and compares. Another PyTorch (its error text may differ), no file or a damaged one (logged; see
    :func:`read_buffer_demo`) runs the code live: the reader sees the table either way.
    """
    try:
        recording = read_buffer_demo(BUFFER_DEMO_FILE if path is None else path)
    except FileNotFoundError:
        recording = None
    except ValueError as exc:
        _log.warning("running buffer_demo('meta') live: %s", exc)
        recording = None
    if recording is not None and recording.torch_version == torch.__version__:
        return MetaBuffers(recording.table, recording.torch_version)
    return MetaBuffers(buffer_demo("meta"), None)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m engine.sections.causal_mask [--out PATH]``, writes :func:`buffer_demo_record`."""
    parser = argparse.ArgumentParser(prog=BUFFER_DEMO_COMMAND,
                                     description="Record buffer_demo('meta')'s table for the server (page 3).")
    parser.add_argument("--out", default=str(BUFFER_DEMO_FILE), help=f"where to write it (default {BUFFER_DEMO_FILE})")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(buffer_demo_record(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out} (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --- the page's prediction gates (``ui/questions/causal_mask.py``): their answers, which the page and its
# notebook's exercises both call ---------------------------------------------------------------------------------

#: d_k of the chapter's two routes (page 3's first section).
ROUTES_D_K = 2


def chapter_routes() -> TwoWays:
    """The chapter's two masking routes, as page 3 computes them (sa_v2 scores, seed 789, d_out 2)."""
    return mask_two_ways(v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=ROUTES_D_K), d_k=ROUTES_D_K)


def future_weights(result: TwoWays) -> dict[str, float]:
    """The weight each way of masking leaves on the future (every row's weights above the diagonal, summed, over
    the rows): masked_fill with −inf (route 2), adding the 0/1 mask, multiplying by the lower triangle."""
    ones = result.mask.to(result.attn_scores.dtype)  # (T, T) 1 above the diagonal
    masked = {
        "neg_inf": result.masked_scores,
        "add_01": result.attn_scores + ones,
        "times_tril": result.attn_scores * (1 - ones),
    }
    weights = {k: torch.softmax(s / math.sqrt(ROUTES_D_K), dim=-1) for k, s in masked.items()}  # (T, T) each
    return {k: float(w[result.mask].sum() / w.shape[0]) for k, w in weights.items()}


def zero_future(result: TwoWays) -> str:
    """The way of masking whose future weight is exactly 0 (``neg_inf`` for masked_fill)."""
    return next(k for k, v in future_weights(result).items() if v == 0.0)


def changed_row_count(inputs: Tensor, token_index: int, delta: float) -> float:
    """How many output rows of the causal layer change (:func:`leakage_test`)."""
    return float(len(leakage_test(inputs, token_index, delta).changed_rows))
