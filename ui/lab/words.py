"""Words the Lab's panels share: escaped reader text, counts, losses, durations, queue notes, run names, prose."""

from __future__ import annotations

import math
import re
import string
from collections.abc import Sequence
from functools import cache

import streamlit as st
from babel import Locale
from babel.numbers import format_compact_decimal

from engine.lab.jobs import Snapshot
from engine.positions import ENCODINGS, LEARNED
from ui import page, positions
from ui.i18n import _, current_language, ngettext
from ui.numbers import MINUS, integer, num, percent

#: A format spec of the catalog's messages: sign, zero padding, width, grouping, precision, type.
_SPEC = re.compile(r"(?P<sign>\+?)(?P<zero>0?)(?P<width>\d*)(?P<group>,?)(?:\.(?P<prec>\d+))?(?P<type>[dfg%]?)")


@cache
def _decimal_sign(lang: str) -> str:
    locale = Locale.parse(lang)
    return locale.number_symbols.get("latn", locale.number_symbols)["decimal"]


def _number(value: float, spec: str, lang: str) -> str:
    """``value`` written as ``format(value, spec)`` would, in ``lang``'s format (``ui.numbers``)."""
    m = _SPEC.fullmatch(spec)
    if m is None:
        return format(value, spec)
    prec, kind, group = m["prec"], m["type"], bool(m["group"])
    if kind == "%":
        text = percent(value, int(prec or 0), lang=lang)
    elif kind == "f" or (prec is not None and kind == ""):
        text = num(value, int(prec), lang=lang, group=group)
    elif kind == "d" or (isinstance(value, int) and kind == ""):
        text = integer(value, lang=lang) if group else num(int(value), 0, lang=lang, group=False)
    else:  # "g" or a plain float: Python's shortest form with the language's decimal sign
        text = format(value, "g" if kind == "g" else "").replace(".", _decimal_sign(lang))
        if text.startswith("-"):  # the sign as ui.numbers writes it; an exponent keeps its hyphen (1e-05)
            text = MINUS + text[1:]
    if m["sign"] and not text.startswith(MINUS):  # -0.0 is written with its minus and needs no plus
        text = "+" + text
    if m["zero"] and m["width"]:
        text = text.rjust(int(m["width"]), "0")
    return text


def fill(template: str, lang: str | None = None, **values) -> str:
    """``template.format(**values)`` with every number written in the reader's format.

    A translated message keeps Python's format specs (``{params:,}``, ``{loss:.3f}``, ``{share:.2%}``,
    ``{lr:g}``, ``{delta:+.3f}``, ``{seconds:02d}``): the spec says how many digits, and
    :mod:`ui.numbers` (Babel) says the decimal sign, the group separator and the percent sign of the
    language (the reader's, or ``lang``). Other values are formatted as ``str.format`` does.

    Raises:
        KeyError: for a placeholder without a value.
    """
    code = lang or current_language()
    out = []
    for literal, field, spec, conversion in string.Formatter().parse(template):
        out.append(literal)
        if field is None:
            continue
        value = values[field]
        if conversion:
            value = {"r": repr, "s": str, "a": ascii}[conversion](value)
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        out.append(_number(value, spec or "", code) if is_number else format(value, spec or ""))
    return "".join(out)


def strongest_keys(weights, tokens: Sequence[str], row_names: Sequence[str] | None = None) -> str:
    """Each row's most weighted key, for a chart's text alternative: "0:白 → 0:白 1,00 · 1:日 → 0:白 0,55".

    Args:
        weights: (rows, T) attention weights (a tensor or an array), each row a query's weights over T keys.
        tokens: the T characters, named with their position as the charts' axes name them.
        row_names: the rows' names; default: the queries named like the keys (a (T, T) matrix).
    """
    names = [f"{i}:{t}" for i, t in enumerate(tokens)]
    rows = []
    for i, row in enumerate(weights.tolist()):
        j = max(range(len(row)), key=row.__getitem__)
        rows.append(f"{(row_names or names)[i]} → {names[j]} {num(row[j], 2)}")
    return " · ".join(rows)


def plain(text: str) -> str:
    """``text`` with Markdown's special characters escaped, so a prompt from a link is shown, never rendered."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>~$])", r"\\\1", text)


def compact(n: int, lang: str | None = None) -> str:
    """A count short enough for a metric tile, in the language's short form (CLDR's, through Babel):
    ``3.27M`` / ``357.48K`` (en), ``3,27 M`` / ``357,48 k`` (fr), ``3,27 Mio.`` (de). Where the language writes a
    count whole (German thousands: ``357.482``), it is written whole with the group separator.
    """
    code = lang or current_language()
    short = format_compact_decimal(int(n), format_type="short", fraction_digits=2, locale=code)
    return short if any(c.isalpha() for c in short) else integer(n, lang=code)


def upload_help(mb: int) -> str:
    """The uploader's help in the reader's language: Streamlit 1.67 writes its box's button ("Upload") and size line
    ("… MB per file") in English whatever the language (only the label and help are the app's), so the help says
    what they mean."""
    return fill(_("Drop the file on the box or choose it with the box's button. Streamlit writes that button and "
                  "the line under it in English: “Upload” opens the file chooser, and the size before “per file” is "
                  "the largest file it takes ({mb} MB)."), mb=mb)


def nats_text(nats: float) -> str:
    """"4.086 nats (perplexity 59.5)"."""
    return fill(_("{nats:.3f} nats (perplexity {ppl:,.1f})"), nats=nats, ppl=math.exp(min(nats, 50.0)))


def eta_text(seconds: float | None) -> str:
    """"about 1 min 05 s left", "about 12 s left" or "estimating time left …"."""
    if seconds is None:
        return _("estimating time left …")
    seconds = max(0, round(seconds))
    if seconds >= 60:
        return fill(_("about {minutes} min {seconds:02d} s left"), minutes=seconds // 60, seconds=seconds % 60)
    return fill(_("about {seconds} s left"), seconds=seconds)


def duration_text(seconds: float) -> str:
    """"12 s", "4 min" or "3.2 h" for an estimate."""
    if seconds < 90:
        return fill(_("{seconds:.0f} s"), seconds=seconds)
    if seconds < 5400:
        return fill(_("{minutes:.0f} min"), minutes=seconds / 60)
    return fill(_("{hours:.1f} h"), hours=seconds / 3600)


def queued_text(snap: Snapshot) -> str:
    """Why a job waits, and its place in the queue (first come, first served)."""
    why = fill(ngettext("Queued: this server trains at most {limit} model at once and {running} is training now; "
                   "yours starts as soon as a slot is free.",
                   "Queued: this server trains at most {limit} models at once and {running} are training now; "
                   "yours starts as soon as a slot is free.", snap.limit
                   ), limit=snap.limit, running=snap.running)
    if snap.position < 1:
        return why
    ahead = snap.position - 1
    place = (_("Yours is next in the queue.") if ahead == 0 else
             fill(ngettext("{ahead} training waits before yours.", "{ahead} trainings wait before yours.", ahead
                      ), ahead=ahead))
    return f"{why} {place}"


def busy_text() -> str:
    """Why a second training from the same browser does not start."""
    return _("This browser already has a training queued or running, perhaps in another tab: one at a time per "
             "reader. Stop it there, or wait until it ends.")


def position_name(key: str) -> str:
    """The name of a position encoding (the key of an ``engine.positions.ENCODINGS`` record): ``ui.positions.name``."""
    return positions.name(key)


def run_name(key: str) -> str:
    """The label of an experiment run (a ``Run.key``)."""
    return {
        "heads_1": _("1 head of 128"),
        "heads_4": _("4 heads of 32 (course)"),
        "heads_8": _("8 heads of 16"),
        **{enc.key: positions.name(enc.key) for enc in ENCODINGS if enc != LEARNED},
        LEARNED.key: _("learned (course)"),
        "causal": _("causal mask (course)"),
        "no_mask": _("no causal mask"),
        "no_mask_rope": _("no causal mask, RoPE"),
    }.get(key, key)


def prose(part: str, **values: str) -> None:
    """One part of the Lab's prose with its ``{name}`` placeholders filled by ``values`` (already formatted).

    Only the names given are replaced, so the prose's LaTeX braces stay as they are; a part's
    translations use the same placeholders (``tests/test_page_lab.py`` checks it).
    """
    body, fell_back = page.part_text(page.current().slug, part, current_language())
    body = re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), body)
    if fell_back:
        st.caption(_("This part is not translated yet: it is shown in English."))
    st.markdown(body)
