"""Issue 25: every chart of Home, pages 1-4 and the Lab's panels carries a text alternative (``st.plotly_chart``'s
``alt``, the chart's accessible name) in the reader's language, stating what it shows and the values a sighted
reader reads from it. Pages 5-7 are checked in their own page tests."""

from engine import attention as A
from engine import chapter
from engine.figures import lab as lab_figures
from engine.lab import internals, models
from engine.lab import settings as rules
from engine.sections import causal_mask as cm
from engine.sections import dropout as do
from engine.sections import self_attention as sa
from engine.sections import trainable_weights as tw
from tests.plotly_json import open_page
from ui.numbers import integer, num, significant

LANG = "fr"
TOKENS = list(A.CHAPTER_TOKENS)
INPUTS = A.chapter_inputs()
#: The English beginnings of the alternatives' message ids: a French page shows none of them.
ENGLISH = ("Heatmap", "Bar chart", "Stacked bar", "Box plots", "Line chart", "3-d chart")


def vector(values, decimals: int) -> str:
    return " / ".join(num(float(v), decimals, lang=LANG) for v in values)


def alternatives(at) -> dict[str, str]:
    """Each chart's key (the end of its element id) and its text alternative."""
    charts = at.get("plotly_chart")
    assert charts, "no chart on the page"
    return {c.proto.id: c.proto.alt for c in charts}


def alt_of(alts: dict[str, str], key: str) -> str:
    return next(alt for element_id, alt in alts.items() if element_id.endswith(key))


def assert_every_chart_described(alts: dict[str, str]) -> None:
    assert all(alt.strip() for alt in alts.values()), [k for k, alt in alts.items() if not alt.strip()]
    assert not [alt for alt in alts.values() if alt.startswith(ENGLISH)]  # in the reader's language


def test_home():
    at = open_page("app.py", 120, lang=LANG)  # Home's page links need the navigation
    assert not at.exception
    alts = alternatives(at)
    assert_every_chart_described(alts)
    vectors = alt_of(alts, "home_vectors")
    assert all(f"{token} {vector(row, 2)}" in vectors for token, row in zip(TOKENS, INPUTS, strict=True))


def test_page_1_self_attention():
    at = open_page("views/self_attention.py", lang=LANG)
    assert not at.exception
    alts = alternatives(at)
    assert_every_chart_described(alts)
    every = sa.loop_vs_matmul(INPUTS)
    weights = alt_of(alts, "sa_all_weights")
    assert all(f"{token}: {vector(row, 4)}" in weights for token, row in zip(TOKENS, every.attn_weights, strict=True))
    journey = sa.query_walkthrough(INPUTS, TOKENS.index("journey"))  # the page's default query
    assert f"z = {vector(journey.context_vec, 4)}" in alt_of(alts, "sa_context_chart")
    steps = alt_of(alts, "sa_steps_chart")
    assert " · ".join(f"{t} {num(float(v), 4, lang=LANG)}" for t, v in zip(TOKENS, journey.attn_weights,
                                                                          strict=True)) in steps
    jacobian = sa.jacobian_check(journey.attn_scores)
    assert f"journey: {vector(jacobian.closed_form[1], 3)}" in alt_of(alts, "sa_jacobian")


def test_page_2_trainable_weights():
    at = open_page("views/trainable_weights.py", lang=LANG)
    assert not at.exception
    alts = alternatives(at)
    assert_every_chart_described(alts)
    outputs = tw.v1_v2_outputs(INPUTS, 2, chapter.TRAINABLE_SEED, chapter.SA_V2_SEED)  # the page's defaults
    compared = alt_of(alts, "tw_v1_v2")
    assert f"Your: {vector(outputs.v1[0], 4)}" in compared and f"Your: {vector(outputs.v2[0], 4)}" in compared
    stats = tw.dk_sweep().stats
    last = stats.iloc[-1]
    dk = alt_of(alts, "tw_dk_figure")
    assert (f"d_k {integer(int(last.d_k), lang=LANG)}: {num(last.w_max_unscaled, 2, lang=LANG)} / "
            f"{num(last.w_max_scaled, 2, lang=LANG)}") in dk
    init = tw.init_comparison()
    rand = init[init["init"] == "torch.rand"]["var_xw"]
    assert "torch.rand " + " / ".join(significant(v, 3, lang=LANG) for v in rand) in alt_of(alts, "tw_init_chart")


def test_page_3_causal_mask():
    at = open_page("views/causal_mask.py", lang=LANG)
    assert not at.exception
    alts = alternatives(at)
    assert_every_chart_described(alts)
    routes = cm.mask_two_ways(cm.v2_scores(INPUTS, seed=chapter.SA_V2_SEED, d_out=2), d_k=2)
    assert f"journey: {vector(routes.attn_weights_causal[1], 4)}" in alt_of(alts, "cm_two_ways_5")
    triu = cm.triu_explorer(len(TOKENS), 1)  # the page's default diagonal
    assert f"Your: {vector(triu.mask[0], 0)}" in alt_of(alts, "cm_triu_chart")
    leak = cm.leakage_test(INPUTS, TOKENS.index("starts"), 1.0)  # the page's default token and perturbation
    first = leak.table.iloc[0]
    assert (f"Your {significant(first.max_diff_causal, 3, lang=LANG)} / "
            f"{significant(first.max_diff_full, 3, lang=LANG)}") in alt_of(alts, "cm_leak_chart")


def test_page_4_dropout():
    at = open_page("views/dropout.py", lang=LANG)
    assert not at.exception
    alts = alternatives(at)
    assert_every_chart_described(alts)
    expectation = do.dropout_expectation(do.chapter_causal_weights(INPUTS), 0.5, n_masks=2000, seed=0)
    convergence = alt_of(alts, "do_convergence")
    assert num(expectation.final_error, 4, lang=LANG) in convergence
    assert integer(expectation.masks, lang=LANG) in convergence
    modes = do.train_vs_eval(INPUTS, 0.5, chapter.DROPOUT_SEED)
    assert f"Your: {vector(modes.eval_1[0], 2)}" in alt_of(alts, "do_train_eval")


def test_the_lab_panels():
    at = open_page("views/lab.py", 120, lang=LANG)
    assert not at.exception
    alts = alternatives(at)
    mine = {k: v for k, v in alts.items()
            if any(k.endswith(key) for key in ("lab_attention", "lab_next_char", "lab_next_char_attention",
                                               "lab_kv_cache")) or "lab_positions_" in k}
    assert len(mine) == 8  # attention maps, four position panels, next character, last position, KV cache
    assert_every_chart_described(mine)
    model = models.load_shipped()
    cfg = model.config
    line = chapter.LESSON_LINE + "，黄河入海流。"  # the line input's default
    maps = internals.attention_maps(model, line, lab_figures.attention_line_length(cfg.n_layer, cfg.n_head))
    w = maps.attn_weights[0, 0].tolist()
    names = [f"{i}:{t}" for i, t in enumerate(maps.tokens)]
    strongest = " · ".join(f"{names[i]} → {names[row.index(max(row))]} {num(max(row), 2, lang=LANG)}"
                           for i, row in enumerate(w))
    assert strongest in alt_of(alts, "lab_attention")
    tables = internals.position_tables(model)  # the shipped model learns its positions (pos_encoding "learned")
    block_size, n_embd = tables.trained.shape
    trained = alt_of(alts, "lab_positions_0")
    assert integer(block_size, lang=LANG) in trained and integer(n_embd, lang=LANG) in trained
    assert num(float(tables.trained.min()), 2, lang=LANG) in trained
    assert num(tables.neighbour_sim_trained, 3, lang=LANG) in alt_of(alts, "lab_positions_2")
    probs = internals.next_char_probs(model, chapter.LESSON_PROMPT, 0.8, 20, 0, top_p=rules.TOP_P[1])
    top = " · ".join(f"{c} {num(float(p), 3, lang=LANG)}"
                     for c, p in zip(probs.candidates[:3], probs.probs[:3].tolist(), strict=True))
    assert top in alt_of(alts, "lab_next_char")
