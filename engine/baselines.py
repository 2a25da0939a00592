"""Counting baselines for the Lab's losses: what a model scores that only counts characters.

A GPT's validation loss means little alone. Two models that learn nothing beyond counting set
the bar on the same train/val split and the same tokens:

* **unigram**: p(b) = (n(b) + 1) / (N + V), the training frequency of each token with add-one
  smoothing, so a validation token never seen in training still gets a probability;
* **bigram**: the next token given the previous one, interpolated with the unigram by
  Witten-Bell: p(b | a) = (n(a, b) + T(a) p_uni(b)) / (n(a) + T(a)), where n(a) counts a as a
  context, n(a, b) the pair and T(a) the distinct tokens seen after a. A context seen often with
  few different followers trusts its counts; a rare or unseen one falls back on the unigram. No
  parameter is tuned, so the validation text plays no part in fitting.

Both are scored as the mean cross-entropy (nats) of tokens 1 .. n-1 of a split (token 0 has no
predecessor, so both baselines skip it), and as perplexity exp(nats). A GPT below the bigram line
on the validation split has learned something beyond which character follows which.

Counting uses numpy on the token ids: the pairs are kept sparse (sorted unique pair codes), so
memory grows with the number of distinct pairs, never with a V x V table (the full Tang corpus
has a vocabulary of about 5 000 characters).

Sources: Jurafsky & Martin, *Speech and Language Processing*, ch. 3 (n-gram models, smoothing,
perplexity); Witten & Bell (1991), "The zero-frequency problem".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from engine.corpus import Corpus


@dataclass(frozen=True)
class BaselineLoss:
    """Cross-entropy of one counting model on the training and validation splits.

    Attributes:
        kind: "unigram" or "bigram".
        train_nats, val_nats: mean cross-entropy in nats per token (float, >= 0).
        train_perplexity, val_perplexity: exp of the above.
    """

    kind: str
    train_nats: float
    val_nats: float

    @property
    def train_perplexity(self) -> float:
        return math.exp(self.train_nats)

    @property
    def val_perplexity(self) -> float:
        return math.exp(self.val_nats)


@dataclass(frozen=True)
class Baselines:
    """The unigram and bigram baselines of one corpus split.

    Attributes:
        unigram, bigram: their losses.
        vocab_size: V, tokens of the vocabulary they were counted over.
        train_tokens, val_tokens: lengths of the splits (tokens).
    """

    unigram: BaselineLoss
    bigram: BaselineLoss
    vocab_size: int
    train_tokens: int
    val_tokens: int


class CountModels:
    """Unigram and Witten-Bell bigram counts of a training sequence of token ids.

    Args:
        train_ids: int tensor or array of shape (n,), n >= 2, values in [0, vocab_size).
        vocab_size: V.

    Raises:
        ValueError: if ``train_ids`` is not one-dimensional, has fewer than 2 tokens, or holds an
            id outside [0, vocab_size).
    """

    def __init__(self, train_ids: torch.Tensor | np.ndarray, vocab_size: int):
        ids = _as_ids(train_ids, vocab_size, "train_ids")
        self.vocab_size = vocab_size
        counts = np.bincount(ids, minlength=vocab_size).astype(np.float64)  # (V,) n(b)
        self.unigram = (counts + 1.0) / (counts.sum() + vocab_size)  # (V,) add-one p_uni(b), sums to 1
        prev, nxt = ids[:-1], ids[1:]  # (n-1,) each: context a and next token b of every pair
        codes = prev * vocab_size + nxt  # (n-1,) int64 pair code a*V + b
        self.pair_codes, pair_counts = np.unique(codes, return_counts=True)  # (P,) sorted codes, their n(a, b)
        self.pair_counts = pair_counts.astype(np.float64)  # (P,)
        self.context_counts = np.bincount(prev, minlength=vocab_size).astype(np.float64)  # (V,) n(a)
        self.target_counts = np.bincount(nxt, minlength=vocab_size).astype(np.float64)  # (V,) n(b) over tokens 1..n-1
        # (V,) T(a): how many pairs start with each character
        self.followers = np.bincount(self.pair_codes // vocab_size, minlength=vocab_size).astype(np.float64)

    def _pair_count(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        codes = a * self.vocab_size + b  # (m,) pair codes
        pos = np.searchsorted(self.pair_codes, codes).clip(max=len(self.pair_codes) - 1)  # (m,)
        found = self.pair_codes[pos] == codes  # (m,) bool
        return np.where(found, self.pair_counts[pos], 0.0)  # (m,) n(a, b), 0 for unseen pairs

    def bigram_prob(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """p(b | a) for arrays of contexts a and next tokens b of equal shape (m,); float64 (m,)."""
        n_a, t_a = self.context_counts[a], self.followers[a]  # (m,) each
        p_uni = self.unigram[b]  # (m,)
        denominator = n_a + t_a  # (m,); 0 only where a was never a context, then T(a) = 0 too
        seen = denominator > 0
        p = p_uni.copy()
        p[seen] = (self._pair_count(a[seen], b[seen]) + t_a[seen] * p_uni[seen]) / denominator[seen]
        return p

    def cross_entropy(self, ids: torch.Tensor | np.ndarray) -> tuple[float, float]:
        """(unigram, bigram) mean cross-entropy in nats over tokens 1 .. n-1 of ``ids`` (shape (n,), n >= 2).

        Raises:
            ValueError: as for the constructor.
        """
        seq = _as_ids(ids, self.vocab_size, "ids")
        a, b = seq[:-1], seq[1:]  # (n-1,) contexts and targets
        unigram = float(-np.log(self.unigram[b]).mean())
        bigram = float(-np.log(self.bigram_prob(a, b)).mean())
        return unigram, bigram


    def train_cross_entropy(self) -> tuple[float, float]:
        """(unigram, bigram) cross-entropy of the training sequence itself, equal to ``cross_entropy(train_ids)``.

        Computed from the counts (one term per distinct token and per distinct pair, weighted by how
        often it occurs) rather than token by token: 3.3 M training tokens hold only ~0.6 M distinct pairs.
        """
        pairs = self.pair_counts.sum()  # n - 1
        unigram = float(-(self.target_counts * np.log(self.unigram)).sum() / pairs)
        a, b = self.pair_codes // self.vocab_size, self.pair_codes % self.vocab_size  # (P,) each
        p = (self.pair_counts + self.followers[a] * self.unigram[b]) / (self.context_counts[a] + self.followers[a])
        bigram = float(-(self.pair_counts * np.log(p)).sum() / pairs)
        return unigram, bigram


def _as_ids(ids: torch.Tensor | np.ndarray, vocab_size: int, name: str) -> np.ndarray:
    array = ids.numpy() if isinstance(ids, torch.Tensor) else np.asarray(ids)
    if array.ndim != 1 or len(array) < 2:
        raise ValueError(f"{name} must be a 1-D sequence of at least 2 token ids, got shape {array.shape}")
    array = array.astype(np.int64, copy=False)
    if array.min() < 0 or array.max() >= vocab_size:
        raise ValueError(f"{name} holds ids outside [0, {vocab_size})")
    return array


def ngram_baselines(train_ids: torch.Tensor | np.ndarray, val_ids: torch.Tensor | np.ndarray,
                    vocab_size: int) -> Baselines:
    """Unigram and bigram cross-entropy of a split, counted on ``train_ids``.

    Args:
        train_ids, val_ids: int tensors or arrays of shape (n_train,), (n_val,), each n >= 2.
        vocab_size: V; every id must lie in [0, V).

    Raises:
        ValueError: for a split shorter than 2 tokens or an id out of range.
    """
    models = CountModels(train_ids, vocab_size)
    train_uni, train_bi = models.train_cross_entropy()
    val_uni, val_bi = models.cross_entropy(val_ids)
    return Baselines(
        unigram=BaselineLoss("unigram", train_uni, val_uni),
        bigram=BaselineLoss("bigram", train_bi, val_bi),
        vocab_size=vocab_size,
        train_tokens=len(train_ids),
        val_tokens=len(val_ids),
    )


def corpus_baselines(corpus: Corpus) -> Baselines:
    """``ngram_baselines`` of a corpus's own split and tokenizer (the numbers the Lab shows beside the losses).

    Pure and deterministic; callers cache it per corpus (e.g. ``st.cache_resource`` keyed by the corpus name).
    """
    return ngram_baselines(corpus.train_ids, corpus.val_ids, corpus.vocab_size)
