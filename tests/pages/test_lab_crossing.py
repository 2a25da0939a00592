"""The moment a Lab training beats counting: the first evaluation below the bigram line, its time, its marker."""

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from engine.figures import lab as LF
from engine.lab.jobs import _Progress, first_below
from tests.plotly_json import ROOT, figures
from ui.i18n import DEFAULT_LANGUAGE, LANG_KEY, LANGUAGES, TRANSLATED, translations
from ui.lab.words import fill
from ui.numbers import integer, num

losses = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


@given(st.lists(losses, max_size=30), losses)
def test_first_below_is_the_first_evaluation_under_the_line(vals, line):
    history = [(10 * i, v + 0.1, v) for i, v in enumerate(vals)]
    times = [2.0 * i for i in range(len(vals))]
    found = first_below(history, times, line)
    if found is None:
        assert all(v >= line for v in vals)
    else:
        step, val, seconds = found
        index = step // 10
        assert val < line and val == vals[index] and seconds == times[index]
        assert all(v >= line for v in vals[:index])


def test_an_evaluation_without_its_time_is_not_counted():
    assert first_below([(0, 8.0, 8.0), (5, 4.0, 4.0)], [0.1], 5.0) is None
    assert first_below([(0, 8.0, 8.0), (5, 4.0, 4.0)], [0.1, 3.0], 5.0) == (5, 4.0, 3.0)


def test_each_evaluation_keeps_its_time_and_a_new_run_starts_afresh():
    progress = _Progress(steps=10)
    progress.new_run(0, "a", 10)
    for step in (0, 5, 10):
        progress.on_eval(step, 6.0, 6.0)
    snap = progress.snapshot()
    assert len(snap.eval_elapsed_s) == len(snap.history) == 3
    assert all(0 <= a <= b for a, b in zip(snap.eval_elapsed_s, snap.eval_elapsed_s[1:], strict=False))
    progress.new_run(1, "b", 10)
    assert progress.snapshot().eval_elapsed_s == ()


def test_the_loss_chart_marks_the_crossing_only_when_given():
    labels = LF.LossLabels(title="", batch="b", train="t", val="v", step="s", loss="l", crossed="x")
    plain = LF.loss_chart([(0, 6.0, 6.1), (10, 5.0, 5.1)], [5.0] * 10, 10, labels)
    marked = LF.loss_chart([(0, 6.0, 6.1), (10, 5.0, 5.1)], [5.0] * 10, 10, labels, crossing=(10, 5.1))
    assert [t.name for t in plain.data] == ["b", "t", "v"]
    assert [t.name for t in marked.data] == ["b", "t", "v", "x"]
    assert list(marked.data[3].x) == [10] and list(marked.data[3].y) == [5.1]


#: The crossing sentence's message id, read from ui/lab/train.py (tests assert on ids, not on the English text).
_CROSSING_ID = next(node.args[0].value for node in ast.walk(ast.parse((ROOT / "ui/lab/train.py").read_text("utf-8")))
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_"
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and "{step:,}" in node.args[0].value and "{time}" in node.args[0].value)


#: The finished training of the panel's tests: its val loss goes below the bigram line (5.173) at step 1200.
HISTORY = ((0, 8.0, 8.0), (600, 5.3, 5.2), (1200, 5.1, 5.15), (1500, 5.0, 5.05))
BIGRAM_VAL, UNIGRAM_VAL = 5.173, 6.1


def _panel_page(history=None, step_losses=None, state="done"):
    """The training panel of a finished job with baselines (AppTest runs this function's source alone: no globals)."""
    from engine.baselines import BaselineLoss, Baselines
    from engine.lab.jobs import Snapshot
    from tests.pages.test_lab_crossing import BIGRAM_VAL, HISTORY, UNIGRAM_VAL
    from ui.lab.train import training_panel

    history = HISTORY if history is None else history
    step_losses = (5.0,) * 1500 if step_losses is None else step_losses

    class FinishedJob:
        result = None
        max_wall_s = 900.0

        def snapshot(self):
            return Snapshot(state=state, step=len(step_losses), steps=1500, elapsed_s=101.0, step_losses=step_losses,
                            history=history, eval_elapsed_s=(0.5, 40.0, 80.0, 100.0)[:len(history)])

        def stop(self):
            raise AssertionError("a finished job has no Stop button")

    baselines = Baselines(unigram=BaselineLoss("unigram", 6.0, UNIGRAM_VAL),
                          bigram=BaselineLoss("bigram", 5.1, BIGRAM_VAL), vocab_size=100, train_tokens=1000,
                          val_tokens=100)
    training_panel(FinishedJob(), True, baselines)


def _alt_ids() -> set[str]:
    """The message ids of ui/lab/train.py's loss_alt (tests assert on ids, not on the English text)."""
    tree = ast.parse((ROOT / "ui/lab/train.py").read_text("utf-8"))
    (function,) = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "loss_alt"]
    return {node.args[0].value for node in ast.walk(function) if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name) and node.func.id == "_"}


def _translated_head(catalog, msgid: str) -> str:
    """The translated message up to its first placeholder."""
    return catalog.gettext(next(i for i in _alt_ids() if i.startswith(msgid))).split("{")[0]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_page_says_when_the_training_went_below_the_bigram_line(lang):
    at = AppTest.from_function(_panel_page)
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    catalog = translations(lang)
    assert (catalog.gettext(_CROSSING_ID) != _CROSSING_ID) == (lang != DEFAULT_LANGUAGE)
    head = catalog.gettext(_CROSSING_ID).split("{step:,}")[0]
    (message,) = [s.value for s in at.success]
    assert message.startswith(head) and integer(1200, lang=lang) in message and "80" in message
    (chart,) = figures(at)
    (star,) = [t for t in chart["data"] if t.get("name") == catalog.gettext("below the bigram line")]
    assert star["x"] == [1200] and star["y"] == [5.15]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_live_loss_chart_has_a_text_alternative_with_the_history_values(lang):
    """Issue 25: the live loss chart's accessible name, in the reader's language, states the last evaluation, the
    baselines and the crossing step, each number as the history and the baselines give it."""
    at = AppTest.from_function(_panel_page)
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    catalog = translations(lang)
    assert all((catalog.gettext(i) != i) == (lang != DEFAULT_LANGUAGE) for i in _alt_ids())
    (chart,) = at.get("plotly_chart")
    alt = chart.proto.alt
    assert alt.startswith(_translated_head(catalog, "Line chart"))
    last_step, last_train, last_val = HISTORY[-1]
    crossing = first_below(HISTORY, (0.5, 40.0, 80.0, 100.0), BIGRAM_VAL)
    last = fill(catalog.gettext(next(i for i in _alt_ids() if i.startswith("Last evaluation"))), lang=lang,
                step=last_step, train=last_train, val=last_val)
    assert last in alt
    for value in (integer(1500, lang=lang), num(last_train, 4, lang=lang), num(last_val, 4, lang=lang),
                  num(BIGRAM_VAL, 2, lang=lang), num(UNIGRAM_VAL, 2, lang=lang), integer(crossing[0], lang=lang),
                  num(crossing[1], 4, lang=lang)):
        assert value in alt, value
    assert _translated_head(catalog, "The val loss is below") in alt


@pytest.mark.parametrize("lang", TRANSLATED)
def test_before_the_first_evaluation_the_alternative_gives_the_last_batch_loss(lang):
    at = AppTest.from_function(_panel_page, kwargs={"history": (), "step_losses": (7.25, 6.5, 6.125),
                                                    "state": "stopped"})
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    catalog = translations(lang)
    alt = at.get("plotly_chart")[0].proto.alt
    assert _translated_head(catalog, "No evaluation yet") in alt and f"{integer(3, lang=lang)}" in alt
    assert num(6.125, 4, lang=lang) in alt
    assert _translated_head(catalog, "The val loss") not in alt and _translated_head(catalog, "Last") not in alt


def _slow_running_page():
    """A running training at 1 s a step, 600 of 1 800 steps after 600 s: the 900 s cap stops it near step 900."""
    from engine.lab.jobs import Snapshot
    from ui.lab.train import training_panel

    class SlowJob:
        result = None
        max_wall_s = 900.0

        def snapshot(self):
            return Snapshot(state="running", step=600, steps=1800, elapsed_s=600.0, eta_s=1200.0,
                            step_losses=(5.0,) * 600, tokens_per_s=1024.0)

        def stop(self):
            pass

    training_panel(SlowJob(), True, None)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_a_training_the_cap_will_stop_says_so_while_it_runs(lang):
    at = AppTest.from_function(_slow_running_page)
    at.session_state[LANG_KEY] = lang
    at.run()
    assert not at.exception
    (warning,) = [w.value for w in at.warning]
    assert integer(900, lang=lang) in warning and integer(1800, lang=lang) in warning and "15" in warning
