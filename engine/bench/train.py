"""``python -m engine.bench train``: training throughput of the course's GPT against the matmul ceiling.

1. The machine (CPU model, ISA flags, torch threads) and the ceiling: fp32 GFLOP/s of a square
   matmul (2 n^3 FLOPs), timed with ``torch.utils.benchmark``, measured before and after the training
   rows in the same run (the machine is shared, so the two can differ; the table uses their mean).
2. For each dropout setting (attention-weight dropout, residual/embedding dropout) and batch size:
   median wall time of a full training step (batch, forward, loss, backward, gradient clipping,
   fused AdamW step) after warm-up steps, giving tokens/s, achieved GFLOP/s and % of the ceiling.
   The settings' steps alternate (interleaved), so a busy spell on a shared machine slows all alike.
3. The T-scaling exponent of each setting: the same step at several sequence lengths T (block_size
   set to T, batch fixed), and the slope of log(step time) against log(T) by least squares. Linear
   layers cost T; the attention scores T^2; attention-weight dropout forces SDPA off its fused
   kernel onto the math path, which stores the T x T weights, so its exponent is the one that grows.

How FLOPs are counted, per training token (the convention of Kaplan et al. 2020 / PaLM):
``6 * N_matmul + 12 * n_layer * block_size * n_embd``, where N_matmul counts the weights of every
Linear layer (qkv, proj, MLP, lm_head; no biases, LayerNorm or embedding lookups) and the second
term is q @ k^T and attn_weights @ v over the full T x T square (forward 4 T C per layer, backward
twice that), although the causal half above the diagonal is wasted work. Elementwise work
(softmax, GELU, LayerNorm, dropout, AdamW) is not counted: it is the overhead that keeps the
achieved number under the ceiling.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path

import torch

from engine.bench.attention import machine_info, time_interleaved
from engine.bench.machine import header_lines, median_seconds
from engine.corpus import load_corpus
from engine.device import configure_threads, pick_device
from engine.gpt import GPT, GPTConfig, param_shapes
from engine.presets import preset
from engine.training import TrainConfig, make_optimizer

#: This command prints the machine and its measured ceiling itself (see engine.bench.__main__).
PRINTS_MACHINE = True


def matmul_gflops(n: int = 1024, device: torch.device | str = "cpu", min_run_time: float = 0.5) -> float:
    """Median fp32 GFLOP/s of an (n, n) @ (n, n) matmul on ``device`` (``torch.utils.benchmark``, which
    synchronises CUDA)."""
    device = torch.device(device)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)

    def run() -> None:
        a @ b
        _sync(device)

    return 2 * n**3 / median_seconds(run, min_run_time) / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def training_flops_per_token(config: GPTConfig) -> int:
    """Matmul FLOPs of one training token (forward + backward), counted as the module docstring says."""
    linear = (".qkv.weight", ".proj.weight", ".fc.weight", "lm_head.weight")  # every nn.Linear's weight
    n_matmul = sum(math.prod(shape) for name, shape in param_shapes(config).items() if name.endswith(linear))
    attention = 12 * config.n_layer * config.block_size * config.n_embd
    return 6 * n_matmul + attention


def training_step_fn(config: GPTConfig, batch_size: int, manual: bool, device: torch.device) -> Callable[[], None]:
    """One full training step of a fresh seeded model on tang300 batches, as a function to time.

    ``manual`` takes the attention path that writes out and returns the attention weights;
    otherwise ``F.scaled_dot_product_attention`` runs (the trainer's path).
    """
    corpus = load_corpus("tang300")
    config = GPTConfig(**{**config.to_dict(), "vocab_size": corpus.vocab_size})
    torch.manual_seed(0)
    model = GPT(config).to(device).train()
    optimizer = make_optimizer(model, TrainConfig())
    generator = torch.Generator().manual_seed(0)

    def step() -> None:
        x, y = corpus.get_batch("train", batch_size, config.block_size, generator, device)  # (B, T)
        loss = model(x, y, return_weights=manual).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss.item()
        _sync(device)

    return step


def scaling_exponent(seq_lens: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) against log(seq_len): step time ~ T^slope. None with fewer than 2 lengths."""
    if len(seq_lens) < 2:
        return None
    xs = [math.log(t) for t in seq_lens]
    ys = [math.log(s) for s in seconds]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False)) / sum((x - mx) ** 2 for x in xs)


def _setting_label(attn: float, resid: float) -> str:
    return f"attn {attn:g} / resid {resid:g}"


#: Dropout settings timed by default (attention-weight, residual): dropout 0.1 everywhere, attention-weight
#: dropout off, both off; ``engine.lab.settings.dropout_price`` reads these three rows.
DEFAULT_SETTINGS = ((0.1, 0.1), (0.0, 0.1), (0.0, 0.0))


def _parse_settings(text: str) -> list[tuple[float, float]]:
    """ "0.1:0.1,0:0.1" -> [(0.1, 0.1), (0.0, 0.1)]: attention-weight dropout : residual dropout."""
    settings = []
    for part in text.split(","):
        attn, _, resid = part.partition(":")
        settings.append((float(attn), float(resid if resid else attn)))
    return settings


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.bench train", description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="course")
    p.add_argument("--batch-sizes", default="16", help="comma-separated batch sizes (default: 16)")
    p.add_argument("--settings", default=None,
                   help="comma-separated attn:resid dropout pairs (default: 0.1:0.1,0:0.1,0:0, and the preset's "
                        "own pair if it is another)")
    p.add_argument("--seq-lens", default="64,128,256",
                   help="sequence lengths of the T-scaling fit (default 64,128,256)")
    p.add_argument("--manual", action="store_true", help="also time the manual attention path at block_size")
    p.add_argument("--steps", type=int, default=6, help="timed steps per row (median reported)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per row")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores but one)")
    p.add_argument("--device", default=None)
    p.add_argument("--matmul-n", type=int, default=1024)
    p.add_argument("--json", default="runs/bench_train.json", help="where to write the results")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 0:
        p.error("--steps must be at least 1 and --warmup at least 0")
    configure_threads(args.threads)
    device = pick_device(args.device)
    base = preset(args.preset, vocab_size=load_corpus("tang300").vocab_size)
    flops_per_token = training_flops_per_token(base)
    if args.settings:
        settings = _parse_settings(args.settings)
    else:
        settings = list(dict.fromkeys([*DEFAULT_SETTINGS, (base.attn_dropout_rate, base.resid_dropout_rate)]))
    seq_lens = sorted({int(t) for t in args.seq_lens.split(",")})

    machine = {**machine_info(), "device": str(device)}
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    ceiling_before = matmul_gflops(args.matmul_n, device=device)
    rows = []
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        fns = {}
        for attn, resid in settings:
            config = preset(args.preset, vocab_size=base.vocab_size, attn_dropout=attn, resid_dropout=resid)
            fns[("sdpa", attn, resid)] = training_step_fn(config, batch_size, False, device)
            if args.manual:
                fns[("manual", attn, resid)] = training_step_fn(config, batch_size, True, device)
        samples = time_interleaved(fns, repeats=args.steps, warmup=args.warmup)  # settings alternate step by step
        for (path, attn, resid), times in samples.items():
            step_s = statistics.median(times)
            tokens_per_s = batch_size * base.block_size / step_s
            rows.append({"path": path, "attn_dropout": attn, "resid_dropout": resid, "batch_size": batch_size,
                         "step_ms": step_s * 1e3, "best_step_ms": min(times) * 1e3,
                         "tokens_per_s": tokens_per_s, "gflops": tokens_per_s * flops_per_token / 1e9,
                         "best_tokens_per_s": batch_size * base.block_size / min(times)})
    scaling_batch = int(args.batch_sizes.split(",")[0])
    scaling = {}
    for T in seq_lens:  # per length, the settings alternate
        fns = {(attn, resid): training_step_fn(
            preset(args.preset, vocab_size=base.vocab_size, block_size=T, attn_dropout=attn, resid_dropout=resid),
            scaling_batch, False, device) for attn, resid in settings}
        for key, times in time_interleaved(fns, repeats=args.steps, warmup=args.warmup).items():
            scaling.setdefault(key, []).append((statistics.median(times), min(times)))
    ceiling_after = matmul_gflops(args.matmul_n, device=device)
    ceiling = (ceiling_before + ceiling_after) / 2
    for row in rows:
        row["pct_of_ceiling"] = 100 * row["gflops"] / ceiling
        row["best_pct_of_ceiling"] = 100 * row["best_tokens_per_s"] * flops_per_token / 1e9 / ceiling
    scaling_rows = []
    for (attn, resid), pairs in scaling.items():
        medians, bests = [m for m, _ in pairs], [b for _, b in pairs]
        scaling_rows.append({
            "attn_dropout": attn, "resid_dropout": resid, "batch_size": scaling_batch, "seq_lens": seq_lens,
            "step_ms": [1e3 * s for s in medians], "best_step_ms": [1e3 * s for s in bests],
            "tokens_per_s": [scaling_batch * T / s for T, s in zip(seq_lens, medians, strict=False)],
            "exponent": scaling_exponent(seq_lens, medians),
            # from the fastest step at each length: on a shared machine the least disturbed estimate
            "exponent_best": scaling_exponent(seq_lens, bests),
        })
    machine["load_average_1min_after"] = machine_info()["load_average_1min"]

    for line in header_lines(machine, ceiling):
        print(line)
    print(f"ceiling before {ceiling_before:.1f}, after {ceiling_after:.1f} GFLOP/s ({args.matmul_n}^2 fp32 matmul); "
          f"load {machine['load_average_1min']} before / {machine['load_average_1min_after']} after "
          "(a busy shared machine lowers every number)")
    print(f"preset {args.preset}: {base}")
    print(f"FLOPs per training token: {flops_per_token:,} (6 N_matmul + 12 n_layer T C)")
    print(f"median of {args.steps} interleaved steps after {args.warmup} warm-up (best step in brackets), "
          f"T = {base.block_size}")
    print(f"{'path':6} {'dropout (attn / resid)':>24} {'batch':>5} {'step ms':>16} {'tokens/s':>9} {'GFLOP/s':>8} "
          f"{'% ceil':>6} {'best tok/s':>10} {'best % ceil':>11}")
    for r in rows:
        print(f"{r['path']:6} {_setting_label(r['attn_dropout'], r['resid_dropout']):>24} {r['batch_size']:5d} "
              f"{r['step_ms']:8.1f} ({r['best_step_ms']:5.0f}) {r['tokens_per_s']:9.0f} {r['gflops']:8.1f} "
              f"{r['pct_of_ceiling']:6.1f} {r['best_tokens_per_s']:10.0f} {r['best_pct_of_ceiling']:11.1f}")
    print(f"\nT-scaling at batch {scaling_batch} (SDPA path): step time ~ T^exponent, "
          f"least squares over T = {seq_lens}")
    print("median step ms (best step ms); exponent from the medians (from the best steps)")
    columns = " ".join(f"{'ms @' + str(T):>16}" for T in seq_lens)
    print(f"{'dropout (attn / resid)':>24} {columns} {'exponent':>15}")

    def fmt(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    for r in scaling_rows:
        cells = " ".join(f"{m:8.1f} ({b:5.0f})" for m, b in zip(r["step_ms"], r["best_step_ms"], strict=False))
        print(f"{_setting_label(r['attn_dropout'], r['resid_dropout']):>24} {cells} "
              f"{fmt(r['exponent']):>6} ({fmt(r['exponent_best'])})")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "train", "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine, "torch": torch.__version__, "preset": args.preset, "config": base.to_dict(),
        "flops_per_token": flops_per_token, "matmul_n": args.matmul_n,
        "ceiling_gflops": {"before": ceiling_before, "after": ceiling_after, "mean": ceiling},
        "timed_steps": args.steps, "warmup_steps": args.warmup, "rows": rows, "t_scaling": scaling_rows,
    }, indent=1) + "\n")
    print(f"written to {out}")
    return 0
