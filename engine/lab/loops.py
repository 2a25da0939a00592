"""The loops greedy decoding falls into: a span that repeats itself to the end (:func:`find_loop`), and the
first of the chapter's prompts on which a model falls into one (:func:`greedy_loop`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine import chapter
from engine.lab import settings
from engine.lab.generation import Generation, generate

#: Where a model comes from.
from engine.lab.models import LabModel

#: A stretch of text counts as a loop when one span follows itself at least twice and the repetition
#: covers at least this many characters (two repeated characters are not yet a loop).
LOOP_MIN_CHARS = 6
#: The longest text :func:`find_loop` searches (it compares every shift of the text with itself).
MAX_LOOP_TEXT = 10_000


@dataclass(frozen=True)
class Loop:
    """A span written again and again: ``text[start:end]`` is span, span, ... (the last copy may be cut).

    Attributes:
        start: index in the searched text of the loop's first character.
        span: the repeated span, as short as the repetition allows.
        covered: characters the repetition covers from ``start`` (at least two copies of the span).
    """

    start: int
    span: str
    covered: int

    @property
    def period(self) -> int:
        """The span's length."""
        return len(self.span)

    @property
    def end(self) -> int:
        """Index one past the loop's last character."""
        return self.start + self.covered

    @property
    def copies(self) -> int:
        """Full copies of the span in the loop (>= 2)."""
        return self.covered // len(self.span)


def find_loop(text: str, min_chars: int = LOOP_MIN_CHARS) -> Loop | None:
    """The longest stretch of ``text`` where one span repeats back to back, or None.

    Greedy decoding is a deterministic function of the last block_size characters, so once the text
    repeats a span the model tends to keep writing it: the reader's "loop". Found by comparing the
    text with itself shifted by every period p: a run of positions where ``text[i] == text[i + p]``
    is a stretch with period p. The loop is the stretch covering the most characters with at least
    two full copies of its span; ties go to the shorter span, then the earlier start.

    Args:
        text: any text, e.g. ``Generation.new`` (positions are then within the new characters).
        min_chars: the fewest characters a loop covers (>= 2).

    Returns:
        The :class:`Loop`, or None when no span repeats over ``min_chars`` characters.

    Raises:
        ValueError: if ``text`` is longer than :data:`MAX_LOOP_TEXT` characters or min_chars < 2.
    """
    if len(text) > MAX_LOOP_TEXT:
        raise ValueError(f"text of {len(text)} characters is longer than {MAX_LOOP_TEXT}")
    if isinstance(min_chars, bool) or not isinstance(min_chars, int) or min_chars < 2:
        raise ValueError(f"min_chars must be an integer >= 2, got {min_chars!r}")
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # (n,) code points
    n = codes.size
    best: tuple[int, int, int] | None = None  # (covered, period, start)
    for period in range(1, n // 2 + 1):
        same = (codes[period:] == codes[:-period]).astype(np.int8)  # (n - period,): text[i] == text[i + period]
        edges = np.diff(np.concatenate(([0], same, [0])))  # (n - period + 1,): +1 where a run starts, -1 past its end
        starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)  # (runs,) each
        if starts.size == 0:
            continue
        run = int(np.argmax(stops - starts))  # the longest run, the earliest of equals
        covered = int(stops[run] - starts[run]) + period
        if covered >= 2 * period and covered >= min_chars and (best is None or covered > best[0]):
            best = (covered, period, int(starts[run]))
    if best is None:
        return None
    covered, period, start = best
    return Loop(start, text[start : start + period], covered)


@dataclass(frozen=True)
class LoopSearch:
    """What :func:`greedy_loop` found: the first of its greedy texts that falls into a loop, or that none does.

    Attributes:
        tried: the prompts decoded, in order ("" when the vocabulary holds none of them whole).
        length: the new characters of each greedy text.
        generation: the first greedy text holding a loop, or None when none does.
        loop: :func:`find_loop` on ``generation.new`` (positions within the new characters), or None.
    """

    tried: tuple[str, ...]
    length: int
    generation: Generation | None
    loop: Loop | None


def greedy_loop(lab_model: LabModel, prompts: tuple[str, ...] = chapter.SAMPLE_PROMPTS,
                length: int = settings.GENERATE_LENGTH[1]) -> LoopSearch:
    """Greedy decoding from each prompt in turn until :func:`find_loop` finds a loop in its new characters.

    Greedy decoding loops late or not at all for a well-trained model, so the page looks for a loop of the model
    in use, at the longest generation it allows, instead of promising one at the reader's settings. A prompt with a
    character outside the vocabulary is skipped (its loop would be one of the unknown token); when every one is,
    the empty prompt is decoded (the model starts from a newline, :func:`prepare_prompt`).

    Args:
        lab_model: the model.
        prompts: the prompts to try, in order (default: the shipped model's sample prompts, the lesson's first).
        length: new characters per greedy text (>= 1).

    Raises:
        ValueError: for length < 1.
        NonFiniteLogitsError: if the model's logits are NaN or infinite.
    """
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ValueError(f"length must be an integer >= 1, got {length!r}")
    tried = tuple(p for p in dict.fromkeys(prompts) if not lab_model.tokenizer.unknown_chars(p)) or ("",)
    for prompt in tried:
        out = generate(lab_model, prompt, length, temperature=0)
        loop = find_loop(out.new)
        if loop is not None:
            return LoopSearch(tried[: tried.index(prompt) + 1], length, out, loop)
    return LoopSearch(tried, length, None, None)
