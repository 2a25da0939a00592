"""Character-level tokenizer for the course's GPT (lesson "multi-head attention and positional encoding").

Every distinct character of the training text is one token; ids follow the sorted
order of the characters, so the same text always gives the same vocabulary.

Two kinds of tokenizer:

* without an unknown token (``unk=None``, format ``char-tokenizer/1``; the small corpora and
  every checkpoint written before the full Tang corpus): characters outside the vocabulary are
  never mapped silently. ``encode(text)`` (``errors="strict"``, the default) raises
  ``ValueError`` naming them; ``encode(text, errors="drop")`` leaves them out, and
  ``unknown_chars(text)`` lists them so a page can tell the reader what was dropped.
* with an unknown token (``unk="\ufffd"``, format ``char-tokenizer/2``; built by
  ``from_counts``): characters seen fewer than ``min_count`` times in the training text share
  one token, U+FFFD REPLACEMENT CHARACTER, and every character outside the vocabulary encodes
  to it. A model sees too few examples of a character that occurs a handful of times in millions
  to learn anything about it; pooling them keeps the embedding and output layers (vocab_size rows
  each) to the characters it can learn. ``unknown_chars`` still lists what was pooled.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
import torch

_FORMAT = "char-tokenizer/1"
_FORMAT_UNK = "char-tokenizer/2"
UNK = "\ufffd"  # U+FFFD REPLACEMENT CHARACTER: the unknown token's character


_CHUNK = 1 << 20  # characters per slice when counting or encoding long texts (bounds the temporary arrays)


def _code_points(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # (len,) code points


def char_counts(text: str) -> dict[str, int]:
    """How often each distinct character occurs in ``text``, keys in sorted (code point) order.

    Vectorised (numpy bincount over the code points, 1 M characters at a time), so a few million
    characters take well under a second and little memory.
    """
    counts: dict[str, int] = {}
    for start in range(0, len(text), _CHUNK):
        points = _code_points(text[start : start + _CHUNK])  # (chunk,)
        values, n = np.unique(points, return_counts=True)  # (distinct in chunk,) each, sorted
        for v, c in zip(values.tolist(), n.tolist(), strict=False):
            counts[chr(v)] = counts.get(chr(v), 0) + c
    return dict(sorted(counts.items()))


class CharTokenizer:
    """Maps characters to int ids and back.

    Args:
        chars: the vocabulary, one character per entry; duplicates are ignored and the
            ids follow the sorted order of the distinct characters.
        unk: the unknown token's character (added to the vocabulary if missing), or None for a
            tokenizer that refuses or drops characters outside its vocabulary.

    Attributes:
        itos, stoi: id -> character and character -> id.
        unk: the unknown token's character or None; unk_id: its id or None.

    Raises:
        ValueError: if the vocabulary is empty or an entry (or ``unk``) is not exactly one character.
    """

    def __init__(self, chars: Iterable[str], unk: str | None = None):
        distinct = set(chars)
        if unk is not None:
            if not isinstance(unk, str) or len(unk) != 1:
                raise ValueError(f"the unknown token must be a single character, got {unk!r}")
            distinct.add(unk)
        distinct = sorted(distinct)
        if not distinct:
            raise ValueError("a tokenizer needs at least one character in its vocabulary")
        bad = [c for c in distinct if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"vocabulary entries must be single characters, got {bad[:5]!r}")
        self.itos: list[str] = distinct
        self.stoi: dict[str, int] = {c: i for i, c in enumerate(distinct)}
        self.unk: str | None = unk
        self.unk_id: int | None = None if unk is None else self.stoi[unk]

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Builds the vocabulary from every distinct character of ``text`` (no unknown token)."""
        return cls(text)

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], min_count: int, unk: str = UNK) -> CharTokenizer:
        """A vocabulary of the characters counted at least ``min_count`` times, plus the unknown token.

        Args:
            counts: character -> occurrences in the training text (``char_counts``).
            min_count: the rarest count that still gets its own token (1 keeps every character).
            unk: the unknown token's character; a counted ``unk`` character simply shares its token.

        Raises:
            ValueError: if ``min_count`` < 1.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {min_count}")
        return cls((c for c, n in counts.items() if n >= min_count), unk=unk)

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters (ids run from 0 to vocab_size - 1)."""
        return len(self.itos)

    def unknown_chars(self, text: str) -> list[str]:
        """The distinct characters of ``text`` outside the vocabulary, in order of first appearance.

        With an unknown token these are the characters that encode to it (the token's own
        character is in the vocabulary, so it is not listed).
        """
        return list(dict.fromkeys(c for c in text if c not in self.stoi))

    def encode(self, text: str, errors: Literal["strict", "drop"] = "strict") -> list[int]:
        """Turns ``text`` into a list of ids (one per character).

        Args:
            text: any string.
            errors: for a tokenizer without an unknown token, ``"strict"`` raises on characters
                outside the vocabulary and ``"drop"`` leaves them out (use ``unknown_chars`` to
                report them). With an unknown token they encode to ``unk_id`` either way.

        Raises:
            ValueError: with ``errors="strict"`` and no unknown token when ``text`` holds unknown
                characters (the message names up to 20 of them), or for an unknown ``errors`` value.
        """
        if errors not in ("strict", "drop"):
            raise ValueError(f"errors must be 'strict' or 'drop', got {errors!r}")
        if self.unk_id is not None:
            return [self.stoi.get(c, self.unk_id) for c in text]
        if errors == "strict":
            unknown = self.unknown_chars(text)
            if unknown:
                raise ValueError(
                    f"{len(unknown)} character(s) not in the vocabulary of {self.vocab_size}, the first "
                    f"{min(20, len(unknown))}: {' '.join(repr(c) for c in unknown[:20])}; "
                    "use errors='drop' to leave them out"
                )
        return [self.stoi[c] for c in text if c in self.stoi]

    def encode_tensor(self, text: str, errors: Literal["strict", "drop"] = "strict") -> torch.Tensor:
        """``encode`` as an int64 tensor of shape (len,); vectorised, so a 20 MB text takes a moment.

        Ids follow the sorted characters, and Python sorts characters by code point, so the id of
        each code point is its rank among the vocabulary's code points (a binary search). The text
        is encoded 1 M characters at a time into one preallocated tensor, so the temporary arrays
        stay small next to the result.
        """
        if errors not in ("strict", "drop"):
            raise ValueError(f"errors must be 'strict' or 'drop', got {errors!r}")
        vocab = _code_points("".join(self.itos))  # (V,) sorted code points
        out = torch.empty(len(text), dtype=torch.int64)  # (len,), filled slice by slice
        filled = 0
        for start in range(0, len(text), _CHUNK):
            points = _code_points(text[start : start + _CHUNK])  # (chunk,)
            ids = np.searchsorted(vocab, points).clip(max=len(vocab) - 1)  # (chunk,) rank of each code point
            known = vocab[ids] == points  # (chunk,) bool
            if not known.all():
                if self.unk_id is not None:
                    ids[~known] = self.unk_id
                elif errors == "strict":
                    self.encode(text[start : start + _CHUNK])  # raises, naming the unknown characters
                else:
                    ids = ids[known]
            out[filled : filled + len(ids)] = torch.from_numpy(ids)
            filled += len(ids)
        return out if filled == len(text) else out[:filled].clone()

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Turns ids back into text.

        Raises:
            ValueError: if an id is outside ``[0, vocab_size)``.
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        out = []
        for i in ids:
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
            out.append(self.itos[i])
        return "".join(out)

    def to_dict(self) -> dict:
        """A JSON-ready description: format tag and the vocabulary as one string.

        Without an unknown token the format is ``char-tokenizer/1`` (as before it existed), with
        one ``char-tokenizer/2`` and an ``"unk"`` entry naming the token's character.
        """
        if self.unk is None:
            return {"format": _FORMAT, "chars": "".join(self.itos)}
        return {"format": _FORMAT_UNK, "chars": "".join(self.itos), "unk": self.unk}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        """Inverse of ``to_dict``; reads both formats.

        Raises:
            ValueError: if the format tag is missing or unknown, the vocabulary is not a
                non-empty string of distinct characters, or (format 2) ``unk`` is not one of them.
        """
        if not isinstance(data, dict) or data.get("format") not in (_FORMAT, _FORMAT_UNK):
            raise ValueError(f"not a {_FORMAT} or {_FORMAT_UNK} tokenizer description")
        chars = data.get("chars")
        if not isinstance(chars, str) or not chars:
            raise ValueError("tokenizer vocabulary must be a non-empty string")
        if len(set(chars)) != len(chars):
            raise ValueError("tokenizer vocabulary repeats a character")
        if data["format"] == _FORMAT:
            return cls(chars)
        unk = data.get("unk")
        if not isinstance(unk, str) or len(unk) != 1 or unk not in chars:
            raise ValueError("tokenizer's unknown token must be one character of its vocabulary")
        return cls(chars, unk=unk)

    def to_json(self) -> str:
        """``to_dict`` as a JSON string (non-ASCII characters kept as they are)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> CharTokenizer:
        """Inverse of ``to_json``; raises ``ValueError`` for invalid JSON or content."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"tokenizer JSON is invalid: {exc}") from exc
        return cls.from_dict(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and self.itos == other.itos and self.unk == other.unk

    def __hash__(self) -> int:
        return hash((tuple(self.itos), self.unk))

    def __repr__(self) -> str:
        unk = "" if self.unk is None else f", unk={self.unk!r}"
        return f"CharTokenizer(vocab_size={self.vocab_size}{unk})"
