"""The course's GPT: config checks, shapes, the two attention paths, causality, generation."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.gpt import GPT, CausalSelfAttention, GPTConfig, attention_shapes, config_params, count_params, param_shapes
from engine.positions import ENCODINGS
from engine.presets import PRESETS, preset
from engine.sampling import generate_ids, generate_text
from engine.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


def tiny(**overrides) -> GPT:
    torch.manual_seed(0)
    return GPT(preset("tiny", **overrides)).eval()


def tokens(B: int, T: int, vocab: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


# --- config ---------------------------------------------------------------------------------------


def test_course_preset_is_the_lessons_model():
    c = PRESETS["course"].model
    assert (c.n_embd, c.n_head, c.head_dim, c.n_layer, c.block_size) == (128, 4, 32, 4, 128)
    assert c.bias and c.causal and c.pos_encoding == "learned"
    assert preset("course", vocab_size=2500).vocab_size == 2500


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"n_embd": 30, "n_head": 4}, r"n_embd \(30\) must be divisible by n_head \(4\)"),
        ({"n_layer": 0}, "n_layer must be a positive integer, got 0"),
        ({"block_size": -1}, "block_size must be a positive integer, got -1"),
        ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
        ({"pos_encoding": "sinus"}, "pos_encoding must be one of .* got 'sinus'"),
    ],
)
def test_config_validation_names_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        GPTConfig(**overrides)


def test_config_is_frozen_and_round_trips():
    c = PRESETS["tiny"].model
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.n_layer = 3
    assert GPTConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="unknown GPTConfig field"):
        GPTConfig.from_dict({**c.to_dict(), "n_heads": 2})
    with pytest.raises(ValueError, match="unknown preset"):
        preset("huge")


def test_old_config_dict_sets_both_dropout_rates():
    old = {k: v for k, v in preset("course").to_dict().items() if k not in ("attn_dropout", "resid_dropout")}
    old["dropout"] = 0.2
    c = GPTConfig.from_dict(old)
    assert (c.attn_dropout_rate, c.resid_dropout_rate) == (0.2, 0.2)
    assert GPTConfig.from_dict(c.to_dict()) == c
    split = preset("course", attn_dropout=0.0, resid_dropout=0.15)
    assert (split.attn_dropout_rate, split.resid_dropout_rate) == (0.0, 0.15)
    assert GPTConfig.from_dict(split.to_dict()) == split
    assert preset("course", dropout=0.3, attn_dropout=0.0).resid_dropout_rate == 0.3
    assert dataclasses.replace(preset("course"), dropout=0.05).attn_dropout_rate == 0.05
    for name in ("attn_dropout", "resid_dropout"):
        with pytest.raises(ValueError, match=rf"{name} must be in \[0, 1\), got 1.5"):
            GPTConfig(**{name: 1.5})


def test_dropout_rates_reach_their_modules():
    model = GPT(preset("tiny", attn_dropout=0.25, resid_dropout=0.125))
    block = model.blocks[0]
    assert block.attn.dropout == block.attn.attn_dropout.p == 0.25
    assert block.attn.resid_dropout.p == block.mlp.dropout.p == model.drop.p == 0.125


@pytest.mark.parametrize("return_weights", [False, True])
def test_attention_dropout_alone_randomises_training_outputs(return_weights):
    idx = tokens(2, 16)
    for attn, resid, varies in ((0.5, 0.0, True), (0.0, 0.5, True), (0.0, 0.0, False)):
        torch.manual_seed(0)
        model = GPT(preset("tiny", attn_dropout=attn, resid_dropout=resid)).train()
        a = model(idx, return_weights=return_weights).logits
        b = model(idx, return_weights=return_weights).logits
        assert ((a - b).abs().max() > 1e-4) == varies, (attn, resid)


# --- shapes and the two attention paths -----------------------------------------------------------


def test_forward_shapes_and_loss():
    model = tiny()
    idx = tokens(3, 10)
    out = model(idx, targets=tokens(3, 10, seed=2), return_weights=True)
    assert out.logits.shape == (3, 10, 16)
    assert out.loss.shape == () and 2.0 < out.loss.item() < 3.5  # about ln(16) = 2.77 untrained
    assert len(out.attn_weights) == 2 and all(w.shape == (3, 4, 10, 10) for w in out.attn_weights)
    assert model(idx).loss is None and model(idx).attn_weights is None
    assert model(idx)[0].shape == (3, 10, 16)  # a tuple: [0] is the logits, as in the lesson


def test_attention_weights_are_causal_rows_summing_to_one():
    weights = tiny()(tokens(2, 7), return_weights=True).attn_weights
    for w in weights:
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 7))
        assert torch.all(w.triu(diagonal=1) == 0)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("pos_encoding", ["learned", "none"])
def test_manual_path_equals_sdpa(causal, pos_encoding):
    model = tiny(causal=causal, pos_encoding=pos_encoding)
    idx = tokens(2, 16)
    fast = model(idx).logits
    manual = model(idx, return_weights=True).logits
    torch.testing.assert_close(manual, fast, atol=1e-5, rtol=0)


def test_attention_layer_paths_agree_and_split_heads():
    config = GPTConfig(vocab_size=8, block_size=5, n_embd=32, n_head=4, n_layer=1, dropout=0.0)
    torch.manual_seed(0)
    attn = CausalSelfAttention(config)
    x = torch.randn(1, 5, 32)
    y_fast, none = attn(x)
    y_manual, w = attn(x, return_weights=True)
    assert none is None and w.shape == (1, 4, 5, 5)  # the lesson's (1, 4, 5, 5): one 5x5 table per head
    torch.testing.assert_close(y_manual, y_fast, atol=1e-5, rtol=0)


def test_non_causal_manual_weights_have_no_mask():
    w = tiny(causal=False)(tokens(1, 6), return_weights=True).attn_weights[0]
    above_diagonal = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    assert torch.all(w[..., above_diagonal] > 0)  # every query also weighs later keys


# --- causality ------------------------------------------------------------------------------------


@pytest.mark.parametrize("return_weights", [False, True])
def test_later_token_never_changes_earlier_logits(return_weights):
    model = tiny()
    idx = tokens(1, 12)
    changed = idx.clone()
    changed[0, 8] = (changed[0, 8] + 1) % 16
    a = model(idx, return_weights=return_weights).logits
    b = model(changed, return_weights=return_weights).logits
    torch.testing.assert_close(a[:, :8], b[:, :8], atol=1e-6, rtol=0)
    assert (a[:, 8:] - b[:, 8:]).abs().max() > 1e-4


@pytest.mark.parametrize("return_weights", [False, True])
def test_without_causal_mask_later_token_changes_earlier_logits(return_weights):
    model = tiny(causal=False)
    idx = tokens(1, 12)
    changed = idx.clone()
    changed[0, 8] = (changed[0, 8] + 1) % 16
    a = model(idx, return_weights=return_weights).logits
    b = model(changed, return_weights=return_weights).logits
    assert (a[:, :8] - b[:, :8]).abs().max() > 1e-4


def test_dropout_only_in_training():
    torch.manual_seed(0)
    model = GPT(preset("tiny", dropout=0.5))
    idx = tokens(2, 16)
    model.eval()
    torch.testing.assert_close(model(idx).logits, model(idx).logits, atol=0, rtol=0)
    model.train()
    assert (model(idx).logits - model(idx).logits).abs().max() > 1e-3


# --- sequence length ------------------------------------------------------------------------------


def test_forward_rejects_sequences_longer_than_block_size():
    model = tiny()
    with pytest.raises(ValueError, match="17 tokens is longer than block_size 16"):
        model(tokens(1, 17))
    with pytest.raises(ValueError, match="shape"):
        model(torch.zeros(16, dtype=torch.long))


def test_generate_crops_a_long_prompt():
    model = tiny()
    prompt = tokens(1, 40)
    out = generate_ids(model, prompt, 5, temperature=0)
    assert out.shape == (1, 45) and torch.equal(out[:, :40], prompt)
    cropped = generate_ids(model, prompt[:, -16:], 5, temperature=0)
    assert torch.equal(out[:, 40:], cropped[:, 16:])  # only the last block_size tokens mattered


# --- generation -----------------------------------------------------------------------------------


def test_temperature_zero_is_greedy_and_deterministic():
    model = tiny()
    prompt = tokens(2, 3)
    out = generate_ids(model, prompt, 6, temperature=0)
    assert torch.equal(out, generate_ids(model, prompt, 6, temperature=0))
    idx = prompt
    for _ in range(6):
        idx = torch.cat([idx, model(idx).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, idx)


def test_top_k_is_clamped_and_top_1_is_greedy():
    model = tiny()
    prompt = tokens(1, 3)
    g = torch.Generator().manual_seed(0)
    out = generate_ids(model, prompt, 20, temperature=1.0, top_k=10_000, generator=g)
    assert out.shape == (1, 23)
    assert torch.equal(generate_ids(model, prompt, 8, top_k=1), generate_ids(model, prompt, 8, temperature=0))
    with pytest.raises(ValueError, match="top_k"):
        generate_ids(model, prompt, 1, top_k=0)
    with pytest.raises(ValueError, match="temperature"):
        generate_ids(model, prompt, 1, temperature=-0.5)


def test_sampled_ids_stay_in_vocabulary_and_seed_repeats():
    model = tiny()
    prompt = tokens(4, 2)
    a = generate_ids(model, prompt, 50, temperature=2.0, generator=torch.Generator().manual_seed(3))
    b = generate_ids(model, prompt, 50, temperature=2.0, generator=torch.Generator().manual_seed(3))
    c = generate_ids(model, prompt, 50, temperature=2.0, generator=torch.Generator().manual_seed(4))
    assert int(a.min()) >= 0 and int(a.max()) < 16
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_generate_restores_training_mode():
    model = tiny().train()
    generate_ids(model, tokens(1, 2), 2)
    assert model.training


def test_generate_text_same_seed_same_text():
    tok = CharTokenizer("\n白日依山尽黄河入海流，。欲穷千里目更上一层楼")
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=tok.vocab_size))
    a = generate_text(model, tok, "白日", 20, temperature=1.0, top_k=5, seed=11)
    b = generate_text(model, tok, "白日", 20, temperature=1.0, top_k=5, seed=11)
    assert a == b and a.startswith("白日") and len(a) == 22
    assert len(generate_text(model, tok, "", 4, temperature=0)) == 4  # starts from a newline, not returned
    with pytest.raises(ValueError, match="'明'"):
        generate_text(model, tok, "明月", 4)


# --- learning -------------------------------------------------------------------------------------


def test_tiny_model_overfits_one_batch():
    torch.manual_seed(0)
    model = GPT(PRESETS["tiny"].model)
    x, y = tokens(4, 16, seed=1), tokens(4, 16, seed=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    start = model(x, y).loss.item()
    for _ in range(150):
        loss = model(x, y).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert model(x, y).loss.item() < 0.1 * start


@st.composite
def small_configs(draw) -> GPTConfig:
    n_head = draw(st.integers(1, 4))
    head_dim = draw(st.integers(1, 4)) * 2  # even, so rope fits too
    return GPTConfig(vocab_size=draw(st.integers(1, 40)), block_size=draw(st.integers(1, 12)), n_embd=n_head * head_dim,
                     n_head=n_head, n_layer=draw(st.integers(1, 3)), dropout=0.0, bias=draw(st.booleans()),
                     pos_encoding=draw(st.sampled_from([e.key for e in ENCODINGS])), causal=draw(st.booleans()))


@settings(max_examples=60, deadline=None)
@given(small_configs())
def test_param_shapes_are_the_built_models_state_dict(config):
    """The shapes read from the config are those of a model built on the CPU, name by name and in order."""
    model = GPT(config)
    assert list(param_shapes(config).items()) == [(name, tuple(t.shape)) for name, t in model.state_dict().items()]
    assert config_params(config) == count_params(model) == model.num_params()
    layer = model.blocks[0].attn
    assert attention_shapes(config) == {name: tuple(t.shape) for name, t in layer.state_dict().items()}


def test_config_params_of_the_presets():
    for name, p in PRESETS.items():
        assert config_params(p.model) == count_params(GPT(p.model)), name
