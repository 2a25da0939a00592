"""The chapter's five classes against the book's own code (``llms_from_scratch.ch03``, installed by ``make test``).

Each class of :mod:`engine.attention` is built, its parameters are copied by name into the book's class of the same
name (the book keeps its own causal mask, built by its own ``torch.triu``), and both run on the same input: the
outputs must agree to float rounding, as minGPT checks itself against the reference GPT-2. The chapter's shapes
come first (its six 3-d tokens, d_out 2, the batch of two), then any sizes hypothesis draws (sequences shorter than
the mask included), with dropout 0, and with dropout p in training mode after the same seed (both draw the same
masks, so the outputs agree too).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from llms_from_scratch import ch03 as book
from torch import nn

from engine import attention as A

CLASSES = ("SelfAttention_v1", "SelfAttention_v2", "CausalAttention", "MultiHeadAttentionWrapper",
           "MultiHeadAttention")


def twins(name: str, *args, seed: int = 0, **kwargs) -> tuple[nn.Module, nn.Module]:
    """Ours (seeded) and the book's class ``name``, built with the same arguments, with our parameters copied
    into the book's by name; refuses when the two hold different parameter names or shapes."""
    torch.manual_seed(seed)
    ours = getattr(A, name)(*args, **kwargs)
    theirs = getattr(book, name)(*args, **kwargs)
    mine = dict(ours.named_parameters())
    other = dict(theirs.named_parameters())
    assert mine.keys() == other.keys(), (name, sorted(mine), sorted(other))
    with torch.no_grad():
        for key, param in other.items():
            assert param.shape == mine[key].shape, (name, key)
            param.copy_(mine[key])
    return ours, theirs


def same_output(ours: nn.Module, theirs: nn.Module, x: torch.Tensor, seed: int = 0) -> None:
    torch.manual_seed(seed)
    got = ours(x)
    torch.manual_seed(seed)
    want = theirs(x)
    torch.testing.assert_close(got, want)


def chapter_cases() -> list[tuple[str, tuple, dict, torch.Tensor]]:
    """The chapter's own calls: v1 and v2 on the six tokens (d_in 3, d_out 2), the causal and multi-head classes
    on the batch of two copies (context_length 6)."""
    x = A.chapter_inputs()  # (6, 3)
    batch = torch.stack((x, x))  # (2, 6, 3)
    return [("SelfAttention_v1", (3, 2), {}, x), ("SelfAttention_v2", (3, 2), {}, x),
            ("CausalAttention", (3, 2, 6, 0.0), {}, batch),
            ("MultiHeadAttentionWrapper", (3, 2, 6, 0.0), {"num_heads": 2}, batch),
            ("MultiHeadAttention", (3, 2, 6, 0.0), {"num_heads": 2}, batch)]


@pytest.mark.parametrize(("name", "args", "kwargs", "x"), chapter_cases(), ids=CLASSES)
def test_the_chapters_calls_match_the_book(name, args, kwargs, x):
    ours, theirs = twins(name, *args, seed=123, **kwargs)
    same_output(ours, theirs, x)
    assert ours(x).shape == theirs(x).shape


def test_every_class_of_the_book_is_checked():
    assert {c for c in dir(book) if isinstance(getattr(book, c), type)} >= set(CLASSES)
    assert [case[0] for case in chapter_cases()] == list(CLASSES)


def test_a_changed_weight_is_caught():
    """The comparison can fail: one weight of ours nudged after the copy gives different outputs."""
    x = torch.stack((A.chapter_inputs(), A.chapter_inputs()))
    ours, theirs = twins("MultiHeadAttention", 3, 4, 6, 0.0, num_heads=2)
    with torch.no_grad():
        ours.W_value.weight[0, 0] += 1e-3
    with pytest.raises(AssertionError):
        same_output(ours, theirs, x)


@st.composite
def sizes(draw):
    num_heads = draw(st.integers(1, 4))
    head_dim = draw(st.integers(1, 4))
    context_length = draw(st.integers(1, 9))
    return {"b": draw(st.integers(1, 3)), "T": draw(st.integers(1, context_length)),
            "context_length": context_length, "d_in": draw(st.integers(1, 8)), "num_heads": num_heads,
            "head_dim": head_dim, "qkv_bias": draw(st.booleans()), "dropout": draw(st.sampled_from((0.0, 0.0, 0.3))),
            "seed": draw(st.integers(0, 2**16))}


@settings(max_examples=60, deadline=None)
@given(s=sizes())
def test_any_sizes_match_the_book(s):
    torch.manual_seed(s["seed"] + 1)
    flat = torch.randn(s["T"], s["d_in"])  # (T, d_in) for the two classes without a batch axis
    batch = torch.randn(s["b"], s["T"], s["d_in"])  # (b, T, d_in)
    d_out = s["num_heads"] * s["head_dim"]
    layer = (s["d_in"], s["head_dim"], s["context_length"], s["dropout"])
    cases = [("SelfAttention_v1", (s["d_in"], d_out), {}, flat),
             ("SelfAttention_v2", (s["d_in"], d_out), {"qkv_bias": s["qkv_bias"]}, flat),
             ("CausalAttention", layer, {"qkv_bias": s["qkv_bias"]}, batch),
             ("MultiHeadAttentionWrapper", layer, {"num_heads": s["num_heads"], "qkv_bias": s["qkv_bias"]}, batch),
             ("MultiHeadAttention", (s["d_in"], d_out, s["context_length"], s["dropout"]),
              {"num_heads": s["num_heads"], "qkv_bias": s["qkv_bias"]}, batch)]
    for name, args, kwargs, x in cases:
        ours, theirs = twins(name, *args, seed=s["seed"], **kwargs)
        same_output(ours, theirs, x, seed=s["seed"])  # training mode: dropout p draws the same masks in both
        ours.eval()
        theirs.eval()
        same_output(ours, theirs, x)


def test_the_causal_mask_hides_the_future_in_both():
    """A later token changed moves no earlier output row, in ours and in the book's (the masks agree)."""
    ours, theirs = twins("MultiHeadAttention", 3, 4, 6, 0.0, num_heads=2)
    x = torch.stack((A.chapter_inputs(), A.chapter_inputs()))
    changed = x.clone()
    changed[:, 4] += 1.0
    for layer in (ours, theirs):
        before, after = layer(x), layer(changed)
        torch.testing.assert_close(before[:, :4], after[:, :4])
        assert not torch.allclose(before[:, 4:], after[:, 4:])
