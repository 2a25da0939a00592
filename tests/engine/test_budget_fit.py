"""engine.budget's memory coefficients are the least-squares fit of the single training steps in
engine/budget_steps.json: refitted here from that file, so a change to the data, to the estimate's terms
or to the parameter count that the fit no longer supports fails."""

import json
from pathlib import Path

import numpy as np
import pytest

from engine import budget
from engine.gpt import GPTConfig, config_params

ROOT = Path(__file__).resolve().parents[2]
DATA = json.loads((ROOT / "engine" / "budget_steps.json").read_text("utf-8"))


def _steps():
    for s in DATA["steps"]:
        config = GPTConfig(vocab_size=s["vocab_size"], block_size=s["block_size"], n_embd=s["n_embd"],
                           n_head=s["n_head"], n_layer=s["n_layer"])
        yield config, s["batch_size"], s["peak_extra_mb"] * budget.MB


def _terms(config: GPTConfig, batch: int) -> list[float]:
    """The estimate's fitted terms: (B*T*n_embd*n_layer, B*n_head*T^2*n_layer, B*T*vocab_size, 1)."""
    B, T, C, L, H, V = batch, config.block_size, config.n_embd, config.n_layer, config.n_head, config.vocab_size
    return [B * T * C * L, B * H * T * T * L, B * T * V, 1.0]


def _refit() -> np.ndarray:
    """Least squares over the steps, the training state's bytes per parameter held at the data's fixed value."""
    per_param = DATA["fixed"]["per_param_bytes"]
    rows, rhs = [], []
    for config, batch, measured in _steps():
        rows.append(_terms(config, batch))
        rhs.append(measured - per_param * config_params(config))
    fit, *_ = np.linalg.lstsq(np.array(rows, dtype=float), np.array(rhs, dtype=float), rcond=None)
    return fit


def test_the_data_covers_every_term():
    rows = np.array([_terms(c, b) for c, b, _ in _steps()], dtype=float)
    assert len(rows) >= 8 and np.linalg.matrix_rank(rows / rows.max(axis=0)) == rows.shape[1]


def test_the_code_holds_the_fit_of_the_measured_steps():
    per_act, per_attn, per_logit, overhead = _refit()
    assert budget.MEMORY_COEFFICIENTS[0] == DATA["fixed"]["per_param_bytes"]
    # The code keeps the fit rounded to whole bytes: each within rounding and 5 % of the refit.
    for code, fitted in zip(budget.MEMORY_COEFFICIENTS[1:], (per_act, per_attn, per_logit), strict=True):
        assert code == pytest.approx(fitted, rel=0.05)
    assert budget.MEMORY_OVERHEAD == pytest.approx(overhead, abs=2 * budget.MB)


def test_the_rounded_coefficients_estimate_the_steps_as_well_as_the_fit():
    fit = _refit()
    per_param = DATA["fixed"]["per_param_bytes"]
    code_errors, fit_errors = [], []
    for config, batch, measured in _steps():
        code_errors.append(budget.estimate(config, batch, steps=1).memory_bytes / measured - 1)
        fitted = per_param * config_params(config) + float(np.dot(fit, _terms(config, batch)))
        fit_errors.append(fitted / measured - 1)
    assert max(abs(e) for e in code_errors) < 0.08  # every step within 8 % of what was measured
    assert _rms(code_errors) <= _rms(fit_errors) * 1.1 + 0.002


def _rms(errors: list[float]) -> float:
    return float(np.sqrt(np.mean(np.square(errors))))
