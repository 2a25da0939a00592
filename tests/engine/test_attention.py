"""engine.attention against the chapter's printed numbers, the fast path, and invariants."""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from engine.sections import self_attention as S

ATOL = 5e-5  # the chapter prints 4 decimals


def close(actual, expected):
    torch.testing.assert_close(actual.detach().float(), torch.tensor(expected, dtype=torch.float32), atol=ATOL, rtol=0)


@pytest.fixture
def inputs():
    return A.chapter_inputs()


@pytest.fixture
def batch(inputs):
    return torch.stack((inputs, inputs), dim=0)  # (2, 6, 3)


# --- the chapter's numbers -------------------------------------------------------------------------


def test_simplified_journey_numbers(inputs):
    steps = S.query_walkthrough(inputs, 1)
    close(steps.attn_scores, chapter.SIMPLE_SCORES_JOURNEY)
    close(steps.naive_weights, chapter.SIMPLE_NAIVE_WEIGHTS_JOURNEY)
    close(steps.attn_weights, chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY)
    close(steps.context_vec, chapter.SIMPLE_CONTEXT_JOURNEY)


def test_simplified_all_pairs(inputs):
    context_vec, attn_weights, attn_scores = A.simplified_self_attention(inputs)
    close(attn_scores[:2], chapter.SIMPLE_SCORES_FIRST_ROWS)
    close(context_vec, chapter.SIMPLE_ALL_CONTEXT)
    torch.testing.assert_close(attn_weights.sum(-1), torch.ones(6))


def test_trainable_weights_step(inputs):
    torch.manual_seed(chapter.TRAINABLE_SEED)
    W_query, W_key, W_value = (torch.rand(3, 2) for _ in range(3))
    step = A.scaled_dot_product_step(inputs, W_query, W_key, W_value, query_index=1)
    close(step["query"], chapter.TRAINABLE_QUERY_2)
    close(step["attn_scores"], chapter.TRAINABLE_SCORES_2)
    close(step["attn_weights"], chapter.TRAINABLE_WEIGHTS_2)
    close(step["context_vec"], chapter.TRAINABLE_CONTEXT_2)


def test_self_attention_v1_v2(inputs):
    torch.manual_seed(chapter.SA_V1_SEED)
    close(A.SelfAttention_v1(3, 2)(inputs), chapter.SA_V1_OUTPUT)
    torch.manual_seed(chapter.SA_V2_SEED)
    sa_v2 = A.SelfAttention_v2(3, 2)
    out, weights = sa_v2(inputs, return_weights=True)
    close(out, chapter.SA_V2_OUTPUT)
    close(weights, chapter.SA_V2_WEIGHTS)


def test_exercise_3_1_copy_v2_into_v1(inputs):
    torch.manual_seed(789)
    sa_v2 = A.SelfAttention_v2(3, 2)
    sa_v1 = A.copy_v2_into_v1(A.SelfAttention_v1(3, 2), sa_v2)
    torch.testing.assert_close(sa_v1(inputs), sa_v2(inputs))


def test_causal_weights_of_v2(inputs):
    weights = causal_weights_of_v2(inputs)
    close(weights, chapter.CAUSAL_WEIGHTS)
    assert weights[1, :2].tolist() == pytest.approx([0.5517, 0.4483], abs=ATOL)  # "row 2" of the chapter


def causal_weights_of_v2(inputs):
    """The chapter's causal weights: SelfAttention_v2 (seed 789) projections, -inf mask, softmax."""
    torch.manual_seed(chapter.SA_V2_SEED)
    sa_v2 = A.SelfAttention_v2(3, 2)
    ca = A.CausalAttention(3, 2, 6, 0.0)
    ca.load_state_dict({**sa_v2.state_dict(), "mask": ca.mask})
    return ca(inputs.unsqueeze(0), return_weights=True)[1][0]  # (6, 6)


def test_dropout_chapter_matrices(inputs):
    torch.manual_seed(chapter.DROPOUT_SEED)
    dropout = torch.nn.Dropout(chapter.DROPOUT_P)
    close(dropout(torch.ones(6, 6)), chapter.DROPOUT_ONES)
    weights = causal_weights_of_v2(inputs).detach()
    torch.manual_seed(chapter.DROPOUT_SEED)
    close(dropout(weights), chapter.DROPOUT_CAUSAL)


def test_causal_attention_and_wrapper(batch):
    torch.manual_seed(chapter.MHA_WRAPPER_SEED)
    ca = A.CausalAttention(3, 2, 6, 0.0)
    out = ca(batch)
    assert out.shape == (2, 6, 2)
    close(out[0], [row[:2] for row in chapter.MHA_WRAPPER_OUTPUT])  # the wrapper's first head is this module
    torch.manual_seed(chapter.MHA_WRAPPER_SEED)
    mha = A.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    out = mha(batch)
    assert out.shape == (2, 6, 4)
    close(out[0], chapter.MHA_WRAPPER_OUTPUT)
    close(out[1], chapter.MHA_WRAPPER_OUTPUT)


def test_multi_head_attention_split(batch):
    torch.manual_seed(chapter.MHA_SPLIT_SEED)
    mha = A.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
    out = mha(batch)
    assert out.shape == (2, 6, 2)
    close(out[0, 0], chapter.MHA_SPLIT_FIRST_ROW)


def test_wrapper_weights_copied_into_split_give_same_heads(batch):
    torch.manual_seed(0)
    wrapper = A.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=3)
    split = A.copy_wrapper_into_split(wrapper, A.MultiHeadAttention(3, 6, 6, 0.0, num_heads=3))
    torch.testing.assert_close(split(batch, return_heads=True), wrapper(batch), atol=1e-6, rtol=0)


# --- invariants of every variant -------------------------------------------------------------------


def all_variants(d_in=4, d_out=6, T=7, num_heads=3, dropout=0.0):
    """(name, module, needs_batch, causal) for each of the chapter's trainable variants."""
    return [
        ("SelfAttention_v1", A.SelfAttention_v1(d_in, d_out), False, False),
        ("SelfAttention_v2", A.SelfAttention_v2(d_in, d_out), False, False),
        ("CausalAttention", A.CausalAttention(d_in, d_out, T, dropout), True, True),
        ("MultiHeadAttentionWrapper",
         A.MultiHeadAttentionWrapper(d_in, d_out // num_heads, T, dropout, num_heads), True, True),
        ("MultiHeadAttention", A.MultiHeadAttention(d_in, d_out, T, dropout, num_heads), True, True),
    ]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), T=st.integers(1, 7))
def test_rows_sum_to_one_and_causal_zeros(seed, T):
    torch.manual_seed(seed)
    x = torch.randn(2, T, 4)
    for name, module, needs_batch, causal in all_variants():
        out, weights = module(x if needs_batch else x[0], return_weights=True)
        assert torch.isfinite(out).all(), name
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), msg=name)
        if causal:
            above = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
            assert (weights[..., above] == 0).all(), name


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), changed=st.integers(0, 6))
def test_later_token_never_changes_earlier_output(seed, changed):
    torch.manual_seed(seed)
    x = torch.randn(1, 7, 4)
    x2 = x.clone()
    x2[0, changed] += torch.randn(4) * 3
    for name, module, _needs_batch, causal in all_variants():
        if not causal:
            continue
        out, out2 = module(x), module(x2)
        torch.testing.assert_close(out[0, :changed], out2[0, :changed], atol=0, rtol=0, msg=name)
        assert not torch.allclose(out[0, changed:], out2[0, changed:]), name


def test_scale_uses_per_head_dim():
    torch.manual_seed(0)
    mha = A.MultiHeadAttention(8, 12, 5, 0.0, num_heads=4)
    x = torch.randn(1, 5, 8)
    _, weights = mha(x, return_weights=True)
    q = mha.split_heads(mha.W_query(x))  # (1, 4, 5, 3)
    k = mha.split_heads(mha.W_key(x))
    scores = (q @ k.transpose(-2, -1)).masked_fill(A.causal_mask(5), float("-inf"))
    torch.testing.assert_close(weights, torch.softmax(scores / 3**0.5, dim=-1))
    assert not torch.allclose(weights, torch.softmax(scores / 12**0.5, dim=-1))


def test_causal_variants_equal_sdpa():
    torch.manual_seed(1)
    x = torch.randn(3, 9, 8)
    ca = A.CausalAttention(8, 8, 9, 0.0)
    ref = F.scaled_dot_product_attention(ca.W_query(x), ca.W_key(x), ca.W_value(x), is_causal=True)
    torch.testing.assert_close(ca(x), ref, atol=1e-6, rtol=0)

    wrapper = A.MultiHeadAttentionWrapper(8, 4, 9, 0.0, num_heads=2)
    refs = [F.scaled_dot_product_attention(h.W_query(x), h.W_key(x), h.W_value(x), is_causal=True)
            for h in wrapper.heads]
    torch.testing.assert_close(wrapper(x), torch.cat(refs, dim=-1), atol=1e-6, rtol=0)

    mha = A.MultiHeadAttention(8, 8, 9, 0.0, num_heads=4)
    q, k, v = (mha.split_heads(w(x)) for w in (mha.W_query, mha.W_key, mha.W_value))  # (3, 4, 9, 2)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(3, 9, 8)  # (3, 9, 8)
    torch.testing.assert_close(mha(x), mha.out_proj(ref), atol=1e-6, rtol=0)


def test_in_place_path_equals_the_chapter_formula_and_its_gradients():
    """masked_fill_ in place on the fresh scores gives the out-of-place formula's values and gradients."""
    torch.manual_seed(5)
    x = torch.randn(2, 7, 8)
    mha = A.MultiHeadAttention(8, 12, 7, 0.0, num_heads=3)
    x1, x2 = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    out, weights = mha(x1, return_weights=True)
    q, k, v = (mha.split_heads(w(x2)) for w in (mha.W_query, mha.W_key, mha.W_value))  # (2, 3, 7, 4)
    scores = (q @ k.transpose(-2, -1)).masked_fill(A.causal_mask(7), float("-inf"))  # (2, 3, 7, 7)
    ref_weights = torch.softmax(scores / 4**0.5, dim=-1)
    ref = mha.out_proj((ref_weights @ v).transpose(1, 2).reshape(2, 7, 12))  # (2, 3, 7, 4) -> (2, 7, 12)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=0)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    grad_out = torch.randn(2, 7, 12)
    out.backward(grad_out)
    ref.backward(grad_out)
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=0)


def test_mask_on_another_device_is_refused():
    ca = A.CausalAttention(3, 2, 6, 0.0)
    ca.mask = ca._buffers.pop("mask").to("meta")  # a plain attribute left on another device
    with pytest.raises(RuntimeError, match="same device"):
        ca(torch.randn(1, 6, 3))


def test_dropout_only_in_training():
    torch.manual_seed(2)
    x = torch.randn(2, 6, 4)
    for _, module, _needs_batch, causal in all_variants(dropout=0.5):
        if not causal:
            continue
        module.eval()
        torch.testing.assert_close(module(x), module(x))
        module.train()
        torch.manual_seed(3)
        a = module(x)
        torch.manual_seed(4)
        assert not torch.allclose(a, module(x))


def test_mask_is_a_buffer():
    ca = A.CausalAttention(3, 2, 6, 0.0)
    assert "mask" in ca.state_dict()
    assert ca.to(torch.float64).mask.dtype == torch.float64 or ca.mask.dtype == torch.bool


# --- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: A.MultiHeadAttention(3, 5, 6, 0.0, num_heads=2), "d_out=5 is not divisible by num_heads=2"),
        (lambda: A.CausalAttention(3, 2, 6, 1.0), "dropout must be in [0, 1), got 1.0"),
        (lambda: A.CausalAttention(3, 2, 6, -0.1), "dropout must be in [0, 1), got -0.1"),
        (lambda: A.MultiHeadAttention(3, 4, 6, 1.5, num_heads=2), "dropout must be in [0, 1)"),
        (lambda: A.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=0), "num_heads must be positive"),
    ],
)
def test_bad_constructor_arguments(build, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        build()


def test_too_long_and_wrong_rank():
    ca = A.CausalAttention(3, 2, 6, 0.0)
    with pytest.raises(ValueError, match="7 tokens but context_length is 6"):
        ca(torch.randn(1, 7, 3))
    with pytest.raises(ValueError, match="rank 3"):
        ca(torch.randn(6, 3))
    mha = A.MultiHeadAttention(3, 4, 6, 0.0, num_heads=2)
    with pytest.raises(ValueError, match="8 tokens but context_length is 6"):
        mha(torch.randn(1, 8, 3))
    with pytest.raises(ValueError, match="rank 2"):
        A.SelfAttention_v1(3, 2)(torch.randn(1, 6, 3))
    with pytest.raises(ValueError, match="query_index"):
        A.scaled_dot_product_step(torch.randn(6, 3), *(torch.rand(3, 2) for _ in range(3)), query_index=6)
