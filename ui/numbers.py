"""Numbers in the reader's own format: one helper for every number shown outside code and tensor prints.

A French reader reads ``3,168`` as three point one six eight, a German one reads ``6.245`` as six
thousand: every number in prose placeholders, captions, badges, metrics, table cells and chart texts
goes through this module, which formats it with Babel (CLDR's data for the reader's language:
decimal sign, group separator, percent and unit spacing). Code listings, tensor prints and the
chapters' printed outputs stay exactly as PyTorch prints them and never come here.

Every function takes ``lang`` (``"fr"``, ``"de"`` or ``"en"``); left out, it is the reader's
language of this session (:func:`ui.i18n.current_language`), so views call ``num(x, 4)`` and tests
call ``num(x, 4, lang="fr")``. Non-finite values are written as the locale writes them (``∞``, ``−∞``,
``NaN``).

Two rules hold in every language and every function here:

- a negative number is written with the minus sign U+2212 (``−0,035``), not the hyphen-minus CLDR gives
  French, German and English: the sign then matches Plotly's ticks and the prose's « − », and a line break
  never falls between the sign and the digits;
- a zero on the page is an exact zero. A value that is not 0 but would round to zero at the requested
  decimals is written with the digits it needs (``num(1.4e-17, 2)`` is ``1,40E-17``, never ``0,00``), so it
  cannot stand beside another small value as if it were nothing; an exact 0 has no false decimals in
  scientific contexts (``sci(0.0, 2)`` is ``0``). (The exponent of E-notation keeps its hyphen-minus: it is
  the form Python reads back and the lessons print, ``2,78E-17``.)

Example::

    >>> num(6.2451, 3, lang="de"), integer(1621248, lang="fr"), percent(0.9834, 2, lang="fr")
    ('6,245', '1\\u202f621\\u202f248', '98,34\\xa0%')
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import functools
import math
from collections.abc import Iterable

from babel import Locale
from babel.dates import format_date
from babel.numbers import format_decimal, format_percent

from ui.i18n import DEFAULT_LANGUAGE, LANGUAGES, current_language


def _lang(lang: str | None) -> str:
    """``lang`` checked against the app's languages; ``None`` is the reader's."""
    code = current_language() if lang is None else lang
    return code if code in LANGUAGES else DEFAULT_LANGUAGE


@functools.cache
def _locale(lang: str) -> Locale:
    return Locale.parse(lang)


#: The minus sign written for a negative number (U+2212), in place of CLDR's hyphen-minus.
MINUS = "\u2212"
#: Decimal digits enough for any float64 written whole with 12 decimals (1.8e308 has 309 integer digits).
_PRECISION = 340


def _signed(text: str) -> str:
    """``text`` (a formatted number) with the minus sign U+2212 for every hyphen-minus Babel or Python wrote."""
    return text.replace("-", MINUS)


def _decimal_context() -> contextlib.AbstractContextManager:
    """A decimal context wide enough to quantize any finite float: the default 28 digits raised
    ``InvalidOperation`` for 1e27 written with 2 decimals."""
    return decimal.localcontext(decimal.Context(prec=_PRECISION))


def _exact(value: float) -> decimal.Decimal:
    """The float's exact binary value: Babel then rounds it as Python's ``format`` does (``0.2175`` is stored as
    0.21749999…, so ``.3f`` writes 0.217 in every language, not Babel's 0.218 from the shortest repr)."""
    return decimal.Decimal(float(value))


def _non_finite(value: float, locale: Locale) -> str:
    """``∞``, ``−∞`` or ``NaN`` as the locale writes them (with the minus sign U+2212)."""
    symbols = locale.number_symbols.get("latn", locale.number_symbols)
    if math.isnan(value):
        return symbols["nan"]
    return (MINUS if value < 0 else "") + symbols["infinity"]


def _rounds_to_zero(value: float, decimals: int) -> bool:
    """True for a finite value that is not 0 but that ``decimals`` decimals would write as zero."""
    return math.isfinite(value) and value != 0 and round(abs(float(value)), decimals) == 0


def num(value: float, decimals: int = 2, lang: str | None = None, group: bool = True) -> str:
    """``value`` with exactly ``decimals`` digits after the locale's decimal sign.

    Any finite float is written whole, however large (``1e300`` with its 301 digits, grouped), rounded as
    Python's ``format`` rounds it; a negative one with the minus sign U+2212. A value that is not 0 but rounds
    to zero at ``decimals`` is written by :func:`sci` instead, with ``decimals`` digits, at most 2 (scientific
    notation below 0.001: ``num(1.4e-17, 4)`` is ``1,40E-17``; the decimals it needs above: ``num(0.004, 2)`` is
    ``0,00400``), so a written zero is always an exact zero.

    Args:
        value: any real number (a tensor's ``.item()``, a float, an int).
        decimals: digits after the decimal sign, 0 … 12.
        lang: the language code; the reader's when ``None``.
        group: write the locale's group separator in the integer part (``1 234,5``).

    Returns:
        ``"0,1385"`` (fr, 4 decimals), ``"1,621,248"`` (en, 0 decimals), ``"−0,0350"`` (fr); ``"∞"``,
        ``"−∞"`` and ``"NaN"`` for the non-finite values (the locale's symbols).

    Raises:
        ValueError: ``decimals`` outside 0 … 12.
    """
    if not 0 <= decimals <= 12:
        raise ValueError(f"decimals must be in 0 … 12, got {decimals}")
    locale = _locale(_lang(lang))
    if not math.isfinite(value):
        return _non_finite(float(value), locale)
    if _rounds_to_zero(value, decimals):
        return sci(value, min(max(decimals, 1), 2), lang)
    pattern = ("#,##0" if group else "0") + ("." + "0" * decimals if decimals else "")
    with _decimal_context():
        return _signed(format_decimal(_exact(value), format=pattern, locale=locale))


def integer(value: int, lang: str | None = None) -> str:
    """A count with the locale's group separator: ``1,621,248`` (en), ``1.621.248`` (de), ``1 621 248`` (fr)."""
    return num(int(value), 0, lang)


def percent(fraction: float, decimals: int = 0, lang: str | None = None) -> str:
    """``fraction`` (0.9834) as a percentage in the locale's pattern: ``98.34%`` (en), ``98,34 %`` (fr, de).

    Raises:
        ValueError: ``decimals`` outside 0 … 12.
    """
    if not 0 <= decimals <= 12:
        raise ValueError(f"decimals must be in 0 … 12, got {decimals}")
    code = _lang(lang)
    locale = _locale(code)
    if not math.isfinite(fraction):
        return _non_finite(float(fraction), locale)
    pattern = LANGUAGES[code].percent
    if decimals:
        last_zero = pattern.rindex("0")
        pattern = pattern[:last_zero + 1] + "." + "0" * decimals + pattern[last_zero + 1:]
    with _decimal_context():
        return _signed(format_percent(_exact(fraction), format=pattern, locale=locale))


def significant(value: float, digits: int = 4, lang: str | None = None) -> str:
    """``value`` rounded to ``digits`` significant digits, trailing zeros dropped, never in exponent form.

    What ``f"{value:.4g}"`` writes for the numbers of a table column that spans several magnitudes
    (``0.0003255``, ``0.5``, ``356.1``), in the locale's format: ``0,0003255``, ``0,5``, ``356,1``
    (fr). An integer part longer than ``digits`` is kept whole, with the locale's group separator
    (``12 346``, where ``%g`` writes ``1.235e+04``).

    Raises:
        ValueError: ``digits`` outside 1 … 12.
    """
    if not 1 <= digits <= 12:
        raise ValueError(f"digits must be in 1 … 12, got {digits}")
    if not math.isfinite(value) or value == 0:
        return num(value, 0, lang)
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    pattern = "#,##0" + ("." + "#" * decimals if decimals else "")
    with _decimal_context():
        return _signed(format_decimal(round(float(value), decimals), format=pattern, locale=_locale(_lang(lang))))


#: Where plain decimals read better than scientific notation: ``|value|`` in ``[SCI_BELOW, SCI_FROM)`` is written
#: with decimals (``0,7507``, ``3,157``, ``2 048``), outside it in scientific notation (``5,96E-8``, ``1,2E5``).
SCI_BELOW = 1e-3
SCI_FROM = 1e4


def sci(value: float, digits: int = 1, lang: str | None = None) -> str:
    """``value`` in scientific notation with ``digits`` after the decimal sign (``1.4E-45`` en, ``1,4E-45`` fr) when
    ``|value|`` lies outside ``[SCI_BELOW, SCI_FROM)``; inside it, the same significant digits as plain decimals
    (``sci(0.75072, 4)`` is ``0,75072`` in French, not ``7,5072E-1``; ``sci(2.0, 1)`` is ``2,0``).

    A quantity whose size the page cannot know in advance (a difference that is 0.75 before a copy and 6e-8
    after it) goes through here: a reader meets E-notation only where decimals would need many zeros. An exact
    0 is written ``0``, without decimals: beside ``2,78E-17`` a ``0,00`` would read as a rounded small value.
    A negative value takes the minus sign U+2212 (``−5,8E-3``); the exponent keeps the hyphen-minus of
    E-notation, the form a reader types back into Python (``5.8e-3``) and the one the lessons print.

    Raises:
        ValueError: ``digits`` outside 0 … 12.
    """
    if not 0 <= digits <= 12:
        raise ValueError(f"digits must be in 0 … 12, got {digits}")
    if not math.isfinite(value) or value == 0:
        return num(value, 0 if value == 0 else digits, lang)
    mantissa, exponent = f"{float(value):.{digits}E}".split("E")  # Python's rounding: '9.9997E+03', '1.0E+04'
    if SCI_BELOW <= abs(float(f"{mantissa}E{exponent}")) < SCI_FROM:
        decimals = min(12, max(0, digits - int(exponent)))
        return num(value, decimals, lang)
    symbols = _locale(_lang(lang)).number_symbols.get("latn", {})
    return _signed(mantissa.replace(".", symbols.get("decimal", "."))) + "E" + str(int(exponent))


def num_or_sci(value: float, decimals: int = 4, digits: int = 2, below: float = 0.01,
               lang: str | None = None) -> str:
    """``value`` with ``decimals`` decimals, or in scientific notation when it is not 0 and ``|value| < below``.

    A difference that may be near 1 or near float rounding (``1,0199`` and ``2,4E-8``, fr) reads in
    the form its size calls for; scientific notation is kept for the small ones, which fixed decimals
    would write as 0.

    Raises:
        ValueError: ``decimals`` or ``digits`` outside 0 … 12.
    """
    if math.isfinite(value) and value != 0 and abs(value) < below:
        return sci(value, digits, lang)
    return num(value, decimals, lang)


def list_separator(lang: str | None = None) -> str:
    """What separates the numbers of a list in the language: ``", "`` (en), ``"\u202f; "`` (fr), ``"; "`` (de)."""
    return LANGUAGES[_lang(lang)].list_separator


def seq(values: Iterable[float], decimals: int = 4, lang: str | None = None) -> str:
    """A row of numbers in brackets, as prose quotes a 1-d tensor: ``[0.43, 0.15]`` (en), ``[0,43 ; 0,15]`` (fr).

    Raises:
        ValueError: ``decimals`` outside 0 … 12.
    """
    code = _lang(lang)
    return "[" + LANGUAGES[code].list_separator.join(num(float(v), decimals, code) for v in values) + "]"


def day(date: datetime.date, lang: str | None = None) -> str:
    """A calendar day in the language's long form: ``December 1, 2026``, ``1er décembre 2026``, ``1. Dezember 2026``.

    French writes the first day of a month as an ordinal (« 1er »), which Babel's long format does not.
    """
    code = _lang(lang)
    if code == "fr" and date.day == 1:
        return format_date(date, "'1er' MMMM y", locale=_locale(code))
    return format_date(date, "long", locale=_locale(code))


def semicolon(lang: str | None = None) -> str:
    """The semicolon and space that join clauses built from parts, in the language's typography, as :func:`colon`
    (``"\u202f; "`` in French, ``"; "`` elsewhere)."""
    return colon(lang).replace(":", ";")


def colon(lang: str | None = None) -> str:
    """The colon and space that join a label to its value in the language's typography (``"\u202f: "`` in French).

    For texts built from parts rather than from a translated sentence, such as a chart's hover template
    (``"%{x}" + colon() + "%{y:.3f}"``), where the catalog's typography cannot reach.
    """
    return LANGUAGES[_lang(lang)].colon


def percent_suffix(lang: str | None = None) -> str:
    """What follows the digits of a percentage in the language's pattern: ``"%"`` (en), ``"\u00a0%"`` (fr, de).

    For a chart that writes its percentages in the browser (a Plotly template over numbers a slider replaces),
    where :func:`percent` cannot run: the template writes the digits, this suffix the sign.
    """
    pattern = LANGUAGES[_lang(lang)].percent
    return pattern[pattern.rindex("0") + 1:]


#: ``st.slider``'s ``format`` for a float slider: Streamlit 1.67's ``"localized"``, which the browser writes with
#: ``Intl.NumberFormat`` in the browser's own languages (``navigator.languages``: ``0,5`` in a French or German
#: browser), where a printf format (``"%.2f"``) writes English decimals in every language. It follows the
#: browser, not the app's language selector: a reader who picks another language than the browser's sees the
#: browser's format on the slider's own value (docs/architecture.md). The slider keeps its number, so its link
#: (``?sa_scale=1.5``) reads the same in every language, which a ``select_slider`` of formatted options would not.
SLIDER_FORMAT = "localized"
#: ``st.column_config.NumberColumn``'s ``format`` for an editable number column: the same browser-side
#: ``"localized"`` format as :data:`SLIDER_FORMAT`, for the same reason (the cell keeps its number).
GRID_FORMAT = "localized"


def plotly_separators(lang: str | None = None) -> str:
    """Plotly's ``layout.separators`` for the language (decimal sign, then group separator)."""
    record = LANGUAGES[_lang(lang)]
    return record.decimal + record.group


def byte_size(n_bytes: float, decimals: int = 1, lang: str | None = None) -> str:
    """A byte count in powers of 1024 with the language's unit: ``1.5 KiB`` (en), ``1,5 Kio`` (fr), ``1,5 KiB`` (de).

    Bytes below 1024 are written whole (``512 B``); a no-break space joins number and unit.

    Raises:
        ValueError: ``decimals`` outside 0 … 12.
    """
    units = LANGUAGES[_lang(lang)].byte_units
    value, power = float(n_bytes), 0
    while abs(value) >= 1024 and power < len(units) - 1:
        value, power = value / 1024, power + 1
    return f"{num(value, decimals if power else 0, lang)}\u00a0{units[power]}"
