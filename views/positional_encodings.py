"""Page 7: positional encodings — none, learned absolute, sinusoidal, RoPE — on the course's GPT."""

import pandas as pd
import streamlit as st
import torch

from engine import experiments, positions
from engine import gpt as G
from engine.figures import positions as PF
from engine.sections import positional_encodings as S
from ui import page
from ui.nav import PAGES
from ui.state import bound

PAGE = "positional_encodings"
INFO = next(p for p in PAGES if p.url_path == "positional-encodings")
N_EMBD_CHOICES = [32, 64, 128]
BLOCK_CHOICES = [16, 32, 64, 128, 256]
PAST_BLOCK_SIZE = 16
SEEDS = [0, 1, 2, 3, 4]
MODES = ["RoPE (rotate q and k)", "sinusoidal table added to q and k"]


@st.cache_data(show_spinner="Running the permutation experiment for 1 … 6 layers …")
def permutation(n_embd: int, seed: int) -> pd.DataFrame:
    return S.permutation_by_layers(n_embd=n_embd, n_head=4, seed=seed)


@st.cache_data(show_spinner=False)
def untrained_table(block_size: int, n_embd: int, seed: int) -> dict:
    config = G.GPTConfig(vocab_size=16, block_size=block_size, n_embd=n_embd, n_head=1, n_layer=1)
    table = S.learned_table(config, seed)
    return {"table": table, "similarity": S.position_similarity(table)}


@st.cache_data(show_spinner=False)
def shipped_table(path: str) -> dict | None:
    found = S.shipped_learned_table(path)
    if found is None:
        return None
    out = {**found, "config": found["config"].to_dict() if found["config"] is not None else None}
    if found["table"] is not None:
        sim = S.position_similarity(found["table"])
        out |= {"similarity": sim, "neighbour_sim": float(torch.diagonal(sim, 1).mean()),
                "far_sim": float(torch.diagonal(sim, min(32, sim.shape[0] - 1)).mean())}
    return out


@st.cache_data(show_spinner=False)
def sinusoidal(block_size: int, n_embd: int) -> dict:
    table = positions.sinusoidal_table(block_size, n_embd)
    sim = S.position_similarity(table)
    return {"table": table, "similarity": sim, "spread": S.diagonal_spread(sim)}


@st.cache_data(show_spinner=False)
def rope_rotation(head_dim: int, seed: int) -> dict:
    return S.rope_rotation(S.seeded_vectors(1, head_dim, seed)[0], 128)


@st.cache_data(show_spinner=False)
def score_matrices(mode: int, head_dim: int, T: int, shift: int, seed: int) -> dict:
    q, k = S.seeded_vectors(2, head_dim, seed + 1)
    if mode == 0:
        result = S.rope_score_matrix(q, k, T, shift)
        first, second, spread = result["attn_scores"], result["shifted"], result["max_diagonal_spread"]
    else:
        table = positions.sinusoidal_encoding(torch.arange(shift + T), head_dim)  # (shift+T, head_dim)
        unshifted = S.additive_score_matrix(q, k, table[:T])
        first, second = unshifted["attn_scores"], S.additive_score_matrix(q, k, table[shift:])["attn_scores"]
        spread = unshifted["max_diagonal_spread"]
    return {"first": first, "second": second, "spread": spread, "shift_diff": float((first - second).abs().max())}


@st.cache_data(show_spinner=False)
def past_block(T: int) -> pd.DataFrame:
    return S.run_past_block_size(T, block_size=PAST_BLOCK_SIZE)


page.header("7 · Positional encodings", INFO.section, PAGE)

# --- 1. the permutation experiment ---------------------------------------------------------------
page.prose(PAGE, "permutation")
c1, c2 = st.columns(2)
n_embd = int(c1.selectbox("n_embd (4 heads)", N_EMBD_CHOICES, key=bound("pe_n_embd", 32, options=N_EMBD_CHOICES)))
seed = int(c2.selectbox("seed of the untrained models", SEEDS, key=bound("pe_seed", 0, options=SEEDS)))
perm = permutation(n_embd, seed)
st.plotly_chart(PF.permutation_figure(perm, active_layers=1), key="pe_perm_chart")
wide = perm.pivot(index="n_layer", columns="pos_encoding", values="max_abs_diff")[list(positions.POS_ENCODINGS)]
st.dataframe(wide.style.format("{:.1e}"), key="pe_perm_table")


def diff(n_layer: int, enc: str) -> float:
    """The measured difference for one (n_layer, encoding) cell of the sweep."""
    return float(wide.loc[n_layer, enc])


one_none, two_none = diff(1, "none"), diff(2, "none")
st.markdown(f"1 layer, none: **{one_none:.1e}** · 2 layers, none: **{two_none:.1e}** · "
            f"1 layer, learned: **{diff(1, 'learned'):.1e}** (the lesson printed 3.7e-08, 1.9e-02 and 2.8e-03 "
            "with its own initialisation: compare orders of magnitude)")
page.verdict(one_none < 1e-5,
             "1 layer without positions: float rounding, as in the lesson",
             "1 layer without positions is NOT at float rounding")
page.verdict(two_none > 1e-4,
             "2 layers without positions: clearly non-zero, as in the lesson",
             "2 layers without positions: not clearly non-zero")
page.show_code(S.permutation_by_layers, experiments.permutation_experiment)

# --- 2. why: the causal mask ------------------------------------------------------------------------
page.prose(PAGE, "why")
vis = S.causal_visibility(S.LINE, S.PERMUTED)
st.plotly_chart(PF.visibility_figure(S.LINE, S.PERMUTED, vis), key="pe_visibility")
same = [t for t, s in enumerate(vis["same_set"].tolist()) if s]
st.markdown(f"visible tokens per position = {vis['counts'].tolist()} · same characters in both lines at positions {same}")
page.show_code(S.causal_visibility, positions.visible_token_counts)

# --- 3-4. learned and sinusoidal tables ---------------------------------------------------------------
page.prose(PAGE, "learned")
page.prose(PAGE, "sinusoidal")
c1, c2 = st.columns(2)
block_size = int(c1.select_slider("block_size (rows)", options=BLOCK_CHOICES, key=bound("pe_block", 128, options=BLOCK_CHOICES)))
width = int(c2.slider("n_embd (columns; odd works too)", 1, 256, step=1, key=bound("pe_width", 128, lo=1, hi=256)))
untrained = untrained_table(block_size, width, seed)
sin = sinusoidal(block_size, width)
shipped = shipped_table(str(S.SHIPPED_MODEL))
has_trained = shipped is not None and shipped.get("table") is not None
panels = {f"untrained pos_emb, seed {seed}": untrained}
if has_trained:
    panels["trained pos_emb, shipped model"] = shipped
panels["sinusoidal table"] = sin
st.plotly_chart(PF.tables_figure({f"{name} ({tuple(p['table'].shape)[0]} × {tuple(p['table'].shape)[1]})": p["table"]
                                  for name, p in panels.items()}), key="pe_tables")
st.plotly_chart(PF.tables_figure({f"similarity, {name}": p["similarity"] for name, p in panels.items()},
                                 "position m", "position n", zmax=1.0), key="pe_similarity")
if shipped is None:
    st.info("No trained model ships with this copy of the app (assets/models/course_tang300), so only the "
            "untrained table is shown. Train one in the GPT lab with learned positions to compare.")
elif shipped["error"]:
    st.warning(f"The shipped model could not be read: {shipped['error']}")
elif not has_trained:
    st.info(f"The shipped model uses pos_encoding “{shipped['config']['pos_encoding']}”, so it has no learned table.")
st.markdown(f"untrained table: std = {float(untrained['table'].std()):.4f} (init std 0.02)")
if has_trained:
    st.markdown(f"trained table: std = {float(shipped['table'].std()):.4f}, shape {tuple(shipped['table'].shape)} · "
                f"mean similarity of neighbouring positions = {shipped['neighbour_sim']:.3f}, "
                f"of positions 32 apart = {shipped['far_sim']:.3f}")
st.markdown(f"sinusoidal row 0 = {page.fmt_row(sin['table'][0, :8].tolist(), 1)}{' …' if width > 8 else ''} · "
            f"largest spread along a diagonal of its similarity = {sin['spread']:.1e}")
page.show_code(S.learned_table, S.shipped_learned_table, positions.sinusoidal_encoding, positions.sinusoidal_table,
               S.position_similarity)

# --- 5. RoPE rotation ----------------------------------------------------------------------------------
page.prose(PAGE, "rope")
c1, c2 = st.columns(2)
head_dim = int(c1.slider("head_dim (odd values show RoPE's error)", 1, 64, step=1, key=bound("pe_head_dim", 16, lo=1, hi=64)))
position = int(c2.slider("position m", 0, 127, step=1, key=bound("pe_position", 3, lo=0, hi=127)))
try:
    positions.rope_frequencies(head_dim)
except ValueError as exc:
    rope_error = str(exc)
    st.error(rope_error)
else:
    rope_error = None
    rotation = rope_rotation(head_dim, seed)
    n_pairs = head_dim // 2
    shown = sorted({round(i * (n_pairs - 1) / 5) for i in range(6)}) if n_pairs > 6 else list(range(n_pairs))
    st.plotly_chart(PF.rope_pairs_figure(rotation, position, shown), key="pe_rope_pairs")
    theta = rotation["theta"]
    pairs = pd.DataFrame({
        "pair i": list(range(n_pairs)),
        "dims": [f"({2 * i}, {2 * i + 1})" for i in range(n_pairs)],
        "θ_i (rad / position)": theta.tolist(),
        "angle m·θ_i (°, mod 360)": [float(torch.rad2deg(a)) % 360 for a in rotation["angles"][position]],
        "wavelength 2π/θ_i (positions)": (2 * torch.pi / theta).tolist(),
    })
    st.dataframe(pairs.style.format({"θ_i (rad / position)": "{:.4g}", "angle m·θ_i (°, mod 360)": "{:.1f}",
                                     "wavelength 2π/θ_i (positions)": "{:.1f}"}), hide_index=True, key="pe_pair_table")
    st.markdown(f"‖v‖ at position 0 = {float(rotation['norms'][0]):.4f} · "
                f"at position {position} = {float(rotation['norms'][position]):.4f}")
page.show_code(positions.apply_rope, positions.rotate_pairs, positions.rope_cos_sin, positions.rope_frequencies)

# --- 6. scores depend on the distance -----------------------------------------------------------------
page.prose(PAGE, "scores")
c1, c2, c3 = st.columns(3)
mode = c1.radio("encoding", MODES, key=bound("pe_score_mode", MODES[0], options=MODES))
T = int(c2.slider("positions T", 2, 16, step=1, key=bound("pe_score_T", 8, lo=2, hi=16)))
shift = int(c3.slider("shift both positions by", 0, 1000, step=1, key=bound("pe_shift", 100, lo=0, hi=1000)))
if rope_error is not None:
    st.error(f"{rope_error} — pick an even head_dim above to see the score matrix.")
else:
    scores = score_matrices(MODES.index(mode), head_dim, T, shift, seed)
    labels = {f"positions 0 … {T - 1} (columns: key position n)": [str(t) for t in range(T)],
              f"shifted by {shift}: positions {shift} … {shift + T - 1}": [str(t + shift) for t in range(T)]}
    st.plotly_chart(PF.score_matrices_figure(dict(zip(labels, (scores["first"], scores["second"]))), labels), key="pe_scores")
    st.markdown(f"largest spread along a diagonal = {scores['spread']:.1e} · "
                f"max |scores − shifted scores| = {scores['shift_diff']:.1e}")
    if scores["shift_diff"] < 1e-3 and scores["spread"] < 1e-3:
        st.badge("constant along diagonals and unchanged by the shift: only m − n matters",
                 icon=":material/check_circle:", color="green")
    else:
        st.badge("depends on the absolute positions", icon=":material/info:", color="gray")
page.show_code(S.rope_score_matrix, S.additive_score_matrix)

# --- 7. past block_size ----------------------------------------------------------------------------------
page.prose(PAGE, "past")
past_T = int(st.slider(f"sequence length (block_size {PAST_BLOCK_SIZE})", 1, 64, step=1,
                       key=bound("pe_past_T", 24, lo=1, hi=64)))
past = past_block(past_T)
st.dataframe(past[["pos_encoding", "ran", "logits shape"]], hide_index=True, key="pe_past_table")
for _, row in past.iterrows():
    if not row["ran"]:
        st.error(f"{row['pos_encoding']}: {row['message']}")
if past["ran"].all():
    st.success(f"All four encodings ran on {past_T} tokens (within block_size {PAST_BLOCK_SIZE}).")
page.show_code(S.run_past_block_size, positions.check_learned_positions, G.GPT.embed)

# --- exercises -------------------------------------------------------------------------------------------
page.prose(PAGE, "exercises")
st.markdown(f"Exercise 1 · 3 layers, no position embedding (n_embd {n_embd}, seed {seed}): "
            f"max |Δ logits| = **{diff(3, 'none'):.1e}**")

page.check_yourself(PAGE)
