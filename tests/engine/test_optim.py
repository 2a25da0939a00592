"""engine.optim.FusedAdamW: bit for bit torch's fused AdamW, the same state dicts, and no compiler stack imported."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import training
from engine.gpt import GPT
from engine.optim import FIXED_OPTIONS, FusedAdamW, fused_supported
from engine.presets import preset
from engine.training import TrainConfig, make_optimizer

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
CONFIG = TrainConfig(learning_rate=3e-3, weight_decay=0.1, beta1=0.9, beta2=0.99)
VOCAB = 12
LRS = (1e-3, 3e-3, 2e-3, 5e-4, 1e-4)  # one per step, set through param_groups as the training loop does


def _model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(preset("tiny", vocab_size=VOCAB, dropout=0.0))


def _torch_twin(ours: FusedAdamW, model: GPT, twin: GPT) -> torch.optim.AdamW:
    """torch.optim.AdamW(fused=True) over ``twin``'s parameters, grouped as ``ours`` groups ``model``'s."""
    place = {id(p): q for p, q in zip(model.parameters(), twin.parameters(), strict=True)}
    groups = [{"params": [place[id(p)] for p in g["params"]], "weight_decay": g["weight_decay"]}
              for g in ours.param_groups]
    return torch.optim.AdamW(groups, fused=True, lr=CONFIG.learning_rate, betas=(CONFIG.beta1, CONFIG.beta2))


def _step(model: GPT, optimizer, step: int, lr: float) -> None:
    """One seeded batch's forward, backward and step; at step 2 the final LayerNorm's bias gets no gradient."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    x = torch.randint(0, VOCAB, (4, 8), generator=torch.Generator().manual_seed(step))  # (B, T)
    optimizer.zero_grad(set_to_none=True)
    model(x, x.roll(-1, dims=1)).loss.backward()
    if step == 2:
        model.ln_f.bias.grad = None  # a parameter without a gradient is skipped, its state not created
    optimizer.step()


def _assert_same(model_a: GPT, opt_a, model_b: GPT, opt_b) -> None:
    for (name, p), q in zip(model_a.named_parameters(), model_b.parameters(), strict=True):
        assert torch.equal(p, q), name
    state_a, state_b = opt_a.state_dict(), opt_b.state_dict()
    assert state_a["param_groups"] == state_b["param_groups"]
    assert list(state_a["state"]) == list(state_b["state"])
    for index, slots in state_a["state"].items():
        assert set(slots) == set(state_b["state"][index]) == {"step", "exp_avg", "exp_avg_sq"}
        for slot, value in slots.items():
            other = state_b["state"][index][slot]
            assert value.dtype == other.dtype and value.device == other.device and torch.equal(value, other), slot


def test_make_optimizer_builds_the_fused_class_with_two_groups():
    model = _model()
    optimizer = make_optimizer(model, CONFIG)
    assert isinstance(optimizer, FusedAdamW)
    decay, no_decay = optimizer.param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == CONFIG.weight_decay and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 and "emb" not in names[id(p)] for p in decay["params"])
    assert all(p.dim() < 2 or "emb" in names[id(p)] for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    assert decay["lr"] == CONFIG.learning_rate and decay["betas"] == (CONFIG.beta1, CONFIG.beta2)


def test_steps_are_bit_identical_to_torch_fused_adamw():
    model, twin = _model(), _model()
    ours = make_optimizer(model, CONFIG)
    theirs = _torch_twin(ours, model, twin)
    start = [p.clone() for p in model.parameters()]
    for step, lr in enumerate(LRS, start=1):
        _step(model, ours, step, lr)
        _step(twin, theirs, step, lr)
        _assert_same(model, ours, twin, theirs)
    assert not any(torch.equal(p, s) for p, s in zip(model.parameters(), start, strict=True))
    assert float(ours.state[model.ln_f.bias]["step"]) == len(LRS) - 1  # skipped once
    assert float(ours.state[model.tok_emb.weight]["step"]) == len(LRS)


def test_a_state_dict_moves_between_ours_and_torchs_and_both_go_on_identically():
    model, twin = _model(), _model()
    ours = make_optimizer(model, CONFIG)
    theirs = _torch_twin(ours, model, twin)
    for step, lr in enumerate(LRS[:3], start=1):
        _step(model, ours, step, lr)
        _step(twin, theirs, step, lr)
    # ours -> a fresh torch AdamW on a copy of the model, and torch's -> a fresh one of ours on another copy
    into_torch_model, into_ours_model = copy.deepcopy(model), copy.deepcopy(twin)
    into_torch = _torch_twin(make_optimizer(model, CONFIG), model, into_torch_model)
    into_torch.load_state_dict(copy.deepcopy(ours.state_dict()))
    into_ours = make_optimizer(into_ours_model, CONFIG)
    into_ours.load_state_dict(copy.deepcopy(theirs.state_dict()))
    assert all(group["fused"] for group in into_torch.param_groups)
    for step, lr in enumerate(LRS[3:], start=4):
        for m, o in ((model, ours), (twin, theirs), (into_torch_model, into_torch), (into_ours_model, into_ours)):
            _step(m, o, step, lr)
    _assert_same(model, ours, twin, theirs)
    _assert_same(model, ours, into_torch_model, into_torch)
    _assert_same(model, ours, into_ours_model, into_ours)


@settings(max_examples=30, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=4),
       lr=st.floats(0, 0.1), beta1=st.floats(0, 0.999), beta2=st.floats(0, 0.9999), eps=st.floats(1e-12, 1e-2),
       weight_decay=st.floats(0, 1), seed=st.integers(0, 2**31 - 1))
def test_any_shapes_and_hyperparameters_step_as_torch(shapes, lr, beta1, beta2, eps, weight_decay, seed):
    generator = torch.Generator().manual_seed(seed)
    ours_params = [torch.randn(*s, generator=generator).requires_grad_() for s in shapes]
    theirs_params = [p.detach().clone().requires_grad_() for p in ours_params]
    options = dict(lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=weight_decay)
    ours, theirs = FusedAdamW(ours_params, **options), torch.optim.AdamW(theirs_params, fused=True, **options)
    for _ in range(3):
        grads = [torch.randn(*s, generator=generator) for s in shapes]
        for params, optimizer in ((ours_params, ours), (theirs_params, theirs)):
            for p, g in zip(params, grads, strict=True):
                p.grad = g.clone()
            optimizer.step()
    for p, q in zip(ours_params, theirs_params, strict=True):
        assert torch.equal(p, q)
    for p, q in zip(ours_params, theirs_params, strict=True):
        assert torch.equal(ours.state[p]["exp_avg"], theirs.state[q]["exp_avg"])
        assert torch.equal(ours.state[p]["exp_avg_sq"], theirs.state[q]["exp_avg_sq"])


def test_zero_grad_drops_or_zeroes_as_torch():
    model = _model()
    optimizer = make_optimizer(model, CONFIG)
    x = torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(0))  # (B, T)
    model(x, x).loss.backward()
    optimizer.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() and not p.grad.requires_grad for p in model.parameters())
    optimizer.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_bad_parameters_and_hyperparameters_are_refused():
    weight = torch.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="empty"):
        FusedAdamW([])
    with pytest.raises(ValueError, match="non-leaf"):
        FusedAdamW([weight * 2])
    with pytest.raises(ValueError, match="fused AdamW kernel"):
        FusedAdamW([torch.zeros(3, dtype=torch.long)])
    with pytest.raises(ValueError, match="more than one group"):
        FusedAdamW([{"params": [weight]}, {"params": [weight]}])
    with pytest.raises(ValueError, match="group"):
        FusedAdamW([{"params": [weight], "momentum": 0.9}])
    with pytest.raises(TypeError):
        FusedAdamW({weight})
    for options in ({"lr": -1.0}, {"lr": float("nan")}, {"eps": float("inf")}, {"weight_decay": -0.1},
                    {"betas": (1.0, 0.9)}, {"betas": (0.9,)}, {"lr": True}):
        with pytest.raises(ValueError):
            FusedAdamW([weight], **options)
    assert fused_supported([weight]) and not fused_supported([torch.zeros(3, dtype=torch.long)])


def _saved_after_one_step() -> tuple[FusedAdamW, dict]:
    model = _model()
    optimizer = make_optimizer(model, CONFIG)
    _step(model, optimizer, 1, LRS[0])
    return optimizer, optimizer.state_dict()


def _with(state: dict, change) -> dict:
    state = copy.deepcopy(state)
    change(state)
    return state


@pytest.mark.parametrize("change, message", [
    (lambda s: s["param_groups"].pop(), "number of parameter groups"),
    (lambda s: s["param_groups"][0]["params"].pop(), "size"),
    (lambda s: s["state"].__setitem__(999, s["state"][0]), "names no parameter"),
    (lambda s: s["state"][0].pop("exp_avg_sq"), "step, exp_avg and exp_avg_sq"),
    (lambda s: s["state"][0].__setitem__("exp_avg", torch.zeros(2)), "shape"),
    (lambda s: s["state"][0].__setitem__("step", torch.tensor(float("nan"))), "step"),
    (lambda s: s["state"][0].__setitem__("step", torch.zeros(2)), "step"),
    (lambda s: s["param_groups"][1].__setitem__("amsgrad", True), "amsgrad"),
    (lambda s: s["param_groups"][0].__setitem__("lr", -1.0), "lr"),
    (lambda s: s["param_groups"][0].pop("betas"), "lacks"),
    (lambda s: s.__setitem__("extra", 1), "exactly the keys"),
])
def test_a_state_dict_that_does_not_fit_is_refused_and_changes_nothing(change, message):
    optimizer, saved = _saved_after_one_step()
    before_groups, before_state = copy.deepcopy(optimizer.param_groups), optimizer.state
    with pytest.raises(ValueError, match=message):
        optimizer.load_state_dict(_with(saved, change))
    assert optimizer.state is before_state
    assert [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups] == [
        {k: v for k, v in g.items() if k != "params"} for g in before_groups]


def test_loading_takes_the_saved_hyperparameters_and_casts_the_step():
    optimizer, saved = _saved_after_one_step()
    saved = _with(saved, lambda s: s["param_groups"][0].update(lr=0.5, foreach=True))
    saved["state"][0]["step"] = 3  # an old-style number step becomes a float32 () tensor
    optimizer.load_state_dict(saved)
    assert optimizer.param_groups[0]["lr"] == 0.5
    assert {k: optimizer.param_groups[0][k] for k in FIXED_OPTIONS} == FIXED_OPTIONS
    step = optimizer.state[optimizer.param_groups[0]["params"][0]]["step"]
    assert step.dtype == torch.float32 and step.shape == () and float(step) == 3


def test_make_optimizer_falls_back_to_torchs_adamw_where_no_fused_kernel(monkeypatch):
    monkeypatch.setattr(training, "fused_supported", lambda params: False)
    model = _model()
    optimizer = make_optimizer(model, CONFIG)
    assert type(optimizer) is torch.optim.AdamW and optimizer.param_groups[0]["fused"] is None
    assert [g["weight_decay"] for g in optimizer.param_groups] == [CONFIG.weight_decay, 0.0]


NO_COMPILER_SCRIPT = r"""
import json, sys, tempfile
import torch
torch.set_num_threads(1)
from engine.corpus import corpus_from_bytes
from engine.gpt import GPT
from engine.optim import FusedAdamW
from engine.training import TrainConfig, make_optimizer, train
from engine.presets import preset

torch.manual_seed(0)
model = GPT(preset("tiny", vocab_size=12))
optimizer = make_optimizer(model, TrainConfig())
for step in range(3):
    for group in optimizer.param_groups:
        group["lr"] = 1e-3 * (step + 1)
    x = torch.randint(0, 12, (2, 8))
    optimizer.zero_grad(set_to_none=True)
    model(x, x).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
again = make_optimizer(model, TrainConfig())
again.load_state_dict(optimizer.state_dict())

lines = ["白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。"]
corpus = corpus_from_bytes("\n\n".join(lines[i % 2] + "\n" + lines[(i + 1) % 2] for i in range(24)).encode(), "p.txt")
config = TrainConfig(steps=6, batch_size=4, warmup_steps=1, eval_interval=3, eval_iters=1, device="cpu")
seen = []


class Hooks:
    on_eval = None

    def on_step(self, step, loss, tokens_per_s):
        seen.append(step)


with tempfile.TemporaryDirectory() as folder:
    first = train(preset("tiny", dropout=0.1), corpus, config, callbacks=Hooks(), stop=lambda: len(seen) >= 3,
                  state_dir=folder)
    rest = train(preset("tiny", dropout=0.1), corpus, config, state_dir=folder)
print(json.dumps({"fused": isinstance(optimizer, FusedAdamW) and isinstance(again, FusedAdamW),
                  "steps": [first.steps_done, rest.steps_done],
                  "modules": sorted(m for m in ("torch._dynamo", "sympy") if m in sys.modules)}))
"""


def test_training_and_resuming_never_import_the_compiler_stack():
    """A fresh interpreter: optimizer steps, a state dict round trip, a training stopped and resumed from its state."""
    run = subprocess.run([sys.executable, "-c", NO_COMPILER_SCRIPT], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["fused"] and report["steps"] == [3, 6]
    assert report["modules"] == []
