"""engine.sections.multi_head: the chapter's multi-head numbers, the lesson's layer, shapes and costs."""

import pytest
import torch

from engine import attention as A
from engine import chapter
from engine.sections import multi_head as M

ATOL = 5e-5  # the chapter prints 4 decimals


def close(actual, expected):
    torch.testing.assert_close(actual.detach().float(), torch.tensor(expected, dtype=torch.float32), atol=ATOL, rtol=0)


def test_wrapper_matches_chapter():
    out = M.wrapper_output()
    assert out["context_vec"].shape == (2, 6, 4)
    close(out["context_vec"][0], chapter.MHA_WRAPPER_OUTPUT)
    close(out["context_vec"][1], chapter.MHA_WRAPPER_OUTPUT)
    torch.testing.assert_close(out["attn_weights"].sum(-1), torch.ones(2, 2, 6))


def test_split_matches_chapter():
    out = M.split_output()
    assert out["context_vec"].shape == (2, 6, 2)
    close(out["context_vec"][0, 0], chapter.MHA_SPLIT_FIRST_ROW)


def test_exercise_3_2_d_out_one_per_head():
    out = M.wrapper_output(d_out=1, num_heads=2)
    assert out["context_vec"].shape == (2, 6, 2)
    assert out["attn_weights"].shape == (2, 2, 6, 6)


@pytest.mark.parametrize("head_dim, num_heads", [(2, 2), (1, 2), (3, 4), (4, 1)])
def test_wrapper_weights_copied_into_split(head_dim, num_heads):
    out = M.wrapper_vs_split(head_dim=head_dim, num_heads=num_heads)
    assert out["max_abs_diff"] < 1e-6
    assert out["max_abs_diff_before"] > 1e-3
    torch.testing.assert_close(out["split"], out["wrapper"])


def test_divisors_and_split_messages():
    assert M.divisors(32) == [1, 2, 4, 8, 16, 32]
    assert M.divisors(7) == [1, 7]
    assert M.check_split(32, 4) == 8
    with pytest.raises(ValueError, match="d_out=32 is not divisible by num_heads=5"):
        M.check_split(32, 5)
    with pytest.raises(ValueError, match="positive"):
        M.check_split(0, 1)
    assert M.nearest_divisors(32, 5) == (4, 8)
    assert M.nearest_divisors(32, 8) == (8, 8)
    assert M.nearest_divisors(7, 40) == (7, 7)


@pytest.mark.parametrize("num_heads", [1, 2, 4, 8, 16, 32])
def test_param_count_does_not_depend_on_heads(num_heads):
    counts = M.param_counts(chapter.LESSON_N_EMBD, num_heads)
    assert counts["qkv"] == chapter.LESSON_QKV_PARAMS
    assert counts["proj"] == chapter.LESSON_PROJ_PARAMS


def test_lesson_shapes():
    out = M.heads_on_line(M.LESSON_LINE, 32, 4)
    shapes = dict(zip(out["shapes"]["step"], out["shapes"]["shape"]))
    assert shapes["input x"] == "(1, 5, 32)"
    assert shapes["q cut into heads"] == "(1, 4, 5, 8)"
    assert shapes["attention scores"] == "(1, 4, 5, 5)"
    assert shapes["heads joined"] == "(1, 5, 32)"
    assert out["attn_weights"].shape == (4, 5, 5)
    assert out["score_bytes"] == 4 * 5 * 5 * 4
    w = out["attn_weights"]
    torch.testing.assert_close(w.sum(-1), torch.ones(4, 5))
    assert (w.triu(diagonal=1) == 0).all()
    other = M.heads_on_line("山依日白尽", 16, 2)
    assert dict(zip(other["shapes"]["step"], other["shapes"]["shape"]))["q cut into heads"] == "(1, 2, 5, 8)"


def test_heads_differ_from_one_another():
    w = M.heads_on_line(M.LESSON_LINE, 32, 4)["attn_weights"]
    assert (w[0] - w[1]).abs().max() > 1e-3


def test_line_errors():
    with pytest.raises(ValueError, match="empty"):
        M.heads_on_line("", 32, 4)
    with pytest.raises(ValueError, match="not divisible"):
        M.heads_on_line(M.LESSON_LINE, 32, 3)
    with pytest.raises(ValueError, match="at most 64"):
        M.heads_on_line("x" * 65, 32, 4)


def test_same_character_same_embedding():
    x = M.line_embeddings("abca", 8)
    torch.testing.assert_close(x[0, 0], x[0, 3])
    assert not torch.equal(x[0, 0], x[0, 1])


@pytest.mark.parametrize("backend", M.BACKENDS)
def test_fused_backends_agree_with_the_chapter_class(backend):
    torch.manual_seed(1)
    C, H, T = 12, 3, 7
    mha = A.MultiHeadAttention(C, C, context_length=T, dropout=0.0, num_heads=H, qkv_bias=True)
    fused = M.FusedQKVAttention(C, H, context_length=T, backend=backend)
    with torch.no_grad():
        fused.qkv.weight.copy_(torch.cat([mha.W_query.weight, mha.W_key.weight, mha.W_value.weight]))
        fused.qkv.bias.copy_(torch.cat([mha.W_query.bias, mha.W_key.bias, mha.W_value.bias]))
        fused.proj.load_state_dict(mha.out_proj.state_dict())
    x = torch.randn(2, T, C)
    torch.testing.assert_close(fused(x), mha(x), atol=1e-5, rtol=0)


def test_fused_layer_errors():
    with pytest.raises(ValueError, match="not divisible"):
        M.FusedQKVAttention(10, 3, 4)
    with pytest.raises(ValueError, match="backend"):
        M.FusedQKVAttention(8, 2, 4, backend="flash")
    layer = M.FusedQKVAttention(8, 2, 4, backend="sdpa_causal")
    with pytest.raises(ValueError, match="never form"):
        layer(torch.randn(1, 3, 8), return_weights=True)
    with pytest.raises(ValueError, match="context_length"):
        layer(torch.randn(1, 5, 8))
    with pytest.raises(ValueError, match="features"):
        layer(torch.randn(1, 3, 6))
    manual = M.FusedQKVAttention(8, 2, 4)
    out, weights = manual(torch.randn(1, 3, 8), return_weights=True)
    assert out.shape == (1, 3, 8) and weights.shape == (1, 2, 3, 3)


def test_cost_table():
    table = M.cost_table(32, (5, 1024))
    assert table["num_heads"].tolist() == [1, 2, 4, 8, 16, 32]
    assert set(table["qkv params"]) == {3168} and set(table["proj params"]) == {1056}
    assert table["attn_scores bytes at T=5"].tolist() == [h * 25 * 4 for h in (1, 2, 4, 8, 16, 32)]
    assert table["attn_scores bytes at T=1024"].tolist() == [h * 1024**2 * 4 for h in (1, 2, 4, 8, 16, 32)]
