"""ui.page.chapter_check: decimal numbers match the chapter to its 4 decimals, whole numbers match exactly."""

from __future__ import annotations

import pytest
import torch

from engine import chapter
from ui import page


@pytest.fixture
def badges(monkeypatch):
    """Every badge the helper draws, as (text, colour); the message ids pass through untranslated."""
    drawn = []
    monkeypatch.setattr(page, "_", lambda message: f"<{message}>")
    monkeypatch.setattr(page.st, "badge", lambda text, icon=None, color=None: drawn.append((text, color)))
    return drawn


@pytest.mark.parametrize(("source", "message"), [("chapter", "<{label}: matches the chapter exactly>"),
                                                 ("lesson", "<{label}: matches the lesson exactly>")])
def test_whole_numbers_get_the_exact_badge(badges, source, message):
    assert page.chapter_check("M.view(3, 2)", torch.tensor(chapter.LAYOUT_VIEW_3_2), chapter.LAYOUT_VIEW_3_2,
                              source=source)
    assert badges == [(message.format(label="M.view(3, 2)"), "green")]


def test_a_whole_number_off_by_a_fraction_fails_the_exact_badge(badges):
    value = torch.tensor(chapter.LAYOUT_STORAGE, dtype=torch.float64)
    value[2] += 0.25  # within the 0-decimal tolerance, not equal
    assert not page.chapter_check("storage", value, chapter.LAYOUT_STORAGE)
    assert badges == [("<{label}: does NOT match the chapter>".format(label="storage"), "red")]
    badges.clear()
    assert not page.chapter_check("qkv", [3167], [chapter.LESSON_QKV_PARAMS], source="lesson")
    assert badges == [("<{label}: does NOT match the lesson>".format(label="qkv"), "red")]


def test_decimal_numbers_keep_the_four_decimal_badge(badges):
    expected = chapter.MHA_SPLIT_FIRST_ROW
    assert page.chapter_check("row", torch.tensor(expected) + 4e-5, expected)
    assert badges == [("<{label}: matches the chapter to {decimals} decimals>".format(
        label="row", decimals=chapter.DECIMALS), "green")]


def test_a_shape_mismatch_is_no_match_and_the_source_is_checked(badges):
    assert not page.chapter_check("storage", torch.arange(1, 6), chapter.LAYOUT_STORAGE)
    assert badges[-1][1] == "red"
    with pytest.raises(ValueError):
        page.chapter_check("storage", chapter.LAYOUT_STORAGE, chapter.LAYOUT_STORAGE, source="book")


def test_integer_detection():
    assert page.is_count([3168, 3168]) and page.is_count(chapter.LAYOUT_MATRIX)
    assert not page.is_count(chapter.MHA_SPLIT_FIRST_ROW)
