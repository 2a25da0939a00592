"""Statistics over seeds: paired comparisons for the exercises, and the older sets' mean/std summaries.

The exercises' runs of one seed share their initial weights and their batches (``measurement.paired_model``),
so two configurations are compared *paired*: the per-seed differences ``loss(b) - loss(a)``, their mean (the
effect, in nats), a Student t interval and a bootstrap interval over seeds, and the smallest difference the
design could have detected (:func:`paired_comparison`). Student's t distribution is computed here in closed
form for whole degrees of freedom (Abramowitz & Stegun 26.7.3-4), which is all a count of seeds needs.
"""

from __future__ import annotations

import math

import numpy as np

from engine.lab.results import VERDICTS, PairedDifference, interval_verdict

#: Two-sided level of the t interval and of the detection rule.
ALPHA = 0.05
#: Power at which :attr:`engine.lab.results.PairedDifference.detectable` is stated.
POWER = 0.8
#: Bootstrap resamples of the seeds (a fixed generator, so a file is reproducible).
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` (a positive integer) degrees of freedom.

    Raises:
        ValueError: if df is not a positive integer.
    """
    if not isinstance(df, int) or df < 1:
        raise ValueError(f"df must be a positive integer, got {df!r}")
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # A(t|df) = 2/pi (theta + sin theta (cos theta + 2/3 cos^3 theta + ...)), df odd
        term, series = c, 0.0
        for k in range(1, (df - 1) // 2 + 1):
            series += term
            term *= c * c * (2 * k) / (2 * k + 1)
        inside = 2 / math.pi * (theta + s * series) if df > 1 else 2 * theta / math.pi
    else:  # A(t|df) = sin theta (1 + 1/2 cos^2 theta + 1*3/(2*4) cos^4 theta + ...), df even
        term, series = 1.0, 0.0
        for k in range(1, df // 2 + 1):
            series += term
            term *= c * c * (2 * k - 1) / (2 * k)
        inside = s * series
    return 0.5 + math.copysign(inside / 2, t)


def t_quantile(p: float, df: int) -> float:
    """The t value with ``t_cdf(t, df) == p``, by bisection to 1e-10.

    Raises:
        ValueError: unless 0 < p < 1 and df is a positive integer.
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    lo, hi = -1.0, 1.0
    while t_cdf(lo, df) > p:
        lo *= 2
    while t_cdf(hi, df) < p:
        hi *= 2
    while hi - lo > 1e-10:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def comparison_to_dict(c: PairedDifference) -> dict:
    """A paired comparison as the results file stores it (read back by ``engine.lab.results``), values rounded
    to 5 decimals (nats)."""
    def r(v):
        return None if v is None else round(v, 5)
    return {"a": c.a, "b": c.b, "seeds": list(c.seeds), "differences": [r(d) for d in c.differences],
            "mean": r(c.mean), "sd": r(c.sd),
            "t_interval": None if c.t_interval is None else [r(v) for v in c.t_interval],
            "bootstrap_interval": None if c.bootstrap_interval is None else [r(v) for v in c.bootstrap_interval],
            "detectable": r(c.detectable), "verdict": c.verdict}


def paired_comparison(a: str, b: str, loss_a: dict[int, float], loss_b: dict[int, float]) -> PairedDifference:
    """Compares run ``b`` with run ``a`` on the seeds both were trained with.

    Args:
        a, b: run keys (recorded, not looked up).
        loss_a, loss_b: {seed: loss in nats}; seeds present in only one are left out.

    Returns:
        The per-seed differences ``loss(b) - loss(a)`` (negative: b lower), their mean (the effect in nats) and
        sample standard deviation (ddof 1), the (1 - ALPHA) Student t interval and the percentile bootstrap
        interval of the mean over seed resamples, ``detectable``: the smallest |mean| a paired t test at ALPHA
        would find with probability POWER given this sd and seed count, ``(t_{1-ALPHA/2} + t_{POWER}) * sd /
        sqrt(n)``, and the verdict (one of ``VERDICTS``): the t interval below 0 (``b_beats_a``), above 0
        (``a_beats_b``), holding 0 (``no_detectable_difference``), or fewer than two seeds (sd, intervals and
        ``detectable`` then None).

    Raises:
        ValueError: if the two share no seed.
    """
    seeds = tuple(sorted(set(loss_a) & set(loss_b)))
    if not seeds:
        raise ValueError(f"runs {a!r} and {b!r} share no seed")
    diffs = np.array([loss_b[s] - loss_a[s] for s in seeds], dtype=np.float64)
    n, mean = len(seeds), float(diffs.mean())
    if n < 2:
        return PairedDifference(a, b, seeds, tuple(diffs.tolist()), mean, None, None, None, None, VERDICTS[3])
    sd = float(diffs.std(ddof=1))
    se = sd / math.sqrt(n)
    t_crit = t_quantile(1 - ALPHA / 2, n - 1)
    t_interval = (mean - t_crit * se, mean + t_crit * se)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = diffs[rng.integers(0, n, size=(BOOTSTRAP_RESAMPLES, n))].mean(axis=1)  # (R, n) -> (R,)
    bootstrap = (float(np.quantile(means, ALPHA / 2)), float(np.quantile(means, 1 - ALPHA / 2)))
    detectable = (t_crit + t_quantile(POWER, n - 1)) * se
    return PairedDifference(a, b, seeds, tuple(diffs.tolist()), mean, sd, t_interval, bootstrap, detectable,
                            interval_verdict(t_interval))


#: Key and formula of the older sets' rule for whether two runs differ by more than the seed noise.
NOISE_RULE = {"key": "welch_2se",
              "formula": "abs(mean_a - mean_b) > 2 * sqrt(std_a**2 / n_a + std_b**2 / n_b)",
              "std": "sample standard deviation over seeds (ddof 1)",  # data key
              "loss": "fixed_val_loss"}
#: Per-run values the older sets summarise over seeds (mean and sample standard deviation).
SEED_FIELDS = ("final_train_loss", "final_val_loss", "fixed_val_loss", "last_position_val_loss",
               "tokens_per_s", "step_tokens_per_s")


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof 1; 0.0 for a single value) of a non-empty list.

    Raises:
        ValueError: for an empty list.
    """
    if not values:
        raise ValueError("mean_std needs at least one value")
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def summarize_seeds(per_seed: list[dict]) -> dict:
    """One run of the older sets trained with several seeds, as one run dict.

    Args:
        per_seed: ``measurement.train_run`` dicts of the same run (same key), one per seed, in seed order.

    Returns:
        The first seed's dict plus ``seeds``, ``n_seeds``, ``seed_results`` (per seed: ``seed``, the
        :data:`SEED_FIELDS` it has, ``wall_s``, ``history``) and ``<field>_mean`` / ``<field>_std`` for
        each of them (rounded to 4 decimals).

    Raises:
        ValueError: for an empty list or runs with different keys.
    """
    if not per_seed or len({r["key"] for r in per_seed}) != 1:
        raise ValueError("summarize_seeds needs one or more results of the same run")
    summary = dict(per_seed[0])
    summary["seeds"] = [r.get("seed") for r in per_seed]
    summary["n_seeds"] = len(per_seed)
    summary["seed_results"] = [{"seed": r.get("seed"), **{f: r[f] for f in SEED_FIELDS if f in r},
                                "wall_s": r["wall_s"], "history": r["history"]} for r in per_seed]
    for field in SEED_FIELDS:
        values = [r[field] for r in per_seed if field in r]
        if values:
            mean, std = mean_std(values)
            summary[f"{field}_mean"], summary[f"{field}_std"] = round(mean, 4), round(std, 4)
    return summary


def compare_runs(runs: list[dict], field: str = NOISE_RULE["loss"]) -> list[dict]:
    """For every pair of the older sets' runs, whether the difference of their means exceeds the seed noise.

    The rule is :data:`NOISE_RULE`; pairs where either run has fewer than two seeds get ``exceeds_noise`` None.

    Returns:
        list of dicts ``a``, ``b``, ``delta_mean`` (mean_b - mean_a, nats), ``noise`` (nats or None) and
        ``exceeds_noise`` (bool or None).
    """
    out = []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            if f"{field}_mean" not in a or f"{field}_mean" not in b:
                continue
            delta = b[f"{field}_mean"] - a[f"{field}_mean"]
            n_a, n_b = a.get("n_seeds", 1), b.get("n_seeds", 1)
            if n_a < 2 or n_b < 2:
                noise, exceeds = None, None
            else:
                noise = 2 * math.sqrt(a[f"{field}_std"] ** 2 / n_a + b[f"{field}_std"] ** 2 / n_b)
                exceeds = abs(delta) > noise
            out.append({"a": a["key"], "b": b["key"], "delta_mean": round(delta, 4),
                        "noise": None if noise is None else round(noise, 4), "exceeds_noise": exceeds})
    return out
