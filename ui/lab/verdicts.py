"""The sentence a paired comparison supports, chosen by its verdict: one wording for the shipped runs' answer
(``ui.lab.experiments``) and the reader's own paired rerun (``ui.lab.rerun``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.lab.experiments.stats import ALPHA
from engine.lab.results import VERDICTS, PairedDifference
from ui.i18n import _
from ui.lab.words import fill
from ui.numbers import integer


def seeds_text(seeds: Sequence[int]) -> str:
    """"1, 2, 3" in the reader's number format."""
    return ", ".join(integer(s) for s in seeds)


def _interval_values(c: PairedDifference) -> dict:
    low, high = c.t_interval if c.t_interval is not None else (math.nan, math.nan)
    return {"seeds": seeds_text(c.seeds), "n": len(c.seeds), "mean": c.mean, "effect": abs(c.mean), "low": low,
            "level": 1 - ALPHA,
            "high": high, "detectable": c.detectable if c.detectable is not None else math.nan}


def verdict_sentence(c: PairedDifference, run: str, reference: str) -> str:
    """What one paired comparison supports, the sentence chosen by its verdict (``engine.lab.results.VERDICTS``).

    Args:
        c: run ``b`` against the reference ``a``, differences b − a over the seeds.
        run, reference: the two configurations' names in the reader's language.
    """
    values = {"run": run, "reference": reference, **_interval_values(c)}
    if c.verdict == VERDICTS[0]:
        template = _("**{run}** is better than {reference}: its validation loss is lower by {effect:.3f} nats on "
                     "average over the seeds {seeds} ({level:.0%} interval of the difference {low:+.3f} … "
                     "{high:+.3f}).")
    elif c.verdict == VERDICTS[1]:
        template = _("**{run}** is worse than {reference}: its validation loss is higher by {effect:.3f} nats on "
                     "average over the seeds {seeds} ({level:.0%} interval of the difference {low:+.3f} … "
                     "{high:+.3f}).")
    elif c.verdict == VERDICTS[2]:
        template = _("**{run}** and {reference}: no difference these seeds can detect ({mean:+.3f} nats on average "
                     "over the seeds {seeds}, {level:.0%} interval {low:+.3f} … {high:+.3f}, which holds 0); the "
                     "smallest difference {n} seeds with this spread could have detected is {detectable:.3f} nats.")
    else:
        template = _("**{run}** against {reference}: {mean:+.3f} nats with the seed {seeds} only; one seed cannot "
                     "tell a difference from the seed-to-seed spread.")
    return fill(template, **values)
