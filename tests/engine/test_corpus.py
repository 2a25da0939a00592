"""Corpora: the full Tang asset, fortune-file parsing (fortunes-zh), the pydoc fallback, uploads, split and batches."""

import hashlib
import inspect
from collections import Counter

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.corpus import (
    BUILTIN_CORPORA,
    DEFAULT_CORPUS,
    FORTUNES_DIR,
    MAX_BYTES,
    MISSING_FORTUNES,
    MISSING_TANG_ASSET,
    RECORD_SEPARATOR,
    TANG_ASSET,
    TANG_MIN_COUNT,
    TANG_RECORDS,
    TANG_SHA256,
    Corpus,
    CorpusError,
    Record,
    Records,
    corpus_from_bytes,
    decode_text,
    is_val_by_hash,
    load_corpus,
    parse_fortunes,
    strip_ansi,
)
from engine.tokenizer import UNK

needs_fortunes = pytest.mark.skipif(
    not (FORTUNES_DIR / "tang300").is_file(), reason="Debian package fortunes-zh is not installed"
)

FORTUNE_BYTES = (
    "\x1b[32m《登鹳雀楼》\x1b[m\r\n\x1b[33m作者：王之涣\x1b[m\r\n白日依山尽，黄河入海流。\r\n欲穷千里目，更上一层楼。\r\n%\r\n"
    "\x1b[32m题目:《塞上》\x1b[m\n\x1b[33m作者:柳开\x1b[m\n鸣骹直上一千尺，\n%    \n"
    "\x1b[32m《静夜思》\x1b[m\n\x1b[33m作者：李白\x1b[m\n床前明月光，疑是地上霜。\n%\n"
).encode()


@pytest.fixture(scope="module")
def tang():
    return load_corpus("tang300")


@needs_fortunes
def test_tang300_has_313_clean_poems(tang):
    assert tang.name == "tang300" and tang.message is None
    assert len(tang.records) == 313
    everything = "".join(r.title + r.author + r.body for r in tang.records) + tang.text
    assert "\x1b" not in everything and "[m" not in everything
    assert "白日依山尽" in tang.text
    poem = next(r for r in tang.records if "白日依山尽" in r.body)
    assert (poem.title, poem.author) == ("《登鹳雀楼》", "王之涣")
    assert poem.body == "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"
    assert all(r.title and r.author for r in tang.records)
    assert not any("作者" in r.body for r in tang.records)  # author lines never leak into bodies


@needs_fortunes
def test_song100_separator_with_trailing_spaces():
    song = load_corpus("song100")
    assert len(song.records) == 96  # one separator line is "%    "; an exact "%" match would give 95
    assert not any("题目" in r.body or "作者" in r.body for r in song.records)
    assert not any(r.title.startswith("题目") for r in song.records)


def test_parse_fortunes_keeps_title_author_body_apart():
    records = parse_fortunes(FORTUNE_BYTES.decode("utf-8"))
    assert [r.title for r in records] == ["《登鹳雀楼》", "《塞上》", "《静夜思》"]
    assert [r.author for r in records] == ["王之涣", "柳开", "李白"]
    assert records[0].body == "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"
    assert records[1].body == "鸣骹直上一千尺，"


def test_strip_ansi():
    assert strip_ansi("\x1b[32m《题》\x1b[m x \x1b[1;33mY\x1b[0m") == "《题》 x Y"


@needs_fortunes
def test_split_is_deterministic_and_by_record(tang):
    again = load_corpus("tang300")
    assert torch.equal(tang.train_ids, again.train_ids) and torch.equal(tang.val_ids, again.val_ids)
    val_text = tang.tokenizer.decode(tang.val_ids)
    assert val_text.startswith(tang.records[9].body)  # records 9, 19, 29, ... are validation
    assert tang.records[19].body in val_text and tang.records[0].body not in val_text
    share = len(tang.val_ids) / (len(tang.train_ids) + len(tang.val_ids))
    assert 0.05 < share < 0.15


def test_get_batch_shapes_shift_and_seed(tang):
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    x, y = tang.get_batch("train", 4, 32, g1)
    x2, y2 = tang.get_batch("train", 4, 32, g2)
    assert x.shape == y.shape == (4, 32) and x.dtype == y.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x moved one token ahead
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert int(x.max()) < tang.vocab_size


def test_get_batch_errors(tang):
    with pytest.raises(ValueError, match="split must be"):
        tang.get_batch("test", 2, 8)
    with pytest.raises(ValueError, match="block_size .* needs more"):
        tang.get_batch("val", 2, len(tang.val_ids))
    with pytest.raises(ValueError, match="positive"):
        tang.get_batch("train", 0, 8)


def test_fallback_when_fortunes_missing(tmp_path):
    corpus = load_corpus("tang300", fortunes_dir=tmp_path / "missing")
    assert corpus.name == "pydoc_topics"
    assert corpus.message == MISSING_FORTUNES
    assert len(corpus.records) > 10 and corpus.vocab_size < 200
    x, y = corpus.get_batch("val", 2, 64)
    assert x.shape == (2, 64)


def test_unknown_corpus_name():
    with pytest.raises(ValueError, match="unknown corpus 'tang1000'"):
        load_corpus("tang1000")


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "empty"),
        (b"  \n\n ", "empty"),
        ("  \n".encode("utf-16"), "empty"),
        (b"abc\x00def" * 10, "binary"),
        ("abc\x00def".encode("utf-16-le"), "binary"),  # NUL bytes between the letters, no mark: not UTF-16
        ("abc\x00def".encode("utf-16"), "binary"),  # a NUL character once decoded
        ("白日依山尽".encode("gbk") * 10, "not_utf8"),
        (b"\xff\xfe" + "白日".encode("utf-16-le") + b"\x00", "not_utf8"),  # an odd byte count after the mark
        (b"\xff\xfe\x00\xd8a\x00", "not_utf8"),  # a lone surrogate in UTF-16
        (b"ab", "too_short"),
    ],
)
def test_corpus_from_bytes_errors(data, reason):
    with pytest.raises(CorpusError) as caught:
        corpus_from_bytes(data, "upload.txt")
    assert caught.value.reason == reason and "upload.txt" in str(caught.value)


def test_corpus_from_bytes_too_large():
    with pytest.raises(CorpusError) as caught:
        corpus_from_bytes(b"a" * (MAX_BYTES + 1), "big.txt")
    assert caught.value.reason == "too_large" and str(MAX_BYTES) in str(caught.value)
    assert issubclass(CorpusError, ValueError)


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_text_with_a_byte_order_mark_is_decoded(codec):
    text = "\n\n".join(f"白日依山尽 {i}\r\nline two 😀" for i in range(12))
    data = ("\ufeff" + text if codec in ("utf-16-le", "utf-16-be", "utf-32-be") else text).encode(codec)
    assert data[:2] in (b"\xff\xfe", b"\xfe\xff", b"\xef\xbb") or data[:4] == b"\x00\x00\xfe\xff"
    assert decode_text(data, "notepad.txt") == text.replace("\r\n", "\n")
    corpus = corpus_from_bytes(data, "notepad.txt")
    assert corpus.text == text.replace("\r\n", "\n") and len(corpus.records) == 12


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\r"),
                        min_size=1).filter(lambda t: t.strip() and "\n\n" not in t and t == t.strip("\n")),
                min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_records_are_views_of_the_text(bodies):
    records = Records([Record("", "", b) for b in bodies])
    assert len(records) == len(bodies) and records.text == RECORD_SEPARATOR.join(bodies)
    assert [r.body for r in records] == bodies == list(records.bodies())
    assert records[-1].body == bodies[-1] and [r.body for r in records[1:3]] == bodies[1:3]
    with pytest.raises(IndexError):
        records[len(bodies)]


def test_records_keep_titles_only_when_there_are_some():
    named = Records([Record("t1", "a1", "x"), Record("", "", "y")])
    assert (named[0].title, named[0].author, named[1].title) == ("t1", "a1", "")
    assert Records([Record("", "", "x")])._titles is None


def test_corpus_from_bytes_paragraphs_and_fortunes():
    paragraphs = "\n\n".join(f"paragraph {i}\nline two of {i}" for i in range(12)).encode("utf-8")
    corpus = corpus_from_bytes(b"\xef\xbb\xbf" + paragraphs, "notes.txt")  # a BOM is dropped
    assert corpus.name == "notes.txt" and len(corpus.records) == 12
    assert corpus.records[0].body == "paragraph 0\nline two of 0" and "\ufeff" not in corpus.text
    assert corpus.tokenizer.decode(corpus.val_ids) == corpus.records[9].body  # only record 9 of 0..11

    fortunes = corpus_from_bytes(FORTUNE_BYTES, "mine.u8")
    assert len(fortunes.records) == 3  # fewer than 10 records: the last 10 % of characters is validation
    assert fortunes.tokenizer.decode(torch.cat([fortunes.train_ids, fortunes.val_ids])) == fortunes.text



# --- the full Tang corpus (assets/corpus/tang.jsonl.xz) ----------------------------------------------------------
@pytest.fixture(scope="module")
def tang_full():
    return load_corpus("tang")


def test_tang_is_the_default_and_the_small_corpora_stay():
    assert DEFAULT_CORPUS == "tang" and BUILTIN_CORPORA == ("tang", "tang300", "song100")
    assert inspect.signature(load_corpus).parameters["name"].default == "tang"


def test_shipped_tang_asset_is_the_built_one():
    assert hashlib.sha256(TANG_ASSET.read_bytes()).hexdigest() == TANG_SHA256


def test_tang_records(tang_full):
    assert tang_full.name == "tang" and tang_full.message is None
    assert len(tang_full.records) == TANG_RECORDS
    poem = next(r for r in tang_full.records if "白日依山尽" in r.body)
    # The 全唐诗 files it twice, as 朱斌's 登楼 and 王之涣's 登鹳雀楼; the build keeps the first body it meets.
    assert (poem.title, poem.author) in {("登楼", "朱斌"), ("登鹳雀楼", "王之涣")}
    assert poem.body == "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"
    assert not any("□" in r.title + r.author + r.body for r in tang_full.records)
    assert len({r.body for r in tang_full.records}) == len(tang_full.records)  # no body twice
    assert all(r.author for r in tang_full.records)
    assert sum(bool(r.title) for r in tang_full.records) > 0.99 * len(tang_full.records)


def test_tang_split_is_by_poem_and_disjoint(tang_full):
    val = [r.body for r in tang_full.records if is_val_by_hash(r.body)]
    train = [r.body for r in tang_full.records if not is_val_by_hash(r.body)]
    assert not set(val) & set(train)
    assert 0.08 < len(val) / len(tang_full.records) < 0.12
    assert tang_full.tokenizer.decode(tang_full.val_ids) == tang_full.tokenizer.decode(
        tang_full.tokenizer.encode_tensor(RECORD_SEPARATOR.join(val)))
    assert len(tang_full.train_ids) == len(RECORD_SEPARATOR.join(train))


def test_tang_vocabulary(tang_full):
    stats = tang_full.vocab_stats
    tok = tang_full.tokenizer
    assert tok.unk == UNK and stats.has_unk and stats.min_count == TANG_MIN_COUNT
    assert stats.vocab_size == tok.vocab_size < stats.distinct_chars
    train_text = tok.decode(tang_full.train_ids)
    counts = Counter(train_text)
    rare_share = sum(n for c, n in counts.items() if c == UNK) / len(train_text)
    assert stats.train_unk_rate == pytest.approx(rare_share)
    assert 0 < stats.val_unk_rate < 0.02 and stats.val_coverage == pytest.approx(1 - stats.val_unk_rate)
    assert "白" in tok.stoi and "尽" in tok.stoi


def test_tang_missing_asset_falls_back(tmp_path):
    corpus = load_corpus("tang", asset=tmp_path / "missing.jsonl.xz")
    assert corpus.name == "pydoc_topics" and corpus.message == MISSING_TANG_ASSET


def test_hash_split_and_min_count_on_small_records():
    records = [Record("", "", f"{i}{'ab' * i}") for i in range(40)]
    corpus = Corpus("small", records, split="hash", min_count=3)
    val = [r.body for r in records if is_val_by_hash(r.body)]
    assert corpus.tokenizer.decode(corpus.val_ids) == RECORD_SEPARATOR.join(val).translate(
        {ord(c): UNK for c in "0123456789" if c not in corpus.tokenizer.stoi})
    plain = Corpus("small", records)
    assert plain.vocab_stats.has_unk is False and plain.vocab_stats.val_unk_rate == 0.0
    with pytest.raises(ValueError, match="split"):
        Corpus("small", records, split="random")
    with pytest.raises(ValueError, match="min_count"):
        Corpus("small", records, min_count=0)


def test_an_upload_of_one_line_paragraphs_costs_a_few_times_its_size():
    """1.9 MB of one-line paragraphs (~90 000 records): what the corpus holds stays within 4x the file (it was 13x
    with one object per record and int32 ids), and nothing of it outlives the corpus."""
    import gc
    import random
    import tracemalloc

    rng = random.Random(0)
    lines = ["".join(rng.choice("abcdefghij klmnop,.") for _ in range(rng.randint(8, 30))) for _ in range(90_000)]
    data = "\n\n".join(lines).encode()[:1_900_000]
    gc.collect()
    tracemalloc.start()
    try:
        corpus = corpus_from_bytes(data, "lines.txt")
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] + corpus.train_ids.nbytes + corpus.val_ids.nbytes
        assert len(corpus.records) > 80_000 and corpus.train_ids.dtype == torch.int16
        assert held < 4 * len(data), held
        del corpus
        gc.collect()
        assert tracemalloc.get_traced_memory()[0] < len(data) // 10
    finally:
        tracemalloc.stop()
