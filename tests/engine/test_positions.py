"""Engine tests for section 7: sinusoidal table, RoPE, learned-table limits, the page's experiments and figures."""

import math

import pytest
import torch

from engine import positions as P

# --- sinusoidal ---------------------------------------------------------------------------------


def test_sinusoidal_position_zero_is_zero_one_alternating():
    table = P.sinusoidal_table(16, 8)
    assert table.shape == (16, 8) and table.dtype == torch.float32
    assert torch.equal(table[0], torch.tensor([0.0, 1.0] * 4))


def test_sinusoidal_follows_vaswani_formula():
    table = P.sinusoidal_table(50, 6)
    pos, i = 37, 2  # columns 4 (sin) and 5 (cos) share the frequency 10000^(-4/6)
    angle = pos / 10000 ** (2 * i / 6)
    assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert table[pos, 0].item() == pytest.approx(math.sin(pos), abs=1e-6)  # pair 0 turns 1 rad per position


@pytest.mark.parametrize("n_embd", [1, 3, 7, 33])
def test_sinusoidal_odd_width(n_embd):
    table = P.sinusoidal_table(10, n_embd)
    assert table.shape == (10, n_embd)
    assert torch.isfinite(table).all()
    expected_row0 = torch.tensor([0.0 if j % 2 == 0 else 1.0 for j in range(n_embd)])
    assert torch.equal(table[0], expected_row0)
    # the unpaired last column is a sine of frequency 10000^(-(n_embd - 1)/n_embd)
    angle = 9 / 10000 ** ((n_embd - 1) / n_embd)
    assert table[9, -1].item() == pytest.approx(math.sin(angle), abs=1e-6)


def test_sinusoidal_runs_past_any_block_size_and_matches_the_table():
    table = P.sinusoidal_table(128, 32)
    far = P.sinusoidal_encoding(torch.arange(120, 300), 32)
    assert far.shape == (180, 32)
    torch.testing.assert_close(far[:8], table[120:128])
    assert torch.isfinite(far).all()


def test_sinusoidal_rejects_bad_sizes():
    with pytest.raises(ValueError, match="n_embd"):
        P.sinusoidal_table(4, 0)
    with pytest.raises(ValueError, match="block_size"):
        P.sinusoidal_table(0, 4)


# --- RoPE -----------------------------------------------------------------------------------------


def test_rope_frequencies_pair_ladder():
    theta = P.rope_frequencies(8)
    torch.testing.assert_close(theta, torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=torch.float64))


@pytest.mark.parametrize("head_dim", [1, 3, 31])
def test_rope_odd_head_dim_is_a_clear_error(head_dim):
    with pytest.raises(ValueError, match="head_dim must be even"):
        P.apply_rope(torch.randn(1, 2, 4, head_dim))
    with pytest.raises(ValueError, match="head_dim must be even"):
        P.rope_frequencies(head_dim)


def test_rope_preserves_norms():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 50, 16)  # (B, nh, T, hs)
    y = P.apply_rope(x, torch.arange(1000, 1050))
    assert y.shape == x.shape
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(y[..., 1:, :], x[..., 1:, :])  # it did rotate


def test_rope_identity_at_position_zero():
    torch.manual_seed(1)
    x = torch.randn(3, 2, 1, 8)
    assert torch.equal(P.apply_rope(x, torch.tensor([0])), x)
    x5 = torch.randn(1, 1, 5, 8)
    assert torch.equal(P.apply_rope(x5)[..., 0, :], x5[..., 0, :])


def test_rope_uses_adjacent_pairs_with_the_documented_frequencies():
    head_dim = 8
    x = torch.zeros(1, head_dim)
    x[0, 2] = 1.0  # pair 1 = dims (2, 3), theta_1 = 10000^(-2/8) = 0.1
    y = P.apply_rope(x, torch.tensor([5]))
    angle = 5 * 0.1
    expected = torch.zeros(head_dim)
    expected[2], expected[3] = math.cos(angle), math.sin(angle)
    torch.testing.assert_close(y[0], expected, atol=1e-6, rtol=0)


def dot_after_rope(q, k, m, n):
    q_m = P.apply_rope(q[None], torch.tensor([m]))[0]
    k_n = P.apply_rope(k[None], torch.tensor([n]))[0]
    return float(q_m @ k_n)


def test_rope_score_depends_only_on_distance():
    torch.manual_seed(2)
    q, k = torch.randn(32), torch.randn(32)
    scores = [dot_after_rope(q, k, m, n) for m, n in ((2, 4), (5, 7), (0, 2))]
    assert max(scores) - min(scores) < 1e-5
    assert abs(dot_after_rope(q, k, 2, 4) - dot_after_rope(q, k, 2, 5)) > 1e-3  # another distance differs
    assert abs(dot_after_rope(q, k, 3, 3) - float(q @ k)) < 1e-5  # distance 0 is the plain dot product


def test_rope_cache_and_manual_rotation_agree():
    torch.manual_seed(3)
    x = torch.randn(2, 3, 6, 10)
    cos, sin = P.rope_cos_sin(6, 10)
    torch.testing.assert_close(P.rotate_pairs(x, cos, sin), P.apply_rope(x))
    with pytest.raises(ValueError, match="cos/sin must be"):
        P.rotate_pairs(x, cos[:5], sin[:5])
    with pytest.raises(ValueError, match="positions has 3 entries"):
        P.apply_rope(x, torch.arange(3))


# --- learned limits, causal counts ----------------------------------------------------------------


def test_learned_positions_error_past_block_size():
    P.check_learned_positions(16, 16)
    with pytest.raises(ValueError, match=r"position 16 is past the learned position table: it has 16 rows"):
        P.check_learned_positions(17, 16)


def test_visible_token_counts():
    assert P.visible_token_counts(5).tolist() == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        P.visible_token_counts(0)


# --- the GPT with each position encoding --------------------------------------------------------------

from engine import gpt as G  # noqa: E402
from engine.presets import preset  # noqa: E402


def tiny_gpt(pos_encoding: str, **overrides) -> G.GPT:
    torch.manual_seed(0)
    return G.GPT(preset("tiny", pos_encoding=pos_encoding, **overrides)).eval()


def ids(T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 16, (2, T), generator=torch.Generator().manual_seed(seed))


def test_config_accepts_every_encoding_and_rope_needs_even_head_dim():
    for enc in (e.key for e in P.ENCODINGS):
        assert preset("tiny", pos_encoding=enc).pos_encoding == enc
    with pytest.raises(ValueError, match="head_dim = n_embd // n_head must be even; got 12 // 4 = 3"):
        G.GPTConfig(n_embd=12, n_head=4, pos_encoding="rope")
    G.GPTConfig(n_embd=12, n_head=4, pos_encoding="sinusoidal")  # odd head_dim is fine without rope


def test_state_dict_keys_learned_unchanged_and_fixed_encodings_add_none():
    keys = {e.key: set(tiny_gpt(e.key).state_dict()) for e in P.ENCODINGS}
    assert keys["learned"] - keys["none"] == {"pos_emb.weight"}
    assert keys["sinusoidal"] == keys["none"] and keys["rope"] == keys["none"]
    assert tiny_gpt("learned").pos_emb.weight.shape == (16, 32)


def test_embed_adds_the_scaled_sinusoidal_table_and_nothing_for_rope():
    x = ids(10)
    sin_model, rope_model = tiny_gpt("sinusoidal"), tiny_gpt("rope")
    table = G.SINUSOIDAL_SCALE * P.sinusoidal_table(16, 32)
    torch.testing.assert_close(sin_model.embed(x), sin_model.tok_emb(x) + table[:10])
    torch.testing.assert_close(rope_model.embed(x), rope_model.tok_emb(x))


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "rope"])
@pytest.mark.parametrize("T", [9, 16, 40])
def test_manual_path_equals_sdpa_for_new_encodings(pos_encoding, T):
    model = tiny_gpt(pos_encoding)
    with torch.no_grad():
        fast = model(ids(T)).logits
        manual, _, weights = model(ids(T), return_weights=True)
    torch.testing.assert_close(manual, fast, atol=1e-5, rtol=1e-5)
    assert weights[0].shape == (2, 4, T, T)
    assert torch.equal(torch.triu(weights[0], diagonal=1), torch.zeros_like(weights[0]))


def test_rope_rotates_q_and_k_inside_attention():
    config = preset("tiny", pos_encoding="rope")
    torch.manual_seed(3)
    attn = G.CausalSelfAttention(config).eval()
    x = torch.randn(1, 6, 32)  # (B, T, C)
    with torch.no_grad():
        y, _ = attn(x)
        q, k, v = attn.qkv(x).split(32, dim=2)  # 3 x (1, 6, 32)
        q, k, v = (t.view(1, 6, 4, 8).transpose(1, 2) for t in (q, k, v))  # (1, 6, 32) -> (1, 4, 6, 8)
        q, k = P.apply_rope(q), P.apply_rope(k)  # rotated by positions 0..5, adjacent pairs
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)  # (1, 4, 6, 8)
        ref = attn.proj(ref.transpose(1, 2).reshape(1, 6, 32))  # (1, 4, 6, 8) -> (1, 6, 32)
    torch.testing.assert_close(y, ref, atol=1e-6, rtol=1e-5)


def test_learned_errors_past_block_size_while_the_others_run():
    x = ids(24)  # block_size 16
    with pytest.raises(ValueError, match="24 tokens is longer than block_size 16: the learned position table"):
        tiny_gpt("learned")(x)
    with pytest.raises(ValueError, match="past the learned position table"):
        tiny_gpt("learned").embed(x)
    for enc in ("none", "sinusoidal", "rope", "alibi"):
        with torch.no_grad():
            out = tiny_gpt(enc)(x).logits
        assert out.shape == (2, 24, 16) and torch.isfinite(out).all()


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "rope", "alibi"])
def test_new_encodings_keep_causality(pos_encoding):
    model = tiny_gpt(pos_encoding)
    x = ids(12)
    y = x.clone()
    y[:, 8:] = (y[:, 8:] + 1) % 16  # change the future only
    with torch.no_grad():
        a, b = model(x).logits, model(y).logits
    torch.testing.assert_close(a[:, :8], b[:, :8])
    assert not torch.allclose(a[:, 8:], b[:, 8:])


@pytest.mark.parametrize("pos_encoding", ["sinusoidal", "rope", "alibi"])
def test_checkpoint_round_trip_with_fixed_encodings(tmp_path, pos_encoding):
    from engine.checkpoint import load_checkpoint, save_checkpoint
    from engine.tokenizer import CharTokenizer

    tokenizer = CharTokenizer("白日依山尽黄河入海流欲穷千里目更上一层楼")
    torch.manual_seed(0)
    model = G.GPT(G.GPTConfig(vocab_size=tokenizer.vocab_size, block_size=16, n_embd=32, n_head=4, n_layer=1,
                              pos_encoding=pos_encoding)).eval()
    save_checkpoint(tmp_path / "m", model, tokenizer)
    loaded = load_checkpoint(tmp_path / "m")
    assert loaded.config.pos_encoding == pos_encoding
    x = ids(12) % tokenizer.vocab_size
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(x).logits, model(x).logits)


# --- ALiBi (Press, Smith & Lewis, 2022) -----------------------------------------------------------------


def test_alibi_slopes_are_the_papers():
    """Section 3: 8 heads 1/2 .. 1/256, 4 heads 1/4 .. 1/256; any other count: 2^floor(log2 n) heads' slopes, then
    every other slope of twice as many heads (the paper's code), e.g. 6 heads and 5 heads."""
    torch.testing.assert_close(P.alibi_slopes(8), torch.tensor([2.0 ** -k for k in range(1, 9)], dtype=torch.float64))
    torch.testing.assert_close(P.alibi_slopes(4), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256], dtype=torch.float64))
    torch.testing.assert_close(P.alibi_slopes(6), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8],
                                                                dtype=torch.float64))
    torch.testing.assert_close(P.alibi_slopes(5), torch.tensor([1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2],
                                                                dtype=torch.float64))
    torch.testing.assert_close(P.alibi_slopes(1), torch.tensor([2.0 ** -8], dtype=torch.float64))
    assert P.alibi_slopes(12).unique().numel() == 12  # distinct slopes for any count
    for bad in (0, -2, 2.0, True):
        with pytest.raises(ValueError, match="num_heads"):
            P.alibi_slopes(bad)


def test_alibi_bias_shape_sign_and_distance():
    bias = P.alibi_bias(6, 4)
    assert bias.shape == (4, 6, 6) and bias.dtype == torch.float32
    assert (bias <= 0).all() and torch.equal(bias.diagonal(dim1=1, dim2=2), torch.zeros(4, 6))
    slopes = P.alibi_slopes(4).float()
    i, j = 5, 2
    torch.testing.assert_close(bias[:, i, j], -slopes * (i - j))  # the paper's -m_h (i - j) below the diagonal
    torch.testing.assert_close(bias, bias.transpose(1, 2))  # |i - j|: the same penalty above it
    # it depends on the distance only: queries 100..103 on keys 0..103 end as queries 0..3 on keys 0..3 do
    far = P.alibi_bias(range(100, 104), 4, key_positions=104)
    assert far.shape == (4, 4, 104)
    torch.testing.assert_close(far[:, :, 100:], P.alibi_bias(4, 4))


def test_alibi_model_adds_no_table_and_no_parameter():
    alibi, none = tiny_gpt("alibi"), tiny_gpt("none")
    assert set(alibi.state_dict()) == set(none.state_dict()) and alibi.num_params() == none.num_params()
    x = ids(10)
    torch.testing.assert_close(alibi.embed(x), alibi.tok_emb(x))


@pytest.mark.parametrize("T", [9, 16, 40])
def test_alibi_sdpa_path_equals_the_manual_path_with_the_mask(T):
    """The SDPA path (bias and mask in one float attn_mask) and the written-out scores + bias agree, causally."""
    model = tiny_gpt("alibi")
    with torch.no_grad():
        fast = model(ids(T)).logits
        manual, _, weights = model(ids(T), return_weights=True)
    torch.testing.assert_close(manual, fast, atol=1e-5, rtol=1e-5)
    assert torch.equal(torch.triu(weights[0], diagonal=1), torch.zeros_like(weights[0]))


def test_alibi_biases_each_heads_scores_inside_attention():
    config = preset("tiny", pos_encoding="alibi")
    torch.manual_seed(3)
    attn = G.CausalSelfAttention(config).eval()
    x = torch.randn(1, 6, 32)  # (B, T, C)
    with torch.no_grad():
        y, weights = attn(x, return_weights=True)
        q, k, v = attn.qkv(x).split(32, dim=2)  # 3 x (1, 6, 32)
        q, k, v = (t.view(1, 6, 4, 8).transpose(1, 2) for t in (q, k, v))  # (1, 6, 32) -> (1, 4, 6, 8)
        scores = q @ k.transpose(-2, -1) / math.sqrt(8)  # (1, 4, 6, 6)
        slopes = P.alibi_slopes(4).float()  # (4,)
        distance = torch.arange(6)[:, None] - torch.arange(6)[None, :]  # (6, 6): i - j
        scores = scores - slopes[:, None, None] * distance  # the paper's -m_h (i - j)
        scores = scores.masked_fill(distance < 0, float("-inf"))
        ref = torch.softmax(scores, dim=-1)  # (1, 4, 6, 6)
    torch.testing.assert_close(weights, ref, atol=1e-6, rtol=1e-5)
    assert not torch.allclose(weights[0, 0], weights[0, 3])  # heads of different slopes weigh distance differently


def test_alibi_reads_past_block_size_with_no_table():
    """ALiBi has no table, so a model trained on 16 positions reads 48; causality holds there too."""
    model = tiny_gpt("alibi")
    x = ids(48)  # 3 x block_size 16
    with torch.no_grad():
        long = model(x).logits
        manual = model(x, return_weights=True).logits
        short = model(x[:, :16]).logits
    assert long.shape == (2, 48, 16) and torch.isfinite(long).all()
    torch.testing.assert_close(manual, long, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(long[:, :16], short, atol=1e-5, rtol=1e-5)  # the first 16 do not see the rest


def test_alibi_without_the_mask_sees_both_sides():
    model = tiny_gpt("alibi", causal=False)
    x = ids(12)
    y = x.clone()
    y[:, 8:] = (y[:, 8:] + 1) % 16
    with torch.no_grad():
        fast, manual = model(x).logits, model(x, return_weights=True).logits
        changed = model(y).logits
    torch.testing.assert_close(manual, fast, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(fast[:, :8], changed[:, :8])  # without the mask the past sees the future


def test_head_choices_for_alibi_are_every_divisor():
    from engine.lab import settings as rules

    assert rules.head_choices(12, "alibi") == (1, 2, 3, 4, 6, 12)
    assert rules.head_choices(12, "rope") == (1, 2, 3, 6)
    G.GPTConfig(n_embd=12, n_head=4, pos_encoding="alibi")  # odd head_dim 3 is fine: nothing is rotated
