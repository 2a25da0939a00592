"""Character-level tokenizer for the course's GPT (lesson "multi-head attention and positional encoding").

Every distinct character of the training text is one token; ids follow the sorted
order of the characters, so the same text always gives the same vocabulary.

Unknown characters (not in the vocabulary) are never mapped silently:

* ``encode(text)`` (``errors="strict"``, the default) raises ``ValueError`` naming them;
* ``encode(text, errors="drop")`` leaves them out, and ``unknown_chars(text)`` lists them
  so a page can tell the reader what was dropped.

There is no "unknown" token: a character-level model trained on a corpus has never
seen one, so it could learn nothing about it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
import torch

_FORMAT = "char-tokenizer/1"


class CharTokenizer:
    """Maps characters to int ids and back.

    Args:
        chars: the vocabulary, one character per entry; duplicates are ignored and the
            ids follow the sorted order of the distinct characters.

    Raises:
        ValueError: if ``chars`` is empty or an entry is not exactly one character.
    """

    def __init__(self, chars: Iterable[str]):
        distinct = sorted(set(chars))
        if not distinct:
            raise ValueError("a tokenizer needs at least one character in its vocabulary")
        bad = [c for c in distinct if len(c) != 1]
        if bad:
            raise ValueError(f"vocabulary entries must be single characters, got {bad[:5]!r}")
        self.itos: list[str] = distinct
        self.stoi: dict[str, int] = {c: i for i, c in enumerate(distinct)}

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Builds the vocabulary from every distinct character of ``text``."""
        return cls(text)

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters (ids run from 0 to vocab_size - 1)."""
        return len(self.itos)

    def unknown_chars(self, text: str) -> list[str]:
        """The distinct characters of ``text`` outside the vocabulary, in order of first appearance."""
        return list(dict.fromkeys(c for c in text if c not in self.stoi))

    def encode(self, text: str, errors: Literal["strict", "drop"] = "strict") -> list[int]:
        """Turns ``text`` into a list of ids (one per character).

        Args:
            text: any string.
            errors: ``"strict"`` raises on characters outside the vocabulary; ``"drop"``
                leaves them out (use ``unknown_chars`` to report them).

        Raises:
            ValueError: with ``errors="strict"`` when ``text`` holds unknown characters
                (the message names up to 20 of them), or for an unknown ``errors`` value.
        """
        if errors not in ("strict", "drop"):
            raise ValueError(f"errors must be 'strict' or 'drop', got {errors!r}")
        if errors == "strict":
            unknown = self.unknown_chars(text)
            if unknown:
                shown = " ".join(repr(c) for c in unknown[:20])
                more = f" (and {len(unknown) - 20} more)" if len(unknown) > 20 else ""
                raise ValueError(
                    f"{len(unknown)} character(s) not in the vocabulary of {self.vocab_size}: "
                    f"{shown}{more}; use errors='drop' to leave them out"
                )
        return [self.stoi[c] for c in text if c in self.stoi]

    def encode_tensor(self, text: str, errors: Literal["strict", "drop"] = "strict") -> torch.Tensor:
        """``encode`` as an int64 tensor of shape (len,); vectorised, so a 20 MB text takes a moment.

        Ids follow the sorted characters, and Python sorts characters by code point, so the id of
        each code point is its rank among the vocabulary's code points (a binary search).
        """
        if errors not in ("strict", "drop"):
            raise ValueError(f"errors must be 'strict' or 'drop', got {errors!r}")
        points = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # (len,) code points
        vocab = np.frombuffer("".join(self.itos).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)  # sorted
        ids = np.searchsorted(vocab, points).clip(max=len(vocab) - 1)  # (len,) rank of each code point
        known = vocab[ids] == points
        if not known.all():
            if errors == "strict":
                self.encode(text)  # raises, naming the unknown characters
            ids = ids[known]
        return torch.from_numpy(ids.astype(np.int64))

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
        """A JSON-ready description (format tag and the vocabulary as one string)."""
        return {"format": _FORMAT, "chars": "".join(self.itos)}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        """Inverse of ``to_dict``.

        Raises:
            ValueError: if the format tag is missing or unknown, or the vocabulary is not a
                non-empty string of distinct characters.
        """
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} tokenizer description")
        chars = data.get("chars")
        if not isinstance(chars, str) or not chars:
            raise ValueError("tokenizer vocabulary must be a non-empty string")
        if len(set(chars)) != len(chars):
            raise ValueError("tokenizer vocabulary repeats a character")
        return cls(chars)

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
        return isinstance(other, CharTokenizer) and self.itos == other.itos

    def __hash__(self) -> int:
        return hash(tuple(self.itos))

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"
