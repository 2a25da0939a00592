"""engine.gpt's one sampling rule (sampling_probs, sample_next), generation's top-p and allowed_next hook, eval_mode."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.gpt import GPT, eval_mode
from engine.presets import preset
from engine.sampling import check_sampling, generate_ids, sample_next, sampling_probs

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 16  # the tiny preset's vocab_size


def logits_for(seed: int, rows: int, vocab: int, ties: bool) -> torch.Tensor:
    """float32 (rows, vocab) logits; with ``ties`` small integers, so equal logits are common."""
    g = torch.Generator().manual_seed(seed)
    if ties:
        return torch.randint(-3, 4, (rows, vocab), generator=g).float()
    return 3.0 * torch.randn(rows, vocab, generator=g)


def banned_mask(seed: int, rows: int, vocab: int, share: float) -> torch.Tensor:
    """bool (rows, vocab): about ``share`` of the ids disallowed per row, never all of them."""
    g = torch.Generator().manual_seed(seed + 1)
    allowed = torch.rand(rows, vocab, generator=g) >= share
    allowed[torch.arange(rows), torch.randint(0, vocab, (rows,), generator=g)] = True  # one id always left
    return allowed


cases = st.fixed_dictionaries({
    "seed": st.integers(0, 2**31 - 1),
    "rows": st.integers(1, 4),
    "vocab": st.integers(1, 40),
    "ties": st.booleans(),
    "temperature": st.one_of(st.just(0.0), st.floats(0.05, 5.0)),
    "top_k": st.one_of(st.none(), st.integers(1, 50)),
    "top_p": st.one_of(st.just(1.0), st.floats(0.01, 1.0)),
    "banned_share": st.sampled_from([0.0, 0.3, 0.9]),
})


def unpack(case):
    logits = logits_for(case["seed"], case["rows"], case["vocab"], case["ties"])
    allowed = banned_mask(case["seed"], case["rows"], case["vocab"], case["banned_share"])
    return logits, allowed, case["temperature"], case["top_k"], case["top_p"]


@settings(max_examples=200, deadline=None)
@given(case=cases)
def test_probabilities_sum_to_one_and_stay_inside_the_allowed_top_k(case):
    logits, allowed, temperature, top_k, top_p = unpack(case)
    probs = sampling_probs(logits, temperature, top_k, top_p, allowed)
    assert probs.shape == logits.shape and probs.dtype == torch.float32
    assert bool((probs >= 0).all())
    torch.testing.assert_close(probs.sum(-1), torch.ones(logits.size(0)), atol=1e-5, rtol=0)
    assert not bool((probs[~allowed] > 0).any())  # a banned id has probability 0
    support = (probs > 0).sum(-1)
    if top_k is not None:
        assert bool((support <= top_k).all())
    if temperature == 0:
        assert bool((support == 1).all())


@settings(max_examples=200, deadline=None)
@given(case=cases)
def test_top_p_one_changes_nothing(case):
    logits, allowed, temperature, top_k, _ = unpack(case)
    full = sampling_probs(logits, temperature, top_k, 1.0, allowed)
    if temperature > 0:  # what temperature and top-k alone give: a softmax over the k largest allowed logits
        masked = logits.masked_fill(~allowed, float("-inf")) / temperature
        if top_k is not None and top_k < logits.size(-1):
            kept = torch.zeros_like(allowed).scatter_(-1, masked.topk(top_k, dim=-1).indices, True)
            masked = masked.masked_fill(~kept, float("-inf"))
        torch.testing.assert_close(full, torch.softmax(masked, dim=-1), atol=1e-6, rtol=0)
    assert torch.equal(full, sampling_probs(logits, temperature, top_k, allowed=allowed))  # top_p's default is 1


@settings(max_examples=200, deadline=None)
@given(case=cases)
def test_top_p_keeps_the_smallest_set_of_likeliest_ids_reaching_it(case):
    logits, allowed, _, top_k, top_p = unpack(case)
    temperature = 1.0
    before = sampling_probs(logits, temperature, top_k, 1.0, allowed)  # (rows, V): the mass top-p cuts
    after = sampling_probs(logits, temperature, top_k, top_p, allowed)
    for row_before, row_after in zip(before, after, strict=True):
        kept = row_after > 0
        assert int(kept.sum()) >= 1
        mass = float(row_before[kept].sum())
        assert mass >= top_p - 1e-5  # the kept ids reach top_p ...
        assert mass - float(row_before[kept].min()) < top_p + 1e-5  # ... and without the least likely they do not
        if bool((~kept & (row_before > 0)).any()):  # every dropped id is at most as likely as every kept one
            assert float(row_before[~kept].max()) <= float(row_before[kept].min()) + 1e-7
        torch.testing.assert_close(row_after[kept], row_before[kept] / mass, atol=1e-5, rtol=0)  # renormalised


@settings(max_examples=100, deadline=None)
@given(case=cases)
def test_greedy_is_the_argmax_of_the_allowed_logits_without_a_draw(case):
    logits, allowed, _, top_k, top_p = unpack(case)
    masked = logits.masked_fill(~allowed, float("-inf"))
    generator = torch.Generator().manual_seed(5)
    state = generator.get_state()
    picked = sample_next(logits, 0.0, top_k, top_p, generator, allowed)  # (rows, 1)
    assert torch.equal(picked[:, 0], masked.argmax(-1))
    assert torch.equal(generator.get_state(), state)  # greedy draws nothing
    probs = sampling_probs(logits, 0.0, top_k, top_p, allowed)
    assert torch.equal(probs.argmax(-1), masked.argmax(-1)) and bool((probs.max(-1).values == 1).all())


@settings(max_examples=50, deadline=None)
@given(case=cases)
def test_banned_ids_are_never_drawn(case):
    logits, allowed, temperature, top_k, top_p = unpack(case)
    generator = torch.Generator().manual_seed(case["seed"])
    draws = torch.cat([sample_next(logits, temperature, top_k, top_p, generator, allowed) for _ in range(30)], 1)
    assert bool(allowed.gather(1, draws).all())  # (rows, 30): every drawn id allowed in its row


def test_a_one_dimensional_row_and_float64_keep_their_shape_and_dtype():
    logits = torch.tensor([1.0, 3.0, 2.0, 0.5], dtype=torch.float64)
    probs = sampling_probs(logits, 0.7, 3, 0.9)
    assert probs.shape == (4,) and probs.dtype == torch.float64
    assert float(probs[3]) == 0.0  # outside top-3
    assert sample_next(logits, 0.0).tolist() == [1]
    assert sample_next(logits, 1.0, generator=torch.Generator().manual_seed(0)).shape == (1,)


@pytest.mark.parametrize(("settings_", "message"), [
    ((-0.1, None, 1.0), "temperature"), ((float("nan"), None, 1.0), "temperature"),
    ((float("inf"), None, 1.0), "temperature"), ((True, None, 1.0), "temperature"),
    ((1.0, 0, 1.0), "top_k"), ((1.0, 2.5, 1.0), "top_k"), ((1.0, True, 1.0), "top_k"),
    ((1.0, None, 0.0), "top_p"), ((1.0, None, 1.5), "top_p"), ((1.0, None, float("nan")), "top_p"),
    ((1.0, None, -0.2), "top_p"),
])
def test_bad_settings_are_refused_with_their_name(settings_, message):
    with pytest.raises(ValueError, match=message):
        check_sampling(*settings_)
    with pytest.raises(ValueError, match=message):
        sampling_probs(torch.zeros(1, 4), *settings_)


def test_non_finite_logits_and_an_empty_mask_are_refused():
    with pytest.raises(ValueError, match="not finite"):
        sampling_probs(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match="no token is allowed"):
        sampling_probs(torch.zeros(2, 3), allowed=torch.tensor([[True, False, False], [False, False, False]]))
    with pytest.raises(ValueError, match="too small"):
        sampling_probs(torch.tensor([[0.0, 1.0]]), temperature=1e-45)


# --- generation: top-p and the allowed_next hook ----------------------------------------------------------------------


def tiny_model() -> GPT:
    """A tiny model with weights pushed away from the small init, so its next-token distributions are far from flat."""
    torch.manual_seed(0)
    model = GPT(preset("tiny")).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model


def test_a_vanishing_top_p_samples_the_greedy_text():
    """The nucleus always holds the most likely token, and with a tiny top_p nothing else."""
    model = tiny_model()
    idx = torch.tensor([[1, 2, 3], [4, 5, 6]])
    greedy = generate_ids(model, idx, 40, temperature=0)
    for use_cache in (True, False):
        out = generate_ids(model, idx, 40, temperature=1.5, top_p=1e-6, seed=3, use_cache=use_cache)
        assert torch.equal(out, greedy)
    sampled = generate_ids(model, idx, 40, temperature=1.5, top_p=0.9, seed=3)
    assert not torch.equal(sampled, greedy)  # a real nucleus samples
    with pytest.raises(ValueError, match="top_p"):
        generate_ids(model, idx, 1, top_p=0.0)


def test_allowed_next_masks_every_step_and_can_stop():
    model = tiny_model()
    idx = torch.tensor([[1, 2, 3]])
    seen = []

    def even_ids_then_stop(generated: torch.Tensor) -> torch.Tensor | None:
        seen.append(generated.size(1))
        if generated.size(1) == 7:
            return None
        return torch.arange(VOCAB) % 2 == 0  # (V,)

    for use_cache in (True, False):
        seen.clear()
        out = generate_ids(model, idx, 20, temperature=1.0, seed=2, allowed_next=even_ids_then_stop,
                           use_cache=use_cache)
        assert out.shape == (1, 3 + 7) and all(i % 2 == 0 for i in out[0, 3:].tolist())
        assert seen == list(range(8))  # called before each step with the new ids so far
    with pytest.raises(ValueError, match="no token is allowed"):
        generate_ids(model, idx, 3, allowed_next=lambda g: torch.arange(VOCAB) == 0, banned_ids=(0,))


# --- eval_mode --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_restores_the_mode_even_on_an_exception(training):
    model = GPT(preset("tiny")).train(training)
    with eval_mode(model) as inside:
        assert inside is model and not model.training and not any(m.training for m in model.modules())
    assert model.training is training and all(m.training is training for m in model.modules())
    with pytest.raises(RuntimeError, match="inside"):
        with eval_mode(model):
            assert not model.training
            raise RuntimeError("inside")
    assert model.training is training
    with eval_mode(model), eval_mode(model):  # nested: the outer block gives back the caller's mode
        pass
    assert model.training is training
