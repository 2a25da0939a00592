"""The tang corpus build (engine.corpus.build) on a small fixture tarball: cleaning, conversion, order, bytes.

No network: the tarball is written here in the layout ``npm pack chinese-poetry`` produces.
"""

import hashlib
import io
import json
import tarfile

import pytest

from engine.corpus import TANG_ASSET, TANG_RECORDS, CorpusError, Record, read_records_asset
from engine.corpus.build import (
    build,
    clean_poem,
    clean_poems,
    drop_punctuation_lines,
    encode_asset,
    main,
    npm_pack,
    read_tarball,
    remove_notes,
)

# Traditional characters, as in the package; poet.tang.200 must come before poet.tang.1000 (numeric order).
FILE_200 = [
    {"title": "登鸛雀樓", "author": "王之渙", "paragraphs": ["白日依山盡，黃河入海流。", "欲窮千里目，更上一層樓。"],
     "id": "a"},
    {"title": "缺字", "author": "甲", "paragraphs": ["綬吐芽猶嫩，冰□已鏤津。"], "id": "b"},
    {"title": "空", "author": "乙", "paragraphs": [], "id": "c"},
]
FILE_1000 = [
    {"title": "江行", "author": "丙",
     "paragraphs": ["水急客舟（一作「行」）疾，山花拂面香。", "[爽]節在重九，物華新雨餘。"], "id": "d"},
    {"title": "組字", "author": "丁", "paragraphs": ["簪玉步河堤，妖韶援綠{𥫗/戢}。"], "id": "e"},
    {"title": "登鸛雀樓", "author": "朱斌", "paragraphs": ["白日依山盡，黃河入海流。", "欲窮千里目，更上一層樓。"],
     "id": "f"},
    {"title": "注", "author": "戊", "paragraphs": ["春眠不覺曉，（敦煌本", "作「春」）處處聞啼鳥。"], "id": "g"},
    {"title": "題□", "author": "己", "paragraphs": ["明月松間照，清泉石上流。"], "id": "h"},
]


def identity(text: str) -> str:
    return text


@pytest.fixture
def tarball(tmp_path):
    path = tmp_path / "chinese-poetry-2.0.1.tgz"
    with tarfile.open(path, "w:gz") as tar:
        for name, poems in [("package/dist/quantangshi/poet.tang.1000.json", FILE_1000),
                            ("package/dist/quantangshi/poet.tang.200.json", FILE_200),
                            ("package/dist/quantangshi/authors.tang.json", [{"name": "x"}]),
                            ("package/dist/songci/ci.song.0.json", [{"title": "not tang"}])]:
            data = json.dumps(poems, ensure_ascii=False).encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_remove_notes():
    assert remove_notes("水急客舟（一作「行」）疾") == "水急客舟疾"
    assert remove_notes("甲（注（内）注）乙") == "甲乙"  # nested notes go, innermost first
    assert remove_notes("[爽]節") == "爽節"
    assert remove_notes("（未闭") == "（未闭"  # an unbalanced note is left for the verse check to reject


def test_read_tarball_takes_tang_files_in_numeric_order(tarball):
    poems = read_tarball(tarball)
    assert [p["id"] for p in poems] == list("abcdefgh")


def test_read_tarball_without_tang_files(tmp_path):
    path = tmp_path / "empty.tgz"
    with tarfile.open(path, "w:gz"):
        pass
    with pytest.raises(ValueError, match="poet.tang"):
        read_tarball(path)


@pytest.mark.parametrize(
    "poem, reason",
    [
        (FILE_200[1], "missing_glyph"),
        (FILE_1000[4], "missing_glyph"),  # a □ in the title drops the poem too
        (FILE_200[2], "empty"),
        ({"title": "t", "author": "a", "paragraphs": ["（只有注）"]}, "empty"),
        (FILE_1000[1], "not_verse"),
        ({"title": "t", "author": "a", "paragraphs": ["一〖1〗二"]}, "not_verse"),
        ({"title": "t", "author": "a", "paragraphs": ["abc"]}, "not_verse"),
    ],
)
def test_clean_poem_drops(poem, reason):
    assert clean_poem(poem, identity) == (None, reason)


@pytest.mark.parametrize(
    "lines, kept, dropped",
    [
        (["春眠不覺曉，處處聞啼鳥。", "。"], ["春眠不覺曉，處處聞啼鳥。"], 1),
        (["。"], [], 1),
        (["「杜康家在此，一任君來沽。", "」。"], ["「杜康家在此，一任君來沽。」"], 1),  # the quotation keeps its end
        (["」", "一任君來沽。"], ["一任君來沽。"], 1),  # no line above: the mark goes with its line
        (["《苕溪》，", "白日依山盡。"], ["《苕溪》，", "白日依山盡。"], 0),  # punctuation beside ideographs stays
    ],
)
def test_drop_punctuation_lines(lines, kept, dropped):
    assert drop_punctuation_lines(lines) == (kept, dropped)


def test_a_note_before_the_full_stop_leaves_no_line_of_punctuation():
    poem = {"title": "t", "author": "a", "paragraphs": ["白日依山盡，黃河入海流。", "（〖1〗注。", "）。"]}
    assert clean_poem(poem, identity) == (Record("t", "a", "白日依山盡，黃河入海流。"), "kept")
    assert clean_poem({"title": "t", "author": "a", "paragraphs": ["。"]}, identity) == (None, "empty")


def test_the_shipped_asset_holds_no_line_of_punctuation_only():
    """The shipped asset is built with rule 2: none of its poems keeps a line that the rule drops."""
    records = read_records_asset(TANG_ASSET)
    lines = sum(drop_punctuation_lines(record.body.split("\n"))[1] for record in records)
    assert (len(records), lines) == (TANG_RECORDS, 0) == (55809, 0)


def test_clean_poems_keeps_verse_removes_notes_and_duplicates():
    records, outcome = clean_poems(read_tarball_list(), identity)
    assert [r.title for r in records] == ["登鸛雀樓", "江行", "注"]
    assert records[0] == Record("登鸛雀樓", "王之渙", "白日依山盡，黃河入海流。\n欲窮千里目，更上一層樓。")
    assert records[1].body == "水急客舟疾，山花拂面香。\n爽節在重九，物華新雨餘。"
    assert records[2].body == "春眠不覺曉，\n處處聞啼鳥。"  # a note across two lines is removed whole
    assert outcome == {"kept": 3, "missing_glyph": 2, "empty": 1, "not_verse": 1, "duplicate": 1}


def read_tarball_list():
    return FILE_200 + FILE_1000


def test_build_converts_to_simplified_and_is_deterministic(tarball, tmp_path, capsys):
    pytest.importorskip("opencc")
    digest, outcome = build(tmp_path / "a.jsonl.xz", tarball)
    again, _ = build(tmp_path / "b.jsonl.xz", tarball)
    data = (tmp_path / "a.jsonl.xz").read_bytes()
    assert digest == again == hashlib.sha256(data).hexdigest()
    assert data == (tmp_path / "b.jsonl.xz").read_bytes()
    records = read_records_asset(tmp_path / "a.jsonl.xz")
    assert records[0] == Record("登鹳雀楼", "王之涣", "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。")
    assert len(records) == outcome["kept"] == 3
    assert main(["build", "--tarball", str(tarball), "--out", str(tmp_path / "c.jsonl.xz")]) == 0
    assert f"sha256 {digest}" in capsys.readouterr().out


def test_build_reports_errors(tmp_path, capsys):
    pytest.importorskip("opencc")
    assert main(["build", "--tarball", str(tmp_path / "missing.tgz"), "--out", str(tmp_path / "x.xz")]) == 1
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "x.xz").exists()


def test_npm_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm there
    with pytest.raises(RuntimeError, match="npm was not found"):
        npm_pack(tmp_path)


def test_encode_asset_round_trip_and_bad_assets(tmp_path):
    records = [Record("静夜思", "李白", "床前明月光，\n疑是地上霜。"), Record("", "", "x")]
    path = tmp_path / "a.jsonl.xz"
    path.write_bytes(encode_asset(records))
    assert read_records_asset(path) == records
    assert encode_asset(records) == encode_asset(records)
    (tmp_path / "plain.xz").write_bytes(b"not xz at all")
    with pytest.raises(CorpusError, match="not a complete xz file"):
        read_records_asset(tmp_path / "plain.xz")
    import lzma

    (tmp_path / "bad.xz").write_bytes(lzma.compress(b'{"title":"t","author":"a"}\n'))
    with pytest.raises(CorpusError, match="line 1"):
        read_records_asset(tmp_path / "bad.xz")
    (tmp_path / "types.xz").write_bytes(lzma.compress(b'{"title":1,"author":"a","body":"b"}\n'))
    with pytest.raises(CorpusError, match="must be strings"):
        read_records_asset(tmp_path / "types.xz")
