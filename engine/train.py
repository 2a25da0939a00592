"""Command line training: ``python -m engine.train --preset course --corpus tang --steps 1000 --out DIR``.

Prints the run's settings, progress every ``--log-interval`` steps, each evaluation, the final
train/val loss and the wall time, then a few generated lines (greedy and sampled), and writes a
checkpoint folder to ``--out`` (``engine.checkpoint.save_checkpoint``). Ctrl-C stops the run
cleanly: it still evaluates, prints and saves what it has.

``--resume DIR`` makes a long run survive interruptions: after every evaluation the run's whole
state goes to DIR (``engine.training.save_train_state``), and the same command started again
continues from there with the same schedule.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
import time

from engine.chapter import SAMPLE_PROMPTS
from engine.checkpoint import save_checkpoint
from engine.corpus import BUILTIN_CORPORA, DEFAULT_CORPUS, FALLBACK_NAME, corpus_from_bytes, load_corpus
from engine.device import configure_threads, describe_device, pick_device
from engine.presets import PRESETS, preset
from engine.sampling import generate_text
from engine.training import Callbacks, TrainConfig, train


def build_parser() -> argparse.ArgumentParser:
    defaults = TrainConfig()
    p = argparse.ArgumentParser(prog="python -m engine.train", description="Train the course's character-level GPT.")
    p.add_argument("--preset", default="course", choices=sorted(PRESETS), help="model size (default: course)")
    p.add_argument("--corpus", default=DEFAULT_CORPUS,
                   help=f"{', '.join(BUILTIN_CORPORA + (FALLBACK_NAME,))}, or a path to a UTF-8 text file")
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.learning_rate, help="peak learning rate")
    p.add_argument("--warmup-steps", type=int, default=None, help="default: TrainConfig.for_steps's schedule")
    p.add_argument("--dropout", type=float, default=None, help="override the preset's dropout")
    p.add_argument("--eval-interval", type=int, default=None, help="default: TrainConfig.for_steps's schedule")
    p.add_argument("--eval-iters", type=int, default=None, help="default: TrainConfig.for_steps's schedule")
    p.add_argument("--log-interval", type=int, default=50, help="print the batch loss every N steps")
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--device", default=None, help="cpu, cuda, mps (default: best available)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores but one)")
    p.add_argument("--out", default=None, help="checkpoint folder to write (nothing is saved without it)")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="write a resumable state to DIR after every evaluation, and continue from it if it is there")
    p.add_argument("--sample-chars", type=int, default=48, help="characters generated per sample line")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_threads(args.threads)
    if args.corpus in BUILTIN_CORPORA or args.corpus == FALLBACK_NAME:
        corpus = load_corpus(args.corpus)
    else:
        with open(args.corpus, "rb") as f:
            corpus = corpus_from_bytes(f.read(), name=args.corpus)
    if corpus.message:
        print(f"note: {corpus.message}")
    overrides = {} if args.dropout is None else {"dropout": args.dropout}
    model_config = preset(args.preset, vocab_size=corpus.vocab_size, **overrides)
    schedule = {name: value for name, value in (("warmup_steps", args.warmup_steps),
                                                 ("eval_interval", args.eval_interval),
                                                 ("eval_iters", args.eval_iters)) if value is not None}
    train_config = TrainConfig.for_steps(args.steps, args.batch_size, learning_rate=args.lr, seed=args.seed,
                                         device=args.device, **schedule)
    device = pick_device(args.device)
    print(f"corpus {corpus.name}: {len(corpus.records)} records, {len(corpus.text)} characters, "
          f"vocab {corpus.vocab_size}, train {len(corpus.train_ids)} / val {len(corpus.val_ids)} tokens")
    print(f"model {args.preset}: {model_config}")
    print(f"training {train_config.steps} steps of batch {train_config.batch_size} x {model_config.block_size} tokens "
          f"on {describe_device(device)}, peak lr {train_config.learning_rate}")

    if args.resume:
        print(f"resumable state in {args.resume} (continued from it if it holds one)")
    started = time.perf_counter()

    def on_step(step: int, loss: float, tokens_per_s: float) -> None:
        if step % args.log_interval == 0:
            print(f"step {step:5d}/{train_config.steps}  loss {loss:.4f}  {tokens_per_s:8.0f} tok/s  "
                  f"{time.perf_counter() - started:6.1f} s", flush=True)

    def on_eval(step: int, train_loss: float, val_loss: float) -> None:
        print(f"eval {step:5d}: train {train_loss:.4f}  val {val_loss:.4f}", flush=True)

    stop = threading.Event()
    in_main_thread = threading.current_thread() is threading.main_thread()  # signal handlers live there only
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set()) if in_main_thread else None
    try:
        result = train(model_config, corpus, train_config, callbacks=Callbacks(on_step, on_eval), stop=stop,
                       state_dir=args.resume)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)

    state = "stopped" if result.stopped else "done"
    print(f"{state} after {result.steps_done} steps in {result.wall_s:.1f} s "
          f"({result.tokens_per_s:.0f} tok/s): train loss {result.final_train_loss:.4f}, "
          f"val loss {result.final_val_loss:.4f}")
    prompts = [p for p in SAMPLE_PROMPTS if not corpus.tokenizer.unknown_chars(p)] or [""]
    for prompt in prompts:
        greedy = generate_text(result.model, corpus.tokenizer, prompt, args.sample_chars, temperature=0)
        print(f"greedy  {greedy!r}")
        sampled = generate_text(result.model, corpus.tokenizer, prompt, args.sample_chars,
                                temperature=0.8, top_k=20, seed=args.seed)
        print(f"sampled {sampled!r}  (temperature 0.8, top_k 20, seed {args.seed})")
    if args.out:
        summary = result.summary()
        summary["command"] = "python -m engine.train " + shlex.join(sys.argv[1:] if argv is None else argv)
        summary["preset"] = args.preset
        folder = save_checkpoint(args.out, result.model, result.tokenizer, summary)
        print(f"checkpoint written to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
