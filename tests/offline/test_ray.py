"""Ray on a local instance started by the test on loopback: Ray Data filling (and Ray Serve)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import ray

from tiankong import Settings
from tiankong.core.options import PredictOptions
from tiankong.offline.fill import FillJob

pytestmark = pytest.mark.processes  # starts processes: the CLI, a server, Ray or export workers


@pytest.fixture(scope="module")
def local_ray():
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    yield ray
    ray.shutdown()


def read_shards(folder: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted(folder.glob("part-*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


def test_fill_through_ray_data(local_ray, tiny_model_dir: Path, tmp_path: Path) -> None:
    from tiankong.offline.ray_fill import run_ray_fill

    texts = ["处处闻啼[MASK]。", "没有空", "手机没电了，赶紧去[MASK][MASK]。"] * 8
    source = tmp_path / "in.jsonl"
    source.write_text(
        "\n".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) for i, t in enumerate(texts))
        + "\n",
        encoding="utf-8",
    )
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=2)
    job = FillJob(source, tmp_path / "out", workers=2, batch_size=4)
    written = run_ray_fill(job, settings, PredictOptions(top_k=2))
    assert (written.rows, written.bad) == (len(texts), 8)  # "没有空" has no [MASK]
    records = read_shards(tmp_path / "out")
    # in input order (Ray's own writer wrote its blocks' files in no fixed order), ids kept
    assert [(r["id"], r["text"]) for r in records] == list(enumerate(texts))
    good = [r for r in records if r["error"] is None]
    bad = [r for r in records if r["error"] is not None]
    assert len(good) == 16 and len(bad) == 8
    assert all(r["error"].startswith("no_mask:") for r in bad)
    for record in good:
        result = json.loads(record["result"])
        assert record["sequence"] == result["sequence"] and "[MASK]" not in record["sequence"]
        assert len(result["predictions"]) == 2


def test_what_ray_data_would_stop_on_is_one_sentence_first(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A non-empty output folder (a second run doubled every row), input not in UTF-8 and a
    JSONL line that isn't JSON were tracebacks from Ray; they are refused before Ray starts."""
    from tiankong.errors import BadDataFileError, BadOptionError
    from tiankong.offline.ray_fill import checked_ray_input, run_ray_fill

    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    started = ray.is_initialized()  # this module's other test may have started a local Ray
    good = tmp_path / "in.txt"
    good.write_text("画龙点[MASK]\n", encoding="utf-8")
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "part-0.json").write_text("{}\n")
    cases = [
        (FillJob(good, tmp_path / "done"), BadOptionError, "is not empty"),
        (FillJob(good, good), BadOptionError, "is a file; name a folder"),
    ]

    def refused(name: str, content: str | bytes, out: str, error: type, words: str) -> None:
        """A case: the input ``name`` holding ``content``, refused with ``error`` ~ ``words``."""
        source = tmp_path / name
        if isinstance(content, bytes):
            source.write_bytes(content)
        else:
            source.write_text(content, encoding="utf-8")
        cases.append((FillJob(source, tmp_path / out), error, words))

    gbk = "画龙点[MASK]\n".encode("gbk")
    refused("gbk.txt", gbk, "a", BadDataFileError, "can't be read as UTF-8")
    refused("mixed.jsonl", '{"text": "画龙点[MASK]"}\nnot json\n', "b", BadDataFileError,
            "Line 2 of 'mixed.jsonl'")  # fmt: skip
    # a line that is JSON but no object (a traceback from pandas), a field that changes type
    # (Ray turned the number 1 into the string "1", or stopped on the block)
    refused("array.jsonl", '{"text": "画龙点[MASK]"}\n["a", "b"]\n', "c", BadDataFileError,
            "Line 2 .* not a JSON object")  # fmt: skip
    # a field name with a lone surrogate: four tracebacks from Arrow (a review)
    refused("surrogate.jsonl", '{"text": "好[MASK]", "k\\ud800": 1}\n', "q", BadDataFileError,
            "Line 1 .* a field name with a lone surrogate")  # fmt: skip
    # a result-named field after the first block was dropped without a word (a review)
    refused("late.jsonl", '{"text": "画龙点[MASK]"}\n{"text": "a[MASK]", "error": "x"}\n', "p",
            BadDataFileError, "Line 2 .* has the field 'error', the name of a result")  # fmt: skip
    refused(
        "typed.jsonl",
        '{"text": "画龙点[MASK]", "id": 1}\n{"text": "好[MASK]", "id": null}\n'
        '{"text": "春眠不觉[MASK]", "id": "b"}\n',
        "d", BadDataFileError, "Line 3 .* 'id' as a string, line 1",
    )  # fmt: skip
    refused(  # a null first says nothing of the type
        "after_null.jsonl",
        '{"text": "a[MASK]", "id": null}\n{"text": "b[MASK]", "id": "x"}\n'
        '{"text": "c[MASK]", "id": 1}\n',
        "e", BadDataFileError, "Line 3 .* 'id' as a number, line 2",
    )  # fmt: skip
    # options --ray can't honour: it wrote JSON shards for --output-format csv and no --errors
    # file, and has no checkpoint for --restart or --chunk-size
    cases += [
        (FillJob(good, tmp_path / "f", errors=tmp_path / "e.jsonl"), BadOptionError, "--errors"),
        (FillJob(good, tmp_path / "x.csv"), BadOptionError, "not CSV"),
        (FillJob(good, tmp_path / "g", output_format="csv"), BadOptionError, "not CSV"),
        (FillJob(good, tmp_path / "h", resume=False), BadOptionError, "no checkpoint"),
        (FillJob(good, tmp_path / "i", chunk_size=10), BadOptionError, "no checkpoint"),
    ]
    # --chunk-size typed at the default's value was taken (a review)
    with pytest.raises(BadOptionError, match="no checkpoint, so --restart and --chunk-size"):
        checked_ray_input(FillJob(good, tmp_path / "k"), typed={"chunk_size"})
    # nested values, which Arrow rewrote ({"a": 1} became {"a": 1.0, "b": null})
    refused(
        "nested.jsonl",
        '{"text": "a[MASK]", "meta": {"a": 1}}\n{"text": "b[MASK]", "meta": {"b": "x"}}\n',
        "j", BadDataFileError, "Line 1 .* 'meta' as an obj",
    )  # fmt: skip
    refused("listed.jsonl", '{"text": "a[MASK]", "tags": [1, 2.5]}\n', "k", BadDataFileError,
            "'tags' as a list")  # fmt: skip
    refused("short.csv", "id,text\n1,a[MASK]\n2\n", "l", BadDataFileError, "Line 3 .* 1 values")
    # a quote never closed: refused as fill without --ray refuses it (the check read on)
    refused("unclosed.csv", 'id,text\n1,画龙点[MASK]\n2,"守株待[MASK]\n3,亡羊补劳\n', "m",
            BadDataFileError, "Line 3 .* never closed")  # fmt: skip
    # a traceback each: Ray's CSV reader on an empty file, a ZeroDivisionError, Ray's
    # repartition, and the folder made only after Ray had started
    refused("empty.csv", "", "n", BadDataFileError, "is empty: it has no header row")
    # a header naming a column twice (it said "has 2 values"), a first record without the
    # field (refused as fill without --ray refuses it)
    refused("twice.csv", "text,id,id\n画龙点[MASK],1,2\n", "o", BadDataFileError,
            "names the column 'id' more than once")  # fmt: skip
    refused("nofield.jsonl", '{"content": "画龙点[MASK]"}\n', "p", BadDataFileError,
            "first record .* has no field 'text'")  # fmt: skip
    (tmp_path / "plain").write_text("x")
    cases += [
        (FillJob(good, tmp_path / "q", workers=0), BadOptionError, "at least 1"),
        (FillJob(good, tmp_path / "r", batch_size=0), BadOptionError, "at least 1"),
        (FillJob(good, tmp_path / "plain" / "sub"), BadOptionError, "can't be made"),
    ]
    for job, error, words in cases:
        with pytest.raises(error, match=words):
            run_ray_fill(job, settings, PredictOptions())
    assert ray.is_initialized() == started  # refused before ray.init


def test_ray_reads_the_values_fill_reads(local_ray, tmp_path: Path) -> None:
    """Arrow's type inference made the CSV value "01234" 1234, "NA" null and "true" true, and
    Ray's read_text kept a TXT file's byte-order mark and split lines at a lone "\r"; fill
    without --ray reads them all as written."""
    from tiankong.offline.fill import read_records
    from tiankong.offline.ray_fill import read_dataset

    table = tmp_path / "in.csv"
    table.write_text(
        '\ufeffzip,text,note\n01234,"多行\n文本[MASK]",NA\n00789,画龙点[MASK],true\n,,\n',
        encoding="utf-8",
    )
    rows = read_dataset(table, "csv").take_all()
    assert rows == [f for _, _, _, f in read_records(table, "csv", "text")]
    assert rows[0] == {"zip": "01234", "text": "多行\n文本[MASK]", "note": "NA"}
    lines = tmp_path / "in.txt"
    lines.write_bytes("\ufeff第一[MASK]\r\n二\r三[MASK]\n\n末[MASK]".encode())
    texts = [row["text"] for row in read_dataset(lines, "txt").take_all()]
    assert texts == [t for _, t, _, _ in read_records(lines, "txt", "text")]
    assert texts == ["第一[MASK]", "二\r三[MASK]", "", "末[MASK]"]


def test_ray_keeps_jsonl_values_as_written(local_ray, tiny_model_dir: Path, tmp_path: Path) -> None:
    """Ray's JSONL reader went through pandas: "01234" came back 1234, "1e3" 1000.0 and a date
    string a timestamp; a whole number beside a null was written 1.0; a blank line was dropped
    and a lone surrogate silently cut from the text it was in. Now each is kept as written, and
    the blank line and the surrogate are error rows, as without --ray."""
    from tiankong.offline.ray_fill import run_ray_fill

    source = tmp_path / "in.jsonl"
    lines = [
        '{"id": "01234", "code": "1e3", "day": "2024-01-02", "n": 1, "text": "好[MASK]"}',
        '{"id": "00789", "code": "x", "day": "2024-01-03", "n": null, "text": "\\ud800很[MASK]"}',
        "",
        '{"id": "5", "code": "y", "day": "d", "n": 2, "text": "画龙点[MASK]"}',
    ]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    job = FillJob(source, tmp_path / "out", workers=1, batch_size=2)
    assert run_ray_fill(job, settings, PredictOptions(top_k=1)).rows == 4
    first, second, blank, last = read_shards(tmp_path / "out")
    assert (first["id"], first["code"], first["day"], first["n"]) == (
        "01234",
        "1e3",
        "2024-01-02",
        1,
    )
    assert (second["id"], second["n"], last["n"]) == ("00789", None, 2)
    assert first["error"] is None and last["error"] is None
    assert str(second["error"]).startswith("bad_input:")  # the lone surrogate, shown as U+FFFD
    assert second["text"] == "\ufffd很[MASK]"
    assert blank["error"] == "bad_record: empty line"  # as fill's errors file (empty_text before)


@pytest.mark.parametrize(
    ("name", "content"), [("empty.jsonl", ""), ("empty.txt", ""), ("header.csv", "id,text\n")]
)
def test_an_empty_input_fills_nothing(
    local_ray, tiny_model_dir: Path, tmp_path: Path, name: str, content: str
) -> None:
    """It stopped with a TypeError traceback (the dataset had no columns)."""
    from tiankong.offline.ray_fill import run_ray_fill

    source = tmp_path / name
    source.write_text(content, encoding="utf-8")
    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    job = FillJob(source, tmp_path / "out", workers=1)
    assert run_ray_fill(job, settings, PredictOptions()).rows == 0
    assert list((tmp_path / "out").iterdir()) == []


def test_ray_fills_only_string_texts_and_writes_any_value(
    local_ray, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """A number or a boolean in the text's field was filled as the text "123.0" or "True",
    and null or a missing field as an empty text; fill without --ray calls each a bad record,
    and so does --ray now. A lone surrogate in another field stopped the writer with a
    UnicodeEncodeError and left a shard behind; it is written escaped, as it came."""
    from tiankong.offline.ray_fill import run_ray_fill

    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"text": 123}\n{"text": 4.5}\n{"text": null}\n', encoding="utf-8")
    job = FillJob(numbers, tmp_path / "out1", workers=1, batch_size=2)
    assert run_ray_fill(job, settings, PredictOptions(top_k=1)).rows == 3
    rows = read_shards(tmp_path / "out1")
    assert [r["error"] for r in rows] == ["bad_record: no string field 'text'"] * 3
    assert [r["text"] for r in rows] == [None] * 3
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        '{"content": "画龙点[MASK]", "note": "a\\udc00b", "flag": true}\n'
        '{"content": null, "note": "ok", "flag": false}\n'
        '{"note": "no content"}\n',
        encoding="utf-8",
    )
    job = FillJob(mixed, tmp_path / "out2", text_field="content", workers=1, batch_size=2)
    assert run_ray_fill(job, settings, PredictOptions(top_k=1)).rows == 3
    first, second, third = read_shards(tmp_path / "out2")
    assert first["error"] is None and first["note"] == "a\udc00b" and first["flag"] is True
    assert [second["error"], third["error"]] == ["bad_record: no string field 'content'"] * 2
    flags = tmp_path / "flags.jsonl"
    flags.write_text('{"text": true}\n{"text": false}\n', encoding="utf-8")
    job = FillJob(flags, tmp_path / "out3", workers=1)
    assert run_ray_fill(job, settings, PredictOptions(top_k=1)).rows == 2
    assert {r["error"] for r in read_shards(tmp_path / "out3")} == {
        "bad_record: no string field 'text'"
    }


def test_a_ray_actor_fills_its_rows_in_engine_batches_and_a_block_without_the_field(
    tiny_model_dir: Path,
) -> None:
    """The actor filled row by row, one engine call each (fill batches them); and a block in
    which no row has the text field has no such column, where the actor raised a KeyError that
    ended the job (a review: 1.4 million rows after one with a text). Called as Ray calls it."""
    import pyarrow as pa

    from tiankong.offline.ray_fill import FillActor

    settings = Settings(model=str(tiny_model_dir), engine="torch", threads=1)
    actor = FillActor(settings, PredictOptions(top_k=1), "text")
    calls: list[int] = []
    run = actor.masker.engine.mask_logits

    def counted(batch: object) -> object:
        calls.append(len(batch.input_ids))  # type: ignore[attr-defined]
        return run(batch)  # type: ignore[arg-type]

    actor.masker.engine.mask_logits = counted  # type: ignore[method-assign]
    texts = [f"第{i}句：春眠不觉晓，处处闻啼[MASK]。" for i in range(6)] + ["没有空"]
    table = actor(pa.table({"id": list(range(7)), "text": texts}))
    assert calls == [6]  # one engine call for the six texts that have a blank
    rows = table.to_pylist()
    assert [r["error"] for r in rows] == [None] * 6 + [rows[6]["error"]]
    assert rows[6]["error"].startswith("no_mask:") and rows[6]["text"] == "没有空"
    assert all("[MASK]" not in r["sequence"] for r in rows[:6])
    alone = actor(pa.table({"id": [1, 2], "note": ["x", "y"]})).to_pylist()
    assert [r["error"] for r in alone] == ["bad_record: no string field 'text'"] * 2
    assert [(r["id"], r["note"], r["text"]) for r in alone] == [(1, "x", None), (2, "y", None)]


def test_a_shard_that_cannot_be_written_is_one_sentence(tmp_path: Path) -> None:
    """A full disk was four chained tracebacks ending in OSError, exit 1 (a review)."""
    from tiankong.errors import BadDataFileError
    from tiankong.offline.ray_fill import write_shards

    (tmp_path / "out" / "part-000000.jsonl").mkdir(parents=True)  # no file can be made there
    with pytest.raises(BadDataFileError, match=r"^Writing the output folder '.*out' failed \("):
        write_shards([{"text": "好", "error": None}], tmp_path / "out")
