"""CharTokenizer: round trip, vocabulary order, unknown characters, the unknown token, JSON form."""

import json
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from engine import tokenizer as tokenizer_module
from engine.tokenizer import UNK, CharTokenizer, char_counts

POEM = "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"


def test_round_trip_and_sorted_ids():
    tok = CharTokenizer.from_text(POEM)
    assert tok.decode(tok.encode(POEM)) == POEM
    assert tok.vocab_size == len(set(POEM))
    assert tok.itos == sorted(set(POEM))
    assert tok.encode("\n") == [0]  # "\n" sorts before every CJK character


@given(st.text(min_size=1))
def test_round_trip_any_text(text):
    tok = CharTokenizer.from_text(text)
    ids = tok.encode(text)
    assert len(ids) == len(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text


def test_strict_names_unknown_characters():
    tok = CharTokenizer.from_text(POEM)
    with pytest.raises(ValueError, match="2 character.*'明' '月'"):
        tok.encode("明月白日明")


def test_drop_and_unknown_chars():
    tok = CharTokenizer.from_text(POEM)
    assert tok.unknown_chars("明月白日明") == ["明", "月"]
    assert tok.unknown_chars(POEM) == []
    assert tok.decode(tok.encode("明月白日", errors="drop")) == "白日"
    with pytest.raises(ValueError, match="errors must be"):
        tok.encode(POEM, errors="replace")


def test_encode_tensor_and_decode_tensor():
    tok = CharTokenizer.from_text(POEM)
    ids = tok.encode_tensor("白日")
    assert ids.dtype == torch.int64 and ids.shape == (2,)
    assert tok.decode(ids) == "白日"


def test_decode_rejects_out_of_range_ids():
    tok = CharTokenizer.from_text("ab")
    with pytest.raises(ValueError, match="token id 2 is outside"):
        tok.decode([0, 2])
    with pytest.raises(ValueError, match="token id -1"):
        tok.decode([-1])


def test_json_round_trip():
    tok = CharTokenizer.from_text(POEM + " \t\"\\")
    again = CharTokenizer.from_json(tok.to_json())
    assert again == tok
    assert again.encode(POEM) == tok.encode(POEM)
    assert "白" in tok.to_json()  # stored as the characters themselves, readable in the JSON file


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "invalid"),
        ('{"format": "other", "chars": "ab"}', "not a char-tokenizer"),
        ('{"format": "char-tokenizer/1", "chars": ""}', "non-empty"),
        ('{"format": "char-tokenizer/1", "chars": "aa"}', "repeats"),
    ],
)
def test_from_json_rejects_bad_input(text, message):
    with pytest.raises(ValueError, match=message):
        CharTokenizer.from_json(text)


def test_constructor_rejects_empty_and_multichar():
    with pytest.raises(ValueError, match="at least one"):
        CharTokenizer("")
    with pytest.raises(ValueError, match="single characters"):
        CharTokenizer(["ab", "c"])


@given(st.text(min_size=1), st.text())
def test_encode_tensor_matches_encode(vocab_text, text):
    tok = CharTokenizer.from_text(vocab_text)
    expected = tok.encode(text, errors="drop")
    assert tok.encode_tensor(text, errors="drop").tolist() == expected
    if tok.unknown_chars(text):
        with pytest.raises(ValueError, match="not in the vocabulary"):
            tok.encode_tensor(text)
    else:
        assert tok.encode_tensor(text).tolist() == expected


# --- unknown token (format 2) ------------------------------------------------------------------------------------
COUNTS = {"\n": 5, "白": 4, "日": 3, "依": 1, "山": 2}


def test_from_counts_pools_rare_characters():
    tok = CharTokenizer.from_counts(COUNTS, min_count=3)
    assert tok.unk == UNK and tok.itos == sorted(["\n", "白", "日", UNK])
    assert tok.vocab_size == 4 and tok.unk_id == tok.stoi[UNK]
    ids = tok.encode("白日依山月")  # 依 and 山 are rare, 月 was never seen: all three share the unknown token
    assert ids == [tok.stoi["白"], tok.stoi["日"], tok.unk_id, tok.unk_id, tok.unk_id]
    assert tok.encode("白日依山月", errors="drop") == ids  # with an unknown token nothing is dropped
    assert tok.decode(ids) == "白日" + UNK * 3
    assert tok.unknown_chars("白日依山月" + UNK) == ["依", "山", "月"]  # the token's own character is known
    assert CharTokenizer.from_counts(COUNTS, min_count=1).vocab_size == len(COUNTS) + 1
    with pytest.raises(ValueError, match="min_count"):
        CharTokenizer.from_counts(COUNTS, min_count=0)
    with pytest.raises(ValueError, match="single character"):
        CharTokenizer("ab", unk="??")


def test_unk_json_round_trip_and_old_format_unchanged():
    tok = CharTokenizer.from_counts(COUNTS, min_count=2)
    data = tok.to_dict()
    assert data["format"] == "char-tokenizer/2" and data["unk"] == UNK
    again = CharTokenizer.from_json(tok.to_json())
    assert again == tok and again.unk_id == tok.unk_id
    assert again != CharTokenizer(tok.itos)  # same characters, but one pools unknowns and one refuses them
    plain = CharTokenizer.from_text(POEM)
    assert plain.to_dict() == {"format": "char-tokenizer/1", "chars": "".join(sorted(set(POEM)))}
    assert plain.unk is None and plain.unk_id is None


@pytest.mark.parametrize(
    "data",
    [
        {"format": "char-tokenizer/2", "chars": "ab"},
        {"format": "char-tokenizer/2", "chars": "ab", "unk": "c"},
        {"format": "char-tokenizer/2", "chars": "ab", "unk": "ab"},
    ],
)
def test_from_dict_rejects_bad_unk(data):
    with pytest.raises(ValueError, match="unknown token"):
        CharTokenizer.from_dict(data)


def test_shipped_checkpoint_tokenizer_loads_and_pools_unknowns():
    meta = json.loads((Path(__file__).resolve().parents[2] / "assets/models/course_tang/checkpoint.json")
                      .read_text(encoding="utf-8"))
    tok = CharTokenizer.from_dict(meta["tokenizer"])
    assert meta["tokenizer"]["format"] == "char-tokenizer/2"
    assert tok.unk == UNK and tok.vocab_size == meta["config"]["vocab_size"]
    assert tok.to_dict() == meta["tokenizer"]
    assert tok.encode("白日依山尽") == [tok.stoi[c] for c in "白日依山尽"]  # the lesson's line is in its vocabulary
    assert tok.encode("a\U00020000") == [tok.unk_id, tok.unk_id]  # characters it never learned share one token


def test_format_1_description_still_loads():
    # Written before the unknown token existed; the small corpora's tokenizers (Lab checkpoints) still use it.
    data = {"format": "char-tokenizer/1", "chars": "\n。依尽山日白"}
    tok = CharTokenizer.from_dict(data)
    assert tok.unk is None and tok.unk_id is None and tok.vocab_size == 7
    assert tok.to_dict() == data
    assert tok.decode(tok.encode("白日依山尽。\n")) == "白日依山尽。\n"
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode(UNK)


@given(st.text(min_size=1), st.text(), st.integers(1, 4), st.integers(1, 7))
def test_encode_tensor_matches_encode_with_unk_and_small_chunks(vocab_text, text, min_count, chunk):
    tok = CharTokenizer.from_counts(char_counts(vocab_text), min_count)
    with mock.patch.object(tokenizer_module, "_CHUNK", chunk):  # several slices even for short texts
        assert tok.encode_tensor(text).tolist() == tok.encode(text)
        plain = CharTokenizer.from_text(vocab_text)
        assert plain.encode_tensor(text, errors="drop").tolist() == plain.encode(text, errors="drop")


@given(st.text(), st.integers(1, 5))
def test_char_counts_matches_counter(text, chunk):
    with mock.patch.object(tokenizer_module, "_CHUNK", chunk):
        counts = char_counts(text)
    assert counts == dict(Counter(text)) and list(counts) == sorted(counts)
