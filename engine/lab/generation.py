"""Generation in the Lab: a reader's prompt checked and cropped, then continued by the model.

:func:`prepare_prompt` keeps what the model can read (its vocabulary, its last block_size characters) and says
what it dropped; :func:`generate` draws the continuation with ``engine.sampling.generate_ids`` (the project's one
sampling rule), optionally inside a poem form (``engine.lab.poem_forms``). Results are frozen dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine import sampling
from engine.gpt import eval_mode
from engine.lab import settings

#: Where a model comes from.
from engine.lab.models import LabModel
from engine.lab.poem_forms import FormError, PoemForm, poem_rule
from engine.sampling import check_sampling
from engine.tokenizer import CharTokenizer


@dataclass(frozen=True)
class Prompt:
    """How a prompt reaches the model.

    Attributes:
        ids: token ids, never empty.
        kept: the characters the model reads, one per id (none when it starts from a newline or its
            first character), as the reader typed them: without an unknown token the prompt less its
            unknown characters; with one, the whole prompt (the model reads the unknown token where
            an unknown character stands, which ``tokenizer.decode`` would write as U+FFFD).
        unknown: the characters outside the vocabulary, in order of first appearance.
        started_from: "prompt", "newline" (nothing known: the model starts from a newline) or
            "first_character" (nothing known and no newline in the vocabulary).
        cropped: how many leading characters the model does not see (it reads the last block_size).
        given: the prompt as the reader typed it.
        as_unk: True when the unknown characters reach the model as its unknown token (a vocabulary
            with one, ``tokenizer.unk_id``), False when they are dropped.
        read_as_unk: how many of ``ids`` are the unknown token (each character outside the vocabulary, and
            the token's own character if typed); 0 without one. ``len(ids) - read_as_unk`` characters are
            known ones.
    """

    ids: tuple[int, ...]
    kept: str
    unknown: tuple[str, ...]
    started_from: str
    cropped: int
    given: str
    as_unk: bool
    read_as_unk: int


def prepare_prompt(tokenizer: CharTokenizer, prompt: str, block_size: int) -> Prompt:
    """Unknown characters dropped or read as the unknown token, an empty prompt replaced, the context's crop counted.

    A vocabulary with an unknown token reads every character outside it as that token (``CharTokenizer.encode``),
    as the model saw the corpus's rare characters in training; one without drops them.

    Args:
        tokenizer: the model's vocabulary.
        prompt: the reader's text, at most ``settings.MAX_PROMPT_CHARS`` characters.
        block_size: the model's context_length.

    Raises:
        ValueError: for a prompt longer than ``settings.MAX_PROMPT_CHARS`` (checked before it is encoded).
    """
    if len(prompt) > settings.MAX_PROMPT_CHARS:
        raise ValueError(f"a prompt of {len(prompt)} characters is longer than {settings.MAX_PROMPT_CHARS}")
    unknown = tokenizer.unknown_chars(prompt)
    ids = tokenizer.encode(prompt, errors="drop")
    as_unk = tokenizer.unk_id is not None
    kept = prompt if as_unk else "".join(c for c in prompt if c in tokenizer.stoi)
    read_as_unk = ids.count(tokenizer.unk_id) if as_unk else 0
    started_from = "prompt"
    if not ids:
        if "\n" in tokenizer.stoi:
            ids, started_from = [tokenizer.stoi["\n"]], "newline"
        else:
            ids, started_from = [0], "first_character"
    return Prompt(tuple(ids), kept, tuple(unknown), started_from, max(0, len(ids) - block_size), prompt, as_unk,
                  read_as_unk)


@dataclass(frozen=True)
class Generation:
    """A continued prompt: :class:`Prompt` plus the new characters.

    Attributes:
        prompt: how the prompt reached the model.
        new: the generated characters only.
        greedy: True when temperature 0 picked the most likely character at each step.
        form: the poem form imposed while sampling, or None.
    """

    prompt: Prompt
    new: str
    greedy: bool
    form: PoemForm | None = None

    @property
    def text(self) -> str:
        """The prompt as the reader typed it followed by the new characters (no U+FFFD where the model read its
        unknown token, and the characters it dropped still shown)."""
        return self.prompt.given + self.new


def banned_ids(tokenizer: CharTokenizer) -> tuple[int, ...]:
    """Ids generation never emits: the unknown token's, if the vocabulary has one (it stands for many
    rare characters and shows as U+FFFD), else none."""
    return () if tokenizer.unk_id is None else (tokenizer.unk_id,)


class NonFiniteLogitsError(ValueError):
    """The model's logits hold NaN or infinite values, so no character can be sampled from them."""


def generate(
    lab_model: LabModel,
    prompt: str,
    max_new_tokens: int | None = 60,
    temperature: float = 0.8,
    top_k: int | None = 20,
    seed: int = 0,
    top_p: float = 1.0,
    form: PoemForm | None = None,
) -> Generation:
    """Continues a prompt with a model, as the engine documents (``engine.sampling.generate_ids``).

    Unknown characters are read as the unknown token (a vocabulary with one) or dropped, and
    reported (:func:`prepare_prompt`); a prompt longer than block_size is fed to the
    model cropped to its last block_size characters (``engine.sampling.generate_ids`` crops at every step).
    Temperature 0 means greedy: the most likely character at each step (deterministic, and a
    small model often falls into a loop then: :func:`find_loop` finds it); any temperature > 0
    samples from a private generator seeded with ``seed``, so the same settings give the same text.
    Every character is drawn by ``engine.sampling.sampling_probs`` (temperature, top-k, top-p), the rule
    :func:`next_char_probs` shows. The logits of the prompt are checked before anything is sampled: a
    model whose weights overflow is reported, not sampled. The unknown token (``tokenizer.unk_id``,
    the rare characters' shared token) is never emitted. Generation uses the KV cache
    (``engine.sampling.generate_ids(use_cache=True)``: the same tokens as without it).

    With a ``form``, the kept prompt is the start of the poem and the form is imposed while
    sampling (see :class:`PoemForm`): only letters inside a line, the line's end mark exactly
    after ``line_length`` characters, a newline after each couplet, and the end after ``n_lines``.

    Args:
        max_new_tokens: the most characters to add (>= 0). None: exactly what the form needs to end
            its last line (only with ``form.n_lines``).
        top_k: None (or 0) keeps every character.
        top_p: nucleus sampling's mass in (0, 1]; 1 keeps every character.

    Raises:
        ValueError: for sampling settings ``engine.sampling.check_sampling`` refuses, a negative
            max_new_tokens, None without a number of lines, or a prompt over ``settings.MAX_PROMPT_CHARS``.
        FormError: if the vocabulary cannot write the form, the prompt does not start a poem of
            that form, or max_new_tokens is shorter than the form needs (``reason`` says which).
        NonFiniteLogitsError: if the model's logits are NaN or infinite.
    """
    top_k = top_k or None
    check_sampling(temperature, top_k, top_p)
    model, tokenizer = lab_model.model, lab_model.tokenizer
    info = prepare_prompt(tokenizer, prompt, model.config.block_size)
    rule = None
    if form is not None:
        rule, needed = poem_rule(tokenizer, form, info.kept)
        if max_new_tokens is None and form.n_lines is not None:
            max_new_tokens = needed
        elif form.n_lines is not None and isinstance(max_new_tokens, int) and max_new_tokens < needed:
            raise FormError("length", f"the form needs up to {needed} new characters, got {max_new_tokens}", needed)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an integer >= 0 (None only with a number of lines), "
                         f"got {max_new_tokens!r}")
    device = next(model.parameters()).device
    idx = torch.tensor([info.ids], dtype=torch.long, device=device)  # (1, T)
    with torch.no_grad(), eval_mode(model):
        logits = model(idx[:, -model.config.block_size :]).logits  # (1, T', V) with T' <= block_size
    if not bool(torch.isfinite(logits).all()):
        raise NonFiniteLogitsError("the model's logits hold NaN or infinite values")
    generator = torch.Generator(device=device).manual_seed(seed)
    try:
        out = sampling.generate_ids(model, idx, max_new_tokens, temperature=temperature, top_k=top_k,
                                    generator=generator, use_cache=True, banned_ids=banned_ids(tokenizer), top_p=top_p,
                                    allowed_next=rule)
    except RuntimeError as exc:  # torch.multinomial on NaN/inf probabilities, past the checked prompt
        raise NonFiniteLogitsError(f"sampling failed: {exc}") from exc
    new = tokenizer.decode(out[0, idx.size(1) :].tolist())  # (T + n,) -> the n new ids
    return Generation(info, new, temperature == 0, form)
