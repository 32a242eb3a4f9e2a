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
    rows = run_ray_fill(job, settings, PredictOptions(top_k=2))
    assert rows == len(texts)
    records = [
        json.loads(line)
        for path in sorted((tmp_path / "out").glob("*.json"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert sorted(r["text"] for r in records) == sorted(texts)
    assert sorted((r["id"], r["text"]) for r in records) == list(enumerate(texts))  # id kept
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
    from tiankong.offline.ray_fill import run_ray_fill

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
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("画龙点[MASK]\n".encode("gbk"))
    cases.append((FillJob(gbk, tmp_path / "a"), BadDataFileError, "can't be read as UTF-8"))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"text": "画龙点[MASK]"}\nnot json\n', encoding="utf-8")
    cases.append((FillJob(mixed, tmp_path / "b"), BadDataFileError, "Line 2 of 'mixed.jsonl'"))
    # a line that is JSON but no object (a traceback from pandas), a field that changes type
    # (Ray turned the number 1 into the string "1", or stopped on the block)
    array = tmp_path / "array.jsonl"
    array.write_text('{"text": "画龙点[MASK]"}\n["a", "b"]\n', encoding="utf-8")
    cases.append((FillJob(array, tmp_path / "c"), BadDataFileError, "Line 2 .* not a JSON object"))
    typed = tmp_path / "typed.jsonl"
    typed.write_text(
        '{"text": "画龙点[MASK]", "id": 1}\n{"text": "好[MASK]", "id": null}\n'
        '{"text": "春眠不觉[MASK]", "id": "b"}\n',
        encoding="utf-8",
    )
    cases.append(
        (FillJob(typed, tmp_path / "d"), BadDataFileError, "Line 3 .* 'id' as a string, line 1")
    )
    after_null = tmp_path / "after_null.jsonl"  # a null first says nothing of the type
    after_null.write_text(
        '{"text": "a[MASK]", "id": null}\n{"text": "b[MASK]", "id": "x"}\n'
        '{"text": "c[MASK]", "id": 1}\n',
        encoding="utf-8",
    )
    cases.append(
        (
            FillJob(after_null, tmp_path / "e"),
            BadDataFileError,
            "Line 3 .* 'id' as a number, line 2",
        )
    )
    for job, error, words in cases:
        with pytest.raises(error, match=words):
            run_ray_fill(job, settings, PredictOptions())
    assert ray.is_initialized() == started  # refused before ray.init
