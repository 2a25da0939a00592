"""Prediction gates (ui/gates.py, ui/questions/): answers from the engine, verdicts, feedback, switch, record, input."""

import csv
import functools
import io
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from tests.plotly_json import open_page
from ui import gates
from ui.i18n import LANGUAGES, translations
from ui.nav import BY_SLUG, PAGES
from ui.questions import GATED_PAGES, by_page, every_gate

GATES = every_gate()
BY_ID = {g.id: g for g in GATES}


def msg(msgid: str, lang: str, **values) -> str:
    return translations(lang).gettext(msgid).format(**values)


# --- the answers are the engine's, for the first visit's controls and for changed ones -------------------------


def _softmax_self(inputs, q):
    scores = inputs @ inputs[q]  # (6, 3) @ (3,) -> (6,)
    return float(torch.softmax(scores, dim=0)[q])


@functools.cache
def other_sweep():
    """Page 7's permutation sweep for controls a reader may pick (n_embd 16, seed 1)."""
    from engine.sections import positional_encodings as pe

    return pe.permutation_by_layers(n_embd=16, n_head=4, seed=1)


#: Gate id -> (controls changed from the first visit's, expected) pairs; a callable gives the changes lazily.
ORACLES = {
    "sa_self_weight": [
        ({}, _softmax_self(A.chapter_inputs(), 1)),
        ({"q": 4}, _softmax_self(A.chapter_inputs(), 4)),
        ({"inputs": A.chapter_inputs() * 2, "q": 0}, _softmax_self(A.chapter_inputs() * 2, 0)),
    ],
    "sa_softmax_outcome": [
        ({}, "both_finite"),
        ({"scale": 150.0}, "naive_breaks"),  # largest score 1.495 x 150 > 89, float32's exp limit
        ({"scale": -150.0}, "naive_breaks"),  # every exp below float32's smallest: 0/0
        ({"scale": 20.0, "dtype_name": "float16"}, "naive_breaks"),  # 29.9 > 11.1, float16's limit
        ({"scale": 5.0, "dtype_name": "float16"}, "both_finite"),
    ],
    # the chapter divides by sqrt(d_k) whatever d_out, seed and query (test_scale_is_sqrt_dk checks the numbers)
    "tw_scale": [({}, "sqrt_dk"), ({"d_out": 5, "seed": 7, "q": 0}, "sqrt_dk"), ({"d_out": 8, "q": 5}, "sqrt_dk")],
    "tw_largest_weight": [({}, "grows")],
    "cm_future": [({}, "neg_inf")],
    # the perturbed token and every row after it change, none before it
    "cm_leakage": [({}, 4.0), ({"token_index": 0}, 6.0), ({"token_index": 5, "delta": -2.0}, 1.0),
                   ({"token_index": 3, "delta": 0.0}, 0.0)],
    "do_kept": [({}, 2.0), ({"seed": 7}, 2.0)],  # 1 / (1 - 0.5)
    "do_row_sums": [({}, "vary"), ({"seed": 5}, "vary")],
    "do_where": [({}, "weights"), ({"p": 0.1}, "weights"), ({"p": 0.9, "seed": 3}, "weights")],
    "mh_qkv": [({}, float(chapter.LESSON_QKV_PARAMS)), ({"n_embd": 64, "num_heads": 8}, 3 * 64 * 64 + 3 * 64),
               ({"n_embd": 12, "num_heads": 3}, 3 * 12 * 12 + 3 * 12)],
    "mh_more_heads": [({}, "same"), ({"n_embd": 48}, "same")],
    "ml_view": [({}, "error")],
    "ml_transpose": [({}, "shared_not"), ({"num_heads": 1}, "shared_contiguous"),
                     ({"num_tokens": 1, "num_heads": 3}, "shared_contiguous"),
                     ({"num_tokens": 5, "num_heads": 4, "head_dim": 3}, "shared_not")],
    # the lesson's finding, which page 7's verdicts check too: rounding at one layer, clearly non-zero from two
    "pe_depth": [({}, "from_two"), (lambda: {"sweep": other_sweep()}, "from_two")],
    "pe_blind": [({}, "none"), (lambda: {"sweep": other_sweep()}, "none")],
    # the shipped runs: 8 heads within the seeds' noise of 4, RoPE lowest (assets/lab_exercises.json)
    "lab_heads": [({}, "same")],
    "lab_positions": [({}, "rope")],
}


def test_every_gate_has_an_oracle_and_every_gated_page_two_to_four_gates():
    assert set(ORACLES) == set(BY_ID)
    for slug in GATED_PAGES:
        assert 2 <= len(by_page(slug)) <= 4, slug
        assert all(g.page == slug for g in by_page(slug))
    assert len(BY_ID) == len(GATES)  # ids unique


@pytest.mark.parametrize("gate_id,case", [(k, i) for k, cases in ORACLES.items() for i in range(len(cases))])
def test_answer_is_the_engine_value(gate_id, case):
    g = BY_ID[gate_id]
    changes, expected = ORACLES[gate_id][case]
    value = g.answer(**(g.defaults() | (changes() if callable(changes) else changes)))
    if g.kind.typed:
        assert value == pytest.approx(expected, abs=1e-6)
    else:
        assert value == expected and value in [o.key for o in g.options]


def test_scale_is_sqrt_dk():
    from engine.sections import trainable_weights as tw

    for d_out, seed, q in ((2, chapter.TRAINABLE_SEED, 1), (5, 7, 0), (8, 0, 5)):
        steps = tw.trainable_walkthrough(A.chapter_inputs(), seed, d_out, q)
        expected = torch.softmax(steps.attn_scores / math.sqrt(d_out), dim=-1)
        torch.testing.assert_close(steps.attn_weights, expected)


def test_shipped_exercise_answers_follow_the_file():
    from engine.sections import lab

    data = lab.shipped()
    heads_8 = next(c for c in data.exercise("heads").comparisons if c.b == "heads_8")
    assert lab.heads_facts(data) == {"verdict": heads_8.verdict, "mean": heads_8.mean, "seeds": len(heads_8.seeds)}
    assert (heads_8.verdict == "no_detectable_difference") == (lab.eight_heads(**lab.heads_facts(data)) == "same")
    deltas = {c.b: c.mean for c in data.exercise("positions").comparisons}
    assert lab.position_facts(data)["deltas"] == {"course": 0.0} | deltas
    assert (min(deltas.values()) < 0) == (lab.best_position(**lab.position_facts(data)) != "learned")
    # one seed draws no verdict: the sign of the mean; the encoding of the lowest run
    assert lab.eight_heads("too_few_seeds", -0.01, 1) == "down" and lab.eight_heads("b_beats_a", 0.02, 1) == "up"
    assert lab.best_position({"course": 0.0, "pos_none": 0.3}) == "learned"
    for facts in (lab.heads_facts, lab.position_facts):  # a notebook run where the file is missing: a clear message
        with pytest.raises(ValueError, match="python -m engine.lab.experiments"):
            facts(None)
    with pytest.raises(ValueError, match="verdict"):
        lab.eight_heads("better", 0.0, 3)
    with pytest.raises(ValueError, match="deltas"):
        lab.best_position({"made_up": 0.0})


def test_page_1_first_answer_is_the_chapter_number():
    assert round(BY_ID["sa_self_weight"].answer(**BY_ID["sa_self_weight"].defaults()), 4) == pytest.approx(
        float(chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY[1]), abs=1e-9)


def test_the_first_visit_answer_is_cached_and_equal():
    for g in GATES:
        assert gates.default_answer(g) == g.answer(**g.defaults())


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_string_translated_and_its_placeholders_filled(lang):
    for g in GATES:
        values = {k: str(v) for k, v in gates.default_words(g).items()}
        texts = [g.question] + ([g.note] if g.note else []) + [t for o in g.options for t in (o.label, o.feedback)]
        for text in texts:
            shown = msg(text, lang, **values)
            assert "{" not in shown, (g.id, shown)
            if lang != "en":  # in the compiled catalog (a few, such as "d_k = {d_k}", read the same)
                assert translations(lang)._catalog.get(text), (g.id, lang, text)


# --- verdicts --------------------------------------------------------------------------------------------------


def test_judge_within_tolerance_and_by_key():
    g = BY_ID["sa_self_weight"]
    assert gates.judge(g, 0.25, 0.2379) and gates.judge(g, 0.2179, 0.2379)
    assert not gates.judge(g, 0.26, 0.2379) and not gates.judge(g, -0.2379, 0.2379)
    c = BY_ID["sa_softmax_outcome"]
    assert gates.judge(c, "both_finite", "both_finite") and not gates.judge(c, "both_break", "both_finite")


# --- typed numbers in the reader's format; crafted input never raises ------------------------------------------


@pytest.mark.parametrize("lang,text,value", [
    ("fr", "0,5", 0.5), ("de", "0,5", 0.5), ("en", "0.5", 0.5), ("fr", "3 168", 3168.0), ("fr", "3\u202f168", 3168.0),
    ("en", "3,168", 3168.0), ("de", "3.168", 3168.0), ("en", " -0.25 ", -0.25), ("fr", "\u22120,25", -0.25),
    ("fr", "0.5", 0.5),  # a point is no French group separator: read as the decimal sign
])
def test_parse_reader_format(lang, text, value):
    assert gates.parse_guess(text, lang) == gates.Parsed(value, None)


@pytest.mark.parametrize("lang,text", [
    ("en", ""), ("en", "   "), ("fr", "abc"), ("en", "1e400"), ("de", "-1e400"), ("en", "NaN"), ("fr", "inf"),
    ("en", "0,5"), ("de", "0.5"), ("en", "1" * 500), ("fr", "1,5,5"), ("en", "0x10"), ("en", "½"),
])
def test_parse_refuses_with_a_message(lang, text):
    parsed = gates.parse_guess(text, lang)
    assert parsed.value is None and parsed.error


@pytest.mark.parametrize("lang", LANGUAGES)
def test_refusal_messages_are_translated_and_give_an_example(lang):
    error = gates.parse_guess("0,5" if lang == "en" else "abc", lang).error
    assert gates.example(lang) in error
    if lang != "en":
        assert error != "This is not a number in your language's format: write it like 0.25."


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=80), lang=st.sampled_from(tuple(LANGUAGES)))
def test_any_text_is_read_or_refused_never_raised(text, lang):
    parsed = gates.parse_guess(text, lang)
    assert (parsed.value is None) != (parsed.error is None)
    if parsed.value is not None:
        assert math.isfinite(parsed.value)


@settings(max_examples=300, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False), lang=st.sampled_from(tuple(LANGUAGES)))
def test_any_finite_guess_is_written_back(value, lang):
    assert gates.number_text(value, lang)


# --- the page: gated until answered or skipped; predict=off shows everything ------------------------------------

PAGE1 = "views/self_attention.py"


def chart_keys(at) -> set[str]:
    return {c.key for c in at.get("plotly_chart")}


@pytest.fixture
def gated():
    at = open_page(PAGE1, 120, state={"predict": "on"})
    assert not at.exception
    return at


def test_blocks_wait_for_their_gate_and_the_rest_of_the_page_does_not(gated):
    keys = chart_keys(gated)
    assert "sa_steps_chart" not in keys and "sa_context_chart" not in keys and "sa_all_scores" in keys
    assert not any(t.startswith("`attn_scores` = ") for t in (m.value for m in gated.markdown))
    assert [t.label for t in gated.text_input] == ["Your guess"]


def test_skip_shows_the_block_at_once(gated):
    gated.button(key="gate_skip_sa_self_weight").click().run()
    assert not gated.exception
    assert "sa_steps_chart" in chart_keys(gated)
    assert gated.session_state[gates.RECORD_KEY]["sa_self_weight"].skipped


def test_predict_off_shows_every_block_and_no_gate():
    at = open_page(PAGE1, 120, params={"predict": "off"}, state={"predict": "off"})
    assert "sa_steps_chart" in chart_keys(at)
    assert not any(b.key and b.key.startswith("gate_") for b in at.button)


@pytest.mark.parametrize("lang", LANGUAGES)
def test_right_and_wrong_number_verdicts_in_each_language(lang):
    at = open_page(PAGE1, 120, state={"predict": "on"}, lang=lang)
    right, wrong = gates.num(0.24, 2, lang), gates.num(0.5, 1, lang)
    at.text_input(key="gate_guess_sa_self_weight").input(right)
    at.button(key="gate_check_sa_self_weight").click().run()
    value = gates.num(float(chapter.SIMPLE_SOFTMAX_WEIGHTS_JOURNEY[1]), 4, lang)
    assert at.success[0].value.startswith(msg("Right: you said {guess}, the page computes {value}.", lang,
                                              guess=right, value=value))
    assert "sa_steps_chart" in chart_keys(at)
    at.button(key="gate_again_sa_self_weight").click().run()
    assert "sa_steps_chart" not in chart_keys(at)
    at.text_input(key="gate_guess_sa_self_weight").input(wrong)
    at.button(key="gate_check_sa_self_weight").click().run()
    assert at.warning[0].value.startswith(msg("Not quite: you said {guess}, the page computes {value}.", lang,
                                              guess=wrong, value=value))
    note = BY_ID["sa_self_weight"].note
    assert msg(note, lang) in [m.value for m in at.markdown]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_choice_feedback_for_every_option_in_each_language(lang):
    at = open_page(PAGE1, 120, state={"predict": "on"}, lang=lang)
    g = BY_ID["sa_softmax_outcome"]
    # the session's value, not radio.set_value: AppTest formats options in the test's thread, in English
    at.session_state["gate_choice_sa_softmax_outcome"] = "both_break"
    at.button(key="gate_check_sa_softmax_outcome").click().run()
    values = gates.words(g, g.defaults()) if lang == "en" else None
    shown = "\n".join(m.value for m in at.markdown)
    said = msg("Not this one: you said “{guess}”, the page computes “{value}”.", lang,
               guess=msg(g.option("both_break").label, lang), value=msg(g.option("both_finite").label, lang))
    assert [w.value for w in at.warning] == [said]
    for o in g.options:
        assert msg(o.label, lang) in shown  # no placeholders in labels
    assert "- ✓ **" + msg(g.option("both_finite").label, lang) in shown
    assert "- ✗ **" + msg(g.option("both_break").label, lang) in shown
    if values:
        assert msg(g.option("both_finite").feedback, lang, **values) in shown


@pytest.mark.parametrize("text", ["", "abc", "1e400", "NaN", "0,5", "9" * 32, "<b>x</b>", "**x**", "{guess}"])
def test_crafted_guess_gives_a_message_not_a_traceback(gated, text):
    gated.text_input(key="gate_guess_sa_self_weight").input(text)
    gated.button(key="gate_check_sa_self_weight").click().run()
    assert not gated.exception
    if text == "9" * 32:  # a number, far off
        assert gated.warning
    else:
        assert gated.error and "sa_steps_chart" not in chart_keys(gated)
        assert gates.RECORD_KEY not in gated.session_state or not gated.session_state[gates.RECORD_KEY]


def test_a_changed_control_keeps_the_answer_until_guess_again(gated):
    gated.text_input(key="gate_guess_sa_self_weight").input("0.24")
    gated.button(key="gate_check_sa_self_weight").click().run()
    gated.selectbox(key="sa_query").set_value("step").run()
    assert not gated.exception and "sa_steps_chart" in chart_keys(gated)
    now = gates.num(_softmax_self(A.chapter_inputs(), 5), 4, "en")
    assert any(now in i.value for i in gated.info)
    assert gated.session_state[gates.RECORD_KEY]["sa_self_weight"].right


# --- the record: counted across a page switch, as CSV -----------------------------------------------------------


def test_record_counts_across_a_page_switch_and_downloads():
    at = open_page("app.py", 180, state={"predict": "on"})
    at.switch_page("views/self_attention.py").run()
    at.text_input(key="gate_guess_sa_self_weight").input("0.24")
    at.radio(key="gate_confidence_sa_self_weight").set_value("high")
    at.button(key="gate_check_sa_self_weight").click().run()
    at.radio(key="gate_choice_sa_softmax_outcome").set_value("both_break")
    at.button(key="gate_check_sa_softmax_outcome").click().run()
    at.switch_page("views/trainable_weights.py").run()
    assert not at.exception
    line = msg("{page}: {right} of {n} right", "en", page=BY_SLUG["self_attention"].nav_title(), right="1", n="2")
    assert any(line in m.value for m in at.sidebar.markdown)
    record = at.session_state[gates.RECORD_KEY]
    assert [s for s in gates.scores(record)] == [gates.PageScore("self_attention", 2, 1, 0)]
    rows = list(csv.DictReader(io.StringIO(gates.record_csv(record))))
    assert [(r["gate"], r["right"], r["confidence"]) for r in rows] == [
        ("sa_self_weight", "True", "high"), ("sa_softmax_outcome", "False", "")]


# --- retrieval: one question from an earlier page, another on each visit ---------------------------------------


def test_retrieval_pool_is_earlier_visited_pages_one_click_questions():
    everything = {p.slug: 1 for p in PAGES}
    assert gates.retrieval_pool("self_attention", everything) == () and gates.retrieval_pool("home", everything) == ()
    for info in PAGES:
        for g in gates.retrieval_pool(info.slug, everything):
            assert not g.kind.typed and int(BY_SLUG[g.page].number) < int(info.number)
    assert {g.page for g in gates.retrieval_pool("lab", everything)} == set(GATED_PAGES) - {"lab"} - {
        s for s in GATED_PAGES if not any(g.recall and not g.kind.typed for g in by_page(s))}


def test_retrieval_pool_holds_only_pages_visited():
    assert gates.retrieval_pool("dropout", {}) == ()
    assert gates.retrieval_pool("dropout", {"dropout": 3, "multi_head": 1}) == ()  # not earlier
    only_1 = gates.retrieval_pool("dropout", {"self_attention": 1})
    assert only_1 and {g.page for g in only_1} == {"self_attention"}
    both = gates.retrieval_pool("dropout", {"self_attention": 1, "trainable_weights": 2})
    assert {g.page for g in both} == {"self_attention", "trainable_weights"}


def test_no_retrieval_question_about_a_page_not_visited():
    """A page opened first (a deep link) asks nothing; after page 1 it asks about page 1 only."""
    at = open_page("app.py", 240, state={"predict": "on"})
    at.switch_page("views/dropout.py").run()
    assert not [p for p in at.radio if (p.key or "").startswith("gate_retrieval_")]
    at.switch_page("views/self_attention.py").run()
    at.switch_page("views/dropout.py").run()
    asked = [p.key for p in at.radio if (p.key or "").startswith("gate_retrieval_")]
    assert not at.exception and len(asked) == 1
    assert BY_ID[asked[0].removeprefix("gate_retrieval_").rsplit("_", 1)[0]].page == "self_attention"


# --- every gated page: its gates appear with gates on, and skipping each shows what it guards -------------------


@pytest.mark.parametrize("slug", GATED_PAGES)
def test_each_page_poses_its_gates_and_skipping_reveals(slug):
    at = open_page(BY_SLUG[slug].script, 240, state={"predict": "on"})
    assert not at.exception, [e.value for e in at.exception]
    for g in by_page(slug):
        keys = {b.key for b in at.button}
        assert f"gate_skip_{g.id}" in keys, (g.id, sorted(k for k in keys if k and k.startswith("gate_")))
        at.button(key=f"gate_skip_{g.id}").click().run()
        assert not at.exception, [e.value for e in at.exception]
        assert f"gate_again_{g.id}" in {b.key for b in at.button}
    assert set(at.session_state[gates.RECORD_KEY]) == {g.id for g in by_page(slug)}
    assert all(a.skipped for a in at.session_state[gates.RECORD_KEY].values())


EVERY_PAGE_SEEN = {p.slug: 1 for p in PAGES}


@pytest.mark.parametrize("slug", [p.slug for p in PAGES if gates.retrieval_pool(p.slug, EVERY_PAGE_SEEN)][:2])
def test_retrieval_question_answers_with_one_click_and_the_record_counts_it(slug):
    at = open_page(BY_SLUG[slug].script, 240, state={"predict": "on", gates.VISITS_KEY: dict(EVERY_PAGE_SEEN)})
    pills = [p for p in at.radio if p.key and p.key.startswith("gate_retrieval_")]
    assert len(pills) == 1
    gate_id = pills[0].key.removeprefix("gate_retrieval_").rsplit("_", 1)[0]
    g = BY_ID[gate_id]
    at.session_state[pills[0].key] = gates.default_answer(g)
    at.run()
    assert not at.exception
    assert any(s.value.startswith(msg("Right.", "en")) for s in at.success)
    recalled = at.session_state[gates.RECALL_KEY]
    assert [(r.gate, r.page, r.asked_on, r.right) for r in recalled.values()] == [(g.id, g.page, slug, True)]
    rows = list(csv.DictReader(io.StringIO(gates.record_csv({}, recalled))))
    assert [(r["part"], r["gate"], r["asked_on"], r["right"]) for r in rows] == [("remember", g.id, slug, "True")]


def test_retrieval_asks_another_question_on_the_next_visit():
    at = open_page("app.py", 240, state={"predict": "on"})
    at.switch_page("views/self_attention.py").run()
    at.switch_page("views/trainable_weights.py").run()  # two earlier pages seen: two questions to walk through
    asked = []
    for _visit in range(2):
        at.switch_page("views/causal_mask.py").run()
        asked += [p.key.rsplit("_", 1)[0] for p in at.radio if (p.key or "").startswith("gate_retr")]
        at.switch_page("views/home.py").run()
    assert not at.exception and len(asked) == 2 and asked[0] != asked[1]


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_record_wording_in_each_language(lang):
    """Nothing answered is said in words, not as "0 of 0"; the "Remember?" line counts with ngettext."""
    t = translations(lang)
    nothing = t.gettext("{page}: nothing answered yet")
    assert "{page}" in nothing and not any(c.isdigit() for c in nothing)
    for n in (1, 2, 5):
        line = t.ngettext("“Remember?” questions: {right} of {n} right", "“Remember?” questions: {right} of {n} right",
                          n).format(right="1", n=str(n))
        assert str(n) in line and "{" not in line
    if lang != "en":
        assert nothing != "{page}: nothing answered yet"


def test_the_record_counts_remember_questions_apart_and_says_when_nothing_was_answered():
    # English only: AppTest reads the sidebar's translated radio labels back in English and fails in fr/de
    lang = "en"
    at = open_page("app.py", 240, state={"predict": "on"})
    at.switch_page("views/self_attention.py").run()
    at.button(key="gate_skip_sa_self_weight").click().run()
    info = BY_SLUG["self_attention"]
    page = f"{info.number} · {translations(lang).gettext(info.title)}"
    sidebar = "\n".join(m.value for m in at.sidebar.markdown)
    nothing = msg("{page}: nothing answered yet", lang, page=page)
    assert nothing in sidebar and "0" not in nothing.replace(page, "")
    assert not at.exception
    at.switch_page("views/causal_mask.py").run()
    pill = next(p for p in at.radio if (p.key or "").startswith("gate_retrieval_"))
    g = BY_ID[pill.key.removeprefix("gate_retrieval_").rsplit("_", 1)[0]]
    wrong = next(o.key for o in g.options if o.key != gates.default_answer(g))
    at.session_state[pill.key] = wrong
    at.run()
    assert not at.exception
    sidebar = "\n".join(m.value for m in at.sidebar.markdown)
    line = translations(lang).ngettext("“Remember?” questions: {right} of {n} right",
                                       "“Remember?” questions: {right} of {n} right", 1).format(right="0", n="1")
    assert line in sidebar and nothing in sidebar
    rows = list(csv.DictReader(io.StringIO(gates.record_csv(at.session_state[gates.RECORD_KEY],
                                                            at.session_state[gates.RECALL_KEY]))))
    assert [(r["part"], r["gate"], r["right"]) for r in rows] == [
        ("prediction", "sa_self_weight", ""), ("remember", g.id, "False")]


def _image_alts(at) -> list[str]:
    """The alt texts of every diagram the page drew (an SVG image, or a Graphviz chart where the server does not
    lay diagrams out)."""
    out = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            proto = getattr(child, "proto", None)
            if proto is not None and hasattr(proto, "imgs"):
                out.extend(img.alt for img in proto.imgs)
            elif proto is not None and getattr(child, "type", "") == "graphviz_chart":
                out.append(proto.alt)
            walk(child)

    walk(at._tree)
    return out


def test_page_2_diagram_alt_text_names_the_scale_only_after_the_gate():
    """Neither the alt text of page 2's diagram nor its scale box gives the scale gate's answer away while the gate
    is closed."""
    at = open_page(BY_SLUG["trainable_weights"].script, 240, state={"predict": "on"})
    closed = [a for a in _image_alts(at) if a.startswith("Diagram: x goes")]
    assert len(closed) == 1 and "√d_k" not in closed[0] and "d_k" not in closed[0]
    [spec] = [g.proto.spec for g in at.get("graphviz_chart")]
    assert "÷ ?" in spec and "√" not in spec
    at.button(key="gate_skip_tw_scale").click().run()
    opened = [a for a in _image_alts(at) if a.startswith("Diagram: x goes")]
    assert len(opened) == 1 and "divided by √d_k" in opened[0]
    [spec] = [g.proto.spec for g in at.get("graphviz_chart")]
    assert "÷ √2" in spec and "÷ ?" not in spec
    off = open_page(BY_SLUG["trainable_weights"].script, 240, state={"predict": "off"})
    assert any("divided by √d_k" in a for a in _image_alts(off))


@pytest.mark.parametrize("lang", LANGUAGES)
def test_page_2_prose_above_the_scale_gate_does_not_name_the_scale(lang):
    """Page 2's recipe paragraph, drawn above the scale gate, says the scores are divided by a number, not which."""
    from ui.page import part_text
    above, fell_back = part_text("trainable_weights", "projections", lang)
    assert not fell_back and any(word in above for word in ("divide", "diviser", "teilen"))
    assert "sqrt" not in above and "√" not in above and "d_{model}" not in above


@pytest.mark.parametrize("lang", LANGUAGES)
def test_page_4_prose_gives_the_factor_and_the_row_sums_only_after_its_gates(lang):
    """Page 4's prose above its first two gates says neither the factor 1/(1 − p) nor what the rows sum to; the part
    that does comes with the figure, after them."""
    from ui.page import part_text

    before, after = part_text("dropout", "slider", lang)[0], part_text("dropout", "scaling", lang)[0]
    assert "1-p" not in before and "1 - p" not in before and "moyenne" not in before and "Mittel" not in before
    assert "\\frac{1}{1-p}" in after
    at = open_page(BY_SLUG["dropout"].script, 240, state={"predict": "on"}, lang=lang)
    first_line = after.strip().splitlines()[0]
    assert not any(first_line in m.value for m in at.markdown)
    for g in ("do_kept", "do_row_sums"):
        at.button(key=f"gate_skip_{g}").click().run()
    assert not at.exception and any(first_line in m.value for m in at.markdown)


def test_page_1_step_3_waits_for_the_first_gate():
    """The weighted-sum chart under page 1's first gate draws the weights: it waits for the gate too."""
    at = open_page(PAGE1, 120, state={"predict": "on"})
    assert "sa_context_chart" not in chart_keys(at)
    assert not any(a.startswith("Stacked bar chart") for a in (c.proto.alt for c in at.get("plotly_chart")))
    at.button(key="gate_skip_sa_self_weight").click().run()
    assert "sa_context_chart" in chart_keys(at)
