"""Opening refuses missing, truncated, foreign, stale and mismatched indexes; bad inputs."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers.implementations import BertWordPieceTokenizer

from tiankong.errors import (
    EXIT_BAD_INPUT,
    EXIT_MODEL_UNAVAILABLE,
    BadOptionError,
    IndexCorruptError,
    IndexInputError,
    IndexStaleError,
    IndexTokenizerMismatchError,
    IndexUnavailableError,
    mapping_for,
)
from tiankong.index import build_index, open_index, tokenizer_fingerprint
from tiankong.index.build import pack_rows
from tiankong.index.tokens import VOCAB_FILE


@pytest.fixture()
def copy_of(small_index: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(small_index, target)
    return target


def test_a_good_index_opens_with_its_checks(
    small_index: Path, corpus_file: Path, tokenizer
) -> None:
    index = open_index(small_index, tokenizer_fingerprint(tokenizer), [corpus_file])
    assert index.describe()["counts"]["passages"] == 11
    assert index.manifest["sources"][0]["sha256"]


def test_missing_index(tmp_path: Path) -> None:
    with pytest.raises(IndexUnavailableError, match="no index") as caught:
        open_index(tmp_path / "nowhere")
    assert mapping_for(caught.value).exit_code == EXIT_MODEL_UNAVAILABLE == 3


def test_a_text_file_given_as_the_index_says_how_to_build_one(tmp_path: Path) -> None:
    poems = tmp_path / "poems.txt"
    poems.write_text("春眠不觉晓，处处闻啼鸟。\n", encoding="utf-8")
    with pytest.raises(
        IndexUnavailableError, match="is a file, not an index folder; build"
    ) as caught:
        open_index(poems)
    assert f"tiankong index build {poems} -o DIR" in str(caught.value)
    # a JSONL or CSV needs its --field: the command told was refused without it (a review)
    notes = tmp_path / "notes.csv"
    notes.write_text("text\n春眠不觉晓\n", encoding="utf-8")
    with pytest.raises(IndexUnavailableError) as caught:
        open_index(notes)
    assert f"tiankong index build {notes} --field FIELD -o DIR" in str(caught.value)
    (other := tmp_path / "notes.md").write_text("春眠不觉晓\n", encoding="utf-8")
    with pytest.raises(IndexUnavailableError) as caught:
        open_index(other)
    assert "an index is built from .txt, .jsonl (.ndjson) or .csv files" in str(caught.value)


def test_folder_without_manifest_is_foreign(tmp_path: Path) -> None:
    (tmp_path / "tokens.bin").write_bytes(b"\0" * 8)
    with pytest.raises(IndexCorruptError, match="not a tiankong index"):
        open_index(tmp_path)


def test_foreign_manifest(copy_of: Path) -> None:
    (copy_of / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(IndexCorruptError, match="foreign"):
        open_index(copy_of)
    (copy_of / "manifest.json").write_text("{not json")
    with pytest.raises(IndexCorruptError, match="unreadable"):
        open_index(copy_of)


@pytest.mark.parametrize("name", ["tokens.bin", "suffix_array.bin", "characters.bin"])
def test_truncated_file(copy_of: Path, name: str) -> None:
    data = (copy_of / name).read_bytes()
    (copy_of / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexCorruptError, match="truncated") as caught:
        open_index(copy_of)
    assert mapping_for(caught.value).exit_code == 3


def test_missing_file(copy_of: Path) -> None:
    (copy_of / "suffix_array.bin").unlink()
    with pytest.raises(IndexCorruptError, match="incomplete"):
        open_index(copy_of)


def test_scrambled_suffix_array_of_the_right_size(copy_of: Path) -> None:
    index = open_index(copy_of)
    rows, bits = index.suffix_array, index.bits
    del index
    np.random.default_rng(0).shuffle(rows)
    pack_rows(rows, bits).tofile(copy_of / "suffix_array.bin")
    with pytest.raises(IndexCorruptError, match="out of order"):
        open_index(copy_of)


@pytest.mark.parametrize(
    ("name", "at", "value"),
    [
        ("characters.bin", None, b"\xff"),  # every entry past the last code point
        ("characters.bin", 4 * 5001, b"\xff\xff\xff\xff"),  # one token's character
        ("characters.bin", 4 * 5001, b"\x00\xd8\x00\x00"),  # a lone surrogate
        ("tokens.bin", 0, b"\xff\xff"),  # a token id past the vocabulary
    ],
)
def test_characters_that_do_not_decode_are_a_corrupt_index(
    copy_of: Path, name: str, at: int | None, value: bytes
) -> None:
    """A damaged characters.bin was a UnicodeDecodeError traceback at startup, or, one entry
    damaged, a 500 for every request of a batch that showed a 出处 (a review)."""
    path = copy_of / name
    data = bytearray(path.read_bytes())
    if at is None:
        data[:] = value * len(data)
    else:
        data[at : at + len(value)] = value
    path.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match="corrupt") as caught:
        open_index(copy_of)
    assert mapping_for(caught.value).exit_code == 3


def test_stale_index(small_index: Path, corpus_file: Path, tmp_path: Path) -> None:
    changed = tmp_path / corpus_file.name
    changed.write_text(corpus_file.read_text(encoding="utf-8") + "新的一行文字。\n")
    with pytest.raises(IndexStaleError, match="stale"):
        open_index(small_index, sources=[changed])
    with pytest.raises(IndexStaleError, match="gone"):
        open_index(small_index, sources=[tmp_path / "deleted.txt"])


def test_tokenizer_mismatch(small_index: Path) -> None:
    lowercase = BertWordPieceTokenizer(str(VOCAB_FILE), lowercase=True)._tokenizer
    with pytest.raises(IndexTokenizerMismatchError, match="different tokenizer") as caught:
        open_index(small_index, tokenizer_fingerprint(lowercase))
    assert mapping_for(caught.value).exit_code == 3


@pytest.mark.parametrize(
    ("name", "content"),
    [("empty.txt", ""), ("blank.txt", "\n  \n\t\n"), ("empty.jsonl", "\n")],
)
def test_empty_inputs(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(IndexInputError, match="has no text") as caught:
        build_index([path], tmp_path / "out", field="text", progress=False)
    assert mapping_for(caught.value).exit_code == EXIT_BAD_INPUT == 2
    assert not (tmp_path / "out").exists()


def test_empty_xz_input(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt.xz"
    path.write_bytes(lzma.compress(b""))
    with pytest.raises(IndexInputError, match="has no text"):
        build_index([path], tmp_path / "out", progress=False)


def test_bad_inputs(tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text('{"body": "画龙点睛"}\n', encoding="utf-8")
    with pytest.raises(IndexInputError, match="--field"):
        build_index([records], tmp_path / "out", progress=False)
    with pytest.raises(IndexInputError, match="no text field 'text'"):
        build_index([records], tmp_path / "out", field="text", progress=False)
    with pytest.raises(IndexInputError, match="does not exist"):
        build_index([tmp_path / "none.txt"], tmp_path / "out", progress=False)
    with pytest.raises(IndexInputError, match="is a folder; name the files"):
        build_index([tmp_path], tmp_path / "out", progress=False)
    (tmp_path / "n.jsonl").write_text('{"text": 5}\n', encoding="utf-8")
    with pytest.raises(IndexInputError, match="the field 'text' is a number, not text"):
        build_index([tmp_path / "n.jsonl"], tmp_path / "out", field="text", progress=False)
    (tmp_path / "n.jsonl").write_text('{"text": null}\n', encoding="utf-8")
    with pytest.raises(IndexInputError, match="the field 'text' is null, not text"):
        build_index([tmp_path / "n.jsonl"], tmp_path / "out", field="text", progress=False)
    (tmp_path / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(IndexInputError, match="not a supported input"):
        build_index([tmp_path / "x.pdf"], tmp_path / "out", progress=False)
    (tmp_path / "s.jsonl").write_text('{"text": "\\ud800画"}\n', encoding="utf-8")
    with pytest.raises(IndexInputError, match="surrogate"):
        build_index([tmp_path / "s.jsonl"], tmp_path / "out", field="text", progress=False)
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\xfa")  # UTF-16's byte-order mark first
    # the decoder's own text ('utf-8' codec can't decode byte ...) was the message
    with pytest.raises(
        IndexInputError,
        match=r"\(invalid start byte\); it looks like UTF-16: convert it \(iconv -f UTF-16 ",
    ):
        build_index([tmp_path / "bad.txt"], tmp_path / "out", progress=False)
    (tmp_path / "gbk.txt").write_bytes("画龙点睛\n".encode("gbk"))
    with pytest.raises(IndexInputError, match=r"save it as UTF-8 \(from GBK: iconv -f GBK "):
        build_index([tmp_path / "gbk.txt"], tmp_path / "out", progress=False)
    # a bad byte deep in a UTF-8 file, and Latin-1, were told to convert from GBK, with no line
    # (a review); a GBK CSV under an ASCII header is told both ways out
    (tmp_path / "deep.txt").write_bytes("画龙点睛\n".encode() * 50 + b"bad \xff\xfe line\n")
    with pytest.raises(IndexInputError) as refused:
        build_index([tmp_path / "deep.txt"], tmp_path / "out", progress=False)
    assert "deep.txt (line 51) can't be read as UTF-8 text" in refused.value.message
    assert "the lines before it are UTF-8, so mend or remove" in refused.value.message
    (tmp_path / "latin.txt").write_bytes("café\n".encode("latin-1"))
    with pytest.raises(IndexInputError, match=r"from the encoding it was written in \(iconv -f E"):
        build_index([tmp_path / "latin.txt"], tmp_path / "out", progress=False)
    (tmp_path / "gbk.csv").write_bytes("id,text\n1,画龙点睛\n".encode("gbk"))
    with pytest.raises(IndexInputError, match=r"\(line 2\) .*that line reads as GBK: if the whole"):
        build_index([tmp_path / "gbk.csv"], tmp_path / "out", field="text", progress=False)
    # a binary file was told "it looks like UTF-16", UTF-8 cut short "from GBK" (a review);
    # UTF-16 without its byte-order mark is still told so
    (tmp_path / "zip.txt").write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00\x8b\xe9\xff\x01")
    with pytest.raises(IndexInputError, match=r"it doesn't look like a text file"):
        build_index([tmp_path / "zip.txt"], tmp_path / "out", progress=False)
    (tmp_path / "cut.txt").write_bytes("画龙点睛".encode()[:-1])
    with pytest.raises(IndexInputError, match=r"it ends in the middle of a character"):
        build_index([tmp_path / "cut.txt"], tmp_path / "out", progress=False)
    (tmp_path / "u16.txt").write_bytes("画龙点睛\n春眠不觉晓\n".encode("utf-16-le"))
    with pytest.raises(IndexInputError, match=r"it looks like UTF-16"):
        build_index([tmp_path / "u16.txt"], tmp_path / "out", progress=False)
    # each told what it is: plain text, another compression, an xz stream cut short (all three
    # were "it is not xz, or it is cut short")
    (tmp_path / "fake.txt.xz").write_text("画龙点睛\n", encoding="utf-8")
    with pytest.raises(IndexInputError, match=r"fake.txt.xz is named .xz but isn't xz-compre"):
        build_index([tmp_path / "fake.txt.xz"], tmp_path / "out", progress=False)
    (tmp_path / "gz.txt.xz").write_bytes(gzip.compress("画龙点睛\n".encode()))
    with pytest.raises(IndexInputError, match=r"gz.txt.xz is gzip-compressed, not xz; "):
        build_index([tmp_path / "gz.txt.xz"], tmp_path / "out", progress=False)
    (tmp_path / "cut.txt.xz").write_bytes(lzma.compress(("画龙点睛\n" * 50).encode())[:40])
    with pytest.raises(IndexInputError, match=r"cut.txt.xz is a damaged or incomplete xz file"):
        build_index([tmp_path / "cut.txt.xz"], tmp_path / "out", progress=False)


def test_suffixes_are_read_in_any_case(tmp_path: Path) -> None:
    """N.TXT and C.JSONL were 'not a supported input' here while fill read them."""
    (tmp_path / "N.TXT").write_text("画龙点睛\n", encoding="utf-8")
    (tmp_path / "C.JSONL").write_text('{"text": "守株待兔"}\n', encoding="utf-8")
    one = build_index([tmp_path / "N.TXT"], tmp_path / "one", progress=False)
    assert [source["passages"] for source in one["sources"]] == [1]
    both = build_index(
        [tmp_path / "N.TXT", tmp_path / "C.JSONL"], tmp_path / "two", field="text", progress=False
    )
    assert [source["passages"] for source in both["sources"]] == [1, 1]
    # .ndjson is JSONL, as `tiankong fill` reads it (it was 'not a supported input' here)
    (tmp_path / "d.ndjson").write_text('{"text": "亡羊补牢"}\n', encoding="utf-8")
    lines = build_index([tmp_path / "d.ndjson"], tmp_path / "three", field="text", progress=False)
    assert [source["passages"] for source in lines["sources"]] == [1]


def test_jsonl_and_csv_fields(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(
        '{"text": "守株待兔", "id": 1}\n{"text": "多行\\n文本"}\n', encoding="utf-8"
    )
    (tmp_path / "b.csv").write_text('id,text\n1,画龙点睛\n2,"有,逗号"\n', encoding="utf-8")
    manifest = build_index(
        [tmp_path / "a.jsonl", tmp_path / "b.csv"], tmp_path / "out", field="text", progress=False
    )
    assert [s["passages"] for s in manifest["sources"]] == [2, 2]
    index = open_index(tmp_path / "out")
    assert index.passage_at(int(index.passage_tokens[1]))[0] == "多行 文本"
    assert index.passage_at(int(index.passage_tokens[3]))[0] == "有,逗号"


def test_a_byte_order_mark_is_not_text(tmp_path: Path) -> None:
    """As tiankong fill reads files: the BOM hid the CSV's first column name, broke the JSONL's
    first line and began the TXT's first passage."""
    (tmp_path / "a.csv").write_text("text,id\n画龙点睛,1\n", encoding="utf-8-sig")
    (tmp_path / "b.jsonl").write_text('{"text": "守株待兔"}\n', encoding="utf-8-sig")
    (tmp_path / "c.txt").write_text("亡羊补牢\n", encoding="utf-8-sig")
    build_index(
        [tmp_path / "a.csv", tmp_path / "b.jsonl"], tmp_path / "f", field="text", progress=False
    )
    build_index([tmp_path / "c.txt"], tmp_path / "t", progress=False)
    fields, lines = open_index(tmp_path / "f"), open_index(tmp_path / "t")
    assert [fields.passage_at(int(start))[0] for start in fields.passage_tokens] == [
        "画龙点睛",
        "守株待兔",
    ]
    assert lines.passage_at(int(lines.passage_tokens[0]))[0] == "亡羊补牢"


def test_every_passage_reads_back_as_it_was(tmp_path: Path) -> None:
    """The text is spelled from the tokens: rare characters ([UNK]), letters, digits and folded
    spaces come back exactly, and nothing is stored twice."""
    lines = [
        "春眠不觉晓，处处闻啼鸟。",
        "𠀀字与龘字是生僻字。",  # [UNK] twice: spelled from the exception table
        "iPhone 15 的电池",  # letters, digits, a space: kept verbatim
        "纯中文一行",
        "Ａ全角，ß",
    ]
    source = tmp_path / "lines.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = build_index([source], tmp_path / "out", progress=False)
    index = open_index(tmp_path / "out")
    read = [index.passage_at(int(start))[0] for start in index.passage_tokens]
    assert read == lines
    assert manifest["files"]["passages.txt"]["bytes"] < len(source.read_bytes()) // 2
    assert len(index.spelling_positions) >= 2 and len(index.verbatim_passages) >= 1
    assert index.manifest["files"]["suffix_array.bin"]["bits"] == (index.size - 1).bit_length()


def test_rebuild_replaces_an_index_but_not_other_folders(corpus_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    build_index([corpus_file], out, progress=False)
    build_index([corpus_file], out, progress=False)
    assert open_index(out).size > 0
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(IndexInputError, match="not an index"):
        build_index([corpus_file], other, progress=False)
    assert (other / "keep.txt").read_text() == "mine"


def test_an_input_inside_the_index_folder_is_not_replaced_with_it(
    corpus_file: Path, tmp_path: Path
) -> None:
    """The build replaces its folder whole: an input kept there was deleted by the rebuild."""
    out = tmp_path / "idx"
    build_index([corpus_file], out, progress=False)
    inside = out / "notes.txt"
    inside.write_text(corpus_file.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(IndexInputError, match="inside the index folder"):
        build_index([inside], out, progress=False)
    assert inside.is_file()


def test_an_index_under_a_file_is_refused_before_the_work(
    corpus_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(BadOptionError, match=r"afile' is a file, not a folder"):
        build_index([corpus_file], tmp_path / "afile" / "sub", progress=False)


def test_an_index_folder_given_as_a_link_is_refused(corpus_file: Path, tmp_path: Path) -> None:
    """The build replaces the folder it is given: a link would be replaced (rmtree refused it
    with a traceback after the work), not the folder it points to."""
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(BadOptionError, match="is a link"):
        build_index([corpus_file], tmp_path / "link", progress=False)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o755), (0o027, 0o750), (0o077, 0o700)])
def test_a_built_index_is_readable_as_the_umask_says(
    corpus_file: Path, tmp_path: Path, umask: int, mode: int
) -> None:
    """Not mkdtemp's 0700: the image's server (uid 10001) reads indexes mounted at /data; but
    a private umask keeps the folder private, as mkdir would."""
    before = os.umask(umask)
    try:
        build_index([corpus_file], tmp_path / "idx", progress=False)
    finally:
        os.umask(before)
    assert (tmp_path / "idx").stat().st_mode & 0o777 == mode


def test_an_index_named_like_a_file_is_refused(corpus_file: Path, tmp_path: Path) -> None:
    taken = tmp_path / "afile"
    taken.write_text("mine")
    with pytest.raises(BadOptionError, match="is a file"):
        build_index([corpus_file], taken, progress=False)
    assert taken.read_text() == "mine"


def test_a_field_no_input_has_is_not_recorded(tmp_path: Path) -> None:
    """TXT inputs have no fields: the manifest said the field was read."""
    path = tmp_path / "notes.txt"
    path.write_text("画龙点睛\n守株待兔\n", encoding="utf-8")
    manifest = build_index([path], tmp_path / "out", field="text", progress=False)
    assert manifest["recipe"]["field"] is None


def test_two_sources_of_one_name_in_two_folders_are_each_fresh(tmp_path: Path) -> None:
    """They were one entry by their name, and the unchanged pair was refused as stale."""
    first, second = tmp_path / "d1" / "n.txt", tmp_path / "d2" / "n.txt"
    for path, line in ((first, "春眠不觉晓，处处闻啼鸟。"), (second, "夜来风雨声，花落知多少。")):
        path.parent.mkdir()
        path.write_text(line + "\n", encoding="utf-8")
    build_index([first, second], tmp_path / "idx", progress=False)
    open_index(tmp_path / "idx", sources=[first, second])
    second.write_text("夜来风雨声，花落知多小。\n", encoding="utf-8")
    with pytest.raises(IndexStaleError, match=r"n\.txt changed since it was built"):
        open_index(tmp_path / "idx", sources=[first, second])


def test_an_index_whose_source_was_edited_since_is_refused_where_it_is_used(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """A textbook whose typo was fixed after the build kept its index: the index turned the
    right 少 back into the typo and quoted text no longer in the file, exit 0 (a review). A
    source deleted or moved is no change: the index holds its text. /info names sources only
    by their names."""
    from tiankong import FillMasker, Settings

    book = tmp_path / "textbook.txt"
    book.write_text("春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多小。\n", encoding="utf-8")
    folder = tmp_path / "idx"
    build_index([book], folder, progress=False)
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    masker = FillMasker.load(settings=settings, index=str(folder))
    shown = masker.index.describe()["sources"][0]
    assert shown["name"] == "textbook.txt" and not {"path", "mtime_ns"} & shown.keys()
    book.write_text("春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n", encoding="utf-8")
    with pytest.raises(IndexStaleError, match=r"was built from .*textbook\.txt, which has changed"):
        FillMasker.load(settings=settings, index=str(folder))
    book.unlink()
    assert FillMasker.load(settings=settings, index=str(folder)).memory is not None


def test_a_stale_indexs_rebuild_command_is_the_build_that_made_it(tmp_path: Path) -> None:
    """The hint said `tiankong index build FILES -o DIR`: without --field a JSONL build failed,
    and without --model the index built was refused by the model (a review)."""
    from tiankong.index.store import check_recorded_sources, read_manifest

    notes = tmp_path / "my notes.jsonl"
    notes.write_text('{"body": "春眠不觉晓，处处闻啼鸟。"}\n', encoding="utf-8")
    folder = tmp_path / "idx"
    build_index(
        [notes],
        folder,
        field="body",
        progress=False,
        tokenizer_name="my-bert",
        tokenizer_source="/models/my-bert",  # a local folder: its path, which /info hides
    )
    assert "source" not in open_index(folder).describe()["tokenizer"]
    notes.write_text('{"body": "夜来风雨声，花落知多少。"}\n', encoding="utf-8")
    with pytest.raises(IndexStaleError) as refused:
        check_recorded_sources(folder, read_manifest(folder))
    assert refused.value.message.endswith(
        f"rebuild it with `tiankong index build '{notes}' -o {folder} --field body --model "
        "/models/my-bert`."
    )


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m["files"]["tokens.bin"].update(dtype="<u8"),
        lambda m: m["files"]["tokens.bin"].update(dtype="x"),
        lambda m: m["files"]["tokens.bin"].pop("dtype"),
        lambda m: m["files"]["suffix_array.bin"].pop("bits"),
        lambda m: m["files"]["suffix_array.bin"].update(bits="many"),
        lambda m: m.pop("tokenizer"),
        lambda m: m.update(tokenizer=None),
        lambda m: m["files"]["tokens.bin"].update(dtype="(2,3"),  # a SyntaxError in numpy
        lambda m: m["files"]["suffix_array.bin"].update(bits=True),
        lambda m: m.pop("sources"),
        lambda m: m["sources"][0].pop("sha256"),
        lambda m: m.update(sources=["a.txt"]),
    ],
)
def test_a_damaged_manifest_whose_files_agree_is_corrupt_not_a_traceback(
    copy_of: Path, damage: Any
) -> None:
    """A manifest edited where the files' sizes still agree with it gave a ValueError, KeyError
    or TypeError traceback, exit 1, on predict, check and serve (a review)."""
    path = copy_of / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    damage(manifest)
    path.write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(IndexCorruptError, match=r"is damaged|is corrupt") as caught:
        open_index(copy_of)
    assert mapping_for(caught.value).exit_code == 3


def test_characters_no_reader_sees_are_not_kept_for_the_source(tmp_path: Path) -> None:
    """A zero-width space, a BEL and a soft hyphen in a corpus line were shown in 出处
    (守株\\u200b待兔, 画龙点睛\\x07): the tokenizer drops them, and now the passage does too;
    a control that is whitespace is folded to a space as the others are."""
    source = tmp_path / "c.txt"
    source.write_text(
        "守株\u200b待兔的故事\n画龙点睛\x07是成语\nA\u00adB画蛇添足\n一\x1f二\ufeff三\n"
        "风花雪月\ufe0f琴棋书画\U000e0100诗酒茶\n",
        encoding="utf-8",
    )
    build_index([source], tmp_path / "out", progress=False)
    index = open_index(tmp_path / "out")
    read = [index.passage_at(int(start))[0] for start in index.passage_tokens]
    assert read == [
        "守株待兔的故事",
        "画龙点睛是成语",
        "AB画蛇添足",
        "一 二三",
        "风花雪月琴棋书画诗酒茶",  # variation selectors: a glyph's pick (a verifying review)
    ]
