"""Poem forms imposed while sampling: five or seven characters a line, an even number of lines.

A :class:`PoemForm` becomes the ``allowed_next`` rule of ``engine.sampling.generate_ids`` (:func:`poem_rule`): at
each step only the characters that keep the poem in its form may come next, so the model writes the form
instead of being cut to it. The line marks are those of the Tang corpus.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine.lab import settings
from engine.tokenizer import CharTokenizer

#: Where a model comes from.


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
    """The ``allowed_next`` rule of ``engine.sampling.generate_ids`` that writes ``form`` after ``prompt``; its length.

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
