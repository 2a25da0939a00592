"""Prediction gates: the reader commits to a guess before a live block shows the answer.

A gate is data (:class:`ui.questions.Gate`, one record per question in ``ui/questions/<slug>.py``): what it asks, its
kind, the engine call that gives the answer from the page's current controls, a tolerance, and for a choice its
options with one sentence of feedback each. A view wraps the block that reveals the answer::

    if gates.gate(questions.SELF_WEIGHT, inputs=inputs, q=q):
        block()

:func:`gate` draws the question and returns False until the reader answers or presses "show me without guessing"
(one click); then it draws the reader's guess beside the live value, the feedback, an optional one-line "why?" box,
and returns True. The block's engine work runs as before; only its drawing waits. The sidebar's switch
(``predict=off`` in the link, :func:`predict_switch`) turns every gate off. The reader's answers live in their
session only (:func:`record_sidebar`, downloadable as CSV). Pages 2-7 and the Lab open with one question from an
earlier page's gates (:func:`retrieval`).

Why: readers who predict an outcome before seeing it understand it better than readers who only watch it
(Crouch, Fagen, Callan & Mazur, Am. J. Phys. 72, 2004), visualisations included (Kim, Reinecke & Hullman, CHI 2017).
"""

from __future__ import annotations

import csv
import decimal
import functools
import io
import math
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

import streamlit as st
from babel.numbers import NumberFormatError, parse_decimal

from ui import record, url
from ui.i18n import N_, _, current_language, ngettext, translations
from ui.nav import BY_SLUG, PAGES, page_info
from ui.numbers import integer, num, sci, significant
from ui.questions import Gate, by_page

#: The session-state key and URL parameter of the sidebar's switch ("on" or "off").
PREDICT_KEY = "predict"
PREDICT_OPTIONS = ("on", "off")
#: The environment variable that sets the switch's default for a whole server (a teacher projecting the essay, the
#: test suite reading the blocks behind the gates); anything but "off" leaves the gates on.
PREDICT_ENV = "ATTENTION_PREDICT"
#: Session-state keys of the reader's answers, the pages' visit counters and the page last drawn.
RECORD_KEY = "gates_record"
#: Session-state key of the reader's answers to the "Remember?" questions (:func:`retrieval`), by visit.
RECALL_KEY = "gates_recall"
VISITS_KEY = "gates_visits"
LAST_PAGE_KEY = "gates_last_page"
SEED_KEY = "gates_seed"
#: The longest guess a reader may type (a number needs far fewer characters); the text box refuses more.
MAX_GUESS_CHARS = 32
#: The longest "why?" line kept.
MAX_WHY_CHARS = 300
#: The optional confidence choice: key -> label (message id).
CONFIDENCE = {"low": N_("not sure"), "medium": N_("fairly sure"), "high": N_("sure")}


@dataclass(frozen=True)
class Answer:
    """The reader's answer to one gate, kept in their session.

    Attributes:
        gate: the gate's id. page: its page's slug. kind: its kind's name.
        guess: the number typed (float) or the option key; ``None`` when skipped.
        value: the live value when the reader answered (float or option key).
        right: the verdict (``None`` when skipped).
        confidence: a :data:`CONFIDENCE` key or ``None``.
        why: the reader's one-line explanation ("" when none).
    """

    gate: str
    page: str
    kind: str
    guess: float | str | None
    value: float | str
    right: bool | None
    confidence: str | None = None
    why: str = ""

    @property
    def skipped(self) -> bool:
        """True when the reader chose "show me without guessing"."""
        return self.guess is None


def judge(gate: Gate, guess: float | str, value: float | str) -> bool:
    """Whether ``guess`` is right for ``value``: within the tolerance for a number, the same key otherwise."""
    if gate.kind.typed:
        return abs(float(guess) - float(value)) <= gate.tolerance + 1e-12 * max(1.0, abs(float(value)))
    return guess == value


# --- reading a typed number ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parsed:
    """A typed guess read: ``value`` when it is a finite number, else ``error``, a message in the reader's words."""

    value: float | None
    error: str | None


def example(lang: str | None = None) -> str:
    """A number written in the reader's format (``0.25``, ``0,25``), for the text box's hint and messages."""
    return num(0.25, 2, lang)


def parse_guess(text: str | None, lang: str | None = None) -> Parsed:
    """Read a number typed in the reader's format (a French or German reader types ``0,5``) with Babel.

    Spaces (a thousands group: ``3 168``) are ignored. Never raises: empty text, words, an infinite or NaN value,
    ``1e400`` (finite as a decimal, infinite as a float), a decimal sign of another language, text longer than
    :data:`MAX_GUESS_CHARS` give a clear message instead.
    """
    lang = lang or current_language()
    raw = (text or "").strip()
    if not raw:
        return Parsed(None, _("Type a number first, such as {example}.").format(example=example(lang)))
    if len(raw) > MAX_GUESS_CHARS:
        return Parsed(None, _("That is too long for a number: type one such as {example}.").format(
            example=example(lang)))
    compact = "".join(raw.split()).replace("\u2212", "-")
    try:
        parsed = parse_decimal(compact, locale=lang, strict=True)
    except (NumberFormatError, ValueError, decimal.InvalidOperation):
        return Parsed(None, _("This is not a number in your language's format: write it like {example}.").format(
            example=example(lang)))
    try:
        value = float(parsed)
    except (OverflowError, ValueError):
        value = math.inf
    if not math.isfinite(value):
        return Parsed(None, _("Type a finite number, such as {example}.").format(example=example(lang)))
    return Parsed(value, None)


# --- the reader's session ---------------------------------------------------------------------------------------


def default_switch() -> str:
    """The switch's position for a reader whose link does not say (:data:`PREDICT_ENV`, else "on")."""
    return "off" if os.environ.get(PREDICT_ENV, "on").strip().lower() == "off" else "on"


def enabled() -> bool:
    """Whether gates are on for this reader (the sidebar's switch, else the server's default)."""
    return st.session_state.get(PREDICT_KEY, default_switch()) != "off"


def revealed(g: Gate) -> bool:
    """Whether gate ``g``'s answer may be shown: gates are off, or the reader answered or skipped it. A text drawn
    above the gate (an image's alt text) says the answer only then."""
    return not enabled() or g.id in answers()


def answers() -> dict[str, Answer]:
    """The reader's answers by gate id (this session only)."""
    return st.session_state.setdefault(RECORD_KEY, {})


@dataclass(frozen=True)
class Recall:
    """The reader's first click on one "Remember?" question (:func:`retrieval`), kept in their session.

    Attributes:
        gate: the question's gate id. page: the earlier page it comes from. asked_on: the page that asked it.
        guess: the option key clicked. value: the right option's key (a first visit's). right: the verdict.
    """

    gate: str
    page: str
    asked_on: str
    guess: str
    value: str
    right: bool


def recalls() -> dict[str, Recall]:
    """The reader's answers to the "Remember?" questions by ``"<page asked on>:<visit>"`` (this session only)."""
    return st.session_state.setdefault(RECALL_KEY, {})


def _save(answer: Answer) -> None:
    answers()[answer.gate] = answer


def _formatted(gate: Gate, value: float | str) -> str:
    """A gate's value in the reader's words: a number in their format, an option by its label."""
    if gate.kind.typed:
        return integer(round(float(value))) if gate.decimals == 0 else num(float(value), gate.decimals)
    return value


def words(gate: Gate, controls: Mapping, lang: str | None = None) -> dict[str, str]:
    """The question's placeholders for ``controls`` in the format of ``lang`` (the reader's when ``None``)."""
    out = {}
    for name, value in gate.words(**controls).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            out[name] = str(value)
        elif isinstance(value, int):
            out[name] = integer(value, lang)
        else:
            out[name] = num(value, gate.decimals, lang)
    return out


def option_label(gate: Gate, key: str, values: Mapping[str, str], lang: str | None = None) -> str:
    """The option's label in ``lang`` (the reader's language when ``None``), its placeholders filled."""
    return translations(lang or current_language()).gettext(gate.option(key).label).format(**values)


def _answer_text(gate: Gate, value: float | str, values: Mapping[str, str]) -> str:
    return _formatted(gate, value) if gate.kind.typed else option_label(gate, value, values)


def number_text(value: float, lang: str | None = None) -> str:
    """A typed number as the reader wrote it (``0,25``, not ``0,2500``), in scientific notation from 10⁹ on (Babel's
    fixed-point patterns fail past 28 digits, and a guess may be ``1e300``)."""
    return sci(value, 3, lang) if abs(value) >= 1e9 else significant(value, 8, lang)


def _guess_text(gate: Gate, guess: float | str, values: Mapping[str, str]) -> str:
    """The reader's guess as they typed it, or the option they chose."""
    return number_text(float(guess)) if gate.kind.typed else option_label(gate, guess, values)


# --- drawing --------------------------------------------------------------------------------------------------


def predict_switch() -> str:
    """The sidebar's switch, bound to the link as ``predict=on|off`` (``ui.url.choice``: anything else is ignored)."""
    labels = {"on": N_("ask me first"), "off": N_("show everything")}
    return url.choice(st.sidebar.radio, _("Predict before seeing"), PREDICT_OPTIONS, key=PREDICT_KEY,
                      default=default_switch(), format_func=lambda o: _(labels[o]), horizontal=True,
                      help=_("Ask me to predict each result before the page shows it, or show every result at once."))


def gate(g: Gate, **controls) -> bool:
    """Draw gate ``g`` for the page's current ``controls``; True when the block it guards may be shown.

    Returns True at once (drawing nothing) when the reader turned gates off. Before an answer: the question, a
    text box (number) or options, an optional confidence choice, "Check my guess" and "Show me without guessing"
    (a form: Enter submits). After: the guess beside the live value, the verdict, each option's feedback, the
    "why?" box and "Guess again". Its place is recorded for the page's notebook, gates on or off.
    """
    record.add(("gate", g.id))
    if not enabled():
        return True
    value = g.answer(**controls)
    values = words(g, controls)
    question = _(g.question).format(**values)
    done = answers().get(g.id)
    with st.container(border=True, key=f"gate_{g.id}"):
        st.markdown("**" + _("Predict first") + "** · " + question)
        if done is None:
            return _ask(g, value, values)
        _reveal(g, done, value, values)
    return True


def _ask(g: Gate, value: float | str, values: Mapping[str, str]) -> bool:
    """The form of an unanswered gate; records the answer and reruns the app when it is sent (so the sidebar's
    record follows, also from inside a fragment)."""
    lang = current_language()  # the options' labels are bound to it: a widget may format them outside the run
    with st.form(key=f"gate_form_{g.id}", border=False, enter_to_submit=True):
        if g.kind.typed:
            typed = st.text_input(_("Your guess"), max_chars=MAX_GUESS_CHARS, key=f"gate_guess_{g.id}",
                                  placeholder=_("for example {example}").format(example=example()))
        else:
            typed = st.radio(_("Your answer"), [o.key for o in g.options], index=None, key=f"gate_choice_{g.id}",
                             format_func=lambda k: option_label(g, k, values, lang))
        confidence = st.radio(_("How sure are you? (optional)"), list(CONFIDENCE), index=None, horizontal=True,
                              key=f"gate_confidence_{g.id}",
                              format_func=lambda k: translations(lang).gettext(CONFIDENCE[k]))
        check = st.form_submit_button(_("Check my guess"), type="primary", key=f"gate_check_{g.id}")
        skip = st.form_submit_button(_("Show me without guessing"), key=f"gate_skip_{g.id}")
    if skip:
        _save(Answer(g.id, g.page, g.kind.name, None, value, None, confidence))
        st.rerun()
    if check:
        if g.kind.typed:
            parsed = parse_guess(typed)
            if parsed.error:
                st.error(parsed.error, icon=":material/edit:")
                return False
            guess = parsed.value
        elif typed is None:
            st.error(_("Pick one of the answers first, or choose “Show me without guessing”."), icon=":material/edit:")
            return False
        else:
            guess = typed
        _save(Answer(g.id, g.page, g.kind.name, guess, value, judge(g, guess, value), confidence))
        st.rerun()
    return False


def _keep_why(gate_id: str) -> None:
    """The "why?" box's callback: its line goes into the reader's answer."""
    kept = answers().get(gate_id)
    if kept is not None:
        _save(replace(kept, why=str(st.session_state.get(f"gate_why_{gate_id}", ""))[:MAX_WHY_CHARS]))


def _guess_again(gate_id: str) -> None:
    answers().pop(gate_id, None)


def _reveal(g: Gate, done: Answer, value: float | str, values: Mapping[str, str]) -> None:
    """The answered gate: the guess beside the value it had then, the verdict, the feedback, "why?", "guess again"."""
    then = _answer_text(g, done.value, values)
    if done.skipped:
        st.markdown(_("You chose to see it without guessing. The answer: **{value}**.").format(value=then))
    else:
        guess = _guess_text(g, done.guess, values)
        if done.right:
            verdict = _("Right: you said {guess}, the page computes {value}.")
        elif g.kind.typed:
            verdict = _("Not quite: you said {guess}, the page computes {value}.")
        else:
            verdict = _("Not this one: you said “{guess}”, the page computes “{value}”.")
        text = verdict.format(guess=guess, value=then)
        if g.kind.typed and g.tolerance:
            text += " " + _("(Within {tolerance} counts as right.)").format(tolerance=significant(g.tolerance, 4))
        if done.right:
            st.success(text, icon=":material/check_circle:")
        else:
            st.warning(text, icon=":material/lightbulb:")
    if g.kind.typed:
        if g.note:
            st.markdown(_(g.note).format(**values))
    else:
        st.markdown("\n".join(
            ("- ✓ " if o.key == done.value else "- ✗ ") + f"**{_(o.label).format(**values)}**: "
            + _(o.feedback).format(**values) for o in g.options))
    if value != done.value:
        st.info(_("Your controls have changed since: the page now computes {value}.").format(
            value=_answer_text(g, value, values)), icon=":material/tune:")
    st.session_state.setdefault(f"gate_why_{g.id}", done.why)
    st.text_input(_("Why? Your own explanation in one line (optional, not graded)"), key=f"gate_why_{g.id}",
                  max_chars=MAX_WHY_CHARS, on_change=_keep_why, args=(g.id,))
    st.button(_("Guess again"), key=f"gate_again_{g.id}", type="tertiary", icon=":material/replay:",
              on_click=_guess_again, args=(g.id,))


# --- retrieval: one question about an earlier page --------------------------------------------------------------


@functools.cache
def default_answer(g: Gate) -> float | str:
    """The gate's answer for a first visit's controls (the same for every reader, so computed once)."""
    return g.answer(**g.defaults())


@functools.cache
def default_words(g: Gate) -> dict:
    """The gate's placeholders for a first visit's controls, raw (computed once, as :func:`default_answer`)."""
    return g.words(**g.defaults())


def retrieval_pool(slug: str, visited: Mapping[str, int] | None = None) -> tuple[Gate, ...]:
    """The one-click questions (choices and orders, :attr:`ui.questions.Gate.recall`) of the essay pages before
    ``slug`` that the reader has visited (``visited``: visits by slug, this session's when ``None``); empty for
    Home, page 1, the glossary, and before the reader has seen an earlier page (a question about a page not yet
    read would test nothing they could remember)."""
    number = BY_SLUG[slug].number
    if not number or number == "1":
        return ()
    if visited is None:
        visited = st.session_state.get(VISITS_KEY, {})
    earlier = [p.slug for p in PAGES if p.number and int(p.number) < int(number) and visited.get(p.slug, 0) > 0]
    return tuple(g for s in earlier for g in by_page(s) if not g.kind.typed and g.recall)


def note_visit(slug: str) -> int:
    """Count a visit when the page drawn is not the one drawn last; returns the page's visit count."""
    visits = st.session_state.setdefault(VISITS_KEY, {})
    if st.session_state.get(LAST_PAGE_KEY) != slug:
        visits[slug] = visits.get(slug, 0) + 1
        st.session_state[LAST_PAGE_KEY] = slug
    return visits.get(slug, 1)


def retrieval_gate(slug: str, visit: int) -> Gate | None:
    """The question of this visit: the pool walked from a place drawn once per session, one step per visit, so
    each visit asks another one (until the pool comes round)."""
    pool = retrieval_pool(slug)
    if not pool:
        return None
    start = st.session_state.setdefault(SEED_KEY, random.randrange(1 << 16))
    return pool[(start + visit) % len(pool)]


def retrieval(slug: str) -> None:
    """One optional question about an earlier page, answered with one click; nothing when gates are off."""
    visit = note_visit(slug)
    if not enabled():
        return
    g = retrieval_gate(slug, visit)
    if g is not None:
        _retrieval_fragment(g, slug, visit)


@st.fragment
def _retrieval_fragment(g: Gate, slug: str, visit: int) -> None:
    """The retrieval question: a click redraws this box only, except the first, which the sidebar's record counts
    (:data:`RECALL_KEY`) and so reruns the page."""
    values = {k: (integer(v) if isinstance(v, int) and not isinstance(v, bool) else
                  num(v, g.decimals) if isinstance(v, float) else str(v)) for k, v in default_words(g).items()}
    value = default_answer(g)
    lang = current_language()
    with st.container(border=True, key=f"gate_retrieval_{g.id}"):
        st.markdown(_("**Remember?** From page {page}, with its first settings (optional): {question}").format(
            page=page_info(g.page).nav_title(), question=_(g.question).format(**values)))
        # a radio, not pills: its labels wrap on a phone, where pills cut long answers short
        picked = st.radio(_("Your answer"), [o.key for o in g.options], index=None,
                          key=f"gate_retrieval_{g.id}_{visit}", format_func=lambda k: option_label(g, k, values, lang))
        if picked is not None:
            asked = f"{slug}:{visit}"
            if asked not in recalls():
                recalls()[asked] = Recall(g.id, g.page, slug, picked, value, picked == value)
                st.rerun()
            option = g.option(picked)
            text = _(option.feedback).format(**values)
            if picked == value:
                st.success(_("Right.") + " " + text, icon=":material/check_circle:")
            else:
                st.warning(_("Not this one.") + " " + text + " " + _("The answer: “{value}”.").format(
                    value=option_label(g, value, values)), icon=":material/lightbulb:")


# --- the reader's record ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PageScore:
    """One page's line of the record: gates answered (not skipped), of them right, and skipped."""

    page: str
    answered: int
    right: int
    skipped: int


def scores(record: Mapping[str, Answer]) -> list[PageScore]:
    """The record per page, in reading order."""
    out = []
    for info in PAGES:
        mine = [a for a in record.values() if a.page == info.slug]
        if mine:
            answered = [a for a in mine if not a.skipped]
            out.append(PageScore(info.slug, len(answered), sum(bool(a.right) for a in answered),
                                 len(mine) - len(answered)))
    return out


@dataclass(frozen=True)
class RecallScore:
    """The "Remember?" questions' line of the record: questions answered, of them right."""

    answered: int
    right: int


def recall_score(record: Mapping[str, Recall]) -> RecallScore:
    """The "Remember?" answers counted (each question's first click)."""
    return RecallScore(len(record), sum(r.right for r in record.values()))


#: The CSV's columns: ``part`` is "prediction" (a gate) or "remember" (a "Remember?" question, asked on the page
#: ``asked_on``); ``page`` is the page the question is about.
CSV_COLUMNS = ("part", "page", "asked_on", "gate", "kind", "guess", "value", "right", "confidence", "why")


def record_csv(record: Mapping[str, Answer], recalled: Mapping[str, Recall] | None = None) -> str:
    """The record as CSV: one row per gate answered or skipped, then one per "Remember?" question answered (numbers
    with a point, as CSV readers expect)."""
    kinds = {g.id: g.kind.name for s in {r.page for r in (recalled or {}).values()} for g in by_page(s)}
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for a in record.values():
        writer.writerow(["prediction", a.page, a.page, a.gate, a.kind, "" if a.guess is None else a.guess, a.value,
                         "" if a.right is None else a.right, a.confidence or "", a.why])
    for r in (recalled or {}).values():
        writer.writerow(["remember", r.page, r.asked_on, r.gate, kinds.get(r.gate, ""), r.guess, r.value, r.right,
                         "", ""])
    return buffer.getvalue()


def score_line(score: PageScore) -> str:
    """One page's line of the record in the reader's language: right of answered, or that nothing was answered yet
    when every gate met was skipped, and how many were seen without guessing."""
    page = page_info(score.page).nav_title()
    if score.answered:
        line = ngettext("{page}: {right} of {n} right", "{page}: {right} of {n} right", score.answered).format(
            page=page, right=integer(score.right), n=integer(score.answered))
    else:
        line = _("{page}: nothing answered yet").format(page=page)
    if score.skipped:
        line += " · " + ngettext("{n} seen without guessing", "{n} seen without guessing", score.skipped).format(
            n=integer(score.skipped))
    return line


def recall_line(score: RecallScore) -> str:
    """The "Remember?" questions' line of the record in the reader's language."""
    return ngettext("“Remember?” questions: {right} of {n} right", "“Remember?” questions: {right} of {n} right",
                    score.answered).format(right=integer(score.right), n=integer(score.answered))


def record_sidebar() -> None:
    """The sidebar's record of the reader's predictions: per page, answered and right, the "Remember?" questions
    apart, and the CSV download."""
    record, recalled = answers(), recalls()
    if not record and not recalled:
        return
    with st.sidebar:
        st.markdown("**" + _("Your predictions") + "**")
        lines = ["- " + score_line(score) for score in scores(record)]
        if recalled:
            lines.append("- " + recall_line(recall_score(recalled)))
        st.markdown("\n".join(lines))
        sure_wrong = sum(1 for a in record.values() if a.right is False and a.confidence == "high")
        if sure_wrong:
            st.caption(ngettext("{n} answer you were sure of was wrong: the places to look again.",
                                "{n} answers you were sure of were wrong: the places to look again.",
                                sure_wrong).format(n=integer(sure_wrong)))
        st.caption(_("Kept in this browser tab only, never on the server."))
        st.download_button(_("Download my predictions (CSV)"), record_csv(record, recalled),
                           file_name="predictions.csv", mime="text/csv", key="gates_csv", on_click="ignore",
                           icon=":material/download:")
