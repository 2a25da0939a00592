"""The Lab's rules: which settings a reader may choose, and what must hold before a training starts.

The page (``views/lab.py``) draws its controls from these ranges and asks :func:`plan_training`
whether a training may start; the runner asks again before it queues one. Caps and estimates come
from :mod:`engine.budget`; the schedule from ``TrainConfig.for_steps``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine import budget, positions
from engine.corpus import Corpus
from engine.gpt import GPTConfig
from engine.presets import DEFAULT_PRESET, preset
from engine.training import TrainConfig

#: Choices of the Lab's controls (within the caps of engine.budget).
N_LAYERS = (1, budget.MAX_N_LAYER)
N_EMBDS = (16, 32, 48, 64, 96, 128, 192, 256)
BLOCK_SIZES = (8, 16, 32, 64, 128, 256)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
LEARNING_RATES = (1e-4, 3e-4, 5e-4, 1e-3, 2e-3, 3e-3, 5e-3, 1e-2)
STEPS = (1, budget.MAX_STEPS)
DROPOUT = (0.0, 0.5)
SEEDS = (0, 99_999)
DEFAULT_SEED = 1337
#: The longest prompt (and line to read) the Lab takes, in characters: twice the longest context a Lab model may
#: have (``budget.MAX_BLOCK_SIZE``), so a prompt longer than the model's context still shows what the crop does,
#: while a link cannot hand the tokenizer and the poem form an unbounded text. The page's text inputs cut there.
MAX_PROMPT_CHARS = 2 * budget.MAX_BLOCK_SIZE
#: Generation controls: new characters, temperature, top-k (0 = all characters).
GENERATE_LENGTH = (1, 300)
TEMPERATURE = (0.0, 2.0)
TOP_K = (0, 5000)
#: Top-p (nucleus sampling): the probability mass of the most likely characters kept (1 = all characters).
TOP_P = (0.05, 1.0)
#: Poem forms: characters per line (5: 五言, 7: 七言), lines (句) per poem (an even number: the corpus's couplets),
#: and the shortest and longest line the model may write when only the number of lines is chosen.
POEM_LINE_LENGTHS = (5, 7)
POEM_LINES = (2, 16)
POEM_FREE_LINE = (3, 9)


def head_choices(n_embd: int, pos_encoding: str) -> tuple[int, ...]:
    """Head counts allowed for ``n_embd``: its divisors, and when q and k are rotated (RoPE) only those giving an
    even head_dim.

    Raises:
        ValueError: for n_embd < 1 or an unknown pos_encoding.
    """
    if n_embd < 1:
        raise ValueError(f"n_embd must be >= 1, got {n_embd}")
    encoding = positions.encoding(pos_encoding)
    return tuple(h for h in range(1, n_embd + 1)
                 if n_embd % h == 0 and (not encoding.rotates_qk or (n_embd // h) % 2 == 0))


def default_heads(n_embd: int, pos_encoding: str, wanted: int | None = None) -> int:
    """``wanted`` when allowed, else the default preset's head count when allowed, else the first choice."""
    choices = head_choices(n_embd, pos_encoding)
    for h in (wanted, preset(DEFAULT_PRESET).n_head):
        if h in choices:
            return h
    return choices[0]


@dataclass(frozen=True)
class Problem:
    """Why a training may not start: a stable key for the page, with the value and the limit.

    Attributes:
        key: "no_corpus", "block_size" (longer than the text allows), or a key of
            ``engine.budget.Refusal`` ("n_layer", "memory", "time" ...).
        value, limit: what was asked for and the most allowed (bytes for "memory", seconds for "time").
    """

    key: str
    value: float = 0
    limit: float = 0


@dataclass(frozen=True)
class TrainingPlan:
    """A training the page may start, or the reasons it may not.

    Attributes:
        model: the GPT config with the corpus's vocab_size (vocab 1 without a corpus).
        train: the training config (``TrainConfig.for_steps``).
        estimate: memory and time (None when the sizes alone are refused).
        problems: empty when the training may start.
        fitting_batch: the largest batch size that fits the caps with these other settings
            (None when none does), for the page to suggest.
    """

    model: GPTConfig
    train: TrainConfig
    estimate: budget.Estimate | None
    problems: tuple[Problem, ...]
    fitting_batch: int | None

    @property
    def ok(self) -> bool:
        """True when the training may start."""
        return not self.problems


def plan_training(model: GPTConfig, corpus: Corpus | None, steps: int, batch_size: int, learning_rate: float,
                  seed: int = DEFAULT_SEED, device: str | None = None) -> TrainingPlan:
    """Checks a Lab training before it starts: a text, a block_size the text allows, the caps.

    Args:
        model: the model's sizes (vocab_size is replaced by the corpus's).
        corpus: the training text, or None when the reader has none yet.
        steps, batch_size, learning_rate, seed, device: the training settings.

    Raises:
        ValueError: for settings no control can produce (steps < 1, an invalid learning rate).
    """
    model = dataclasses.replace(model, vocab_size=corpus.vocab_size if corpus is not None else 1)
    train = TrainConfig.for_steps(steps, batch_size, learning_rate=learning_rate, seed=seed, device=device)
    problems: list[Problem] = []
    if corpus is None:
        problems.append(Problem("no_corpus"))
    elif model.block_size > corpus.max_block_size:
        problems.append(Problem("block_size", model.block_size, corpus.max_block_size))
    estimate, refusals = budget.training_refusals(model, batch_size, steps, train.eval_interval, train.eval_iters)
    problems += [Problem(r.key, r.value, r.limit) for r in refusals]
    fitting = None
    if any(r.key in ("memory", "time") for r in refusals):
        fitting = budget.largest_batch(model, steps, train.eval_interval, train.eval_iters, BATCH_SIZES)
    return TrainingPlan(model, train, estimate, tuple(problems), fitting)

