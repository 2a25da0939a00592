"""What one reader's training or model may cost: caps, and estimates of memory and time from a config.

The app runs as one process for every reader, on as little as Streamlit Community Cloud's smallest
allotment (690 MB). Anything a reader controls (the Lab's settings, an uploaded text, an uploaded
checkpoint) is checked here *before* a tensor is allocated, from sizes alone:

* parameters ``P`` (from the config alone, ``engine.gpt.config_params``);
* training state ``16 P`` bytes: float32 weights, gradients and AdamW's two moments;
* activations kept for the backward pass, which dominate: per layer ``B * T * n_embd`` floats for
  the LayerNorms, q/k/v, projections and the 4x MLP, ``B * n_head * T^2`` floats for the attention
  scores, weights and dropout mask, and once ``B * T * vocab_size`` floats for the logits, their
  softmax and its gradient.

The coefficients are fitted to the peak resident memory of single training steps, and the time estimate
divides the step's floating-point operations by a cautious rate; the measurements behind both are in
``engine/budget_steps.json`` (a test refits the coefficients from it). The estimate is a guide for the reader,
not a promise.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.gpt import GPTConfig, config_params

MB = 2**20

# --- caps ----------------------------------------------------------------------------------------------------------
# One training runs at a time (LabRunner.max_concurrent is 1), so the 690 MB allotment holds the Lab page plus any
# training estimated under MAX_TRAINING_BYTES. The process sizes and the single steps the estimate is fitted to
# are in engine/budget_steps.json.
#: Memory one training may take (bytes): weights, gradients, AdamW moments and the activations of one step.
MAX_TRAINING_BYTES = 240 * MB
#: Longest a training may run (seconds); the job stops itself there and keeps what it learned.
MAX_JOB_WALL_S = 15 * 60
#: Size limits of the Lab's controls, also applied to uploaded checkpoints (before anything is allocated).
MAX_N_LAYER = 8
MAX_N_EMBD = 256
MAX_BLOCK_SIZE = 256
MAX_BATCH_SIZE = 64
MAX_STEPS = 5000
#: Distinct characters a training text or checkpoint may have: tang300 has 2,500 and song100 fewer; a text with
#: 200,000 distinct characters would make the logits alone (B * T * vocab_size floats, ~13 bytes each) ~2.6 GB.
MAX_VOCAB = 6000
#: The unit of the upload limits. Streamlit's ``file_uploader(max_upload_size=n)`` makes the browser refuse files over
#: n * 1000**2 bytes (n * 1024**2 on Windows), so a limit in whole megabytes of 10**6 bytes is one the widget states
#: exactly: a file the widget lets through on Windows but the check below refuses gets the page's message instead.
UPLOAD_UNIT = 1_000_000
#: An uploaded training text (bytes): 2 MB of UTF-8 are at most 2M characters, 8 MB as int32 token ids.
MAX_TEXT_BYTES = 2 * UPLOAD_UNIT
#: Parameters a model may have: the largest Lab model (8 layers of 256, block 256, MAX_VOCAB characters) has 9.4M.
MAX_PARAMS = 10_000_000
#: The JSON header of a safetensors checkpoint (tensor table, config, vocabulary, training history).
MAX_HEADER_BYTES = 2 * MB
#: An uploaded checkpoint file (bytes): MAX_PARAMS float32 weights, the 8-byte length and a header of
#: MAX_HEADER_BYTES, in whole upload units (43 MB).
MAX_CHECKPOINT_BYTES = -(-(4 * MAX_PARAMS + 8 + MAX_HEADER_BYTES) // UPLOAD_UNIT) * UPLOAD_UNIT
#: What one reader's session may hold in uploaded files at once (bytes): one text and one checkpoint, the Lab's two
#: upload widgets. The server refuses an upload that would go past it before reading its body (``serve.py``).
MAX_SESSION_UPLOAD_BYTES = MAX_TEXT_BYTES + MAX_CHECKPOINT_BYTES
#: Files one session may hold at once: a widget's file, and its next one while the widget replaces it.
MAX_SESSION_UPLOAD_FILES = 4
#: What every session together may hold in uploaded files, or have on the way (bytes): two sessions' worth.
MAX_UPLOADS_HELD_BYTES = 2 * MAX_SESSION_UPLOAD_BYTES

#: Bytes per unit of each term, fitted (least squares) to the steps of budget_steps.json: (training state per parameter,
#: per B*T*n_embd*n_layer activation, per B*n_head*T^2*n_layer attention entry, per B*T*vocab_size logit).
MEMORY_COEFFICIENTS = (16.0, 146.0, 14.0, 13.0)
#: Fixed cost of a first training step (allocator arenas, the backward pass's libraries, the batches), fitted.
MEMORY_OVERHEAD = 110 * MB
#: Floating-point operations per second of one training thread: a cautious middle for a shared machine, below
#: what the fitted steps reached (less for long blocks and large vocabularies; budget_steps.json).
FLOPS_PER_S = 15e9


@dataclass(frozen=True)
class Estimate:
    """What a training would cost, from its sizes alone.

    Attributes:
        params: parameters of the model.
        memory_bytes: estimated peak memory of the training (bytes).
        step_flops: floating-point operations of one training step (forward and backward).
        seconds: estimated wall time of the whole training, evaluations included (seconds).
    """

    params: int
    memory_bytes: int
    step_flops: float
    seconds: float


@dataclass(frozen=True)
class Refusal:
    """Why a setting is refused: a stable key for the page to translate, the value and the limit.

    Attributes:
        key: "n_layer", "n_embd", "block_size", "batch_size", "steps", "vocab_size", "params",
            "memory" or "time".
        value: what was asked for (bytes for "memory", seconds for "time").
        limit: the cap it exceeds.
    """

    key: str
    value: float
    limit: float


def estimate(config: GPTConfig, batch_size: int, steps: int, eval_interval: int = 0, eval_iters: int = 0) -> Estimate:
    """Memory and time of training ``config`` for ``steps`` steps of ``batch_size`` windows.

    Args:
        config: the model (vocab_size included).
        batch_size: B, windows per step.
        steps: optimizer steps.
        eval_interval, eval_iters: the evaluation cadence (each evaluation runs ``2 * eval_iters``
            forward passes, a third of a step each); 0 leaves evaluations out.

    Returns:
        An :class:`Estimate`. Nothing is allocated (parameters are counted from the config).
    """
    params = config_params(config)
    B, T, C, L, H, V = batch_size, config.block_size, config.n_embd, config.n_layer, config.n_head, config.vocab_size
    per_param, per_act, per_attn, per_logit = MEMORY_COEFFICIENTS
    memory = (per_param * params + per_act * B * T * C * L + per_attn * B * H * T * T * L + per_logit * B * T * V
              + MEMORY_OVERHEAD)
    # 6 FLOPs per parameter and token (forward 2, backward 4), plus q @ k^T and weights @ v over the T x T square
    step_flops = 6.0 * params * B * T + 12.0 * L * B * T * T * C
    evaluations = steps // eval_interval + 1 if eval_interval else 0
    total_flops = steps * step_flops + evaluations * 2 * eval_iters * step_flops / 3
    return Estimate(params=params, memory_bytes=int(memory), step_flops=step_flops, seconds=total_flops / FLOPS_PER_S)


def upload_widget_mb(limit_bytes: int) -> int:
    """The ``max_upload_size`` (megabytes) of a ``file_uploader`` for a limit of ``limit_bytes``.

    Raises:
        ValueError: if the limit is not a positive whole number of :data:`UPLOAD_UNIT` (the widget could
            then not state it).
    """
    if limit_bytes < UPLOAD_UNIT or limit_bytes % UPLOAD_UNIT:
        raise ValueError(f"an upload limit must be a positive multiple of {UPLOAD_UNIT} bytes, got {limit_bytes}")
    return limit_bytes // UPLOAD_UNIT


def size_refusals(config: GPTConfig) -> list[Refusal]:
    """The caps a model config exceeds (sizes and parameter count), in a fixed order; [] when it fits."""
    out = [Refusal(name, getattr(config, name), cap) for name, cap in
           (("n_layer", MAX_N_LAYER), ("n_embd", MAX_N_EMBD), ("block_size", MAX_BLOCK_SIZE), ("vocab_size", MAX_VOCAB))
           if getattr(config, name) > cap]
    if not out:  # the parameter count lists every layer's shapes: only for sizes within the caps
        params = config_params(config)
        if params > MAX_PARAMS:
            out.append(Refusal("params", params, MAX_PARAMS))
    return out


def training_refusals(config: GPTConfig, batch_size: int, steps: int, eval_interval: int = 0,
                      eval_iters: int = 0) -> tuple[Estimate | None, list[Refusal]]:
    """The estimate of a training and every cap it exceeds.

    Returns:
        ``(estimate, refusals)``: the estimate is None when the sizes alone are refused (then
        nothing is counted); refusals is [] when the training may start.
    """
    refusals = size_refusals(config)
    refusals += [Refusal(name, value, cap) for name, value, cap in
                 (("batch_size", batch_size, MAX_BATCH_SIZE), ("steps", steps, MAX_STEPS)) if value > cap]
    if refusals:
        return None, refusals
    est = estimate(config, batch_size, steps, eval_interval, eval_iters)
    if est.memory_bytes > MAX_TRAINING_BYTES:
        refusals.append(Refusal("memory", est.memory_bytes, MAX_TRAINING_BYTES))
    if est.seconds > MAX_JOB_WALL_S:
        refusals.append(Refusal("time", est.seconds, MAX_JOB_WALL_S))
    return est, refusals


def largest_batch(config: GPTConfig, steps: int, eval_interval: int = 0, eval_iters: int = 0,
                  batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)) -> int | None:
    """The largest of ``batch_sizes`` whose training fits every cap, or None when none does."""
    fitting = [b for b in batch_sizes if not training_refusals(config, b, steps, eval_interval, eval_iters)[1]]
    return max(fitting) if fitting else None

