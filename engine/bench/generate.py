"""``python -m engine.bench generate``: text generation with and without the KV cache.

Times ``engine.sampling.generate_ids`` on the shipped course model (``assets/models/course_tang``) at one
thread by default, in two settings:

* ``within_block``: from a one-character prompt to block_size tokens, so the cache is reused at
  every step (the regime a KV cache is for);
* ``n_chars``: from the same prompt, ``--chars`` new characters (200 by default), crossing
  block_size, where the cached path recomputes the sliding window at every step
  (:class:`engine.sampling.KVCache` says why).

Cached and uncached runs alternate (interleaved repeats, median reported), and each setting first
checks that both paths produce the same tokens, greedy and sampled with the same seed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import time
from pathlib import Path

import torch

from engine.bench.attention import time_interleaved
from engine.bench.machine import header_lines, machine_info, matmul_ceiling
from engine.checkpoint import load_checkpoint
from engine.gpt import GPT
from engine.sampling import generate_ids, kv_cache_steps

#: This command prints the machine and its measured ceiling itself (see engine.bench.__main__).
PRINTS_MACHINE = True

DEFAULT_MODEL = Path(__file__).resolve().parents[2] / "assets" / "models" / "course_tang"
DEFAULT_JSON = Path("runs") / "bench_generate.json"


def same_tokens(model: GPT, idx: torch.Tensor, max_new_tokens: int, seed: int = 0) -> dict[str, bool]:
    """Whether the cached and uncached paths give identical ids, greedy and sampled (temperature 1, top_k 20)."""
    result = {}
    for mode, kwargs in (("greedy", {"temperature": 0.0}), ("sampled", {"temperature": 1.0, "top_k": 20})):
        cached = generate_ids(model, idx, max_new_tokens, seed=seed, use_cache=True, **kwargs)
        uncached = generate_ids(model, idx, max_new_tokens, seed=seed, use_cache=False, **kwargs)
        result[mode] = bool(torch.equal(cached, uncached))
    return result


def bench_setting(model: GPT, idx: torch.Tensor, max_new_tokens: int, repeats: int, warmup: int) -> dict:
    """Median wall time of ``generate`` (greedy) cached and uncached, interleaved; JSON-ready."""
    fns = {
        name: (lambda use_cache=use_cache: generate_ids(model, idx, max_new_tokens, temperature=0.0,
                                                        use_cache=use_cache))
        for name, use_cache in (("uncached", False), ("cached", True))
    }
    samples = time_interleaved(fns, repeats, warmup)
    steps = kv_cache_steps(idx.size(1), max_new_tokens, model.config.block_size)
    medians = {name: statistics.median(s) for name, s in samples.items()}
    return {
        "prompt_tokens": idx.size(1),
        "new_tokens": max_new_tokens,
        "uncached_ms": 1e3 * medians["uncached"],
        "cached_ms": 1e3 * medians["cached"],
        "speedup": medians["uncached"] / medians["cached"],
        "uncached_samples_ms": [1e3 * s for s in samples["uncached"]],
        "cached_samples_ms": [1e3 * s for s in samples["cached"]],
        "keys_reused": sum(s.reused for s in steps),
        "keys_computed": sum(s.computed for s in steps),
        "same_tokens": same_tokens(model, idx, max_new_tokens),
    }


def run(model: GPT, n_chars: int, repeats: int, warmup: int, prompt_id: int = 0) -> dict:
    """Both settings on ``model``, prompt = one token ``prompt_id``."""
    idx = torch.tensor([[prompt_id]], dtype=torch.long)  # (1, 1)
    block = model.config.block_size
    return {
        "within_block": bench_setting(model, idx, block - 1, repeats, warmup),
        "n_chars": bench_setting(model, idx, n_chars, repeats, warmup),
    }


def main(argv: list[str]) -> int:
    """Command line: ``python -m engine.bench generate [--chars N] [--threads N] [--repeats N] [--model DIR]``."""
    p = argparse.ArgumentParser(prog="python -m engine.bench generate", description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="checkpoint folder (default: the shipped course model)")
    p.add_argument("--chars", type=int, default=200, help="characters generated in the long setting (default 200)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per path (default 5)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--json", default=str(DEFAULT_JSON))
    args = p.parse_args(argv)
    if args.chars < 1 or args.threads < 1 or args.repeats < 1 or args.warmup < 0:
        p.error("--chars, --threads and --repeats must be at least 1, --warmup at least 0")
    torch.set_num_threads(args.threads)  # a command-line run, not a request: the process is ours
    started = time.perf_counter()
    model = load_checkpoint(args.model).model.eval()
    prompt_id = 0  # "\n" in the course tokenizer: the Lab's start for an empty prompt
    ceiling_before = matmul_ceiling()
    settings = run(model, args.chars, args.repeats, args.warmup, prompt_id)
    ceiling_after = matmul_ceiling()
    machine = {**machine_info(), "matmul_ceiling_gflops": {"before": ceiling_before, "after": ceiling_after}}
    data = {
        "benchmark": "generate",
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "model": Path(args.model).resolve().name,  # the checkpoint folder's name: no machine's path in a results file
        "config": model.config.to_dict(),
        "settings": {"repeats": args.repeats, "warmup": args.warmup, "statistic": "median, interleaved",
                     "seconds_total": round(time.perf_counter() - started, 1)},
        "results": settings,
    }
    for line in header_lines(machine, (ceiling_before + ceiling_after) / 2):
        print(line)
    print(f"ceiling before {ceiling_before:.1f}, after {ceiling_after:.1f} GFLOP/s")
    print(f"{'setting':<14} {'prompt':>6} {'new':>5} {'uncached ms':>12} {'cached ms':>10} {'speedup':>8} "
          f"{'k/v reused':>10} {'computed':>9}  same tokens")
    for name, r in settings.items():
        same = ", ".join(f"{mode} {'yes' if ok else 'NO'}" for mode, ok in r["same_tokens"].items())
        print(f"{name:<14} {r['prompt_tokens']:>6} {r['new_tokens']:>5} "
              f"{r['uncached_ms']:>12.1f} {r['cached_ms']:>10.1f} "
              f"{r['speedup']:>7.2f}× {r['keys_reused']:>10} {r['keys_computed']:>9}  {same}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0 if all(all(r["same_tokens"].values()) for r in settings.values()) else 1
