"""Training text for the course's character-level GPT: built-in poems, a fallback, user uploads.

The default corpus, ``tang``, is the complete Tang poetry (全唐诗) of the npm package
``chinese-poetry`` 2.0.1 (MIT licence), converted to simplified characters with OpenCC ``t2s``
and cleaned by ``engine.corpus.build`` (``python -m engine.corpus build``; the rules are in that
module's docstring). It ships as ``assets/corpus/tang.jsonl.xz``: one JSON object per line with
``title``, ``author`` and ``body``, xz-compressed, read with the standard library only
(``lzma``, ``json``). Its split is by poem: a poem is in validation when the CRC-32 of its body's
UTF-8 bytes is divisible by 10 (about 10 %), so a poem never straddles the split and the same
body (the collection repeats some) always falls on the same side. Its vocabulary is the characters
seen at least ``TANG_MIN_COUNT`` times in the training split plus one unknown token
(``CharTokenizer.from_counts``); ``Corpus.vocab_stats`` says what that covers.

The small corpora come from Debian's ``fortunes-zh`` package (``/usr/share/games/fortunes``):

* ``tang300``: 313 Tang poems (the lesson's kind of text; it holds "白日依山尽");
* ``song100``: Song ci (the file holds 96 records).

They are fortune files: records separated by a line holding ``%``, the title and author lines
wrapped in ANSI colour codes (``ESC[32m ... ESC[m``). The parser strips every ANSI escape and
keeps title, author and body apart; the model trains on the bodies (the poem lines), records
joined by a blank line.

Where the package is missing, ``load_corpus`` falls back to English text that ships with every
CPython (``pydoc_data.topics``, the language reference's topic texts) and says how to get the poems
in ``Corpus.message``. User text arrives as bytes through ``corpus_from_bytes``: UTF-8 (with or without a
byte-order mark) or UTF-16/UTF-32 with their byte-order mark, decoded by ``decode_text``.

A corpus keeps its records as offsets into its one text (:class:`Records`), not as one object per record, so
a text of many short paragraphs costs a small multiple of its size in a reader's session.

Split of every other corpus: records are split 90/10 deterministically (every tenth record,
indices 9, 19, 29 ..., goes to validation, which spreads the validation poems over the whole
collection). A text with fewer than 10 records is split by characters instead: the last 10 % goes
to validation. Their vocabulary is every character of the text (no unknown token), as before.
"""

from __future__ import annotations

import json
import logging
import lzma
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, overload

import numpy as np
import torch

from engine.tokenizer import CharTokenizer, char_counts

FORTUNES_DIR = Path("/usr/share/games/fortunes")
ASSET_DIR = Path(__file__).resolve().parents[2] / "assets" / "corpus"
TANG_NAME = "tang"
TANG_ASSET = ASSET_DIR / "tang.jsonl.xz"
# Characters seen fewer times in tang's training split share the unknown token: the logits (batch x block x vocab)
# of a Lab training stay within the resource budget, and the characters kept are the ones a small model meets often
# enough to learn (assets/corpus/README.md gives the counts).
TANG_MIN_COUNT = 50
# What `python -m engine.corpus build` writes from chinese-poetry 2.0.1 (OpenCC 1.4.2, CPython's liblzma).
TANG_RECORDS = 55809
TANG_SHA256 = "3db7272cb4fd0c0da0002538735c93bd5cc4ac84aeda382b6d516971d545b120"
FORTUNE_CORPORA = ("tang300", "song100")
BUILTIN_CORPORA = (TANG_NAME,) + FORTUNE_CORPORA
DEFAULT_CORPUS = TANG_NAME
FALLBACK_NAME = "pydoc_topics"
#: ``Corpus.message`` keys: why the fallback text is used (the page words them in the reader's language).
MISSING_FORTUNES = "fortunes_zh_missing"
MISSING_TANG_ASSET = "tang_asset_missing"
MAX_ASSET_BYTES = 64 * 1024 * 1024  # a decompressed corpus asset above 64 MB is refused
MAX_BYTES = 20 * 1024 * 1024  # a text file read by the command line (engine.train); the Lab's uploads: engine.budget
RECORD_SEPARATOR = "\n\n"  # between record bodies in the training text
VAL_EVERY = 10  # record i goes to validation when i % VAL_EVERY == VAL_EVERY - 1

# CSI escape sequences such as "\x1b[32m" (green) and "\x1b[m" (reset): ESC [ params intermediates final.
_log = logging.getLogger(__name__)
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_LABEL_RE = re.compile(r"^(题目|作者)\s*[:：]\s*")


class CorpusError(ValueError):
    """A text that cannot be used as a corpus (empty, binary, not UTF-8, too large, too short).

    Attributes:
        reason: a stable key for pages: "empty", "too_large", "binary", "not_utf8", "too_short" or
            "unreadable" (a corpus asset that is not what it should be).
    """

    def __init__(self, message: str, reason: str = "unreadable"):
        super().__init__(message)
        self.reason = reason


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


def is_val_by_hash(body: str) -> bool:
    """The ``"hash"`` split rule: True when the CRC-32 of ``body``'s UTF-8 bytes is divisible by 10.

    About one poem in ten; fixed by the text alone, so identical bodies share a side and adding or
    removing other poems never moves a poem across the split.
    """
    return zlib.crc32(body.encode("utf-8")) % VAL_EVERY == 0


def paragraph_bodies(text: str) -> list[str]:
    """Plain text cut into paragraphs at blank lines (colour codes removed, blank paragraphs dropped)."""
    text = strip_ansi(text.replace("\r\n", "\n"))
    return [body for p in re.split(r"\n[ \t]*\n", text) if (body := p.strip("\n")).strip()]


class _Strings:
    """A tuple of strings held as one string and offsets (int64, shape (n + 1,)): item i is
    ``text[starts[i] : starts[i + 1]]``. Tens of thousands of short titles cost one object each in a tuple; here
    they cost their characters and eight bytes."""

    def __init__(self, values: Sequence[str]):
        self._text = "".join(values)
        self._starts = np.zeros(len(values) + 1, dtype=np.int64)  # (n + 1,)
        np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)), out=self._starts[1:])

    def __getitem__(self, i: int) -> str:
        return self._text[int(self._starts[i]) : int(self._starts[i + 1])]


class Records(Sequence[Record]):
    """A corpus's records as a read-only sequence over its text: bodies are slices, nothing per record but offsets.

    The text is the bodies joined by :data:`RECORD_SEPARATOR`; ``starts`` (int64, shape (n + 1,)) holds where
    each body starts and, last, where a body after the last one would start, so body i is
    ``text[starts[i] : starts[i + 1] - len(RECORD_SEPARATOR)]``. Titles and authors are kept only when a
    record has one (the poem collections); a record is built when it is read.

    Args:
        records: the parsed records.

    Attributes:
        text: the bodies joined by the separator.
    """

    def __init__(self, records: Sequence[Record]):
        has_names = any(r.title or r.author for r in records)
        self._titles = _Strings([r.title for r in records]) if has_names else None
        self._authors = _Strings([r.author for r in records]) if has_names else None
        self._set_bodies([r.body for r in records])

    @classmethod
    def from_bodies(cls, bodies: list[str]) -> Records:
        """Records of these bodies, without titles or authors (no ``Record`` object is made)."""
        records = cls.__new__(cls)
        records._titles = records._authors = None
        records._set_bodies(bodies)
        return records

    def _set_bodies(self, bodies: list[str]) -> None:
        self.text = RECORD_SEPARATOR.join(bodies)
        lengths = np.fromiter((len(b) + len(RECORD_SEPARATOR) for b in bodies), dtype=np.int64, count=len(bodies))
        self._starts = np.zeros(len(bodies) + 1, dtype=np.int64)  # (n + 1,)
        np.cumsum(lengths, out=self._starts[1:])

    def __len__(self) -> int:
        return len(self._starts) - 1

    def body(self, i: int) -> str:
        """The body of record ``i`` (0 <= i < len)."""
        return self.text[int(self._starts[i]) : int(self._starts[i + 1]) - len(RECORD_SEPARATOR)]

    @overload
    def __getitem__(self, i: int) -> Record: ...
    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} of {n}")
        i %= n
        if self._titles is None:
            return Record("", "", self.body(i))
        return Record(self._titles[i], self._authors[i], self.body(i))

    def __iter__(self) -> Iterator[Record]:
        return (self[i] for i in range(len(self)))

    def bodies(self) -> Iterator[str]:
        """Every body, in order."""
        return (self.body(i) for i in range(len(self)))


@dataclass(frozen=True)
class VocabStats:
    """What the corpus's vocabulary covers (lesson: the Lab's corpus step).

    Attributes:
        distinct_chars: distinct characters in the whole text (train and val, separators included).
        vocab_size: tokens of the tokenizer (including the unknown token, if any).
        min_count: occurrences in the training split a character needs for its own token
            (1: every character of the text has one, no unknown token).
        has_unk: whether rare and unseen characters share an unknown token.
        train_unk_rate, val_unk_rate: share of each split's tokens that are the unknown token
            (0.0 without one); floats in [0, 1].
        val_coverage: 1 - val_unk_rate, the share of validation characters with their own token.
    """

    distinct_chars: int
    vocab_size: int
    min_count: int
    has_unk: bool
    train_unk_rate: float
    val_unk_rate: float
    val_coverage: float


class Corpus:
    """A named text, its records, its vocabulary and its train/val split as token ids.

    Args:
        name: "tang", "tang300", "song100", "pydoc_topics" or the name given to ``corpus_from_bytes``.
        records: the parsed records (a list, or :class:`Records`).
        message: see the attribute.
        split: ``"interleave"`` (record i is validation when i % 10 == 9; by characters under 10
            records) or ``"hash"`` (``is_val_by_hash`` of the body).
        min_count: 1 builds the vocabulary from every character of the text, no unknown token;
            k > 1 keeps the characters seen at least k times in the training split and maps the
            rest (and validation characters never seen in training) to one unknown token.

    Attributes:
        name, message: as given; message is a stable key (``MISSING_FORTUNES``,
            ``MISSING_TANG_ASSET``) that the page words for the reader (e.g. why the
            fallback text is used), None when all is well.
        records: the records (:class:`Records`: offsets into ``text``, a record built when read).
        text: the record bodies joined by a blank line.
        tokenizer: the ``CharTokenizer`` (see ``min_count``).
        train_ids, val_ids: tensors of shape (n_train,), (n_val,) on the CPU, int16 when the vocabulary has
            at most 32 767 tokens (every corpus within ``engine.budget.MAX_VOCAB``), else int32, a quarter of
            int64's memory for a text held in a reader's session; batches are int64.

    Raises:
        CorpusError: if there are no records, or a split ends up with fewer than 2 tokens.
        ValueError: for an unknown ``split`` or ``min_count`` < 1.
    """

    def __init__(
        self,
        name: str,
        records: Sequence[Record],
        message: str | None = None,
        split: Literal["interleave", "hash"] = "interleave",
        min_count: int = 1,
    ):
        if split not in ("interleave", "hash"):
            raise ValueError(f"split must be 'interleave' or 'hash', got {split!r}")
        if min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {min_count}")
        if not records:
            raise CorpusError(f"corpus {name!r} has no text")
        self.name = name
        self.records = records if isinstance(records, Records) else Records(records)
        self.message = message
        self.split = split
        self.min_count = min_count
        self.text = self.records.text
        train_text, val_text = self._split_texts()
        if min_count == 1:
            self.tokenizer = CharTokenizer.from_text(self.text)
        else:
            self.tokenizer = CharTokenizer.from_counts(char_counts(train_text), min_count)
        dtype = torch.int16 if self.tokenizer.vocab_size <= torch.iinfo(torch.int16).max + 1 else torch.int32
        self.train_ids = self.tokenizer.encode_tensor(train_text).to(dtype)
        self.val_ids = self.tokenizer.encode_tensor(val_text).to(dtype)
        if len(self.train_ids) < 2 or len(self.val_ids) < 2:
            raise CorpusError(
                f"corpus {name!r} is too short to split: {len(self.text)} characters "
                f"({len(self.train_ids)} train, {len(self.val_ids)} val)"
            )

    def _split_texts(self) -> tuple[str, str]:
        if self.split == "hash" or len(self.records) >= VAL_EVERY:
            train, val = [], []
            for i, body in enumerate(self.records.bodies()):
                is_val = is_val_by_hash(body) if self.split == "hash" else i % VAL_EVERY == VAL_EVERY - 1
                (val if is_val else train).append(body)
            return RECORD_SEPARATOR.join(train), RECORD_SEPARATOR.join(val)
        cut = len(self.text) - max(2, len(self.text) // VAL_EVERY)
        return self.text[:cut], self.text[cut:]

    @property
    def vocab_size(self) -> int:
        """Number of tokens (distinct characters, plus the unknown token if there is one)."""
        return self.tokenizer.vocab_size

    @cached_property
    def vocab_stats(self) -> VocabStats:
        """Vocabulary size, the rarity threshold and the unknown-token rate of each split."""
        unk_id = self.tokenizer.unk_id

        def rate(ids: torch.Tensor) -> float:
            return 0.0 if unk_id is None else float((ids == unk_id).sum()) / len(ids)

        val_unk = rate(self.val_ids)
        return VocabStats(
            distinct_chars=len(char_counts(self.text)),
            vocab_size=self.vocab_size,
            min_count=self.min_count,
            has_unk=unk_id is not None,
            train_unk_rate=rate(self.train_ids),
            val_unk_rate=val_unk,
            val_coverage=1.0 - val_unk,
        )

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
        window = data[index].long()  # (B, T+1), int64 as nn.Embedding and cross_entropy want
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


def read_records_asset(path: Path | str) -> list[Record]:
    """Reads a corpus asset: xz-compressed UTF-8 JSON lines ``{"title", "author", "body"}``.

    Raises:
        CorpusError: if the file is not xz, decompresses to more than 64 MB, or a line is not a
            JSON object with three string fields and a non-empty body (the message gives the line).
    """
    records = []
    size = 0
    try:
        with lzma.open(path, "rb") as f:  # read line by line: no copy of the whole text is ever held
            for number, line in enumerate(f, start=1):
                size += len(line)
                if size > MAX_ASSET_BYTES:
                    raise CorpusError(f"{path}: decompresses to more than {MAX_ASSET_BYTES // 2**20} MB")
                try:
                    item = json.loads(line)
                    record = Record(title=item["title"], author=item["author"], body=item["body"])
                except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
                    raise CorpusError(f"{path}, line {number}: not a title/author/body record ({exc})") from exc
                if not all(isinstance(v, str) for v in (record.title, record.author, record.body)) or not record.body:
                    raise CorpusError(
                        f"{path}, line {number}: title, author and body must be strings, the body non-empty"
                    )
                records.append(record)
    except (lzma.LZMAError, EOFError) as exc:
        raise CorpusError(f"{path}: not a complete xz file ({exc})") from exc
    return records


def load_corpus(
    name: str = DEFAULT_CORPUS, fortunes_dir: Path | str | None = None, asset: Path | str | None = None
) -> Corpus:
    """Loads a built-in corpus by name, falling back to ``pydoc_data.topics`` when it is missing.

    Args:
        name: "tang" (the default), "tang300", "song100" or "pydoc_topics".
        fortunes_dir: where the fortune files live (default ``/usr/share/games/fortunes``).
        asset: the tang asset to read (default ``assets/corpus/tang.jsonl.xz``).

    Returns:
        The corpus; when its file is missing, the fallback corpus whose ``message`` says which
        file was missing and how to get it.

    Raises:
        ValueError: for an unknown name.
        CorpusError: if the file exists but cannot be used.
    """
    if name == FALLBACK_NAME:
        return fallback_corpus()
    if name not in BUILTIN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; choose one of {BUILTIN_CORPORA + (FALLBACK_NAME,)}")
    if name == TANG_NAME:
        path = Path(asset if asset is not None else TANG_ASSET)
        if not path.is_file():
            _log.warning("%s was not found, so the Tang poems are not available: `python -m engine.corpus build` "
                         "rebuilds it (needs npm and a network). Using English text from pydoc_data.topics.", path)
            return fallback_corpus(message=MISSING_TANG_ASSET)
        return Corpus(TANG_NAME, read_records_asset(path), split="hash", min_count=TANG_MIN_COUNT)
    path = Path(fortunes_dir if fortunes_dir is not None else FORTUNES_DIR) / name
    if not path.is_file():
        _log.warning("%s was not found, so the Chinese poems are not available. They come with Debian's "
                     "'fortunes-zh' package (packages.txt installs it on Streamlit Community Cloud). "
                     "Using English text from pydoc_data.topics.", path)
        return fallback_corpus(message=MISSING_FORTUNES)
    return corpus_from_text(decode_text(path.read_bytes(), str(path)), name)


#: Byte-order marks and their codecs, longest first (UTF-32-LE's mark begins with UTF-16-LE's).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"),
)


def decode_text(data: bytes, name: str, max_bytes: int = MAX_BYTES) -> str:
    """Checks and decodes uploaded bytes as text (BOM removed, line ends normalised to "\\n").

    A file that starts with a byte-order mark is decoded with the encoding the mark names (UTF-8,
    UTF-16 or UTF-32, as Windows' Notepad saves "Unicode" text); any other file must be UTF-8.

    Args:
        data: the file's bytes.
        name: names the file in messages.
        max_bytes: the largest file accepted (default :data:`MAX_BYTES`, the command line's; the Lab passes
            ``engine.budget.MAX_TEXT_BYTES``).

    Raises:
        CorpusError: with ``reason`` "too_large" (over ``max_bytes``), "empty" (nothing but
            whitespace), "not_utf8" (not valid in its encoding; the message gives the byte offset)
            or "binary" (a NUL byte in a file without a byte-order mark, a NUL character in one with it).
    """
    if len(data) > max_bytes:
        raise CorpusError(f"{name}: {len(data)} bytes is over the limit of {max_bytes}", "too_large")
    codec, skip = "utf-8", 0
    for mark, bom_codec in _BOMS:
        if data.startswith(mark):
            codec, skip = bom_codec, len(mark)
            break
    if codec == "utf-8" and b"\x00" in data:  # UTF-8 text never holds a NUL byte; an image or archive does
        raise CorpusError(f"{name}: the file holds NUL bytes, so it looks binary, not text", "binary")
    try:
        text = data[skip:].decode(codec)
    except UnicodeDecodeError as exc:
        offset = skip + exc.start
        raise CorpusError(
            f"{name}: not {codec.upper()} text (invalid byte 0x{data[offset]:02x} at offset {offset}); "
            "save the file as UTF-8 and try again", "not_utf8"
        ) from exc
    if not text.strip():
        raise CorpusError(f"{name}: the file is empty", "empty")
    if "\x00" in text:
        raise CorpusError(f"{name}: the file holds NUL characters, so it looks binary, not text", "binary")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def corpus_from_bytes(data: bytes, name: str = "upload") -> Corpus:
    """Builds a corpus from an uploaded file's bytes (decoded by ``decode_text``; see :func:`corpus_from_text`).

    Raises:
        CorpusError: see ``decode_text``; also when the text is too short to split.
    """
    return corpus_from_text(decode_text(data, name), name)


_FORTUNE_SEPARATOR = re.compile(r"^%[^\S\n]*$", re.MULTILINE)


def corpus_from_text(text: str, name: str) -> Corpus:
    """A corpus from decoded text: a text with a line holding only ``%`` is read as a fortune file, any
    other text is split into records at blank lines.

    Raises:
        CorpusError: ("too_short") when the text has no record or a split would be under 2 tokens.
    """
    is_fortune = _FORTUNE_SEPARATOR.search(text) is not None
    records = parse_fortunes(text) if is_fortune else Records.from_bodies(paragraph_bodies(text))
    try:
        return Corpus(name, records)
    except CorpusError as exc:
        raise CorpusError(str(exc), "too_short") from exc
