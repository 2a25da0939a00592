"""Section 1 of the Lab: the training text (built-in corpora or an upload), its numbers and counting baselines."""

from __future__ import annotations

import streamlit as st

from engine import budget
from engine.baselines import Baselines, corpus_baselines
from engine.corpus import (
    BUILTIN_CORPORA,
    MISSING_TANG_ASSET,
    TANG_MIN_COUNT,
    TANG_RECORDS,
    VAL_EVERY,
    Corpus,
    load_corpus,
)
from engine.device import release_free_memory
from engine.lab.models import UploadResult, corpus_fingerprint, read_corpus_upload
from ui import numbers, url
from ui.i18n import _
from ui.lab.session import LabSession
from ui.lab.words import compact, fill, nats_text, prose, upload_help
from ui.numbers import integer, percent

CORPORA = ("tang", "tang300", "song100", "upload")
MB = budget.MB


def corpus_label(name: str) -> str:
    """The radio label of a training text."""
    return {"tang": fill(_("All Tang poems (tang, {poems})"), poems=integer(TANG_RECORDS)),
            "tang300": _("A selection of Tang poems (tang300)"),
            "song100": _("Song ci (song100)"), "upload": _("upload a UTF-8 text file")}[name]


@st.cache_resource(show_spinner=False, max_entries=3)
def builtin_corpus(name: str) -> Corpus:
    """A built-in corpus, loaded once per process."""
    corpus = load_corpus(name)
    release_free_memory()  # the load's transient buffers
    return corpus


def shipped_corpus(name: object, corpus: Corpus | None = None) -> Corpus | None:
    """The corpus a result or a model names: a built-in one, the reader's own text when it has that name, or None."""
    if name in CORPORA and name != "upload":
        return builtin_corpus(name)
    return corpus if corpus is not None and corpus.name == name else None


@st.cache_resource(show_spinner=False, max_entries=8)
def _baselines(name: str, fingerprint: str, _corpus: Corpus) -> Baselines:
    baselines = corpus_baselines(_corpus)
    release_free_memory()  # the counting's transient arrays
    return baselines


def baselines_for(corpus: Corpus | None) -> Baselines | None:
    """The unigram and bigram baselines of a corpus, counted once per built-in corpus (or uploaded text)."""
    if corpus is None:
        return None
    fingerprint = "" if corpus.name in BUILTIN_CORPORA else corpus_fingerprint(corpus)
    return _baselines(corpus.name, fingerprint, corpus)


def baseline_lines(baselines: Baselines | None) -> dict[str, float]:
    """``{label: val nats}`` of the two baselines, for the dashed lines of the loss charts."""
    if baselines is None:
        return {}
    return {fill(_("unigram (val {nats:.2f})"), nats=baselines.unigram.val_nats): baselines.unigram.val_nats,
            fill(_("bigram (val {nats:.2f})"), nats=baselines.bigram.val_nats): baselines.bigram.val_nats}


def versus_baselines(val_loss: float, baselines: Baselines | None) -> str:
    """One sentence: a validation loss beside the unigram and bigram validation losses, in nats and perplexity."""
    if baselines is None:
        return ""
    uni, bi = baselines.unigram.val_nats, baselines.bigram.val_nats
    if val_loss < bi:
        verdict = _("below the bigram line: the model has learned more than which character follows which")
    elif val_loss < uni:
        verdict = _("between the two lines: better than counting characters, not yet better than counting pairs")
    else:
        verdict = _("above the unigram line: no better than counting characters")
    return fill(_("val {val} · unigram {uni} · bigram {bi}: {verdict}."),
        val=nats_text(val_loss), uni=nats_text(uni), bi=nats_text(bi), verdict=verdict)


def upload_text(outcome: UploadResult) -> str:
    """Why an uploaded text cannot be used."""
    messages = {
        "empty": _("the file is empty."),
        "binary": _("the file holds NUL bytes, so it looks binary, not text."),
        "not_utf8": _("it is not UTF-8 text; save it as UTF-8 and try again."),
        "too_short": _("the text is too short to split into training and validation parts."),
        "too_large": _("{value} bytes is over this server's limit of {limit} bytes ({mb} MB)."),
        "vocab": _("it has {value:,} distinct characters; a model here may have at most {limit:,} "
                   "(each one adds a row to the embedding and a column to every prediction)."),
    }
    text = messages.get(outcome.problem, _("it cannot be read."))
    if outcome.problem == "too_large":  # the limit in the unit the upload widget states it in
        return fill(text, value=numbers.integer(outcome.value), limit=numbers.integer(outcome.limit),
                         mb=numbers.integer(budget.upload_widget_mb(outcome.limit)))
    return fill(text, value=outcome.value, limit=outcome.limit)


def corpus_prose() -> None:
    """Section 1's prose, its numbers taken from the corpus module and the upload cap of ``engine.budget`` (in the
    uploader's megabytes)."""
    prose("corpus", poems=integer(TANG_RECORDS), min_count=integer(TANG_MIN_COUNT),
          upload_mb=integer(budget.upload_widget_mb(budget.MAX_TEXT_BYTES)), val_every=integer(VAL_EVERY))


def choose_corpus(lab: LabSession) -> Corpus | None:
    """The training-text radio, the uploader when chosen; the corpus, or None while there is no usable text."""
    # the link holds the corpus's own name (tang300), the radio its label in the reader's language
    name = url.choice(st.radio, _("Training text"), CORPORA, key="lab_corpus", default=CORPORA[0],
                      format_func=corpus_label, horizontal=True)
    if name != "upload":
        with st.spinner(_("Loading the corpus …")):
            return builtin_corpus(name)
    limit_mb = budget.upload_widget_mb(budget.MAX_TEXT_BYTES)  # the one limit, in the widget's unit
    uploaded = st.file_uploader(fill(_("A text file: UTF-8, or UTF-16 with a byte-order mark (at most {mb} MB)"),
                                mb=numbers.integer(limit_mb)), key="lab_upload", max_upload_size=limit_mb,
                                help=upload_help(limit_mb))
    if uploaded is None:
        st.info(_("Choose a file to train on; until then the training controls wait for it."))
        return None
    outcome = lab.corpus_upload(uploaded.getvalue(), uploaded.name, read_corpus_upload)
    if outcome.problem:
        st.error(fill(_("This file cannot be used: {reason}"), reason=upload_text(outcome)),
                 icon=":material/error:")
    return outcome.corpus


def corpus_numbers(corpus: Corpus) -> None:
    """The text's sizes, vocabulary and unknown-token rates, its counting baselines and its first record."""
    if corpus.message == MISSING_TANG_ASSET:
        st.warning(_("The Tang corpus file is missing from this copy of the app (assets/corpus); the Lab uses "
                     "English text from Python's documentation instead."), icon=":material/info:")
    elif corpus.message:
        st.warning(_("The Chinese poems are not installed on this server (Debian package fortunes-zh); the Lab "
                     "uses English text from Python's documentation instead."), icon=":material/info:")
    stats = corpus.vocab_stats
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(_("characters"), integer(len(corpus.text)))
    m2.metric(_("records"), integer(len(corpus.records)))
    m3.metric(_("distinct characters"), integer(stats.distinct_chars))
    m4.metric(_("train / val tokens"), f"{compact(len(corpus.train_ids))} / {compact(len(corpus.val_ids))}",
              help=fill(_("{train:,} training tokens, {val:,} validation tokens."), train=len(corpus.train_ids),
                        val=len(corpus.val_ids)))
    m1, m2, m3, m4 = st.columns(4)
    m1.metric(_("vocabulary (tokens)"), integer(stats.vocab_size))
    m2.metric(_("validation coverage"), percent(stats.val_coverage, 2),
              help=_("Share of the validation characters that have their own token."))
    m3.metric(_("unknown tokens (val)"), percent(stats.val_unk_rate, 2))
    m4.metric(_("unknown tokens (train)"), percent(stats.train_unk_rate, 2))
    if stats.has_unk:
        st.caption(fill(_("Characters seen fewer than {min_count} times in the training split share one unknown token "
                     "(shown as �; generation never writes it): {kept:,} characters keep their own token, "
                     "{pooled:,} rarer ones are pooled."), min_count=stats.min_count, kept=stats.vocab_size - 1,
                                                                 pooled=stats.distinct_chars - (stats.vocab_size - 1)))
    else:
        st.caption(_("Every character of this text has its own token: no unknown token."))
    base = baselines_for(corpus)
    st.markdown(fill(_("**What counting alone scores on this split** (a model must go below these to have learned "
                  "anything): unigram (character frequency) {uni}; bigram (the previous character) {bi}."),
        uni=nats_text(base.unigram.val_nats), bi=nats_text(base.bigram.val_nats)))
    st.caption(_("The first record of the text:"))
    st.code(corpus.records[0].body[:400], language=None)
