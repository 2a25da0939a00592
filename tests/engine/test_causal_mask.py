"""Engine tests for section 3 (causal mask): both routes, leakage, triu, NaN guards, register_buffer."""

import copy
import json
import math
import re

import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import attention as A
from engine import chapter
from engine.figures import causal_mask as figures
from engine.sections import causal_mask as sections


def close(got, want):
    torch.testing.assert_close(torch.as_tensor(got, dtype=torch.float32), torch.tensor(want), atol=5e-5, rtol=0)


@pytest.fixture(scope="module")
def scores():
    return sections.v2_scores(A.chapter_inputs(), seed=chapter.SA_V2_SEED, d_out=2)


def test_two_ways_reproduce_the_chapter(scores):
    result = sections.mask_two_ways(scores, d_k=2)
    close(result.attn_weights, chapter.SA_V2_WEIGHTS)
    close(result.masked_simple_norm, chapter.CAUSAL_WEIGHTS)
    close(result.attn_weights_causal, chapter.CAUSAL_WEIGHTS)
    close(result.attn_weights_causal[1], (0.5517, 0.4483, 0.0, 0.0, 0.0, 0.0))
    assert chapter.matches(result.masked_scores, chapter.CAUSAL_MASKED_SCORES)
    assert torch.isinf(result.masked_scores[0, 1:]).all()


def test_two_ways_agree_and_obey_the_invariants(scores):
    result = sections.mask_two_ways(scores, d_k=2)
    assert result.max_abs_diff < 1e-6
    w = result.attn_weights_causal
    assert torch.equal(torch.triu(w, diagonal=1), torch.zeros(6, 6))
    torch.testing.assert_close(w.sum(dim=-1), torch.ones(6))
    # row sums of the zeroed weights are < 1 except the last row, which keeps every weight
    assert (result.row_sums[:-1] < 1).all()
    assert abs(float(result.row_sums[-1]) - 1) < 1e-6
    assert torch.equal(result.mask_simple, torch.tril(torch.ones(6, 6)))


def test_two_ways_rejects_non_square():
    with pytest.raises(ValueError):
        sections.mask_two_ways(torch.zeros(2, 3), d_k=2)
    with pytest.raises(ValueError):
        sections.mask_two_ways(torch.zeros(3, 3), d_k=0)


@pytest.mark.parametrize("token_index", range(6))
@pytest.mark.parametrize("delta", [-3.0, 0.25, 5.0])
def test_leakage_only_that_row_and_later_change(token_index, delta):
    leak = sections.leakage_test(A.chapter_inputs(), token_index, delta)
    table = leak.table
    assert list(table.columns) == list(sections.LEAKAGE_COLUMNS)
    changed = table["changed_causal"].tolist()
    assert changed == [i >= token_index for i in range(6)]
    assert leak.changed_rows == tuple(range(token_index, 6)) and not leak.leaks
    assert (table["max_diff_causal"][:token_index] == 0).all()
    # without the mask every row sees the perturbed token
    assert table["changed_full"].all()


def test_leakage_zero_perturbation_changes_nothing():
    leak = sections.leakage_test(A.chapter_inputs(), 3, 0.0)
    assert not leak.table["changed_causal"].any() and leak.changed_rows == ()
    assert not leak.table["changed_full"].any()
    with pytest.raises(ValueError):
        sections.leakage_test(A.chapter_inputs(), 6, 1.0)


@pytest.mark.parametrize("k", range(-7, 8))
def test_triu_explorer_at_every_offset(k):
    info = sections.triu_explorer(6, k)
    torch.testing.assert_close(info.mask, torch.triu(torch.ones(6, 6), diagonal=k))
    assert info.visible_per_row == tuple(int(min(6, max(0, i + k))) for i in range(6))
    assert info.is_causal == (k == 1)
    assert info.hides_diagonal == (k <= 0)
    assert (0 in info.fully_masked_rows) == (k <= 0)
    if k <= -5:
        assert info.fully_masked_rows == tuple(range(6))
    if k >= 6:
        assert info.visible_per_row == (6,) * 6
    expected_kind = ("causal" if k == 1 else "fully_masked_rows" if k <= 0 else "leaks_future")
    assert info.kind == expected_kind and info.kind in sections.TRIU_KINDS


def test_fully_masked_row_is_nan_without_a_guard(scores):
    demo = sections.masked_row_demo(scores, row=3, guard="none")
    assert demo.nan_rows == (3,)
    assert torch.isnan(demo.row_weights).all()
    assert not torch.isnan(demo.attn_weights[[0, 1, 2, 4, 5]]).any()


@pytest.mark.parametrize("row", [0, 3, 5])
def test_guards_keep_every_row_finite(scores, row):
    finite = sections.masked_row_demo(scores, row, "finite_min")
    zeros = sections.masked_row_demo(scores, row, "nan_to_num")
    diag = sections.masked_row_demo(scores, row, "keep_diagonal")
    for demo in (finite, zeros, diag):
        assert demo.nan_rows == ()
        assert torch.isfinite(demo.attn_weights).all()
    torch.testing.assert_close(finite.row_weights, torch.full((6,), 1 / 6))
    assert torch.equal(zeros.row_weights, torch.zeros(6))
    torch.testing.assert_close(diag.row_weights, torch.nn.functional.one_hot(torch.tensor(row), 6).float())
    # other rows keep their causal weights under every guard
    causal = sections.mask_two_ways(scores, d_k=2).attn_weights_causal
    others = [i for i in range(6) if i != row]
    for demo in (finite, zeros, diag):
        torch.testing.assert_close(demo.attn_weights[others], causal[others])
    with pytest.raises(ValueError):
        sections.masked_row_demo(scores, row, "magic")


def test_buffer_demo_on_meta():
    table = sections.buffer_demo("meta")
    assert list(table.columns) == list(sections.BUFFER_COLUMNS)
    table = table.set_index("holder")
    assert list(table.index) == list(sections.MASK_HOLDERS)
    chap, nonpersist, plain = table.index
    assert table.loc[chap, "state_dict_keys"].split(", ")[0] == "mask"
    assert "mask" not in table.loc[nonpersist, "state_dict_keys"].split(", ")
    assert "mask" not in table.loc[plain, "state_dict_keys"].split(", ")
    assert table["in_state_dict"].tolist() == [True, False, False]
    assert table["in_named_buffers"].tolist() == [True, True, False]
    assert table["mask_device"].tolist() == ["meta", "meta", "cpu"]
    assert table["forward_ok"].tolist() == [True, True, False]
    assert table.loc[chap, "forward_result"] == "(2, 6, 2)"
    assert table.loc[plain, "forward_result"].startswith("RuntimeError")
    assert (table["weights_device"] == "meta").all()


def test_the_recording_is_a_fresh_buffer_demo_of_this_torch():
    """assets/buffer_demo.json, which the server shows, is what buffer_demo("meta") returns with the running PyTorch:
    after a PyTorch upgrade this fails until someone reruns the command the file names."""
    recording = sections.read_buffer_demo()
    assert recording.torch_version == torch.__version__, f"regenerate it: {recording.command}"
    assert recording.command == sections.BUFFER_DEMO_COMMAND
    pd.testing.assert_frame_equal(recording.table, sections.buffer_demo("meta"))


def test_the_command_writes_the_committed_recording(tmp_path):
    out = tmp_path / "sub" / "buffer_demo.json"
    assert sections.main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == sections.BUFFER_DEMO_FILE.read_text(encoding="utf-8")
    pd.testing.assert_frame_equal(sections.read_buffer_demo(out).table, sections.buffer_demo("meta"))


@pytest.fixture(scope="module")
def record():
    return sections.buffer_demo_record()


def write(tmp_path, data) -> str:
    path = tmp_path / "buffer_demo.json"
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return str(path)


def damaged(record, change):
    data = copy.deepcopy(record)
    change(data)
    return data


#: Damaged recordings, each with the words of the error that must name what is wrong.
DAMAGES = {
    "missing column": (lambda d: d["rows"][1].pop("mask_device"),
                       r"row 1 must hold the columns.*missing \['mask_device'\]"),
    "extra column": (lambda d: d["rows"][0].update(extra=1), r"row 0 .*unexpected \['extra'\]"),
    "string for a bool": (lambda d: d["rows"][2].update(forward_ok="false"),
                          r"row 2, forward_ok must be true or false"),
    "1 for a bool": (lambda d: d["rows"][0].update(in_state_dict=1), r"row 0, in_state_dict must be true or false"),
    "bool for a string": (lambda d: d["rows"][0].update(forward_result=True),
                          r"row 0, forward_result must be a string"),
    "over-long cell": (lambda d: d["rows"][0].update(state_dict_keys="x" * 5000), r"state_dict_keys must be a string"),
    "columns renamed": (lambda d: d.update(columns=[*d["columns"][:-1], "result"]), r"columns must be"),
    "a row missing": (lambda d: d["rows"].pop(), r"rows must be a list of 3"),
    "rows not a list": (lambda d: d.update(rows={"a": 1}), r"rows must be a list of 3"),
    "holders swapped": (lambda d: d["rows"].reverse(), r"holders must be"),
    "other format": (lambda d: d.update(format="buffer-demo/0"), r"not a buffer-demo/1 recording"),
    "other target": (lambda d: d.update(target="cuda"), r"target must be 'meta'"),
    "other mask size": (lambda d: d.update(context_length=6.0), r"context_length must be 6"),
    "no torch version": (lambda d: d.pop("torch"), r"torch must be a string"),
    "command not text": (lambda d: d.update(command=["python"]), r"command must be a string"),
}


@pytest.mark.parametrize("name", DAMAGES)
def test_a_damaged_recording_is_refused_with_what_is_wrong(tmp_path, record, name, monkeypatch, caplog):
    change, words = DAMAGES[name]
    path = write(tmp_path, damaged(record, change))
    with pytest.raises(ValueError, match=words):
        sections.read_buffer_demo(path)
    monkeypatch.setattr(sections, "buffer_demo", lambda target: pd.DataFrame({"ran_live_on": [target]}))
    shown = sections.meta_buffers(path)  # the page's reader runs the code live instead, and says why in the log
    assert shown.recorded_with is None and shown.table["ran_live_on"].tolist() == ["meta"]
    assert any(re.search(words, r.getMessage()) for r in caplog.records)


def test_a_recording_that_is_not_json_or_too_large_is_refused(tmp_path, record):
    with pytest.raises(ValueError, match="not valid UTF-8 JSON"):
        sections.read_buffer_demo(write(tmp_path, "{not json"))
    big = damaged(record, lambda d: d.update(padding=" " * sections.MAX_BUFFER_FILE_BYTES))
    with pytest.raises(ValueError, match="bytes, more than"):
        sections.read_buffer_demo(write(tmp_path, big))
    with pytest.raises(FileNotFoundError):
        sections.read_buffer_demo(tmp_path / "absent.json")


#: JSON values of each kind a damaged cell may hold.
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                        st.lists(st.integers(), max_size=2))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(row=st.integers(0, len(sections.MASK_HOLDERS) - 1), column=st.sampled_from(sections.BUFFER_COLUMNS),
       value=JSON_VALUES)
def test_any_cell_of_another_type_is_refused(tmp_path, record, row, column, value):
    kind = sections.BUFFER_COLUMN_TYPES[column]
    data = damaged(record, lambda d: d["rows"][row].update({column: value}))
    if type(value) is kind and (column != "holder" or value == record["rows"][row]["holder"]):
        table = sections.read_buffer_demo(write(tmp_path, data)).table
        assert table[column].iloc[row] == value
        pd.testing.assert_frame_equal(table.drop(columns=column),
                                      sections.read_buffer_demo(write(tmp_path, record)).table.drop(columns=column))
    else:
        with pytest.raises(ValueError, match=f"{column} must be|holders must be"):
            sections.read_buffer_demo(write(tmp_path, data))


def test_meta_buffers_reads_the_recording_of_this_torch_and_runs_another_live(tmp_path, record, monkeypatch):
    live = sections.buffer_demo("meta")
    marked = damaged(record, lambda d: d["rows"][2].update(forward_result="RuntimeError: recorded"))
    this = sections.meta_buffers(write(tmp_path, marked))
    assert this.recorded_with == torch.__version__
    assert this.table["forward_result"].iloc[2] == "RuntimeError: recorded"  # read, not rerun
    other = sections.meta_buffers(write(tmp_path, damaged(marked, lambda d: d.update(torch="1.0.0+other"))))
    assert other.recorded_with is None
    pd.testing.assert_frame_equal(other.table, live)
    missing = sections.meta_buffers(tmp_path / "absent.json")
    assert missing.recorded_with is None
    pd.testing.assert_frame_equal(missing.table, live)
    monkeypatch.setattr(sections, "buffer_demo", lambda *a, **k: pytest.fail("the shipped recording was rerun"))
    assert sections.meta_buffers().recorded_with == torch.__version__  # the default is assets/buffer_demo.json


def test_plain_mask_variant_computes_the_same_function():
    torch.manual_seed(0)
    a = A.CausalAttention(3, 2, 6, 0.0)
    b = sections.CausalAttentionPlainMask(3, 2, 6, 0.0)
    b.load_state_dict(a.state_dict(), strict=False)
    x = A.chapter_inputs().unsqueeze(0)  # (1, 6, 3)
    torch.testing.assert_close(a(x), b(x))
    assert "mask" not in dict(b.named_buffers())


def test_figures(scores):
    tokens = list(A.CHAPTER_TOKENS)
    titles = tuple(f"panel {i}" for i in range(6))
    panels = figures.two_ways_panels(sections.mask_two_ways(scores, d_k=2), tokens, titles)
    assert len(panels) == 6 and all(len(f.data) == 1 for f in panels)
    assert [f.layout.title.text for f in panels] == list(titles)
    with pytest.raises(ValueError):
        figures.two_ways_panels(sections.mask_two_ways(scores, d_k=2), tokens, titles[:5])
    # -inf cells of the masked scores are written out, not drawn
    masked = panels[4].data[0]
    assert masked.text[0][1] == "-inf" and math.isnan(masked.z[0][1])
    assert list(panels[4].layout.yaxis.ticktext) == tokens and panels[4].layout.yaxis.autorange == "reversed"
    labels = figures.LeakageLabels("causal", "full", "here", "row", "change")
    leak = figures.leakage_figure(sections.leakage_test(A.chapter_inputs(), 2, 1.0), tokens, 2, labels)
    assert len(leak.data) == 2 and list(leak.data[0].text[:2]) == ["0", "0"]
    assert [t.name for t in leak.data] == ["causal", "full"] and leak.layout.xaxis.title.text == "row"
    mask_fig = figures.mask_heatmap(sections.triu_explorer(6, 1).mask, tokens, row_title="q", col_title="k")
    assert mask_fig.data[0].text[0][1] == "1" and mask_fig.layout.yaxis.title.text == "q"


def test_masked_row_figure_writes_nan_and_outlines_the_row(scores):
    tokens = list(A.CHAPTER_TOKENS)
    demo = sections.masked_row_demo(scores, 3, "none")
    fig = figures.masked_row_figure(demo.attn_weights, tokens, demo.nan_rows, nan_label="NaN")
    assert fig.data[0].text[3] == ["nan"] * 6
    assert all(math.isnan(v) for v in fig.data[0].z[3])
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].y0 == 2.5
    assert list(fig.layout.yaxis.ticktext) == [*tokens[:3], "with · NaN", *tokens[4:]]
    guarded = sections.masked_row_demo(scores, 3, "keep_diagonal")
    assert not figures.masked_row_figure(guarded.attn_weights, tokens, guarded.nan_rows).layout.shapes
