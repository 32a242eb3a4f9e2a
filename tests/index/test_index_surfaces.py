"""The corpus index on every surface: the library (FillMasker.load(index=...)), the CLI
(--index, TIANKONG_INDEX, index build, eval --compare-index) and HTTP ("index": false, /info).

A tiny random BERT with the real vocabulary knows nothing, so whatever it gets right about the
small fixture corpus comes from the index; with the index off, it must give exactly its own
numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from server_helpers import local_client
from tokenizers.implementations import BertWordPieceTokenizer

from tiankong import FillMasker, Settings
from tiankong.core.models import VOCAB_FILE
from tiankong.errors import BadOptionError, IndexTokenizerMismatchError, IndexUnavailableError
from tiankong.index import combine
from tiankong.index.grounding import choose_memory
from tiankong.model_sources import resolve_model
from tiankong.server import create_app

WEATHER = "今天天气很[MASK]，我们去公园散步。"
UNKNOWN = "鲸鲨[MASK]鳄鳌"  # no character of it is in the fixture corpus
WHOLE_WORD = "手机没电了，赶紧去[MASK][MASK]。"
IDIOM_CLOZE = "这一笔真是[BLANK]之笔。"
SETTINGS = Settings(engine="torch", threads=1)


@pytest.fixture(scope="module", autouse=True)
def no_plausibility_floor() -> Iterator[None]:
    """A tiny random model finds every real word absurd (its fills are peaked at random), so
    the plausibility rule would keep the index out of all of this module: these tests are about
    the surfaces, and the rule has its own tests (test_index_combine.py, test_index_evidence.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(combine, "MIN_MODEL_RATIO", 0.0)
        yield


@pytest.fixture(scope="module")
def grounded(tiny_model_dir: Path, small_index: Path) -> FillMasker:
    return FillMasker.load(str(tiny_model_dir), SETTINGS, index=str(small_index))


def test_a_user_model_has_no_index_by_default(tiny_masker: FillMasker) -> None:
    assert tiny_masker.memory is None
    assert tiny_masker.index.used == "none" and "not a bundled model" in tiny_masker.index.reason


def test_the_index_grounds_a_mask_with_its_evidence(
    grounded: FillMasker, tiny_masker: FillMasker
) -> None:
    best = grounded.predict(WEATHER).masks[0][0]
    assert best.token == "好"
    assert best.memory is not None and best.memory["count"] == 1
    assert best.memory["match"] in best.memory["example"] and "很好" in best.memory["match"]
    alone = {c.token: c.score for c in tiny_masker.predict(WEATHER, top_k=50).masks[0]}
    assert best.model_score == pytest.approx(alone.get("好", best.model_score), abs=1e-9)
    assert best.score > best.model_score  # the index raised it


def test_with_no_match_or_index_off_the_numbers_are_the_models(
    grounded: FillMasker, tiny_masker: FillMasker
) -> None:
    for text, changes in ((UNKNOWN, {}), (WEATHER, {"index": False})):
        with_index = grounded.predict(text, top_k=10, **changes).masks[0]
        alone = tiny_masker.predict(text, top_k=10).masks[0]
        assert [(c.token, c.score) for c in with_index] == [(c.token, c.score) for c in alone]
        assert all(c.memory is None and c.model_score == c.score for c in with_index)


def test_whole_word_candidates_and_blank_fills_carry_evidence(grounded: FillMasker) -> None:
    sequence = grounded.predict(WHOLE_WORD, mode="whole_word").sequences[0]
    assert sequence.fill == "充电" and sequence.memory is not None
    # its longest context: the whole left side and the full stop (the 电脑 line differs)
    assert sequence.memory["match"] == "手机没电了，赶紧去充电。" and sequence.memory["count"] == 1
    assert sequence.model_score is not None
    assert sequence.score > sequence.model_score
    ranked = grounded.predict(IDIOM_CLOZE, candidates=("画蛇添足", "画龙点睛")).candidates
    assert [c.option for c in ranked] == ["画龙点睛", "画蛇添足"]
    assert ranked[0].memory is not None and ranked[0].memory["match"].startswith(
        "这一笔真是画龙点睛"
    )
    # unsupported: weighed by the supported option's model share, as a mask's row is
    assert ranked[1].memory is None and 0 < ranked[1].score < ranked[1].model_score
    blank = grounded.predict("今天天气很[BLANK]，我们去公园散步。").sequences[0]
    assert blank.fill == "好" and blank.memory is not None
    off = grounded.predict(WHOLE_WORD, mode="whole_word", index=False).sequences
    assert all(s.memory is None and s.score == s.model_score for s in off)


def test_an_unusable_or_foreign_index_is_an_error(
    tiny_model_dir: Path, small_index: Path, tmp_path: Path
) -> None:
    with pytest.raises(IndexUnavailableError, match="no index"):
        FillMasker.load(str(tiny_model_dir), SETTINGS, index=str(tmp_path / "nothing"))
    lowercase = BertWordPieceTokenizer(str(VOCAB_FILE), lowercase=True)
    model = resolve_model(str(tiny_model_dir))
    with pytest.raises(IndexTokenizerMismatchError):
        choose_memory(str(small_index), model, lowercase)  # type: ignore[arg-type]


def test_bundled_model_default_is_the_bundled_index() -> None:
    """The issue's example: default `predict "画龙点[MASK]"` -> 睛, with its memory."""
    masker = FillMasker.load()
    assert masker.index.used == "bundled"
    best = masker.predict("画龙点[MASK]").masks[0][0]
    assert best.token == "睛" and best.memory is not None and best.memory["match"] == "画龙点睛"
    plain = FillMasker.load(index="none").predict("画龙点[MASK]").masks[0]
    assert all(c.memory is None for c in plain) and plain[0].token != "睛"
    # as predict(index=False) spells it: it was "--index must be a string", a CLI flag's words
    assert FillMasker.load(index=False).index.used == "none"
    with pytest.raises(BadOptionError, match=r"^index must be auto, bundled, none or an index"):
        FillMasker.load(index=True)


# --- HTTP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(grounded: FillMasker, tiny_model_dir: Path) -> Iterator[TestClient]:
    app = create_app(Settings(engine="torch", threads=1, model=str(tiny_model_dir)), grounded)
    with local_client(app) as test_client:
        yield test_client


def test_http_routes_show_evidence_and_take_index_false(
    client: TestClient, grounded: FillMasker
) -> None:
    on = client.post("/predict", json={"text": WEATHER}).json()
    assert on["predictions"][0]["token"] == "好" and on["predictions"][0]["memory"]["count"] == 1
    assert set(on["predictions"][0]) >= {"score", "model_score", "memory"}
    off = client.post("/predict", json={"text": WEATHER, "index": False}).json()
    alone = grounded.predict(WEATHER, index=False).masks[0]
    assert [(c["token"], c["score"]) for c in off["predictions"]] == [
        (c.token, c.score) for c in alone
    ]
    assert all(c["memory"] is None for c in off["predictions"])
    got = client.get("/predict", params={"text": WEATHER, "index": "false"}).json()
    assert got["predictions"] == off["predictions"]  # the cache keeps the two apart
    batch = client.post(
        "/batch_predict", json={"texts": [WEATHER, WHOLE_WORD], "mode": "whole_word"}
    ).json()["results"]
    assert batch[1]["sequences"][0]["fill"] == "充电" and batch[1]["sequences"][0]["memory"]
    batch_off = client.post("/batch_predict", json={"texts": [WEATHER], "index": False}).json()[
        "results"
    ]
    assert batch_off[0]["predictions"] == off["predictions"]
    hf = client.post("/", json={"inputs": WEATHER, "parameters": {"top_k": 5}}).json()
    assert [c["score"] for c in hf] == pytest.approx([c.score for c in alone])  # the model's own
    bad = client.post("/predict", json={"text": WEATHER, "index": "no"})
    assert bad.status_code == 422


def test_info_describes_the_index(client: TestClient, small_index: Path) -> None:
    index = client.get("/info").json()["index"]
    # by the folder's own name, as a model is: a client was shown the server's paths
    assert index["used"] == small_index.name and index["setting"] == "folder"
    assert str(small_index.parent) not in json.dumps(client.get("/info").json())
    assert index["counts"]["passages"] == 11 and index["sources"][0]["name"] == "small.txt"
    assert index["tokenizer"]["name"] == "bert-base-chinese" and index["bytes"] > 0


# --- CLI -------------------------------------------------------------------------------------


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiankong", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})},
    )


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
def test_cli_index_build_predict_and_errors(
    tiny_model_dir: Path, corpus_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "idx"
    built = run_cli("index", "build", str(corpus_file), "-o", str(out))
    assert (
        built.returncode == 0 and "11 passages" in built.stderr and "from 1 file " in built.stderr
    )
    base = ("predict", WEATHER, "--json", "-m", str(tiny_model_dir), "--engine", "onnx")
    on = run_cli(*base, env={"TIANKONG_INDEX": str(out)})  # the env twin
    assert on.returncode == 0, on.stderr
    first = json.loads(on.stdout)["predictions"][0]
    assert first["token"] == "好" and first["memory"]["count"] == 1
    off = json.loads(run_cli(*base, "--index", "none").stdout)["predictions"][0]
    assert off["memory"] is None and off["score"] == off["model_score"]
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    failed = run_cli("index", "build", str(empty), "-o", str(tmp_path / "x"))
    assert failed.returncode == 2 and failed.stderr.count("error:") == 1
    assert "Traceback" not in failed.stderr
    (out / "suffix_array.bin").write_bytes(b"junk")
    for command in (base, ("serve", "-m", str(tiny_model_dir), "--engine", "onnx")):
        broken = run_cli(*command, "--index", str(out))
        assert broken.returncode == 3 and "truncated or damaged" in broken.stderr


def test_an_index_for_a_model_that_reads_text_differently(
    tiny_model_dir: Path, corpus_file: Path, tmp_path: Path
) -> None:
    """A model whose tokenizer lower-cases (BertTokenizerFast's default) could use neither the
    bundled index nor one `tiankong index build` made (always bert-base-chinese's tokenizer),
    and the message said to rebuild with "the model's tokenizer", which the CLI couldn't do.
    `index build --model` reads the text as the model does, and the refusal names it."""
    import shlex
    import shutil

    from tiankong import FillMasker, Settings
    from tiankong.errors import IndexTokenizerMismatchError

    lower = tmp_path / "lower case 模型"  # a path the message's command quotes
    shutil.copytree(tiny_model_dir, lower)
    tokenizer_json = lower / "tokenizer.json"
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    data["normalizer"]["lowercase"] = True
    tokenizer_json.write_text(json.dumps(data), encoding="utf-8")
    config_file = lower / "tokenizer_config.json"  # where transformers reads it from
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    config_file.write_text(json.dumps({**config, "do_lower_case": True}), encoding="utf-8")
    settings = Settings(engine="torch", threads=1)
    with pytest.raises(IndexTokenizerMismatchError) as refused:
        FillMasker.load(str(lower), settings, index="bundled")
    assert refused.value.message.startswith("The bundled index reads its text with")
    quoted = shlex.quote(str(lower.resolve()))
    assert f"tiankong index build FILES -o DIR --model {quoted}` and" in refused.value.message
    assert quoted.startswith("'")  # pasted into a shell, the folder is one argument
    plain = tmp_path / "plain"
    assert run_cli("index", "build", str(corpus_file), "-o", str(plain)).returncode == 0
    with pytest.raises(IndexTokenizerMismatchError, match="was built with another tokenizer"):
        FillMasker.load(str(lower), settings, index=str(plain))
    own = tmp_path / "own"
    built = run_cli("index", "build", str(corpus_file), "-o", str(own), "--model", str(lower))
    assert built.returncode == 0, built.stderr
    masker = FillMasker.load(str(lower), settings, index=str(own))
    first = masker.predict(WEATHER).masks[0][0]
    assert first.token == "好" and first.memory is not None
    missing = run_cli(
        "index",
        "build",
        str(corpus_file),
        "-o",
        str(tmp_path / "x"),
        "--model",
        str(tmp_path / "nowhere"),
    )
    assert missing.returncode == 3 and missing.stderr.count("error:") == 1


@pytest.mark.usefixtures("onnx_exports")  # --engine onnx starts without torch
def test_cli_fill_and_eval_compare_index(
    tiny_model_dir: Path, small_index: Path, tmp_path: Path
) -> None:
    source = tmp_path / "in.txt"
    source.write_text(f"{WEATHER}\n{UNKNOWN}\n", encoding="utf-8")
    filled = run_cli(
        "fill", str(source), "-o", str(tmp_path / "out.jsonl"), "-m", str(tiny_model_dir),
        "--engine", "onnx", "--index", str(small_index),
    )  # fmt: skip
    assert filled.returncode == 0, filled.stderr
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert rows[0]["predictions"][0]["memory"]["count"] == 1
    assert rows[1]["predictions"][0]["memory"] is None
    cloze = tmp_path / "cloze.jsonl"
    cloze.write_text(
        json.dumps({"category": "weather", "text": WEATHER, "answers": ["好"]}, ensure_ascii=False)
        + "\n",
        encoding="utf-8",
    )
    args = ("eval", str(cloze), "-m", str(tiny_model_dir), "--engine", "onnx")
    report = tmp_path / "report.json"
    compared = run_cli(*args, "--index", str(small_index), "--compare-index", "--json", str(report))
    assert compared.returncode == 0, compared.stderr
    without, grounded = json.loads(report.read_text())["reports"]
    assert (without["index"], grounded["index"]) == ("none", small_index.name)
    assert grounded["overall"]["top1"] == 1.0
    # a user model has no index by default: refused before the model loads (it was exported
    # and measured first, on a cold cache: a review)
    cold = tmp_path / "cold-cache"
    refused = run_cli(*args, "--compare-index", env={"TIANKONG_ONNX_CACHE_DIR": str(cold)})
    assert refused.returncode == 2 and "--compare-index needs a corpus index" in refused.stderr
    assert refused.stderr.count("--index bundled or --index DIR") == 1  # said twice before
    assert "once (later runs reuse it)" not in refused.stderr and not cold.exists()


def test_evidence_offsets_from_a_passage_prefix_equal_the_whole_passage(small_index: Path) -> None:
    """Evidence tokenizes only the start of a long passage; the offsets it uses must be the
    whole passage's (a word cut by the prefix, iPhone or 15, is not trusted)."""
    from tiankong.index import BlankLookup, open_index

    lookup = BlankLookup(open_index(small_index))
    line = "他在iPhone 15上读了3遍《静夜思》，床前明月光。" * 6
    whole = lookup.tokenizer.encode(line, add_special_tokens=False).offsets
    for needed in range(1, len(whole) + 1):
        assert lookup.token_offsets(line, needed)[:needed] == whole[:needed]
