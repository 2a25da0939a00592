"""engine.bench.attention on a tiny size: every variant computes the same function; the command writes its JSON.

No timing is asserted: the benchmark prints numbers, tests only check that they exist and that the
variants agree.
"""

import json

import pytest
import torch

from engine.bench import attention as B
from engine.bench.__main__ import main as dispatch
from engine.bench.machine import cpu_model

SIZES = [B.TINY, B.BenchSize(1, 5, 12, 3), B.BenchSize(3, 16, 32, 1)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: s.label)
def test_all_variants_give_the_same_output(size):
    modules = B.build_variants(size)
    assert list(modules) == list(B.VARIANTS)
    x = B.make_input(size)
    outs = B.outputs(modules, x)
    for name, out in outs.items():
        assert out.shape == (size.batch, size.seq_len, size.n_embd), name
        torch.testing.assert_close(out, outs["split"], atol=1e-5, rtol=0, msg=lambda m, n=name: f"{n}: {m}")


@pytest.mark.parametrize("size", SIZES[:2], ids=lambda s: s.label)
def test_all_variants_give_the_same_gradients(size):
    modules = B.build_variants(size)
    x = B.make_input(size)
    grad_out = torch.randn(x.shape, generator=torch.Generator().manual_seed(5))
    grads = B.gradients(modules, x, grad_out)
    for name, g in grads.items():
        torch.testing.assert_close(g, grads["split"], atol=1e-5, rtol=0, msg=lambda m, n=name: f"{n}: {m}")


def test_variants_are_causal():
    size = B.BenchSize(1, 6, 8, 2)
    modules = B.build_variants(size)
    x = B.make_input(size)
    later = x.clone()
    later[:, 4:] += 1.0  # change tokens 4 and 5 only
    for name, m in modules.items():
        with torch.no_grad():
            a, b = m(x), m(later)
        torch.testing.assert_close(a[:, :4], b[:, :4], atol=1e-6, rtol=0, msg=lambda msg, n=name: f"{n}: {msg}")
        assert (a[:, 4:] - b[:, 4:]).abs().max() > 1e-4, name


def test_bench_size_reports_every_variant():
    result = B.bench_size(B.TINY, repeats=2, warmup=0)
    assert result["label"] == B.TINY.label and result["batch"] == 2
    assert [r["variant"] for r in result["results"]] == list(B.VARIANTS)
    for r in result["results"]:
        assert len(r["forward_samples_ms"]) == 2 and len(r["forward_backward_samples_ms"]) == 2
        assert r["forward_ms"] > 0 and r["forward_backward_ms"] > 0
        assert r["max_abs_diff_vs_split"] < 1e-5
    forward_only = B.bench_size(B.TINY, repeats=1, warmup=0, backward=False, variants=["split", "sdpa_causal"])
    assert [r["variant"] for r in forward_only["results"]] == ["split", "sdpa_causal"]
    assert forward_only["results"][0]["forward_backward_ms"] is None


def test_command_writes_json_and_prints_a_table(tmp_path, capsys):
    out = tmp_path / "bench.json"
    status = dispatch(["attention", "--size", "2,8,16,4", "--size", "1x4x8x2", "--repeats", "1", "--warmup", "0",
                       "--rounds", "2", "--json", str(out)])
    captured = capsys.readouterr()
    printed = captured.out
    # the exit status says whether a size still had a variant whose forward was not below its forward+backward
    unordered = [s["checks"]["unordered"] for s in B.load_results(out)["sizes"]]
    assert status == (1 if any(unordered) else 0)
    assert ("forward is not below forward+backward" in captured.err) == any(unordered)
    assert "input B=2 × T=8 × C=16, H=4 (head_dim 4)" in printed and "sdpa_causal" in printed
    assert f"wrote {out}" in printed
    data = B.load_results(out)
    assert data["machine"]["cpu"] == cpu_model() and data["machine"]["torch"] == torch.__version__
    assert data["machine"]["cores"] >= 1
    assert [s["label"] for s in data["sizes"]] == [B.TINY.label, B.BenchSize(1, 4, 8, 2).label]
    table = B.results_table(data)
    assert len(table) == 2 * len(B.VARIANTS)
    assert (table.groupby("size")["× fastest (fwd)"].min() == 1.0).all()
    assert B.format_table(data).count("nn_mha") == 2
    json.dumps(data)  # plain JSON types only


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit):
        B.main(["--size", "2,8,15,4", "--json", str(tmp_path / "x.json")])
    assert "B,T,C,H" in capsys.readouterr().err
    with pytest.raises(ValueError):
        B.BenchSize(0, 8, 16, 4)
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"benchmark": "train"}))
    with pytest.raises(ValueError, match="not an attention-benchmark"):
        B.load_results(bad)


def test_default_sizes_state_the_large_reduction():
    assert (B.SMALL.batch, B.SMALL.seq_len, B.SMALL.n_embd, B.SMALL.num_heads) == (8, 64, 256, 4)
    assert (B.LARGE.seq_len, B.LARGE.n_embd, B.LARGE.num_heads) == (1024, 768, 12)
    assert B.LARGE.batch < 8 and "batch reduced from 8" in B.LARGE.note


def test_book_reference_is_timed_beside_the_table():
    result = B.bench_size(B.TINY, repeats=1, warmup=0)
    book = result["book_reference"]
    assert B.book_reference_available(), "make test installs llms-from-scratch (the book's class) for this check"
    assert book["variant"] == B.BOOK_REFERENCE and book["max_abs_diff_vs_split"] < 1e-5
    assert book["split_over_book_forward"] > 0 and book["split_over_book_forward_backward"] > 0
    assert book["split_over_book_forward_paired"] > 0 and book["split_over_book_forward_backward_paired"] > 0
    assert B.BOOK_REFERENCE not in [r["variant"] for r in result["results"]]


def test_command_prints_the_machine_and_its_ceiling(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert B.main(["--size", "1,4,8,2", "--repeats", "1", "--warmup", "0", "--no-backward", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    data = B.load_results(out)
    machine = data["machine"]
    assert machine["torch_threads"] == torch.get_num_threads() and set(machine["isa"]) >= {"avx2", "avx512f"}
    ceiling = machine["matmul_ceiling_gflops"]
    assert ceiling["before"] > 0 and ceiling["after"] > 0
    assert "ISA: " in printed and "fp32 matmul ceiling, measured in this run" in printed
    assert f"with {machine['torch_threads']} thread(s)" in printed


def _fake_size(times):
    """A measured size whose variants have the given (forward, forward+backward, forward min, fb min) in ms."""
    return {"label": "fake", "results": [
        {"variant": name, "forward_ms": f, "forward_backward_ms": fb, "forward_min_ms": fmin,
         "forward_backward_min_ms": fbmin} for name, (f, fb, fmin, fbmin) in times.items()]}


def test_size_checks_name_unordered_and_unstable_variants():
    checks = B.size_checks(_fake_size({"a": (1.0, 3.0, 0.9, 2.9), "b": (5.0, 4.0, 4.9, 3.9),
                                       "c": (2.0, 6.0, 1.0, 5.9), "d": (1.0, 3.1, 0.9, 2.0)}))
    assert checks == {"unordered": ["b"], "unstable": ["c", "d"]}
    # forward only: nothing to order
    assert B.size_checks(_fake_size({"a": (1.0, None, 1.0, None)})) == {"unordered": [], "unstable": []}


def test_a_size_is_measured_again_with_more_repeats_while_forward_is_not_below_forward_backward():
    calls, lines = [], []

    def measure(size, repeats, warmup, backward):
        calls.append(repeats)
        bad = len(calls) < 3  # the first two rounds are out of order
        return _fake_size({"split": (5.0 if bad else 1.0, 4.0, 1.0, 3.9)})

    result = B.bench_size_checked(B.TINY, repeats=4, rounds=3, measure=measure, progress=lines.append)
    assert calls == [4, 8, 16] and result["checks"]["rounds"] == 3 and result["checks"]["repeats"] == 16
    assert result["checks"]["unordered"] == [] and len(lines) == 2 and "measuring again with 8" in lines[0]
    calls.clear()
    stuck = B.bench_size_checked(B.TINY, repeats=2, rounds=2,
                                 measure=lambda *a: calls.append(a[1]) or _fake_size({"split": (5.0, 4.0, 5.0, 4.0)}))
    assert calls == [2, 4] and stuck["checks"]["unordered"] == ["split"]
    with pytest.raises(ValueError, match="at least 1"):
        B.bench_size_checked(B.TINY, rounds=0, measure=measure)
