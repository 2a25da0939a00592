"""Words the Lab's panels share: escaped reader text, short counts, losses, durations, queue notes, run names."""

from __future__ import annotations

import math
import re

from engine.lab.jobs import Snapshot
from ui.i18n import _, ngettext


def plain(text: str) -> str:
    """``text`` with Markdown's special characters escaped, so a prompt from a link is shown, never rendered."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)


def compact(n: int) -> str:
    """A count short enough for a metric tile: 3.27 M, 357 k, 980."""
    if n >= 1_000_000:
        return f"{n / 1e6:.2f} M"
    if n >= 10_000:
        return f"{n / 1e3:.0f} k"
    return f"{n:,}"


def nats_text(nats: float) -> str:
    """"4.483 nats (perplexity 88.5)"."""
    return _("{nats:.3f} nats (perplexity {ppl:,.1f})").format(nats=nats, ppl=math.exp(min(nats, 50.0)))


def eta_text(seconds: float | None) -> str:
    """"about 1 min 05 s left", "about 12 s left" or "estimating time left …"."""
    if seconds is None:
        return _("estimating time left …")
    seconds = max(0, round(seconds))
    if seconds >= 60:
        return _("about {minutes} min {seconds:02d} s left").format(minutes=seconds // 60, seconds=seconds % 60)
    return _("about {seconds} s left").format(seconds=seconds)


def duration_text(seconds: float) -> str:
    """"12 s", "4 min" or "3.2 h" for an estimate."""
    if seconds < 90:
        return _("{seconds:.0f} s").format(seconds=seconds)
    if seconds < 5400:
        return _("{minutes:.0f} min").format(minutes=seconds / 60)
    return _("{hours:.1f} h").format(hours=seconds / 3600)


def queued_text(snap: Snapshot) -> str:
    """Why a job waits, and its place in the queue (first come, first served)."""
    why = ngettext("Queued: this server trains at most {limit} model at once and {running} is training now; "
                   "yours starts as soon as a slot is free.",
                   "Queued: this server trains at most {limit} models at once and {running} are training now; "
                   "yours starts as soon as a slot is free.", snap.limit
                   ).format(limit=snap.limit, running=snap.running)
    if snap.position < 1:
        return why
    ahead = snap.position - 1
    place = (_("Yours is next in the queue.") if ahead == 0 else
             ngettext("{ahead} training waits before yours.", "{ahead} trainings wait before yours.", ahead
                      ).format(ahead=ahead))
    return f"{why} {place}"


def busy_text() -> str:
    """Why a second training from the same browser does not start."""
    return _("This browser already has a training queued or running, perhaps in another tab: one at a time per "
             "reader. Stop it there, or wait until it ends.")


def run_name(key: str) -> str:
    """The label of an experiment run (a ``Run.key``)."""
    return {
        "heads_1": _("1 head of 128"),
        "heads_4": _("4 heads of 32 (course)"),
        "heads_8": _("8 heads of 16"),
        "none": _("none"),
        "learned": _("learned (course)"),
        "rope": _("RoPE"),
        "sinusoidal": _("sinusoidal"),
        "causal": _("causal mask (course)"),
        "no_mask": _("no causal mask"),
        "no_mask_rope": _("no causal mask, RoPE"),
    }.get(key, key)
