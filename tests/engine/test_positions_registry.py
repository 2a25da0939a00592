"""The position encodings are one closed set: engine.positions.ENCODINGS is the only place their keys and order
are written, the model asks each record what to do, and every record has its words for readers (ui.positions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from engine import gpt as G
from engine import positions as P
from engine.lab.experiments import definitions as X
from engine.presets import preset
from ui import positions as words
from ui import questions as Q
from ui.i18n import translations
from ui.questions import lab as lab_questions
from ui.questions import positional_encodings as pe_questions

ROOT = Path(__file__).resolve().parents[2]
KEYS = [enc.key for enc in P.ENCODINGS]
#: Words that are also encoding keys but mean something else there: "none" (a guard, a Plotly or loss option) is
#: checked only where it is compared with a pos_encoding, and ui/nav.py's lesson key "rope" names a chapter part.
ORDINARY = {"none"}
OTHER_MEANING = {("ui/nav.py", "rope")}


def test_registry_keys_are_unique_and_in_the_pages_order():
    assert KEYS == ["none", "learned", "sinusoidal", "rope", "alibi"]
    assert len(set(KEYS)) == len(KEYS)
    assert [P.encoding(k) for k in KEYS] == list(P.ENCODINGS)
    assert not hasattr(P, "POS_ENCODINGS") and not hasattr(G, "POS_ENCODINGS")  # no second list of the keys
    for bad in ("ALiBi", "", None, 3, "rope "):
        with pytest.raises(ValueError, match="pos_encoding must be one of"):
            P.encoding(bad)
        with pytest.raises(ValueError, match="pos_encoding must be one of"):
            G.GPTConfig(pos_encoding=bad)


def test_records_say_what_the_model_does():
    table = {enc.key: (enc.adds_table, enc.trained_table, enc.rotates_qk, enc.biases_scores, enc.limited_to_block)
             for enc in P.ENCODINGS}
    assert table == {"none": (False, False, False, False, False),
                     "learned": (True, True, False, False, True),
                     "sinusoidal": (True, False, False, False, False),
                     "rope": (False, False, True, False, False),
                     "alibi": (False, False, False, True, False)}
    assert P.LEARNED.max_positions(64) == 64 and P.ALIBI.max_positions(64) is None
    with pytest.raises(ValueError, match="table must be"):
        P.PositionEncoding("x", table="other", rotates_qk=False, biases_scores=False, limited_to_block=False)


@pytest.mark.parametrize("key", KEYS)
def test_the_model_follows_its_record(key):
    enc = P.encoding(key)
    torch.manual_seed(0)
    model = G.GPT(preset("tiny", pos_encoding=key))
    attn = model.blocks[0].attn
    assert hasattr(model, "pos_emb") == enc.trained_table
    assert hasattr(model, "pos_table") == (enc.adds_table and not enc.trained_table)
    assert attn.rope == enc.rotates_qk and hasattr(attn, "rope_cos") == enc.rotates_qk
    assert attn.alibi == enc.biases_scores and hasattr(attn, "score_bias") == enc.biases_scores
    assert ("pos_emb.weight" in G.param_shapes(model.config)) == enc.trained_table


@pytest.mark.parametrize("lang", ["en", "fr", "de"])
def test_every_record_has_its_words_in_each_language(lang):
    catalog = translations(lang)
    for table in (words.NAMES, words.TITLES, words.PARTS):
        assert list(table) == list(P.ENCODINGS)  # every record, in the registry's order
        translated = [catalog.gettext(message) for message in table.values()]
        assert len(set(translated)) == len(translated)
        if lang != "en":
            assert any(t != m for t, m in zip(translated, table.values(), strict=True))  # the catalog was used
    assert words.name("not-an-encoding") == "not-an-encoding"


def test_the_exercises_and_the_older_set_cover_every_encoding():
    assert [run.key for run in X.EXPERIMENTS["positions"].runs] == KEYS
    exercise = [X.EXERCISE_RUNS[k].config().pos_encoding for k in X.EXERCISES["positions"].runs]
    assert exercise == KEYS


def _strings_outside_calls(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings nor the message of ``_``/``N_``/``ngettext``."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            skip.add(id(first.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("_", "N_", "ngettext"):
            skip |= {id(arg) for arg in node.args}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def _spelled(rel: str) -> list[str]:
    """Where the module ``rel`` writes an encoding key outside the registry (line and key, or the comparison)."""
    tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    found = [f"{rel}:{node.lineno} {node.value!r}" for node in _strings_outside_calls(tree)
             if node.value in KEYS and node.value not in ORDINARY and (rel, node.value) not in OTHER_MEANING]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and "pos_encoding" in ast.unparse(node) and any(
                isinstance(c, ast.Constant) and c.value in KEYS for c in [node.left, *node.comparators]):
            found.append(f"{rel}:{node.lineno} compares pos_encoding with a key: {ast.unparse(node)}")
    return found


def test_no_module_spells_an_encoding_key_outside_the_registry():
    """A key written anywhere but engine/positions.py is a second list that a new encoding would miss."""
    bad = []
    for pkg in ("engine", "ui", "views", "tools"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != "engine/positions.py":
                bad += _spelled(rel)
    assert not bad, bad


def test_the_scan_finds_a_planted_key():
    tree = ast.parse('"""Doc "rope"."""\nx = _("rope")\nif cfg.pos_encoding == "rope":\n    y = "alibi"\n')
    assert [n.value for n in _strings_outside_calls(tree)] == ["rope", "alibi"]


def test_questions_that_name_every_encoding_offer_each_in_the_registrys_order():
    """Page 7's and the Lab's encoding questions build their options from the records: a new record they lack
    fails at import, not as a question with a missing answer."""
    for gate in (pe_questions.BLIND, lab_questions.POSITIONS):
        assert [o.key for o in gate.options] == KEYS
    words_for = {enc: ("label", "feedback") for enc in P.ENCODINGS}
    assert [o.key for o in Q.encoding_options(words_for)] == KEYS
    for bad in (dict(list(words_for.items())[:-1]), dict(reversed(words_for.items())),
                {**words_for, "extra": ("label", "feedback")}):
        with pytest.raises(ValueError, match="encoding options must list"):
            Q.encoding_options(bad)
