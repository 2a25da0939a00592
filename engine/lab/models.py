"""The models the Lab holds, and what a page does with one: uploads, generation, attention maps, position tables.

:class:`LabModel` is what a page keeps for a reader: a trained, uploaded or shipped model with its
tokenizer, training summary and a content id (SHA-256 of the weights), so caches keyed by that id
can never mix two readers' different models. Everything a reader sends (a text, a checkpoint, a
prompt) is checked and bounded here before anything is allocated; results are frozen dataclasses
with stable keys, never sentences.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from engine import budget, chapter
from engine.checkpoint import SHIPPED_MODEL, checkpoint_from_bytes, load_checkpoint
from engine.corpus import Corpus, CorpusError, corpus_from_text, decode_text
from engine.gpt import GPT, GPTConfig, GPTOutput, check_sampling, config_params, eval_mode, sample_next, sampling_probs
from engine.lab import settings
from engine.rng import uses_global_rng
from engine.tokenizer import CharTokenizer
from engine.training import TrainResult

#: Where a model comes from.
SOURCES = ("trained", "uploaded", "shipped")


def corpus_fingerprint(corpus: Corpus) -> str:
    """First 16 hex digits of the SHA-256 of the corpus's training text (UTF-8).

    Two corpora with the same text (and hence the same records, split and vocabulary) get the
    same fingerprint, whatever their names.
    """
    return hashlib.sha256(corpus.text.encode("utf-8")).hexdigest()[:16]


def weights_id(model: GPT, tokenizer: CharTokenizer) -> str:
    """16 hex digits of the SHA-256 of everything that sets a model's output: config, vocabulary, weights.

    Equal ids mean equal models: caches of generated text and attention maps are keyed by it, so two
    checkpoints with the same weights and different vocabularies (the same ids, other characters) get two ids.
    """
    h = hashlib.sha256(json.dumps(model.config.to_dict(), sort_keys=True).encode("utf-8"))
    h.update(tokenizer.to_json().encode("utf-8", "surrogatepass"))
    for name, tensor in model.state_dict().items():  # a fixed order: the module's registration order
        h.update(name.encode("utf-8"))
        h.update(tensor.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


@dataclass
class LabModel:
    """A model the Lab can use: trained here, uploaded, or shipped with the app.

    Attributes:
        model: the GPT, in eval mode (on the device it was trained or loaded on).
        tokenizer: its character vocabulary.
        summary: JSON-ready training summary (losses, steps, wall time, history ...), as in checkpoints.
        source: one of :data:`SOURCES`.
        model_id: :func:`weights_id`; caches of generations and attention maps are keyed by it.
        stopped: True when training was stopped before its last step.
    """

    model: GPT
    tokenizer: CharTokenizer
    summary: dict
    source: str
    model_id: str
    stopped: bool = False

    @property
    def config(self) -> GPTConfig:
        """The model's GPTConfig."""
        return self.model.config

    @property
    def params(self) -> int:
        """Parameters of the model (``engine.gpt.config_params``)."""
        return config_params(self.config)

    @classmethod
    def from_result(cls, result: TrainResult) -> LabModel:
        """Wraps a ``TrainResult`` (source "trained")."""
        model = result.model
        return cls(model, result.tokenizer, result.summary(), "trained", weights_id(model, result.tokenizer),
                   result.stopped)


def load_shipped(path: str | Path = SHIPPED_MODEL, device: str = "cpu") -> LabModel:
    """Loads the app's shipped checkpoint folder as a :class:`LabModel` (source "shipped").

    Raises:
        CheckpointError: if the folder is missing or its files are broken (see ``engine.checkpoint``).
    """
    ckpt = load_checkpoint(path, device=device)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "shipped", weights_id(ckpt.model, ckpt.tokenizer))


def read_checkpoint_upload(data: bytes, name: str = "upload") -> LabModel:
    """An uploaded single-file checkpoint (``checkpoint_to_bytes``) as a :class:`LabModel` on the CPU.

    The file is checked from its header before anything is allocated (``engine.checkpoint``):
    over-the-caps sizes, shapes that differ from the declared config, NaN/inf weights are refused.

    Raises:
        CheckpointError: for anything that is not such a checkpoint; ``reason`` is a stable key
            and the message (for logs) starts with ``name``.
    """
    ckpt = checkpoint_from_bytes(data, device="cpu", where=name)
    return LabModel(ckpt.model, ckpt.tokenizer, ckpt.summary, "uploaded", weights_id(ckpt.model, ckpt.tokenizer))


@dataclass(frozen=True)
class UploadResult:
    """What the corpus upload handler returns: a corpus, or why there is none.

    Attributes:
        corpus: the corpus, or None.
        problem: None, or a stable key: "empty", "too_large" (over ``budget.MAX_TEXT_BYTES``),
            "binary", "not_utf8", "vocab" (over ``budget.MAX_VOCAB`` distinct characters) or
            "too_short" (a split would be under 2 characters).
        value, limit: the measured size and the cap for "too_large" (bytes) and "vocab" (characters).
        detail: the ``CorpusError`` text for logs, or "".
    """

    corpus: Corpus | None
    problem: str | None = None
    value: int = 0
    limit: int = 0
    detail: str = ""


def read_corpus_upload(data: bytes, name: str) -> UploadResult:
    """The page's handler for an uploaded text file: checks sizes first, never raises for bad content.

    Order of the checks, each before anything larger is built: byte size (at most
    ``budget.MAX_TEXT_BYTES``), then the text decoded once (``engine.corpus.decode_text``: UTF-8, or
    UTF-16/32 with a byte-order mark; empty, not decodable, NUL characters), the number of distinct
    characters (at most ``budget.MAX_VOCAB``: the vocabulary sets the embedding and logits sizes), and
    only then the corpus (records as offsets into the text, split, token ids). What the result holds is
    the text, its token ids (int32) and one offset per record, a few times the file's size.

    Args:
        data: the file's bytes.
        name: its file name (the corpus name).
    """
    if len(data) > budget.MAX_TEXT_BYTES:
        return UploadResult(None, "too_large", len(data), budget.MAX_TEXT_BYTES)
    try:
        text = decode_text(data, name, budget.MAX_TEXT_BYTES)
    except CorpusError as exc:
        problem = exc.reason if exc.reason in ("empty", "binary", "not_utf8") else "not_utf8"
        return UploadResult(None, problem, detail=str(exc))
    distinct = len(set(text))
    if distinct > budget.MAX_VOCAB:
        return UploadResult(None, "vocab", distinct, budget.MAX_VOCAB)
    try:
        return UploadResult(corpus_from_text(text, name))
    except CorpusError as exc:
        return UploadResult(None, "too_short", detail=str(exc))


# ---------------------------------------------------------------------------------------------
# Using a model: generation and attention maps
# ---------------------------------------------------------------------------------------------


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
    """Continues a prompt with a model, as the engine documents (``GPT.generate``).

    Unknown characters are read as the unknown token (a vocabulary with one) or dropped, and
    reported (:func:`prepare_prompt`); a prompt longer than block_size is fed to the
    model cropped to its last block_size characters (``GPT.generate`` crops at every step).
    Temperature 0 means greedy: the most likely character at each step (deterministic, and a
    small model often falls into a loop then: :func:`find_loop` finds it); any temperature > 0
    samples from a private generator seeded with ``seed``, so the same settings give the same text.
    Every character is drawn by ``engine.gpt.sampling_probs`` (temperature, top-k, top-p), the rule
    :func:`next_char_probs` shows. The logits of the prompt are checked before anything is sampled: a
    model whose weights overflow is reported, not sampled. The unknown token (``tokenizer.unk_id``,
    the rare characters' shared token) is never emitted. Generation uses the KV cache
    (``GPT.generate(use_cache=True)``: the same tokens as without it).

    With a ``form``, the kept prompt is the start of the poem and the form is imposed while
    sampling (see :class:`PoemForm`): only letters inside a line, the line's end mark exactly
    after ``line_length`` characters, a newline after each couplet, and the end after ``n_lines``.

    Args:
        max_new_tokens: the most characters to add (>= 0). None: exactly what the form needs to end
            its last line (only with ``form.n_lines``).
        top_k: None (or 0) keeps every character.
        top_p: nucleus sampling's mass in (0, 1]; 1 keeps every character.

    Raises:
        ValueError: for sampling settings ``engine.gpt.check_sampling`` refuses, a negative
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
        out = model.generate(idx, max_new_tokens, temperature=temperature, top_k=top_k, generator=generator,
                             use_cache=True, banned_ids=banned_ids(tokenizer), top_p=top_p, allowed_next=rule)
    except RuntimeError as exc:  # torch.multinomial on NaN/inf probabilities, past the checked prompt
        raise NonFiniteLogitsError(f"sampling failed: {exc}") from exc
    new = tokenizer.decode(out[0, idx.size(1) :].tolist())  # (T + n,) -> the n new ids
    return Generation(info, new, temperature == 0, form)


# ---------------------------------------------------------------------------------------------
# Poem forms, imposed while sampling, and the loops greedy decoding falls into
# ---------------------------------------------------------------------------------------------

#: The marks the Tang corpus ends its lines (句) with: the first line of a couplet with a comma, the
#: second with a full stop (or a question or exclamation mark); a newline follows each couplet.
ODD_LINE_ENDS = "，"
EVEN_LINE_ENDS = "。？！"


class FormError(ValueError):
    """A poem form that cannot be written here.

    Attributes:
        reason: a stable key for the page: "vocabulary" (the model's vocabulary lacks "，", every
            mark of :data:`EVEN_LINE_ENDS`, the newline or letters), "prompt" (the prompt does not
            start a poem of the form: a line longer than line_length, a line ended at another
            length, a character that is neither a letter, a line end nor a newline, or already
            n_lines lines) or "length" (max_new_tokens is shorter than the form needs).
        needed: for "length", the new characters the form needs; else 0.
    """

    def __init__(self, reason: str, message: str, needed: int = 0):
        super().__init__(message)
        self.reason = reason
        self.needed = needed


@dataclass(frozen=True)
class PoemForm:
    """The shape of a poem, imposed while sampling: characters per line and lines per poem.

    Attributes:
        line_length: characters per line, one of ``settings.POEM_LINE_LENGTHS`` (5: 五言, 7: 七言);
            None lets the model end each line once it has ``settings.POEM_FREE_LINE[0]`` characters
            and ends it at ``settings.POEM_FREE_LINE[1]``.
        n_lines: lines (句) in the poem, an even number (the corpus writes its poems in couplets)
            within ``settings.POEM_LINES``; the poem, and the generation, end with the last line's
            full stop. None: lines follow each other until max_new_tokens.

    Raises:
        ValueError: for other values, or when both are None (no form: pass ``form=None``).
    """

    line_length: int | None = None
    n_lines: int | None = None

    def __post_init__(self) -> None:
        if self.line_length is None and self.n_lines is None:
            raise ValueError("a form needs a line length, a number of lines or both")
        if self.line_length is not None and (isinstance(self.line_length, bool)
                                             or self.line_length not in settings.POEM_LINE_LENGTHS):
            raise ValueError(f"line_length must be one of {settings.POEM_LINE_LENGTHS} or None, "
                             f"got {self.line_length!r}")
        low, high = settings.POEM_LINES
        if self.n_lines is not None and (isinstance(self.n_lines, bool) or not isinstance(self.n_lines, int)
                                         or not low <= self.n_lines <= high or self.n_lines % 2):
            raise ValueError(f"n_lines must be an even integer in [{low}, {high}] or None, got {self.n_lines!r}")


# Where a poem stands: (lines finished, characters of the line being written, a couplet just ended
# so a newline comes next).
_Verse = tuple[int, int, bool]


def _verse_after(form: PoemForm, verse: _Verse, char: str) -> _Verse | None:
    """The poem's state after ``char``, or None when ``char`` cannot come next in this form."""
    lines, chars, _ = verse
    if form.n_lines is not None and lines >= form.n_lines:
        return None
    if char == "\n":
        return (lines, 0, False) if chars == 0 else None
    if char in ODD_LINE_ENDS or char in EVEN_LINE_ENDS:
        if chars == 0 or (form.line_length is not None and chars != form.line_length):
            return None
        return lines + 1, 0, (lines + 1) % 2 == 0
    if char.isalpha() and (form.line_length is None or chars < form.line_length):
        return lines, chars + 1, False
    return None


def _form_length(form: PoemForm, verse: _Verse) -> int:
    """The most new characters that finish the poem from ``verse`` (letters, end marks, newlines); needs n_lines."""
    lines, chars, need_break = verse
    longest = form.line_length or settings.POEM_FREE_LINE[1]
    total = int(need_break)
    for line in range(lines, form.n_lines):
        written = chars if line == lines else 0
        total += max(longest - written, 0) + 1  # the line's letters and its end mark
        if (line + 1) % 2 == 0 and line + 1 < form.n_lines:
            total += 1  # the newline after a couplet
    return total


def poem_rule(
    tokenizer: CharTokenizer, form: PoemForm, prompt: str
) -> tuple[Callable[[torch.Tensor], torch.Tensor | None], int]:
    """The ``allowed_next`` rule of ``GPT.generate`` that writes ``form`` after ``prompt``, and its length.

    The prompt is the start of the poem: its letters count towards the current line and its line
    ends towards the lines. At each step the rule allows only what the form lets come next: the
    newline after a finished couplet; inside a line, letters (``str.isalpha``: the Tang corpus's
    ideographs); at the line's length, its end mark ("，" for odd lines, :data:`EVEN_LINE_ENDS` for
    even ones, the model choosing among those); and it stops generation after the last line. A
    free line length allows letters and the end mark between ``settings.POEM_FREE_LINE``'s bounds.

    Args:
        tokenizer: the model's vocabulary.
        form: the form.
        prompt: the kept prompt (``Prompt.kept``: the characters the model reads, as typed; an
            unknown one read as the unknown token counts as a letter if it is one).

    Returns:
        (rule, needed): rule maps int64 (1, n) generated ids to a bool (V,) mask or None (the poem
        is complete); needed is the most new characters the poem can take (0 without n_lines).

    Raises:
        FormError: "vocabulary" or "prompt" (see :class:`FormError`).
    """
    stoi, itos = tokenizer.stoi, tokenizer.itos
    if ODD_LINE_ENDS not in stoi or "\n" not in stoi or not any(c in stoi for c in EVEN_LINE_ENDS):
        raise FormError("vocabulary", "the vocabulary lacks the line ends of a poem ('，', '。' and a newline)")
    letters = torch.tensor([c.isalpha() and i != tokenizer.unk_id for i, c in enumerate(itos)])  # (V,) bool
    if not bool(letters.any()):
        raise FormError("vocabulary", "the vocabulary has no letters to write lines with")
    verse: _Verse | None = (0, 0, False)
    for char in prompt:
        verse = _verse_after(form, verse, char)
        if verse is None:
            raise FormError("prompt", f"the prompt {prompt!r} does not start a poem of {form}")
    if form.n_lines is not None and verse[0] >= form.n_lines:
        raise FormError("prompt", f"the prompt {prompt!r} already has {form.n_lines} lines")
    start = verse

    def ids(chars: str) -> torch.Tensor:
        mask = torch.zeros(len(itos), dtype=torch.bool)  # (V,)
        mask[[stoi[c] for c in chars if c in stoi]] = True
        return mask

    ends = (ids(EVEN_LINE_ENDS), ids(ODD_LINE_ENDS))  # indexed by lines % 2 == 0 -> odd line next
    newline = ids("\n")
    shortest, longest = (form.line_length, form.line_length) if form.line_length else settings.POEM_FREE_LINE

    def rule(generated: torch.Tensor) -> torch.Tensor | None:
        verse = start
        for i in generated[0].tolist():  # the new ids so far, (n,)
            verse = _verse_after(form, verse, itos[i])
        lines, chars, need_break = verse
        if form.n_lines is not None and lines == form.n_lines:
            return None
        if need_break:
            return newline
        end = ends[lines % 2 == 0]
        if chars < shortest:
            return letters
        return end if chars >= longest else letters | end

    return rule, _form_length(form, start) if form.n_lines is not None else 0


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


@dataclass(frozen=True)
class AttentionMaps:
    """Every layer's and head's attention weights on a line.

    Attributes:
        attn_weights: float32 (n_layer, n_head, T, T) on the CPU; row i: how query i spreads its
            attention over keys 0..i. T is 0 when the model reads nothing of the line.
        tokens: the T characters read, as typed (``Prompt.kept``: where the model reads its unknown
            token, the character the reader typed, not U+FFFD).
        unknown: the characters outside the vocabulary, in order of first appearance.
        cut: characters the model reads that are left out at the end.
        as_unk: True when the unknown characters are read as the unknown token (drawn), False when
            they are dropped (``Prompt.as_unk``).
    """

    attn_weights: torch.Tensor
    tokens: tuple[str, ...]
    unknown: tuple[str, ...]
    cut: int
    as_unk: bool

    @property
    def self_weight(self) -> float:
        """Mean weight a query puts on itself (the diagonal), over layers, heads and positions; NaN when T = 0."""
        if self.attn_weights.size(-1) == 0:
            return float("nan")
        return float(self.attn_weights.diagonal(dim1=-2, dim2=-1).mean())

    @property
    def row_sum(self) -> float:
        """Mean sum of a row of weights (1 up to float rounding); NaN when T = 0."""
        if self.attn_weights.size(-1) == 0:
            return float("nan")
        return float(self.attn_weights.sum(-1).mean())


@torch.no_grad()
def attention_maps(lab_model: LabModel, line: str, max_len: int = 32) -> AttentionMaps:
    """Every layer's and head's attention weights on a line (the manual attention path).

    The line reaches the model as a prompt does (:func:`prepare_prompt`, the rule generation follows):
    unknown characters read as the unknown token (a vocabulary with one) or dropped; a line the model
    reads nothing of draws nothing (no newline put in its place).

    Args:
        lab_model: the model.
        line: the text to read, at most ``settings.MAX_PROMPT_CHARS`` characters; only the first
            ``min(max_len, block_size)`` characters the model reads are used.
        max_len: the longest line drawn (keeps the heatmaps readable).

    Raises:
        ValueError: for a line longer than ``settings.MAX_PROMPT_CHARS``.
    """
    model, tokenizer = lab_model.model, lab_model.tokenizer
    info = prepare_prompt(tokenizer, line, model.config.block_size)
    ids, chars = (info.ids, info.kept) if info.started_from == "prompt" else ((), "")
    limit = min(max_len, model.config.block_size)
    cut = max(0, len(ids) - limit)
    ids, chars = ids[:limit], chars[:limit]
    c = model.config
    if not ids:
        return AttentionMaps(torch.zeros(c.n_layer, c.n_head, 0, 0), (), info.unknown, cut, info.as_unk)
    device = next(model.parameters()).device
    with eval_mode(model):
        out = model(torch.tensor([ids], dtype=torch.long, device=device), return_weights=True)
    # n_layer x (1, nh, T, T) -> (n_layer, nh, T, T)
    weights = torch.stack([w[0] for w in out.attn_weights]).float().cpu()
    return AttentionMaps(weights, tuple(chars), info.unknown, cut, info.as_unk)


@dataclass(frozen=True)
class PositionTables:
    """A model's learned position table next to the one it started from.

    Attributes:
        trained, untrained: float32 (block_size, n_embd) on the CPU.
        seed: the seed of the untrained table.
        neighbour_sim_trained, neighbour_sim_untrained: mean cosine similarity of neighbouring
            rows (training makes nearby positions alike, random init does not); NaN for one row.
    """

    trained: torch.Tensor
    untrained: torch.Tensor
    seed: int
    neighbour_sim_trained: float
    neighbour_sim_untrained: float


def _neighbour_sim(table: torch.Tensor) -> float:
    if table.size(0) < 2:
        return float("nan")
    unit = torch.nn.functional.normalize(table, dim=1)  # (block_size, n_embd), rows of length 1
    return float((unit[:-1] * unit[1:]).sum(dim=1).mean())  # cos(row t, row t+1), averaged


def position_tables(lab_model: LabModel, seed: int | None = None) -> PositionTables | None:
    """The learned position table of a model next to the table an untrained model starts with.

    Args:
        lab_model: the model; None is returned unless ``pos_encoding == "learned"``.
        seed: the seed of the untrained model; default: the training seed from the summary
            (the table the trained one actually started from), else 1337.
    """
    config = lab_model.config
    if config.pos_encoding != "learned":
        return None
    if seed is None:
        train_config = lab_model.summary.get("train_config")
        stored = train_config.get("seed", 1337) if isinstance(train_config, dict) else 1337
        seed = stored if isinstance(stored, int) and not isinstance(stored, bool) else 1337
    untrained = _initial_position_table(config, seed)  # (block_size, n_embd)
    trained = lab_model.model.pos_emb.weight.detach().float().cpu()  # (block_size, n_embd)
    return PositionTables(trained, untrained, seed, _neighbour_sim(trained), _neighbour_sim(untrained))


@uses_global_rng
def _initial_position_table(config: GPTConfig, seed: int) -> torch.Tensor:
    """``pos_emb`` of a GPT built after ``torch.manual_seed(seed)``, as ``train`` builds it: (block_size, n_embd)."""
    torch.manual_seed(seed)
    return GPT(config).pos_emb.weight.detach().float()



# ---------------------------------------------------------------------------------------------
# The next character: its probabilities under temperature, top-k and top-p, and where attention looked
# ---------------------------------------------------------------------------------------------

#: Temperatures of the next-character view's slider (the page's own value is added).
VIEW_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
#: Top-k values of its slider; 0 means all characters (the page's own value is added).
VIEW_TOP_KS = (1, 2, 3, 5, 10, 20, 40, 0)
#: Top-p values of its slider; 1 keeps every character (the page's own value is added).
VIEW_TOP_PS = (0.5, 0.7, 0.8, 0.9, 0.95, 1.0)


@dataclass(frozen=True)
class NextCharProbs:
    """The model's distribution over the character after a prompt, under several samplings.

    Attributes:
        context: the characters the model read, as typed (the kept prompt, cropped to its last block_size).
        candidates: the characters drawn, most likely first: the ``n`` most likely plus the sampled
            one if it is not among them. The unknown token is never a candidate.
        temperatures: temperatures of ``by_temperature``'s rows (ascending; 0 = greedy).
        top_ks: top-k values of ``by_top_k``'s rows (ascending, 0 = all last).
        by_temperature: float32 (len(temperatures), len(candidates)): the probability of each
            candidate at each temperature, with the page's top-k and top-p.
        by_top_k: float32 (len(top_ks), len(candidates)): at each top-k, with the page's
            temperature and top-p.
        temperature, top_k: the page's settings (0 top-k: all), one row of each table.
        probs: float32 (len(candidates),): the probabilities at the page's settings.
        sampled: index into ``candidates`` of the character sampled at the page's settings with
            ``seed`` (the first character ``generate`` writes with the same settings).
        shapes: {"idx", "residual", "logits", "attn_weights"}: the tensor shapes of this forward
            pass, (1, T), (1, T, n_embd), (1, T, vocab_size), (1, n_head, T, T).
        top_p: the page's top-p (1: all), one row of ``by_top_p``.
        top_ps: top-p values of ``by_top_p``'s rows (ascending, 1 last).
        by_top_p: float32 (len(top_ps), len(candidates)): at each top-p, with the page's
            temperature and top-k.
    """

    context: str
    candidates: tuple[str, ...]
    temperatures: tuple[float, ...]
    top_ks: tuple[int, ...]
    by_temperature: torch.Tensor
    by_top_k: torch.Tensor
    temperature: float
    top_k: int
    probs: torch.Tensor
    sampled: int
    shapes: dict
    top_p: float = 1.0
    top_ps: tuple[float, ...] = ()
    by_top_p: torch.Tensor | None = None


@dataclass(frozen=True)
class LastPositionAttention:
    """Where each layer's attention looked when the model predicted the next character.

    Attributes:
        attn_weights: float32 (n_layer, n_head, T) on the CPU: the last query's row of every
            layer's and head's weights over the T characters read (each row sums to 1).
        tokens: the T characters read, as typed (where the model reads its unknown token, the
            character the reader typed).
    """

    attn_weights: torch.Tensor
    tokens: tuple[str, ...]

    @property
    def head_mean(self) -> torch.Tensor:
        """float32 (n_layer, T): the weights averaged over heads (rows still sum to 1)."""
        return self.attn_weights.mean(dim=1)


@torch.no_grad()
def _last_forward(lab_model: LabModel, prompt: str) -> tuple[Prompt, torch.Tensor, GPTOutput]:
    """The prompt as :func:`generate` feeds it (idx (1, T), T <= block_size) and the eval-mode forward with weights."""
    model = lab_model.model
    info = prepare_prompt(lab_model.tokenizer, prompt, model.config.block_size)
    device = next(model.parameters()).device
    ids = info.ids[-model.config.block_size:]
    idx = torch.tensor([ids], dtype=torch.long, device=device)  # (1, T), T <= block_size
    with eval_mode(model):
        out = model(idx, return_weights=True)
    return info, idx, out


def _read_as_typed(info: Prompt, tokenizer: CharTokenizer, block_size: int) -> str:
    """The characters of ``info`` the model reads (its last block_size ids), as the reader typed them: the typed
    character where it reads its unknown token; the newline or first character it starts from otherwise."""
    if info.started_from != "prompt":
        return tokenizer.decode(info.ids[-block_size:])
    return info.kept[-block_size:]  # one character per id: ids[-block_size:]


@torch.no_grad()
def next_char_probs(
    lab_model: LabModel,
    prompt: str,
    temperature: float = 0.8,
    top_k: int = 20,
    seed: int = 0,
    n: int = 20,
    temperatures: tuple[float, ...] = VIEW_TEMPERATURES,
    top_ks: tuple[int, ...] = VIEW_TOP_KS,
    top_p: float = 1.0,
    top_ps: tuple[float, ...] = VIEW_TOP_PS,
    form: PoemForm | None = None,
) -> NextCharProbs:
    """The probability of every candidate next character after ``prompt``, as ``generate`` samples it.

    The prompt reaches the model as in :func:`generate` (unknown characters read as the unknown
    token or dropped, cropped to block_size), and the probabilities are
    ``engine.gpt.sampling_probs``, the rule generation draws from: the unknown token (and, with a
    ``form``, what the form does not allow first) excluded, then temperature (below 1 sharpens,
    above 1 flattens), top-k (the k most likely characters) and top-p (the fewest most likely
    characters holding top_p of the probability), renormalised.

    Args:
        temperature, top_k, top_p, seed, form: the page's sampling settings (top_k 0: all characters).
        n: how many of the most likely allowed characters to draw (1 to 200).
        temperatures, top_ks, top_ps: the sliders' values; the page's own are added.

    Raises:
        ValueError: for a temperature < 0 or not finite, top_k < 0, top_p outside (0, 1], n outside
            [1, 200], a slider value outside those ranges, or a prompt over ``settings.MAX_PROMPT_CHARS``.
        FormError: as :func:`poem_rule`.
        NonFiniteLogitsError: if the model's logits are NaN or infinite.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ValueError(f"top_k must be an integer >= 0 (0: all), got {top_k!r}")
    check_sampling(temperature, top_k or None, top_p)
    for t in temperatures:
        check_sampling(t, None, 1.0)
    for k in top_ks:
        check_sampling(1.0, k or None, 1.0)
    for q in top_ps:
        check_sampling(1.0, None, q)
    if not 1 <= n <= 200:
        raise ValueError(f"n must be in [1, 200], got {n}")
    tokenizer = lab_model.tokenizer
    vocab_size = lab_model.config.vocab_size
    allowed = torch.ones(vocab_size, dtype=torch.bool)  # (V,)
    allowed[list(banned_ids(tokenizer))] = False
    if form is not None:
        kept = prepare_prompt(tokenizer, prompt, lab_model.config.block_size).kept
        rule, _ = poem_rule(tokenizer, form, kept)
        allowed &= rule(torch.zeros(1, 0, dtype=torch.long))  # the first step's mask (the prompt leaves lines to write)
    info, idx, out = _last_forward(lab_model, prompt)
    logits = out.logits[0, -1].float().cpu()  # (1, T, V) -> (V,): the prediction after the last character
    if not bool(torch.isfinite(logits).all()):
        raise NonFiniteLogitsError("the model's logits hold NaN or infinite values")
    vocab = int(allowed.sum())
    temps = tuple(sorted({float(t) for t in temperatures} | {float(temperature)}))
    ks = tuple(sorted({int(k) for k in top_ks if k <= vocab} | {int(top_k) if top_k <= vocab else 0},
                      key=lambda k: (k == 0, k)))
    ps = tuple(sorted({float(q) for q in top_ps} | {float(top_p)}))

    def probs_at(t: float, k: int, q: float) -> torch.Tensor:
        return sampling_probs(logits, t, k or None, q, allowed)  # (V,)

    current = probs_at(temperature, top_k, top_p)  # (V,)
    generator = torch.Generator().manual_seed(seed)
    sampled_id = int(sample_next(logits, temperature, top_k or None, top_p, generator, allowed))  # generate's 1st draw
    order = torch.argsort(logits.masked_fill(~allowed, float("-inf")), descending=True)[: min(n, vocab)].tolist()
    if sampled_id not in order:
        order.append(sampled_id)
    columns = torch.tensor(order)  # (n_candidates,)
    by_t = torch.stack([probs_at(t, top_k, top_p)[columns] for t in temps])  # (len(temps), n_c)
    by_k = torch.stack([probs_at(temperature, k, top_p)[columns] for k in ks])  # (len(ks), n_c)
    by_p = torch.stack([probs_at(temperature, top_k, q)[columns] for q in ps])  # (len(ps), n_c)
    weights = out.attn_weights[0]  # layer 0: (1, nh, T, T)
    shapes = {"idx": tuple(idx.shape), "residual": (*idx.shape, lab_model.model.ln_f.weight.shape[0]),
              "logits": tuple(out.logits.shape), "attn_weights": tuple(weights.shape)}
    return NextCharProbs(
        context=_read_as_typed(info, tokenizer, lab_model.config.block_size),
        candidates=tuple(tokenizer.decode([i]) for i in order),
        temperatures=temps,
        top_ks=ks,
        by_temperature=by_t,
        by_top_k=by_k,
        temperature=float(temperature),
        top_k=int(top_k),
        probs=current[columns],
        sampled=order.index(sampled_id),
        shapes=shapes,
        top_p=float(top_p),
        top_ps=ps,
        by_top_p=by_p,
    )


@torch.no_grad()
def last_position_attention(lab_model: LabModel, prompt: str) -> LastPositionAttention:
    """Each layer's and head's attention from the last position of ``prompt`` (the one that predicts).

    The prompt reaches the model as in :func:`generate`. A non-causal model's last row also
    covers every position (there is nothing after it).

    Returns:
        :class:`LastPositionAttention` with weights (n_layer, n_head, T).

    Raises:
        ValueError: for a prompt longer than ``settings.MAX_PROMPT_CHARS``.
    """
    info, _, out = _last_forward(lab_model, prompt)
    # n_layer x (1, nh, T, T) -> (n_layer, nh, T): the last query's row
    rows = torch.stack([w[0, :, -1, :] for w in out.attn_weights]).float().cpu()
    return LastPositionAttention(rows, tuple(_read_as_typed(info, lab_model.tokenizer, lab_model.config.block_size)))
