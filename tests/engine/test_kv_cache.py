"""The KV cache of engine.gpt: the same tokens as the uncached path, what each step reuses, and the
sampling guards (private generator, finite logits)."""

import pytest
import torch

from engine import sampling
from engine.gpt import GPT
from engine.positions import ENCODINGS
from engine.presets import preset
from engine.sampling import KVCache, forward_cached, generate_ids, kv_cache_steps, new_cache

POS_ENCODINGS = [e.key for e in ENCODINGS]  # every encoding, ALiBi included

pytestmark = pytest.mark.usefixtures("one_thread")

BLOCK = 16  # the tiny preset's block_size
VOCAB = 16


def model_for(pos_encoding: str, causal: bool = True) -> GPT:
    """A tiny model with weights pushed away from GPT-2's small init, so its logits are far from uniform."""
    torch.manual_seed(0)
    model = GPT(preset("tiny", pos_encoding=pos_encoding, causal=causal)).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def prompt(B: int, T: int, seed: int = 2) -> torch.Tensor:
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


# --- same tokens as the uncached path -------------------------------------------------------------


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
@pytest.mark.parametrize("T", [3, BLOCK, BLOCK + 9], ids=["shorter", "equal", "longer"])
def test_cached_greedy_equals_uncached(pos_encoding, T):
    model = model_for(pos_encoding)
    idx = prompt(2, T)
    new = 2 * BLOCK  # crosses block_size whatever the prompt
    cached = generate_ids(model, idx, new, temperature=0, use_cache=True)
    uncached = generate_ids(model, idx, new, temperature=0, use_cache=False)
    assert cached.shape == (2, T + new)
    assert torch.equal(cached, uncached)


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
@pytest.mark.parametrize("T", [1, BLOCK, BLOCK + 5], ids=["shorter", "equal", "longer"])
def test_cached_sampling_equals_uncached(pos_encoding, T):
    model = model_for(pos_encoding)
    idx = prompt(3, T, seed=T)
    runs = {
        use_cache: generate_ids(model, idx, 2 * BLOCK, temperature=1.0, top_k=8,
                                  generator=torch.Generator().manual_seed(7), use_cache=use_cache)
        for use_cache in (True, False)
    }
    assert torch.equal(runs[True], runs[False])
    greedy = generate_ids(model, idx, 2 * BLOCK, temperature=0)
    assert not torch.equal(runs[True], greedy)  # it really sampled


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
def test_cached_nucleus_sampling_and_a_mask_equal_uncached(pos_encoding):
    """Top-p and a per-step mask (allowed_next) draw the same tokens from the cached and the uncached logits."""
    model = model_for(pos_encoding)
    idx = prompt(2, 5, seed=4)

    def odd_after_even(generated: torch.Tensor) -> torch.Tensor:
        parity = generated.size(1) % 2
        return torch.arange(VOCAB) % 2 == parity  # (V,): even ids at even steps, odd ids at odd steps

    runs = {
        use_cache: generate_ids(model, idx, 2 * BLOCK, temperature=1.2, top_k=10, top_p=0.8, seed=5,
                                  use_cache=use_cache, allowed_next=odd_after_even)
        for use_cache in (True, False)
    }
    assert torch.equal(runs[True], runs[False])
    assert [i % 2 for i in runs[True][0, 5:].tolist()] == [step % 2 for step in range(2 * BLOCK)]


def test_non_causal_model_generates_the_same_with_or_without_cache():
    model = model_for("learned", causal=False)
    idx = prompt(1, 5)
    assert torch.equal(generate_ids(model, idx, 20, temperature=0, use_cache=True),
                       generate_ids(model, idx, 20, temperature=0, use_cache=False))
    with pytest.raises(ValueError, match="causal"):
        forward_cached(model, idx, new_cache(model, 1))


@pytest.mark.parametrize("pos_encoding", POS_ENCODINGS)
def test_forward_cached_logits_match_full_forward(pos_encoding):
    """Token by token, and in chunks (the masked branch: several new queries after cached keys)."""
    model = model_for(pos_encoding)
    idx = prompt(2, BLOCK)
    full = model(idx).logits  # (2, BLOCK, V)
    cache = new_cache(model, 2)
    for t in range(BLOCK):
        torch.testing.assert_close(forward_cached(model, idx[:, t : t + 1], cache), full[:, t], atol=1e-5, rtol=0)
    assert cache.length == BLOCK
    chunked = new_cache(model, 2)
    for start, end in ((0, 5), (5, 6), (6, 13), (13, BLOCK)):
        logits = forward_cached(model, idx[:, start:end], chunked)
        torch.testing.assert_close(logits, full[:, end - 1], atol=1e-5, rtol=0)
    for layer in range(model.config.n_layer):
        torch.testing.assert_close(chunked.k[layer], cache.k[layer], atol=1e-5, rtol=0)
        torch.testing.assert_close(chunked.v[layer], cache.v[layer], atol=1e-5, rtol=0)


def test_forward_cached_refuses_past_the_block_and_a_wrong_batch():
    model = model_for("rope")
    cache = new_cache(model, 1)
    forward_cached(model, prompt(1, BLOCK), cache)
    with pytest.raises(ValueError, match="pass block_size"):
        forward_cached(model, prompt(1, 1), cache)
    with pytest.raises(ValueError, match="batch size"):
        forward_cached(model, prompt(2, 1), new_cache(model, 1))
    with pytest.raises(ValueError, match="batch_size"):
        KVCache(model.config, 0)


# --- what each step reuses ------------------------------------------------------------------------


@pytest.mark.parametrize("T", [1, 4, BLOCK, BLOCK + 3])
def test_kv_cache_steps_describe_what_generate_does(T, monkeypatch):
    model = model_for("learned")
    calls = []
    original = sampling.forward_cached

    def recording(model, idx, cache):
        before = cache.length
        logits = original(model, idx, cache)
        calls.append((before, idx.size(1), cache.length))
        return logits

    monkeypatch.setattr(sampling, "forward_cached", recording)
    new = BLOCK + 6
    generate_ids(model, prompt(1, T), new, temperature=0)
    steps = kv_cache_steps(T, new, BLOCK)
    assert len(steps) == len(calls) == new
    for step, (before, computed, after) in zip(steps, calls, strict=False):
        assert (step.reused, step.computed) == (before, computed)
        assert after == step.reused + step.computed == min(step.seq_len, BLOCK)
        assert step.window_start == step.seq_len - min(step.seq_len, BLOCK)


def test_kv_cache_steps_reuse_inside_the_block_and_recompute_after():
    steps = kv_cache_steps(prompt_len=3, max_new_tokens=30, block_size=BLOCK)
    assert [s.step for s in steps] == list(range(30))
    inside = [s for s in steps[1:] if s.seq_len <= BLOCK]
    past = [s for s in steps if s.seq_len > BLOCK]
    assert inside and past
    assert (steps[0].reused, steps[0].computed) == (0, 3)  # the prompt
    assert all(s.computed == 1 and s.reused == s.seq_len - 1 for s in inside)
    assert all(s.reused == 0 and s.computed == BLOCK for s in past)
    assert all(s.reused == 0 for s in kv_cache_steps(3, 10, BLOCK, causal=False))
    assert kv_cache_steps(5, 0, BLOCK) == []
    with pytest.raises(ValueError, match="prompt_len"):
        kv_cache_steps(0, 3, BLOCK)


# --- sampling guards ------------------------------------------------------------------------------


def test_generation_never_touches_the_global_rng():
    model = model_for("learned")
    state = torch.get_rng_state()
    generate_ids(model, prompt(1, 3), 10, temperature=1.0)
    generate_ids(model, prompt(1, 3), 10, temperature=1.0, seed=3, use_cache=False)
    assert torch.equal(torch.get_rng_state(), state)


def test_seed_repeats_and_matches_an_equal_generator():
    model = model_for("sinusoidal")
    idx = prompt(2, 4)
    a = generate_ids(model, idx, 25, temperature=1.5, seed=9)
    b = generate_ids(model, idx, 25, temperature=1.5, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a, b)


def test_non_finite_logits_raise_a_clear_error():
    model = model_for("learned")
    with torch.no_grad():
        model.lm_head.weight[3, 0] = float("nan")
    for temperature in (0.0, 1.0):
        for use_cache in (True, False):
            with pytest.raises(ValueError, match="not finite"):
                generate_ids(model, prompt(1, 3), 2, temperature=temperature, use_cache=use_cache)


def test_a_vanishing_temperature_is_refused_not_sampled_from():
    model = model_for("learned")
    with pytest.raises(ValueError, match="too small"):
        generate_ids(model, prompt(1, 3), 2, temperature=1e-45)


def test_generation_never_emits_a_banned_id():
    """The unknown token (or any banned id) is never written, greedy or sampled, cached or not."""
    torch.manual_seed(0)
    model = GPT(preset("tiny", vocab_size=16)).eval()
    idx = torch.tensor([[1, 2, 3]])
    greedy = generate_ids(model, idx, 20, temperature=0)
    favourite = int(torch.mode(greedy[0, 3:]).values)  # the id greedy writes most
    banned = generate_ids(model, idx, 20, temperature=0, banned_ids=(favourite,))
    assert favourite not in banned[0, 3:].tolist()
    for use_cache in (True, False):
        out = generate_ids(model, idx, 200, temperature=2.0, seed=3, banned_ids=(0, 5), use_cache=use_cache)
        assert not set(out[0, 3:].tolist()) & {0, 5}
    # only one id left: it is the only one written, with or without top-k
    only = generate_ids(model, idx, 10, temperature=1.0, top_k=3, seed=1, banned_ids=tuple(range(1, 16)))
    assert set(only[0, 3:].tolist()) == {0}
    with pytest.raises(ValueError, match="banned_ids"):
        generate_ids(model, idx, 1, banned_ids=(16,))
    with pytest.raises(ValueError, match="banned_ids"):
        generate_ids(model, idx, 1, banned_ids=tuple(range(16)))
