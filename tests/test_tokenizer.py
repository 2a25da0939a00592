"""CharTokenizer: round trip, vocabulary order, unknown characters, JSON form."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from engine.tokenizer import CharTokenizer

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
