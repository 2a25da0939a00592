"""Issue 24's fresh-read faults on pages 2-5 and 7: words translated, numbers in the reader's format (ui.numbers).

Each page is opened in German or French; the expected texts come from the engine's own computation and the
catalog's message ids, formatted by ui.numbers for that language.
"""

from __future__ import annotations

import datetime
import json

from engine import attention as A
from engine import chapter
from engine.checkpoint import SHIPPED_MODEL
from engine.corpus import TANG_RECORDS
from engine.figures import causal_mask as figures_cm
from engine.lab import models
from engine.lab import results as lab_results
from engine.sections import causal_mask as cm_sections
from engine.sections import dropout as dropout_sections
from engine.sections import multi_head as multi_head_sections
from engine.sections import positional_encodings as pe_sections
from engine.sections import self_attention as sa_sections
from tests.plotly_json import ROOT, figures, open_page, texts
from ui.i18n import translations
from ui.lab import controls
from ui.lab.words import fill
from ui.numbers import day, integer, num, num_or_sci, sci, seq


def test_trainable_weights_legend_is_translated():
    de = translations("de").gettext
    assert de("softmax(scores / √d_k)") != "softmax(scores / √d_k)"
    at = open_page("views/trainable_weights.py", lang="de")
    names = {trace.get("name") for fig in figures(at) for trace in fig["data"]}
    assert de("softmax(scores / √d_k)") in names and "softmax(scores / √d_k)" not in names


def test_dropout_panel_title_and_row_sums_in_german():
    de = translations("de").gettext
    at = open_page("views/dropout.py", lang="de")
    slider = next(f for f in figures(at) if f["layout"].get("sliders"))
    annotations = [a.get("text", "") for a in slider["layout"].get("annotations", [])]
    assert any(de("dropout(causal attn_weights)") in a for a in annotations)
    assert not any("dropout(causal attn_weights)" in a for a in annotations)
    shown = dropout_sections.dropout_sweep(dropout_sections.chapter_causal_weights(A.chapter_inputs()),
                                           chapter.DROPOUT_SEED)[chapter.DROPOUT_P]
    ones, weights = seq(shown.ones_row_sums, 1, lang="de"), seq(shown.weights_row_sums, 2, lang="de")
    assert "," in ones and "." not in ones
    assert any(f"= {ones};" in x and f"= {weights}." in x for x in texts(at))


def test_positional_encodings_one_scientific_style_and_row_zero_in_german():
    at = open_page("views/positional_encodings.py", lang="de")
    sweep = pe_sections.permutation_by_layers(n_embd=32, n_head=4, seed=0)
    bars = next(f for f in figures(at) if f["layout"].get("sliders") and f["layout"]["yaxis"].get("type") == "log")
    bar_traces = [trace for trace in bars["data"] if trace["type"] == "bar"]  # not the dotted rounding line
    written = [text for trace in bar_traces for text in trace["texttemplate"]]
    expected = [sci(float(d), lang="de") for n in sorted(sweep.by_layer.index)
                for d in sweep.by_layer.loc[n] if d > 0]
    assert set(expected) <= set(written)  # plain decimals inside [0.001, 10 000), E-notation outside (ui.numbers.sci)
    assert sorted(t for t in written if "E" in t) == sorted(e for e in expected if "E" in e)
    assert not any("%{" in t for t in written)
    row = seq(pe_sections.sinusoidal_position_table(128, 128).table[0, :8].tolist(), 1, lang="de")
    assert row.startswith("[0,0; 1,0;")
    assert any(row in x for x in texts(at))


def test_multi_head_difference_before_the_copy_in_french():
    at = open_page("views/multi_head.py", lang="fr")
    compare = multi_head_sections.wrapper_vs_split(chapter.MHA_WRAPPER_SEED, head_dim=2, num_heads=2)
    before = num_or_sci(compare.max_abs_diff_before, 4, lang="fr")
    assert ("E" in before) == (abs(compare.max_abs_diff_before) < 0.01)
    assert any(f"**{before}**" in x for x in texts(at))
    created = json.loads((ROOT / "assets" / "bench_attention.json").read_text(encoding="utf-8"))["created"]
    measured = translations("fr").gettext(" · measured on {day}").format(
        day=day(datetime.date.fromisoformat(created[:10]), lang="fr"))
    assert any(measured + "**" in c.value for c in at.caption)
    assert created[8:10] != "01" or "1er décembre" in measured


def test_page_3s_bars_write_the_tables_scientific_style():
    leak = cm_sections.leakage_test(A.chapter_inputs(), 2, 1.0)
    labels = figures_cm.LeakageLabels(causal="a", no_mask="b", perturbed="c", x_title="x", y_title="y",
                                      separators=",.", value_format=lambda v: sci(v, 2, lang="de"))
    fig = figures_cm.leakage_figure(leak, ["t"] * len(leak.table), 2, labels)
    for trace, column in zip(fig.data[:2], ("max_diff_causal", "max_diff_full"), strict=True):
        assert list(trace.text) == ["0" if v == 0 else sci(float(v), 2, lang="de") for v in leak.table[column]]



#: The dropout experiment's caption (ui.lab.controls.dropout_loss_text), its message id.
DROPOUT_MEASURED = ("Validation loss after the course preset's training ({steps} steps of batch {batch}, peak learning "
                    "rate {lr:g}, {corpus}), mean ± standard deviation over the seeds {seeds}, with the tokens/s of "
                    "the training steps ({cpu}, threads: {threads}): no dropout {none}; residual dropout {resid:g} "
                    "only {resid_only}; dropout {both:g} everywhere {everywhere}.")

#: The dropout price note (ui.lab.controls.dropout_notes), its message id.
DROPOUT_PRICE = ("Dropout has a price on a CPU: on the attention weights it keeps PyTorch off its fused attention "
                 "kernel. Course preset, batch {batch}, measured on {cpu}: {both_on:,.0f} tokens/s with dropout "
                 "{rate:g} everywhere, {attn_off:,.0f} with attention dropout off, {both_off:,.0f} with both off; "
                 "attention dropout off alone is {t128:.2f}× faster at T = {block} and {t256:.2f}× at T = {long}.")


def test_lab_numbers_from_the_code_in_german():
    de = translations("de").gettext
    at = open_page("views/lab.py", 90, lang="de")
    assert not at.exception, [e.value for e in at.exception]
    corpus_radio = next(r for r in at.radio if r.key == "lab_corpus")
    assert fill(de("All Tang poems (tang, {poems})"), "de", poems=integer(TANG_RECORDS, "de")) in corpus_radio.options
    price = lab_results.dropout_price()
    assert price is not None
    assert de(DROPOUT_PRICE) != DROPOUT_PRICE
    note = next(c.value for c in at.caption if c.value.startswith(de(DROPOUT_PRICE).split("{")[0]))
    assert f"Dropout {num(lab_results.PRICE_DROPOUT, 1, 'de')} " in note and f"T = {controls.LONG_T}" in note
    assert integer(round(price.both_on), "de") in note and price.cpu in note
    shipped = models.load_shipped(SHIPPED_MODEL)
    vocabulary = fill(de("vocabulary {size}"), "de", size=integer(shipped.tokenizer.vocab_size, "de"))
    steps = fill(de("{steps} steps on {corpus}"), "de", steps=integer(shipped.summary["steps_done"], "de"),
                 corpus=shipped.summary["corpus"])
    assert any(f" · {vocabulary} · {steps}" in c.value for c in at.caption)
    loss = lab_results.dropout_loss()
    template = de(DROPOUT_MEASURED)
    measured = template.split("{steps}")[0] + integer(loss.steps, "de") + " "
    assert template != DROPOUT_MEASURED and any(c.value.startswith(measured) for c in at.caption)


#: Page 1's sentence on the query's row of both Jacobians (views/self_attention.py's naive_row_text), its message id.
NAIVE_ROW = ("For the scores of “{token}” (all positive, $S$ ≈ {S}) both work: with $w_{q}$ the weight of "
             "“{token}”, its row is $(1 - w_{q})/S$ ≈ {diag} on the diagonal and $-w_{q}/S$ ≈ {off} everywhere "
             "else, against {softmax_diag} on the softmax's diagonal.")


def test_page_1_jacobian_row_numbers_come_from_the_computation_in_german():
    de = translations("de").gettext
    assert de(NAIVE_ROW) != NAIVE_ROW
    at = open_page("views/self_attention.py", lang="de")
    tokens = list(A.CHAPTER_TOKENS)
    for token in ("journey", tokens[4]):
        if token != "journey":
            at.selectbox(key="sa_jacobian_query").set_value(token).run()
        q = tokens.index(token)
        scores = A.dot_scores(A.chapter_inputs(), A.chapter_inputs()[q])  # (6, 3), (3,) -> (6,)
        naive = sa_sections.naive_jacobian_check(scores).closed_form
        softmax = sa_sections.jacobian_check(scores).closed_form
        expected = de(NAIVE_ROW).format(token=token, q=q, S=num(float(scores.sum()), 2, "de"),
                                        diag=num(float(naive[q, q]), 3, "de"),
                                        off=num(float(naive[q, (q + 1) % len(tokens)]), 3, "de"),
                                        softmax_diag=num(float(softmax[q, q]), 3, "de"))
        assert expected in texts(at), token
