"""ui.numbers: every number a reader reads, in the reader's own format (Babel)."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

import pytest
from babel.dates import format_date
from babel.numbers import parse_decimal
from hypothesis import assume, given
from hypothesis import strategies as st

from ui import numbers
from ui.i18n import LANGUAGES

LANGS = tuple(LANGUAGES)


@pytest.mark.parametrize(("lang", "decimal", "count", "pct"), [
    ("en", "6.245", "1,621,248", "98.34%"),
    ("fr", "6,245", "1\u202f621\u202f248", "98,34\u00a0%"),
    ("de", "6,245", "1.621.248", "98,34\u00a0%"),
])
def test_the_issue_examples_read_as_each_language_writes_them(lang, decimal, count, pct):
    assert numbers.num(6.2451, 3, lang=lang) == decimal
    assert numbers.integer(1_621_248, lang=lang) == count
    assert numbers.percent(0.9834, 2, lang=lang) == pct
    assert "98,34".replace(",", decimal[1]) + numbers.percent_suffix(lang) == pct  # what a chart's template writes


@given(value=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False), decimals=st.integers(0, 6),
       lang=st.sampled_from(LANGS))
def test_a_formatted_number_parses_back_to_the_rounded_value(value, decimals, lang):
    assume(value == 0 or round(abs(value), decimals) != 0)  # a value rounding to zero is written by sci
    text = numbers.num(value, decimals, lang=lang).replace(numbers.MINUS, "-")
    parsed = parse_decimal(text.replace("\u202f", "\u00a0") if lang == "fr" else text, locale=lang,
                           strict=False)
    assert abs(parsed - Decimal(repr(value))) <= Decimal(10) ** -decimals / 2 + Decimal("1e-9")
    assert len(text.partition({"en": ".", "fr": ",", "de": ","}[lang])[2]) == decimals


@pytest.mark.parametrize("lang", LANGS)
def test_non_finite_values_are_written_not_crashed_on(lang):
    assert numbers.num(math.inf, 2, lang=lang) == "∞"
    assert numbers.num(-math.inf, 2, lang=lang) == "\u2212∞"
    assert numbers.num(math.nan, 2, lang=lang) == "NaN"
    assert numbers.percent(math.nan, lang=lang) == "NaN"
    assert numbers.sci(math.inf, lang=lang) == "∞"


def test_scientific_notation_uses_the_decimal_sign_of_the_language():
    assert numbers.sci(1.4e-45, 1, lang="en") == "1.4E-45"
    assert numbers.sci(1.4e-45, 1, lang="fr") == "1,4E-45"
    assert numbers.sci(0.0, 1, lang="de") == "0"


def test_plotly_separators_follow_the_language():
    assert numbers.plotly_separators("en") == ".,"
    assert numbers.plotly_separators("de") == ",."
    assert numbers.plotly_separators("fr")[0] == ","


def test_the_colon_follows_each_languages_typography():
    assert numbers.colon("fr") == "\u202f: " and numbers.colon("de") == numbers.colon("en") == ": "
    assert numbers.colon("xx") == ": "


def test_an_unknown_language_falls_back_to_english():
    assert numbers.num(1234.5, 1, lang="xx") == "1,234.5"


@pytest.mark.parametrize(("lang", "small", "half", "large", "grouped"), [
    ("en", "0.0003255", "0.5", "356.1", "12,346"),
    ("fr", "0,0003255", "0,5", "356,1", "12\u202f346"),
    ("de", "0,0003255", "0,5", "356,1", "12.346"),
])
def test_significant_digits_in_each_language(lang, small, half, large, grouped):
    values = (0.000325521, 0.5, 356.077271, 12345.678)
    assert [numbers.significant(v, 4, lang=lang) for v in values] == [small, half, large, grouped]
    assert numbers.significant(0.0, 4, lang=lang) == "0"
    assert numbers.significant(math.inf, 4, lang=lang) == "∞"


@given(value=st.floats(min_value=1e-4, max_value=9e3), digits=st.integers(1, 6), negative=st.booleans())
def test_significant_is_the_value_g_format_writes(value, digits, negative):
    """Below 10**digits, the value is the one ``%g`` rounds to, without its exponent form."""
    assume(value < 10**digits)
    value = -value if negative else value
    text = numbers.significant(value, digits, lang="en")
    assert Decimal(text.replace(",", "").replace("\u2212", "-")) == Decimal(f"{value:.{digits}g}")
    assert "E" not in text and "e" not in text


@pytest.mark.parametrize("bad", [-1, 13])
def test_out_of_range_digits_are_refused(bad):
    with pytest.raises(ValueError):
        numbers.num(1.0, bad, lang="en")
    with pytest.raises(ValueError):
        numbers.percent(1.0, bad, lang="en")
    with pytest.raises(ValueError):
        numbers.sci(1.0, bad, lang="en")
    with pytest.raises(ValueError):
        numbers.significant(1.0, bad, lang="en")


@pytest.mark.parametrize("lang, expected", [("en", "1.5\u00a0KiB"), ("fr", "1,5\u00a0Kio"), ("de", "1,5\u00a0KiB")])
def test_byte_size_in_the_reader_units(lang, expected):
    assert numbers.byte_size(1536, lang=lang) == expected
    assert numbers.byte_size(512, lang=lang).startswith("512\u00a0")
    assert numbers.byte_size(96 * 2**20, 0, lang=lang).startswith("96\u00a0")


@given(values=st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=8),
       decimals=st.integers(0, 4), lang=st.sampled_from(LANGS))
def test_a_row_of_numbers_splits_back_into_its_rounded_values(values, decimals, lang):
    assume(all(v == 0 or round(abs(v), decimals) != 0 for v in values))
    text = numbers.seq(values, decimals, lang=lang).replace(numbers.MINUS, "-")
    assert text.startswith("[") and text.endswith("]")
    cells = text[1:-1].split({"en": ", ", "fr": "\u202f; ", "de": "; "}[lang])
    assert len(cells) == len(values)
    for cell, value in zip(cells, values, strict=True):
        parsed = parse_decimal(cell.replace("\u202f", "\u00a0") if lang == "fr" else cell, locale=lang,
                               strict=False)
        assert abs(parsed - Decimal(repr(value))) <= Decimal(10) ** -decimals / 2 + Decimal("1e-9")


@pytest.mark.parametrize("lang", LANGS)
def test_a_difference_near_one_is_written_with_decimals_and_a_tiny_one_in_scientific_notation(lang):
    near_one = numbers.num_or_sci(1.0199, 4, lang=lang)
    assert near_one == numbers.num(1.0199, 4, lang=lang)
    assert "E" not in near_one
    tiny = numbers.num_or_sci(2.4e-8, 4, lang=lang)
    assert tiny == numbers.sci(2.4e-8, 2, lang=lang)
    assert numbers.num_or_sci(0.0, 4, lang=lang) == numbers.num(0.0, 4, lang=lang)


@given(ordinal=st.integers(datetime.date(2000, 1, 1).toordinal(), datetime.date(2100, 12, 31).toordinal()),
       lang=st.sampled_from(LANGS))
def test_a_day_reads_in_the_long_form_with_the_french_first_of_the_month(ordinal, lang):
    date = datetime.date.fromordinal(ordinal)
    text = numbers.day(date, lang=lang)
    assert str(date.year) in text
    if lang == "fr" and date.day == 1:
        assert text.startswith("1er ")
        assert text.removeprefix("1er ") == format_date(date, "long", locale="fr").removeprefix("1 ")
    else:
        assert text == format_date(date, "long", locale=lang)


@given(value=st.floats(-1e9, 1e9, allow_nan=False), decimals=st.integers(0, 6), lang=st.sampled_from(LANGS))
def test_rounding_follows_the_float_in_every_language(value, decimals, lang):
    """0.2175 is stored as 0.21749999…: every language rounds the stored value, as Python's format does."""
    assume(value == 0 or round(abs(value), decimals) != 0)
    python = f"{value:.{decimals}f}"
    assert numbers.num(value, decimals, lang, group=False).replace(",", ".").replace("\u2212", "-") == python


@pytest.mark.parametrize(("value", "digits", "fr", "en"), [
    (0.75072, 4, "0,75072", "0.75072"), (2.0, 1, "2,0", "2.0"), (-0.5805, 3, "\u22120,5805", "\u22120.5805"),
    (0.0013, 1, "0,0013", "0.0013"), (3.157, 3, "3,157", "3.157"), (2048.0, 1, "2\u202f048", "2,048"),
    (9.9e-4, 1, "9,9E-4", "9.9E-4"), (9999.7, 1, "1,0E4", "1.0E4"), (1.2e5, 1, "1,2E5", "1.2E5"),
    (5.96e-8, 2, "5,96E-8", "5.96E-8"),
])
def test_sci_writes_e_notation_only_outside_a_thousandth_to_ten_thousand(value, digits, fr, en):
    """Issue 36: 0.7507 is not written 7,5072E-1; scientific notation only for |value| outside [0.001, 10 000)."""
    assert numbers.sci(value, digits, lang="fr") == fr and numbers.sci(value, digits, lang="en") == en
    assert ("E" in en) == (not numbers.SCI_BELOW <= abs(float(en.replace(",", "").replace("\u2212", "-")))
                           < numbers.SCI_FROM)


def test_list_separator_is_the_one_seq_writes():
    for lang in LANGUAGES:
        assert numbers.seq([0.5, 0.25], 2, lang=lang) == (
            "[" + numbers.num(0.5, 2, lang=lang) + numbers.list_separator(lang) + numbers.num(0.25, 2, lang=lang) + "]")
    assert numbers.list_separator("de") == "; " and numbers.list_separator("fr") == "\u202f; "


def test_semicolon_joins_clauses_in_each_languages_typography():
    assert [numbers.semicolon(lang) for lang in ("en", "fr", "de")] == ["; ", "\u202f; ", "; "]


# --- issue 36: the minus sign, any finite float, no zero that is not one ---------------------------------------


@given(value=st.floats(max_value=-1e-300, allow_nan=False, allow_infinity=False), decimals=st.integers(0, 6),
       lang=st.sampled_from(LANGS))
def test_a_negative_number_is_written_with_the_minus_sign_in_every_function(value, decimals, lang):
    """CLDR gives French, German and English the hyphen-minus; the page writes U+2212 (« −0,035 »)."""
    written = [numbers.num(value, decimals, lang=lang), numbers.sci(value, decimals, lang=lang),
               numbers.percent(max(value, -1e6), 1, lang=lang), numbers.seq([value], decimals, lang=lang),
               numbers.num_or_sci(value, decimals, lang=lang)]
    if value > -1e12:
        written.append(numbers.significant(value, 4, lang=lang))
    for text in written:
        assert "-" not in text.partition("E")[0] and text.startswith(("[\u2212", "\u2212")), text
    assert numbers.num(-math.inf, lang=lang) == numbers.sci(-math.inf, lang=lang) == "\u2212∞"


@given(value=st.floats(allow_nan=False, allow_infinity=False), decimals=st.integers(0, 12))
def test_any_finite_float_is_formatted_as_python_rounds_it(value, decimals):
    """1e28 raised decimal.InvalidOperation (Babel quantizes in the 28-digit default context); every finite float is
    written whole now, with the digits Python's ``format`` writes."""
    assume(value == 0 or round(abs(value), decimals) != 0)
    text = numbers.num(value, decimals, lang="en", group=False)
    assert text.replace("\u2212", "-") == f"{value:.{decimals}f}"


@pytest.mark.parametrize("lang", LANGS)
def test_the_largest_floats_are_written_in_every_function(lang):
    assert numbers.num(1e28, 2, lang="en") == f"{1e28:,.2f}"  # raised decimal.InvalidOperation
    for value in (1e27, 2.0**90, -1e300, 1.7976931348623157e308):
        assert numbers.num(value, 2, lang=lang).replace("\u2212", "").startswith("1")
        assert numbers.integer(int(value), lang=lang)[-1].isdigit()
        assert "E" in numbers.sci(value, 2, lang=lang)
        assert numbers.percent(value, 0, lang=lang)[0] in "1\u2212"
        assert numbers.significant(value, 4, lang=lang).replace("\u2212", "")[0] == "1"


@given(value=st.floats(min_value=-1e-2, max_value=1e-2, allow_nan=False).filter(lambda v: v != 0),
       decimals=st.integers(0, 6), lang=st.sampled_from(LANGS))
def test_a_value_that_is_not_zero_is_never_written_as_zero(value, decimals, lang):
    """Page 1 wrote « 0,00 » beside « 2,78E-17 »: a value below the display precision is written by sci (scientific
    notation under 0.001), and the number read back is the value to its first digits."""
    text = numbers.num(value, decimals, lang=lang)
    plain = text.replace("\u2212", "-").replace(",", ".") if lang != "en" else text.replace("\u2212", "-")
    assert float(plain) != 0
    assert math.isclose(float(plain), value, rel_tol=0.5 / 10 ** min(max(decimals, 1), 2) + 1e-9) or \
        round(abs(value), decimals) != 0


@pytest.mark.parametrize("lang", LANGS)
def test_an_exact_zero_is_written_without_false_decimals_where_scientific_notation_may_stand(lang):
    assert numbers.sci(0.0, 2, lang=lang) == "0"
    assert numbers.num(0.0, 2, lang=lang) == numbers.num(0.0, 2, lang=lang, group=False)
    assert numbers.num(1.4e-17, 2, lang=lang) == numbers.sci(1.4e-17, 2, lang=lang)
    assert numbers.num(-1.4e-17, 2, lang=lang).replace(",", ".") == "\u22121.40E-17"  # the exponent: Python's form
