"""Section 4 of the Lab: generation from a prompt, why greedy decoding loops (with a loop of the model in use), the KV
cache while it wrote, the next character's odds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st
from babel.lists import format_list

from engine import chapter
from engine.figures import lab as figures
from engine.lab import generation, internals, loops, poem_forms
from engine.lab import settings as rules
from engine.lab.models import LabModel
from engine.sampling import kv_cache_steps
from ui import url
from ui.i18n import _, current_language, ngettext
from ui.lab.session import FORM_LINE_LENGTH, FORM_LINES
from ui.lab.words import fill, plain, prose, strongest_keys
from ui.numbers import SLIDER_FORMAT, colon, integer, num, percent, percent_suffix, plotly_separators

#: The line lengths the reader may ask for (0: free, the model ends its lines) and the numbers of lines (0: free).
LINE_LENGTHS = (0, *rules.POEM_LINE_LENGTHS)
LINE_COUNTS = (0, *range(rules.POEM_LINES[0], rules.POEM_LINES[1] + 1, 2))
#: The Chinese names of the line lengths (kept in every language).
FORM_NAMES = {5: "五言", 7: "七言"}


@st.cache_data(show_spinner=False, max_entries=64)
def generated(model_id: str, prompt: str, length: int, temperature: float, top_k: int, top_p: float, seed: int,
              form: poem_forms.PoemForm | None, _model: LabModel) -> generation.Generation | None:
    """The model's continuation of ``prompt`` in ``form``; None when its predictions are not finite.

    Raises:
        FormError: when the form cannot be written (not cached: it is found before any sampling).
    """
    try:
        return generation.generate(_model, prompt, length, temperature, top_k or None, seed, top_p=top_p, form=form)
    except generation.NonFiniteLogitsError:
        return None


@st.cache_resource(show_spinner=False, max_entries=32)
def next_char_view(model_id: str, prompt: str, temperature: float, top_k: int, top_p: float, seed: int,
                   form: poem_forms.PoemForm | None, _model: LabModel,
                   bar_labels: figures.NextCharLabels, attn_labels: figures.LastAttentionLabels
                   ) -> tuple[internals.NextCharProbs, go.Figure, internals.LastPositionAttention, go.Figure] | None:
    """The next character's distribution and its figure, the last position's attention and its figure; None if not
    finite.

    The distribution follows ``form`` as the generation does; a form the generation refused is left out.
    """
    try:
        try:
            probs = internals.next_char_probs(_model, prompt, temperature, top_k, seed, top_p=top_p, form=form)
        except poem_forms.FormError:
            probs = internals.next_char_probs(_model, prompt, temperature, top_k, seed, top_p=top_p)
    except generation.NonFiniteLogitsError:
        return None
    looked = internals.last_position_attention(_model, prompt)
    steps = tuple(fill("{t:g}", t=t) for t in probs.temperatures)  # the slider's labels in the reader's format
    bars = figures.next_char_figure(probs.candidates, probs.probs, probs.sampled, probs.temperatures,
                                    probs.by_temperature, probs.top_ks, probs.by_top_k,
                                    dataclasses.replace(bar_labels, temperatures=steps))
    attention = figures.last_attention_figure(looked.attn_weights, looked.tokens, attn_labels)
    return probs, bars, looked, attention


def shown(char: str) -> str:
    """A candidate character as the bars name it: a newline or another invisible one escaped (``\\n``)."""
    return repr(char)[1:-1] if not char.isprintable() or char.isspace() else char


def not_finite_text() -> str:
    """Why a model with NaN or infinite predictions writes nothing."""
    return _("This model's predictions are not finite numbers (NaN or infinity), so nothing can be generated.")


@dataclass(frozen=True)
class Sampling:
    """The generation form's values: the prompt, how to sample (top_k 0: all characters; top_p 1: all), how many
    new characters, the sampling seed, the poem's form (line_length and n_lines 0: free)."""

    prompt: str
    temperature: float
    top_k: int
    top_p: float
    length: int
    seed: int
    line_length: int = 0
    n_lines: int = 0

    @property
    def form(self) -> poem_forms.PoemForm | None:
        """The form to impose while sampling, or None when both are free."""
        if not self.line_length and not self.n_lines:
            return None
        return poem_forms.PoemForm(self.line_length or None, self.n_lines or None)


def line_length_label(chars: int) -> str:
    """A line length's name: free, or its Chinese name with its characters (五言 · 5)."""
    return _("free") if chars == 0 else f"{FORM_NAMES[chars]} · {chars}"


def form_text(form: poem_forms.PoemForm) -> str:
    """The form in words: "五言, 4 lines", "lines of any length, 4 lines", "七言"."""
    chars = _("lines of any length") if form.line_length is None else FORM_NAMES[form.line_length]
    if form.n_lines is None:
        return chars
    return chars + ", " + fill(ngettext("{n} line", "{n} lines", form.n_lines), n=form.n_lines)


def generation_form(disabled: bool) -> Sampling:
    """The prompt and sampling controls in a form (generation runs when the reader asks)."""
    with st.form("lab_generate_form", border=False):
        c1, c2, c3, c6, c4, c5 = st.columns([3, 2, 1, 1, 2, 1])
        prompt = c1.text_input(_("prompt"), value=chapter.LESSON_PROMPT, key="lab_prompt", bind="query-params",
                               max_chars=rules.MAX_PROMPT_CHARS)
        temperature = float(c2.slider(_("temperature (0 = greedy)"), *rules.TEMPERATURE, step=0.05,
                                      value=0.8, key="lab_temp", bind="query-params", format=SLIDER_FORMAT))
        top_k = url.int_input(c3, _("top-k (0 = all)"), *rules.TOP_K, step=1, value=20, key="lab_top_k")
        top_p = float(c6.slider(_("top-p (1 = all)"), *rules.TOP_P, step=0.05, value=rules.TOP_P[1],
                                key="lab_top_p", bind="query-params", format=SLIDER_FORMAT))
        length = int(c4.slider(_("new characters"), *rules.GENERATE_LENGTH, step=1,
                               value=64, key="lab_length", bind="query-params"))
        seed = url.int_input(c5, _("sampling seed"), *rules.SEEDS, step=1, value=0, key="lab_gen_seed")
        f1, f2, _rest = st.columns([2, 2, 5])
        # the link holds the numbers (7, 4), the controls their names in the reader's language ("free" for 0)
        line_length = url.choice(f1.radio, _("line length (characters)"), LINE_LENGTHS, key=FORM_LINE_LENGTH,
                                 default=0, format_func=line_length_label, horizontal=True,
                                 help=_("五言: five characters a line; 七言: seven. Free: the model ends its lines."))
        n_lines = url.choice(f2.selectbox, _("lines in the poem"), LINE_COUNTS, key=FORM_LINES, default=0,
                             format_func=lambda n: _("free") if n == 0 else str(n),
                             help=_("An even number: the poems are written in couplets."))
        st.form_submit_button(_("Generate"), key="lab_generate", icon=":material/edit_note:", disabled=disabled)
    return Sampling(prompt, temperature, top_k, top_p, length, seed, int(line_length or 0), int(n_lines or 0))


def form_refused(error: poem_forms.FormError, sampling: Sampling) -> str:
    """Why the form cannot be written, for each :class:`~engine.lab.poem_forms.FormError` reason."""
    form = form_text(sampling.form)
    if error.reason == "vocabulary":
        return fill(_("This model cannot write the form {form}: its vocabulary lacks the marks that end the lines "
                      "(，and 。) or the newline, as a model trained on an English text does. Choose free lines "
                      "and a free number of lines."), form=form)
    if error.reason == "length":
        return fill(_("The form {form} needs up to {needed} new characters, and new characters is set to "
                      "{length}: raise it, or ask for fewer lines."),
                    form=form, needed=integer(error.needed), length=integer(sampling.length))
    return fill(_("The prompt does not start a poem of the form {form}: each line needs exactly its number of "
                  "characters before its mark (，or 。), only characters, marks and newlines, and fewer lines than "
                  "the poem has. Change the prompt or the form."), form=form)


def loop_note(new: str) -> None:
    """Says where the new text falls into a loop (``find_loop``): the repeated span and how much it covers."""
    loop = loops.find_loop(new)
    if loop is None:
        return
    st.info(fill(_("The text falls into a loop: from new character {start} on, it writes “{span}” {copies} times "
                   "over, {covered} of its {n} new characters ({share})."),
                 start=integer(loop.start + 1), span=plain(loop.span.replace("\n", "↵")),
                 copies=integer(loop.copies), covered=integer(loop.covered), n=integer(len(new)),
                 share=percent(loop.covered / len(new))), icon=":material/repeat:")


@st.cache_data(show_spinner=False, max_entries=8)
def loop_search(model_id: str, _model: LabModel) -> loops.LoopSearch | None:
    """``loops.greedy_loop`` for the model ``model_id`` names; None when its predictions are not finite."""
    try:
        return loops.greedy_loop(_model)
    except generation.NonFiniteLogitsError:
        return None


def shaded_loop(text: str, loop: loops.Loop) -> str:
    """``text`` as Markdown, the loop's copies of its span shaded in turn in two colours, its newlines kept."""
    pieces = [(text[: loop.start], "")]
    for copy, at in enumerate(range(loop.start, loop.end, loop.period)):
        pieces.append((text[at : min(at + loop.period, loop.end)], ("orange", "blue")[copy % 2]))
    pieces.append((text[loop.end :], ""))
    # a background directive ends at a line break, so each line of a copy gets its own
    return "".join("  \n".join(f":{colour}-background[{plain(line)}]" if colour and line else plain(line)
                               for line in piece.split("\n")) for piece, colour in pieces)


def quoted_prompt(prompt: str) -> str:
    """A prompt in the language's quotation marks, escaped; "an empty prompt" for ""."""
    return fill(_("“{text}”"), text=plain(prompt)) if prompt else _("an empty prompt")


def loop_example(model: LabModel) -> None:
    """A greedy loop of the model in use, found live (``loops.greedy_loop``), or that its search found none."""
    with st.spinner(_("Looking for a loop in this model's greedy text…")):
        found = loop_search(model.model_id, model)
    if found is None:
        st.error(not_finite_text())
        return
    if found.generation is None or found.loop is None:
        prompts = format_list([quoted_prompt(p) for p in found.tried], locale=current_language())
        st.info(fill(_("Greedy decoding from {prompts}, {n} new characters each: this model falls into no loop there "
                       "(no span written back to back over {least} characters or more)."),
                     prompts=prompts, n=found.length, least=loops.LOOP_MIN_CHARS), icon=":material/repeat:")
        return
    out, loop = found.generation, found.loop
    prompt = quoted_prompt(out.prompt.given)
    span = fill(ngettext("{n} character", "{n} characters", loop.period), n=loop.period)
    st.markdown(fill(_("Greedy decoding from {prompt}, {n} new characters: from new character {start} on, this model "
                       "writes one span of {span} again and again, {copies} times over, {covered} of the {n} new "
                       "characters ({share}). Each copy of the span is shaded in turn."),
                     prompt=prompt, n=len(out.new), start=loop.start + 1, span=span, copies=loop.copies,
                     covered=loop.covered, share=percent(loop.covered / len(out.new))))
    given = f"**{plain(out.prompt.given)}**" if out.prompt.given else ""
    st.markdown(given + shaded_loop(out.new, loop))


def why_loops(model: LabModel) -> None:
    """Why greedy decoding loops, always offered; opened, with a loop of the model in use (computed only then)."""
    box = st.expander(_("Why greedy decoding loops"), key="lab_loops", on_change="rerun")
    with box:
        prose("loops")
        if box.open:
            loop_example(model)


def cropped_text(info: generation.Prompt, block_size: int) -> str:
    """Why the first characters of a long prompt do not count: its known characters and those read as the unknown
    token (``Prompt.read_as_unk``), the block_size the model reads, how many are cropped."""
    known = len(info.ids) - info.read_as_unk
    counts = fill(ngettext("{n} known character", "{n} known characters", known), n=known)
    if info.read_as_unk:
        unk = fill(ngettext("{n} read as the unknown token", "{n} read as the unknown token", info.read_as_unk),
                   n=info.read_as_unk)
        counts = format_list([counts, unk], locale=current_language())
    return fill(ngettext("The prompt has {counts}; the model reads only the last {block} (its block_size), so the "
                         "first {cropped} character does not influence it.",
                         "The prompt has {counts}; the model reads only the last {block} (its block_size), so the "
                         "first {cropped} characters do not influence it.", info.cropped),
                counts=counts, block=block_size, cropped=info.cropped)


def show_generation(model: LabModel, sampling: Sampling) -> None:
    """The prompt as the reader typed it and the generated text, with the notes on the prompt (the unknown characters
    and what the model did with them, an empty start, a cropped prompt), then why greedy decoding loops."""
    generation_text(model, sampling)
    why_loops(model)


def generation_text(model: LabModel, sampling: Sampling) -> None:
    """The generated text and its notes (:func:`show_generation`)."""
    prompt, temperature, top_k, seed = sampling.prompt, sampling.temperature, sampling.top_k, sampling.seed
    try:
        out = generated(model.model_id, prompt, sampling.length, temperature, top_k, sampling.top_p, seed,
                        sampling.form, model)
    except poem_forms.FormError as error:
        st.warning(form_refused(error, sampling), icon=":material/format_align_left:")
        return
    if out is None:
        st.error(not_finite_text())
        return
    info = out.prompt
    if info.unknown:
        chars = plain(" ".join(info.unknown[:30])) + (" …" if len(info.unknown) > 30 else "")
        st.warning(fill(_("Not in this model's vocabulary, so the model reads each as its unknown token, the one its "
                          "rare characters share: {chars}") if info.as_unk
                        else _("Not in this model's vocabulary, so left out of the prompt: {chars}"), chars=chars),
                   icon=":material/text_select_move_back_word:")
    if info.started_from != "prompt":
        start = _("newline") if info.started_from == "newline" else _("first character of its vocabulary")
        st.info(fill(_("Nothing of the prompt is in the vocabulary: the model starts from a {start}."), start=start))
    if info.cropped:
        st.info(cropped_text(info, model.config.block_size))
    given = f"**{plain(info.given)}**" if info.given else ""  # as typed: no U+FFFD, nothing the model dropped hidden
    st.markdown(given + plain(out.new).replace("\n", "  \n"))
    loop_note(out.new)
    mode = _("greedy") if out.greedy else fill(_("temperature {t:g}"), t=temperature)
    k_text = _("all characters") if top_k == 0 else fill(_("top-k {k}"), k=top_k)
    if sampling.top_p < 1:
        k_text += " · " + fill(_("top-p {p:g}"), p=sampling.top_p)
    if out.form is not None:
        k_text += " · " + form_text(out.form)
    st.caption(fill(_("{mode} · {k} · seed {seed} · {n} new characters"), mode=mode, k=k_text, seed=seed,
                                                                           n=len(out.new)))


def kv_cache(model: LabModel, sampling: Sampling) -> None:
    """Keys and values reused and computed at each step of the generation (the characters it wrote: a form may end
    the poem before ``sampling.length``); nothing when it wrote nothing."""
    prompt, cfg = sampling.prompt, model.config
    try:
        out = generated(model.model_id, prompt, sampling.length, sampling.temperature, sampling.top_k,
                        sampling.top_p, sampling.seed, sampling.form, model)
    except poem_forms.FormError:
        return
    if out is None:
        return
    length = len(out.new)
    prompt_len = len(generation.prepare_prompt(model.tokenizer, prompt, cfg.block_size).ids)
    cache_steps = kv_cache_steps(prompt_len, length, cfg.block_size, cfg.causal)
    st.markdown("#### " + _("The KV cache while these characters were written"))
    reused = sum(r.reused for r in cache_steps)
    total = sum(r.reused + r.computed for r in cache_steps)
    st.plotly_chart(figures.kv_cache_figure(cache_steps, figures.KvCacheLabels(
        title="", reused=_("keys/values reused from the cache"), computed=_("computed at this step"),
        step=_("generation step"), keys=_("keys per layer and head"), slide=_("the window slides"),
        separators=plotly_separators(), colon=colon())),
        key="lab_kv_cache", alt=fill(
            _("Stacked bar chart of the keys per layer and head at each generation step ({steps} steps): reused from "
              "the cache or computed at that step; {reused:,} reused and {computed:,} computed in all."),
            steps=len(cache_steps), reused=reused, computed=total - reused))
    st.caption(fill(
        _("To predict a character the model needs a key and a value for every character in its window. With "
                 "the KV cache it computes them for the newest character only and reuses the others ({reused:,} of "
                 "{total:,} here, in each of {layers} layers × {heads} heads). Past block_size ({block}) the window "
                 "slides: every position shifts, so the whole window is computed again at each step. The text is "
                 "the same with or without the cache."),
        reused=reused, total=max(total, 1), layers=cfg.n_layer, heads=cfg.n_head, block=cfg.block_size)
        if cfg.causal else _("A model without the causal mask lets every position see later ones, so nothing can "
                             "be reused: every step computes the whole window."))


def next_character(model: LabModel, sampling: Sampling) -> dict[str, tuple[int, ...]] | None:
    """The next character's odds and where the last position looked.

    Returns:
        The shapes of the forward pass on the prompt (for the model's diagram), or None when not finite.
    """
    st.markdown("#### " + _("The next character"))
    bar_labels = figures.NextCharLabels(
        title=_("What the model predicts after your prompt"), x=_("probability"), y=_("candidate next character"),
        temperature=_("temperature (top-k as set above): "), top_k=_("top-k (temperature as set above): "),
        all=_("all"), sampled=_("sampled: {char}"), separators=plotly_separators(), colon=colon(),
        percent_suffix=percent_suffix())
    attn_labels = figures.LastAttentionLabels(
        title=_("Where attention looked from the last character"), layer=_("layer"),
        key=_("character read (position:character)"), mean=_("mean of the heads"), head=_("head {head}"),
        layer_label=_("layer {layer}"), separators=plotly_separators(), colon=colon())
    seed = sampling.seed
    view = next_char_view(model.model_id, sampling.prompt, sampling.temperature, sampling.top_k, sampling.top_p, seed,
                          sampling.form, model, bar_labels, attn_labels)
    if view is None:
        st.error(not_finite_text())
        return None
    probs, bars, looked, attention = view
    n1, n2 = st.columns([1, 1])
    n1.plotly_chart(bars, key="lab_next_char", alt=fill(
        _("Bar chart of the probability of each candidate next character at your settings: {values}; sampled: "
          "{sampled}."), values=" · ".join(f"{shown(c)} {num(float(p), 3)}" for c, p in zip(
            probs.candidates, probs.probs.tolist(), strict=True)), sampled=shown(probs.candidates[probs.sampled])))
    n1.caption(fill(_("The {n} most likely characters after the prompt, with the character sampled at your settings "
                 "(seed {seed}) highlighted: the first character of the text above. The sliders redraw the "
                 "bars for other temperatures (keeping your top-k) and other top-k (keeping your temperature). "
                 "The unknown token is never a candidate."), n=len(probs.candidates), seed=seed))
    n2.plotly_chart(attention, key="lab_next_char_attention", alt=fill(
        _("Heatmap of the last character's attention weights, one row per layer (the mean of the heads; the slider "
          "shows each head), over the characters read; the one each layer weighs most: {strongest}."),
        strongest=strongest_keys(looked.head_mean, looked.tokens, [
            fill(_("layer {layer}"), layer=layer) for layer in range(looked.head_mean.shape[0])])))
    n2.caption(fill(_("The last character's attention weights in each layer, over the {chars} characters the model "
                 "read: where it looked to make this prediction. The slider shows each head; the first step "
                 "averages them."), chars=probs.shapes["idx"][1]))
    return dict(probs.shapes)
