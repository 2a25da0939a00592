"""Training text for the course's character-level GPT: built-in poems, a fallback, user uploads.

Built-in corpora come from Debian's ``fortunes-zh`` package (``/usr/share/games/fortunes``):

* ``tang300``: 313 Tang poems (the lesson's kind of text; it holds "白日依山尽");
* ``song100``: Song ci (the file holds 96 records).

They are fortune files: records separated by a line holding ``%``, the title and author lines
wrapped in ANSI colour codes (``ESC[32m ... ESC[m``). The parser strips every ANSI escape and
keeps title, author and body apart; the model trains on the bodies (the poem lines), records
joined by a blank line.

Where the package is missing, ``load_corpus`` falls back to English text that ships with every
CPython (``pydoc_data.topics``, the language reference's topic texts) and says how to get the poems
in ``Corpus.message``. User text arrives as bytes through ``corpus_from_bytes``.

Split: records are split 90/10 deterministically (every tenth record, indices 9, 19, 29 ...,
goes to validation, which spreads the validation poems over the whole collection). A text with
fewer than 10 records is split by characters instead: the last 10 % goes to validation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from engine.tokenizer import CharTokenizer

FORTUNES_DIR = Path("/usr/share/games/fortunes")
BUILTIN_CORPORA = ("tang300", "song100")
FALLBACK_NAME = "pydoc_topics"
MAX_BYTES = 20 * 1024 * 1024  # uploads above 20 MB are refused
RECORD_SEPARATOR = "\n\n"  # between record bodies in the training text
VAL_EVERY = 10  # record i goes to validation when i % VAL_EVERY == VAL_EVERY - 1

# CSI escape sequences such as "\x1b[32m" (green) and "\x1b[m" (reset): ESC [ params intermediates final.
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_LABEL_RE = re.compile(r"^(题目|作者)\s*[:：]\s*")


class CorpusError(ValueError):
    """A text that cannot be used as a corpus (empty, binary, not UTF-8, too large, too short)."""


@dataclass(frozen=True)
class Record:
    """One poem (or one topic / paragraph of a user text).

    Attributes:
        title: title line without colour codes or a "题目:" label ("" when the record has none).
        author: author line without colour codes or a "作者:" label ("" when none).
        body: the text the model trains on; lines joined by "\\n", no leading/trailing blank lines.
    """

    title: str
    author: str
    body: str


def strip_ansi(text: str) -> str:
    """Removes ANSI CSI escape sequences (colour codes like ``\\x1b[32m``) from ``text``."""
    return _ANSI_RE.sub("", text)


def parse_fortunes(text: str) -> list[Record]:
    """Parses a fortune file into records.

    A separator is a line that is ``%`` once trailing whitespace is removed (song100 has one
    separator written ``"%    "``; matching only an exact ``%`` would merge two ci). In each
    record, a first line carrying a colour code is the title; a following line carrying a colour
    code or starting with "作者" is the author; the rest is the body. Records with an empty body
    are dropped.
    """
    records: list[Record] = []
    chunk: list[str] = []
    for line in text.replace("\r\n", "\n").split("\n") + ["%"]:
        if line.rstrip() == "%":
            record = _record_from_lines(chunk)
            if record is not None:
                records.append(record)
            chunk = []
        else:
            chunk.append(line)
    return records


def _record_from_lines(lines: list[str]) -> Record | None:
    while lines and not strip_ansi(lines[0]).strip():
        lines = lines[1:]
    title = author = ""
    if lines and _ANSI_RE.search(lines[0]):
        title = _LABEL_RE.sub("", strip_ansi(lines[0]).strip())
        lines = lines[1:]
        if lines and (_ANSI_RE.search(lines[0]) or strip_ansi(lines[0]).lstrip().startswith("作者")):
            author = _LABEL_RE.sub("", strip_ansi(lines[0]).strip())
            lines = lines[1:]
    body = "\n".join(strip_ansi(line).rstrip() for line in lines).strip("\n")
    if not body.strip():
        return None
    return Record(title=title, author=author, body=body)


def parse_paragraphs(text: str) -> list[Record]:
    """Splits plain text into records at blank lines (title and author left empty)."""
    text = strip_ansi(text.replace("\r\n", "\n"))
    paragraphs = re.split(r"\n[ \t]*\n", text)
    return [Record("", "", p.strip("\n")) for p in paragraphs if p.strip()]


class Corpus:
    """A named text, its records, its vocabulary and its train/val split as token ids.

    Attributes:
        name: "tang300", "song100", "pydoc_topics" or the name given to ``corpus_from_bytes``.
        records: the parsed records (title, author, body).
        message: a note for the reader, e.g. why the fallback text is used; None when all is well.
        tokenizer: ``CharTokenizer`` over every character of ``text`` (train and val, so the
            validation split never meets an unknown character).
        train_ids, val_ids: int64 tensors of shape (n_train,), (n_val,) on the CPU.

    Raises:
        CorpusError: if there are no records, or a split ends up with fewer than 2 tokens.
    """

    def __init__(self, name: str, records: list[Record], message: str | None = None):
        if not records:
            raise CorpusError(f"corpus {name!r} has no text")
        self.name = name
        self.records: tuple[Record, ...] = tuple(records)
        self.message = message
        self.text = RECORD_SEPARATOR.join(r.body for r in self.records)
        self.tokenizer = CharTokenizer.from_text(self.text)
        train_text, val_text = self._split_texts()
        self.train_ids = self.tokenizer.encode_tensor(train_text)
        self.val_ids = self.tokenizer.encode_tensor(val_text)
        if len(self.train_ids) < 2 or len(self.val_ids) < 2:
            raise CorpusError(
                f"corpus {name!r} is too short to split: {len(self.text)} characters "
                f"({len(self.train_ids)} train, {len(self.val_ids)} val)"
            )

    def _split_texts(self) -> tuple[str, str]:
        if len(self.records) >= VAL_EVERY:
            train = [r.body for i, r in enumerate(self.records) if i % VAL_EVERY != VAL_EVERY - 1]
            val = [r.body for i, r in enumerate(self.records) if i % VAL_EVERY == VAL_EVERY - 1]
            return RECORD_SEPARATOR.join(train), RECORD_SEPARATOR.join(val)
        cut = len(self.text) - max(2, len(self.text) // VAL_EVERY)
        return self.text[:cut], self.text[cut:]

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters in the corpus."""
        return self.tokenizer.vocab_size

    @property
    def max_block_size(self) -> int:
        """Largest block_size ``get_batch`` accepts for both splits (shortest split length - 1)."""
        return min(len(self.train_ids), len(self.val_ids)) - 1

    def get_batch(
        self,
        split: Literal["train", "val"],
        batch_size: int,
        block_size: int,
        generator: torch.Generator | None = None,
        device: torch.device | str = "cpu",
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Draws ``batch_size`` random windows of ``block_size`` tokens from one split.

        Args:
            split: "train" or "val".
            batch_size: B, number of windows.
            block_size: T, tokens per window.
            generator: a CPU ``torch.Generator`` for reproducible offsets (global RNG if None).
            device: where the returned tensors live.

        Returns:
            x, y: int64 tensors of shape (B, T); y is x shifted by one token (the next-token targets).

        Raises:
            ValueError: for an unknown split, non-positive sizes, or a split not longer than block_size.
        """
        if split not in ("train", "val"):
            raise ValueError(f"split must be 'train' or 'val', got {split!r}")
        if batch_size < 1 or block_size < 1:
            raise ValueError(f"batch_size and block_size must be positive, got {batch_size}, {block_size}")
        data = self.train_ids if split == "train" else self.val_ids
        if len(data) <= block_size:
            raise ValueError(
                f"the {split} split of {self.name!r} has {len(data)} tokens; block_size {block_size} "
                f"needs more than that (largest usable: {self.max_block_size})"
            )
        offsets = torch.randint(len(data) - block_size, (batch_size,), generator=generator)  # (B,)
        index = offsets[:, None] + torch.arange(block_size + 1)  # (B, 1) + (T+1,) -> (B, T+1)
        window = data[index]  # (B, T+1)
        x = window[:, :-1].contiguous()  # (B, T)
        y = window[:, 1:].contiguous()  # (B, T)
        return x.to(device), y.to(device)

    def __repr__(self) -> str:
        return (
            f"Corpus(name={self.name!r}, records={len(self.records)}, chars={len(self.text)}, "
            f"vocab_size={self.vocab_size})"
        )


def fallback_corpus(message: str | None = None) -> Corpus:
    """English text from ``pydoc_data.topics`` (ships with CPython): one record per topic.

    Raises:
        CorpusError: if this Python was built without ``pydoc_data``.
    """
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:
        raise CorpusError("this Python has no pydoc_data.topics to fall back on") from exc
    records = [Record(title=key, author="", body=topics[key].strip("\n")) for key in sorted(topics)]
    return Corpus(FALLBACK_NAME, [r for r in records if r.body.strip()], message=message)


def load_corpus(name: str = "tang300", fortunes_dir: Path | str | None = None) -> Corpus:
    """Loads a built-in corpus by name, falling back to ``pydoc_data.topics`` when it is missing.

    Args:
        name: "tang300", "song100" or "pydoc_topics".
        fortunes_dir: where the fortune files live (default ``/usr/share/games/fortunes``).

    Returns:
        The corpus; when the fortune file is missing, the fallback corpus whose ``message`` says
        which file was missing and how to install ``fortunes-zh``.

    Raises:
        ValueError: for an unknown name.
        CorpusError: if the fortune file exists but cannot be used.
    """
    if name == FALLBACK_NAME:
        return fallback_corpus()
    if name not in BUILTIN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; choose one of {BUILTIN_CORPORA + (FALLBACK_NAME,)}")
    path = Path(fortunes_dir if fortunes_dir is not None else FORTUNES_DIR) / name
    if not path.is_file():
        return fallback_corpus(
            message=(
                f"{path} was not found, so the Chinese poems are not available. They come with the "
                "'fortunes-zh' package: `sudo apt-get install fortunes-zh` on Debian/Ubuntu "
                "(packages.txt installs it on Streamlit Community Cloud). Using English text from "
                "Python's pydoc_data.topics instead."
            )
        )
    return _corpus_from_text(decode_text(path.read_bytes(), str(path)), name)


def decode_text(data: bytes, name: str) -> str:
    """Checks and decodes uploaded bytes as UTF-8 text (BOM removed, line ends normalised to "\\n").

    Raises:
        CorpusError: if ``data`` is empty or whitespace only, larger than 20 MB, holds NUL bytes
            (binary), or is not valid UTF-8 (the message gives the byte offset).
    """
    if len(data) > MAX_BYTES:
        raise CorpusError(f"{name}: {len(data) / 2**20:.1f} MB is over the 20 MB limit")
    if not data.strip():
        raise CorpusError(f"{name}: the file is empty")
    if b"\x00" in data:
        raise CorpusError(f"{name}: the file holds NUL bytes, so it looks binary, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(
            f"{name}: not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8 and try again"
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def corpus_from_bytes(data: bytes, name: str = "upload") -> Corpus:
    """Builds a corpus from an uploaded file's bytes.

    A text with lines holding ``%`` is read as a fortune file; any other text is split into
    records at blank lines.

    Raises:
        CorpusError: see ``decode_text``; also when the text is too short to split.
    """
    return _corpus_from_text(decode_text(data, name), name)


def _corpus_from_text(text: str, name: str) -> Corpus:
    is_fortune = any(line.rstrip() == "%" for line in text.split("\n"))
    records = parse_fortunes(text) if is_fortune else parse_paragraphs(text)
    return Corpus(name, records)
