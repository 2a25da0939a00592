"""``python -m engine.bench train``: training throughput of the course's GPT against the matmul ceiling.

1. The ceiling: fp32 GFLOP/s of a large square matmul (2 n^3 FLOPs for n x n @ n x n), median
   of several runs, measured before and after the training rows (the machine is shared, so the
   two can differ; the table uses their mean).
2. For each row (attention path x dropout x batch size): median wall time of a full training step
   (batch, forward, loss, backward, gradient clipping, fused AdamW step) after warm-up steps,
   giving tokens/s and achieved GFLOP/s. The manual and SDPA steps alternate, so a busy spell
   on a shared machine slows both alike; the best step is printed beside the median.

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
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from engine.bench.attention import machine_info, time_interleaved
from engine.corpus import load_corpus
from engine.device import configure_threads, pick_device
from engine.gpt import GPT, GPTConfig, preset
from engine.training import TrainConfig, make_optimizer


def matmul_gflops(n: int = 2048, repeats: int = 7, device: torch.device | str = "cpu") -> float:
    """Median fp32 GFLOP/s of an (n, n) @ (n, n) matmul on ``device``."""
    device = torch.device(device)
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        a @ b
        _sync(device)
        times.append(time.perf_counter() - t0)
    return 2 * n**3 / statistics.median(times) / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def training_flops_per_token(config: GPTConfig) -> int:
    """Matmul FLOPs of one training token (forward + backward), counted as the module docstring says."""
    model = GPT(config)
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    attention = 12 * config.n_layer * config.block_size * config.n_embd
    return 6 * n_matmul + attention


def training_step_fn(config: GPTConfig, batch_size: int, manual: bool, device: torch.device) -> Callable[[], None]:
    """One full training step of a fresh seeded model on tang300 batches, as a function to time.

    ``manual`` takes the attention path that writes out and returns the attention weights;
    otherwise ``F.scaled_dot_product_attention`` runs.
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


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.bench train", description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="course")
    p.add_argument("--batch-sizes", default="16,32", help="comma-separated batch sizes (default: 16,32)")
    p.add_argument("--dropouts", default=None, help="comma-separated dropout rates (default: the preset's, and 0)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per row")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps per row")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores but one)")
    p.add_argument("--device", default=None)
    p.add_argument("--matmul-n", type=int, default=2048)
    p.add_argument("--json", default="runs/bench_train.json", help="where to write the results")
    args = p.parse_args(argv)
    configure_threads(args.threads)
    device = pick_device(args.device)
    base = preset(args.preset, vocab_size=load_corpus("tang300").vocab_size)
    flops_per_token = training_flops_per_token(base)
    dropouts = [float(d) for d in args.dropouts.split(",")] if args.dropouts else sorted({base.dropout, 0.0}, reverse=True)

    machine = {**machine_info(), "device": str(device)}
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    ceiling_before = matmul_gflops(args.matmul_n, device=device)
    rows = []
    for batch_size in (int(b) for b in args.batch_sizes.split(",")):
        for dropout in dropouts:
            config = preset(args.preset, vocab_size=base.vocab_size, dropout=dropout)
            paths = ("manual", "sdpa")
            # the two paths alternate step by step, so a busy spell on a shared machine hits both
            samples = time_interleaved(
                {path: training_step_fn(config, batch_size, path == "manual", device) for path in paths},
                repeats=args.steps, warmup=args.warmup,
            )
            for path in paths:
                step_s = statistics.median(samples[path])
                tokens_per_s = batch_size * config.block_size / step_s
                rows.append({"path": path, "dropout": dropout, "batch_size": batch_size,
                             "step_ms": step_s * 1e3, "best_step_ms": min(samples[path]) * 1e3,
                             "tokens_per_s": tokens_per_s, "gflops": tokens_per_s * flops_per_token / 1e9})
    ceiling_after = matmul_gflops(args.matmul_n, device=device)
    ceiling = (ceiling_before + ceiling_after) / 2
    for row in rows:
        row["pct_of_ceiling"] = 100 * row["gflops"] / ceiling
    machine["load_average_1min_after"] = machine_info()["load_average_1min"]

    print(f"machine: {machine.get('gpu', machine['cpu'])}, {machine['torch_threads']} torch threads ({device}), "
          f"torch {torch.__version__}, load average {machine['load_average_1min']} before / "
          f"{machine['load_average_1min_after']} after (a busy shared machine lowers every number)")
    print(f"fp32 matmul ceiling ({args.matmul_n}^2): {ceiling_before:.1f} GFLOP/s before, "
          f"{ceiling_after:.1f} after -> {ceiling:.1f}")
    print(f"preset {args.preset}: {base}")
    print(f"FLOPs per training token: {flops_per_token:,} (6 N_matmul + 12 n_layer T C)")
    print("median of the timed steps (best step in brackets)")
    print(f"{'path':7} {'dropout':>7} {'batch':>5} {'step ms':>16} {'tokens/s':>9} {'GFLOP/s':>8} {'% ceil':>6}")
    for r in rows:
        print(f"{r['path']:7} {r['dropout']:7.2f} {r['batch_size']:5d} {r['step_ms']:8.1f} ({r['best_step_ms']:5.0f}) "
              f"{r['tokens_per_s']:9.0f} {r['gflops']:8.1f} {r['pct_of_ceiling']:6.1f}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "machine": machine, "torch": torch.__version__, "preset": args.preset, "config": base.to_dict(),
        "flops_per_token": flops_per_token, "matmul_n": args.matmul_n,
        "ceiling_gflops": {"before": ceiling_before, "after": ceiling_after, "mean": ceiling},
        "timed_steps": args.steps, "warmup_steps": args.warmup, "rows": rows,
    }, indent=1) + "\n")
    print(f"written to {out}")
    return 0
