"""Counting baselines (engine.baselines): unigram and Witten-Bell bigram cross-entropy.

Checked against a direct count.
"""

import math
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.baselines import CountModels, corpus_baselines, ngram_baselines
from engine.corpus import Corpus, Record


def direct_bigram(train: list[int], vocab_size: int, a: int, b: int) -> float:
    """p(b | a) by the formula, with plain Python counting (the reference for the vectorised version)."""
    counts = Counter(train)
    p_uni = (counts[b] + 1) / (len(train) + vocab_size)
    pairs = Counter(zip(train[:-1], train[1:], strict=False))
    n_a = sum(n for (x, _), n in pairs.items() if x == a)
    t_a = sum(1 for (x, _) in pairs if x == a)
    if n_a == 0:
        return p_uni
    return (pairs[(a, b)] + t_a * p_uni) / (n_a + t_a)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 6).flatmap(lambda v: st.tuples(
    st.just(v), st.lists(st.integers(0, v - 1), min_size=2, max_size=40),
    st.lists(st.integers(0, v - 1), min_size=2, max_size=40))))
def test_matches_direct_count(case):
    vocab_size, train, val = case
    models = CountModels(torch.tensor(train), vocab_size)
    expected_uni = -np.mean([math.log((Counter(train)[b] + 1) / (len(train) + vocab_size)) for b in val[1:]])
    pairs = zip(val[:-1], val[1:], strict=True)
    expected_bi = -np.mean([math.log(direct_bigram(train, vocab_size, a, b)) for a, b in pairs])
    unigram, bigram = models.cross_entropy(np.array(val))
    assert unigram == pytest.approx(expected_uni, rel=1e-9)
    assert bigram == pytest.approx(expected_bi, rel=1e-9)
    by_token = models.cross_entropy(np.array(train))
    assert models.train_cross_entropy() == pytest.approx(by_token, rel=1e-9)  # from the counts, same numbers


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 6).flatmap(lambda v: st.tuples(
    st.just(v), st.lists(st.integers(0, v - 1), min_size=2, max_size=40))))
def test_bigram_is_a_distribution(case):
    vocab_size, train = case
    models = CountModels(np.array(train), vocab_size)
    assert models.unigram.sum() == pytest.approx(1.0)
    for a in range(vocab_size):
        p = models.bigram_prob(np.full(vocab_size, a), np.arange(vocab_size))
        assert p.sum() == pytest.approx(1.0) and (p > 0).all()


def test_bigram_learns_a_cycle_the_unigram_cannot():
    cycle = [0, 1, 2, 3] * 200  # every token equally frequent, the next one fully determined
    result = ngram_baselines(torch.tensor(cycle), torch.tensor(cycle[:80]), vocab_size=4)
    assert result.unigram.val_nats == pytest.approx(math.log(4), rel=1e-2)
    assert result.bigram.val_nats < 0.01
    assert result.bigram.val_perplexity == pytest.approx(math.exp(result.bigram.val_nats))
    assert result.unigram.train_perplexity == pytest.approx(math.exp(result.unigram.train_nats))
    assert (result.vocab_size, result.train_tokens, result.val_tokens) == (4, 800, 80)


def test_unseen_validation_token_has_a_finite_loss():
    result = ngram_baselines(np.array([0, 1, 0, 1]), np.array([2, 2, 0]), vocab_size=3)
    assert math.isfinite(result.unigram.val_nats) and math.isfinite(result.bigram.val_nats)


@pytest.mark.parametrize(
    "train, val, message",
    [
        ([0], [0, 1], "at least 2"),
        ([[0, 1]], [0, 1], "1-D"),
        ([0, 3], [0, 1], "outside"),
        ([0, 1], [0, -1], "outside"),
    ],
)
def test_bad_ids(train, val, message):
    with pytest.raises(ValueError, match=message):
        ngram_baselines(np.array(train), np.array(val), vocab_size=3)


def test_corpus_baselines_use_the_corpus_split():
    records = [Record("", "", "春眠不觉晓，处处闻啼鸟。" if i % 2 else "白日依山尽，黄河入海流。") for i in range(20)]
    corpus = Corpus("tiny", records)
    result = corpus_baselines(corpus)
    again = ngram_baselines(corpus.train_ids, corpus.val_ids, corpus.vocab_size)
    assert result == again
    assert result.bigram.val_nats < result.unigram.val_nats  # these lines repeat, so the previous character tells a lot
