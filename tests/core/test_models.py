"""Model sources: bundled registry, local folders, hub ids offline, and every failure sentence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiankong.core.models import BUNDLED_MODELS, DEFAULT_MODEL, VOCAB_FILE
from tiankong.errors import ModelUnavailableError
from tiankong.model_sources import resolve_model


def test_local_folder_resolves(tiny_model_dir: Path) -> None:
    resolved = resolve_model(str(tiny_model_dir))
    assert resolved.kind == "local" and resolved.path == tiny_model_dir.resolve()


def test_missing_folder_is_one_clear_sentence(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist or is not a directory"):
        resolve_model(str(tmp_path / "nope"))


def test_hub_id_offline_and_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(ModelUnavailableError) as caught:
        resolve_model("google-bert/bert-base-chinese")
    message = str(caught.value)
    assert "google-bert/bert-base-chinese" in message
    assert "offline mode is on" in message and "--model" in message
    assert "\n" not in message


def test_invalid_hub_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="neither a bundled model"):
        resolve_model("not a valid id!!")


def test_not_a_masked_lm(tmp_path: Path, tiny_model_dir: Path) -> None:
    from tiny_bert import build_tiny_bert

    folder = build_tiny_bert(tmp_path / "cls", architecture="BertForSequenceClassification")
    with pytest.raises(ModelUnavailableError, match="not a masked language model"):
        resolve_model(str(folder))


def copy_with_mask_token(tiny_model_dir: Path, folder: Path, token: str) -> Path:
    """A copy of the tiny model whose tokenizer.json calls [MASK] ``token``."""
    import shutil

    shutil.copytree(tiny_model_dir, folder)
    tokenizer_json = folder / "tokenizer.json"
    tokenizer_json.write_text(
        tokenizer_json.read_text(encoding="utf-8").replace("[MASK]", token), encoding="utf-8"
    )
    return folder


def copy_with_config(tiny_model_dir: Path, folder: Path, **changes: object) -> Path:
    """A copy of the tiny model with ``changes`` in its config.json (None: the key removed)."""
    import shutil

    shutil.copytree(tiny_model_dir, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(changes)
    config = {key: value for key, value in config.items() if value is not None}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_tokenizer_without_mask_token(tmp_path: Path, tiny_model_dir: Path) -> None:
    folder = copy_with_mask_token(tiny_model_dir, tmp_path / "nomask", "[MAKS]")
    tokenizer_json = folder / "tokenizer.json"
    with pytest.raises(ModelUnavailableError, match="has no \\[MASK\\] token"):
        resolve_model(str(folder))
    # the same check for a folder that only has vocab.txt
    tokenizer_json.unlink()
    vocab = VOCAB_FILE.read_text(encoding="utf-8").replace("[MASK]\n", "[MAKS]\n")
    (folder / "vocab.txt").write_text(vocab, encoding="utf-8")
    with pytest.raises(ModelUnavailableError, match="has no \\[MASK\\] token"):
        resolve_model(str(folder))


def test_a_sentencepiece_mask_token_is_named(tmp_path: Path, tiny_model_dir: Path) -> None:
    """An XLM-R-style vocabulary was said to have no mask token at all; it has <mask>."""
    folder = copy_with_mask_token(tiny_model_dir, tmp_path / "spm", "<mask>")
    with pytest.raises(ModelUnavailableError, match="its mask token is <mask>"):
        resolve_model(str(folder))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # custom code: transformers asked on a terminal, then ran the folder's Python (with
        # "y"), or the load failed as if the weights were corrupt
        (
            {"auto_map": {"AutoModelForMaskedLM": "modeling.Glyce"}, "model_type": "glycebert"},
            "Python code of its own",
        ),
        # RoCBert's inputs are more than token ids: its answers were wrong, exit 0
        ({"model_type": "roc_bert"}, "shape and pronunciation ids"),
        # no model_type: transformers can't load it, and the export's message blamed the
        # weights ("could not be loaded for export (ValueError)…", a review)
        ({"model_type": None}, "no model_type in its config.json"),
    ],
)
def test_a_model_tiankong_would_answer_wrongly_or_not_safely_is_refused(
    tmp_path: Path, tiny_model_dir: Path, changes: dict[str, object], message: str
) -> None:
    folder = copy_with_config(tiny_model_dir, tmp_path / "odd", **changes)
    with pytest.raises(ModelUnavailableError, match=message):
        resolve_model(str(folder))


def test_a_known_type_with_an_auto_map_still_loads(tmp_path: Path, tiny_model_dir: Path) -> None:
    """transformers loads a BERT whose config carries an auto_map natively (trust_remote_code
    off): only a type it doesn't know needs the folder's code (a code review)."""
    auto_map = {"AutoModelForMaskedLM": "modeling.Custom"}
    folder = copy_with_config(tiny_model_dir, tmp_path / "bert-automap", auto_map=auto_map)
    assert resolve_model(str(folder)).path == folder


def test_a_type_without_a_masked_lm_head_is_named_by_the_torch_engine(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """GPT-2's config without architectures: the torch engine blamed missing, truncated or
    corrupt weights (the export named the type)."""
    from tiankong import FillMasker, Settings

    folder = copy_with_config(
        tiny_model_dir, tmp_path / "gpt2ish", architectures=None, model_type="gpt2"
    )
    with pytest.raises(ModelUnavailableError, match="of type 'gpt2', which has no masked") as got:
        FillMasker.load(str(folder), Settings(engine="torch", threads=1, index="none"))
    assert "corrupt" not in str(got.value)


def test_vocab_only_folder_loads(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Older HF folders have vocab.txt and no tokenizer.json; the encoder builds it."""
    import shutil

    from tiankong.core.text import TextEncoder, TextLimits

    folder = tmp_path / "vocabonly"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer.json").unlink()
    shutil.copy(VOCAB_FILE, folder / "vocab.txt")
    resolve_model(str(folder))
    from_vocab = TextEncoder.from_folder(folder, TextLimits())
    from_json = TextEncoder.from_folder(tiny_model_dir, TextLimits())
    text = "他说：“WiFi很好用！”[MASK]ok 123"
    assert from_vocab.prepare(text).input_ids == from_json.prepare(text).input_ids


def test_a_vocab_only_folder_keeps_its_added_tokens(tmp_path: Path, tiny_model_dir: Path) -> None:
    """added_tokens.json (or tokenizer_config's added_tokens_decoder) past vocab.txt: the tokens
    were read as pieces, so the model answered another text. Ids that can't be reproduced are
    one sentence, not a guess."""
    import shutil

    from tiankong.core.text import TextEncoder, TextLimits

    folder = tmp_path / "added"
    shutil.copytree(tiny_model_dir, folder)
    (folder / "tokenizer.json").unlink()
    shutil.copy(VOCAB_FILE, folder / "vocab.txt")
    (folder / "added_tokens.json").write_text(json.dumps({"哈哈哈": 21128, "ChatGPT": 21129}))
    encoder = TextEncoder.from_folder(folder, TextLimits())
    ids = encoder.prepare("哈哈哈ChatGPT真[MASK]").input_ids
    assert ids[1:3] == [21128, 21129]
    (folder / "added_tokens.json").write_text(json.dumps({"哈哈哈": 30000}))
    with pytest.raises(ModelUnavailableError, match="adds '哈哈哈' at id 30000"):
        TextEncoder.from_folder(folder, TextLimits())
    (folder / "added_tokens.json").write_text('{"哈哈哈": 21128,')  # cut short
    with pytest.raises(ModelUnavailableError, match="unreadable or corrupt"):
        TextEncoder.from_folder(folder, TextLimits())


def test_missing_config_and_weights(tmp_path: Path, tiny_model_dir: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelUnavailableError, match=r"has no config\.json"):
        resolve_model(str(empty))
    (empty / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ModelUnavailableError, match="has no weights"):
        resolve_model(str(empty))


def test_a_model_without_a_trained_masked_lm_head_is_refused(tmp_path: Path) -> None:
    """An ELECTRA discriminator is a *ForPreTraining: transformers built it a random generator
    head, and its answers were random, with exit 0. Both load paths (torch, the export) refuse."""
    import torch
    from transformers import BertTokenizer, ElectraConfig, ElectraForPreTraining

    from tiankong.engines.torch_engine import TorchEngine
    from tiankong.export.export import load_masked_lm

    torch.manual_seed(0)
    folder = tmp_path / "discriminator"
    config = ElectraConfig(
        vocab_size=21128, embedding_size=32, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=64, tokenizer_class="BertTokenizer",
    )  # fmt: skip
    ElectraForPreTraining(config).save_pretrained(folder)
    BertTokenizer(str(VOCAB_FILE)).save_pretrained(folder)
    resolve_model(str(folder))  # the folder itself is fine: a *ForPreTraining
    with pytest.raises(ModelUnavailableError, match="no trained masked-LM head"):
        load_masked_lm(folder)
    with pytest.raises(ModelUnavailableError, match="no trained masked-LM head"):
        TorchEngine(folder, threads=1)


def test_sharded_weights_load(tmp_path: Path, tiny_model_dir: Path) -> None:
    """pytorch_model-0000N-of-0000M.bin with its index, as transformers saves a large model:
    refused as 'has no weights' before."""
    import torch
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    from tiankong.engines.torch_engine import TorchEngine

    folder = tmp_path / "sharded"
    model = AutoModelForMaskedLM.from_pretrained(tiny_model_dir)
    model.config.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    state = model.state_dict()
    names = sorted(state)
    halves = {
        "pytorch_model-00001-of-00002.bin": names[::2],
        "pytorch_model-00002-of-00002.bin": names[1::2],
    }
    for file, part in halves.items():
        torch.save({name: state[name].contiguous() for name in part}, folder / file)
    weight_map = {name: file for file, part in halves.items() for name in part}
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (folder / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    resolve_model(str(folder))
    TorchEngine(folder, threads=1)


def test_bundled_registry_is_data() -> None:
    assert DEFAULT_MODEL == BUNDLED_MODELS[0].name == "tiankong-mini-zh"
    with pytest.raises(ModelUnavailableError, match="bundled models are: tiankong-mini-zh"):
        resolve_model("bundled:nope")


def test_a_tokenizer_that_is_not_the_models_is_refused(
    tmp_path: Path, tiny_model_dir: Path
) -> None:
    """transformers 5 ignores ``BertTokenizerFast(vocab_file=...)`` and saves a tokenizer of the
    five special tokens: every character read as [UNK], every answer an id it has no token for
    (empty strings), exit 0. Such a tokenizer, or one with ids past the model's scores, is one
    sentence before the engine starts."""
    import shutil

    from tiankong import FillMasker, Settings

    folder = tmp_path / "specials"
    shutil.copytree(tiny_model_dir, folder)
    tokenizer_json = folder / "tokenizer.json"
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    data["model"]["vocab"] = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"])}
    data["model"]["vocab"]["[MASK]"] = 4
    data["added_tokens"] = [
        t for t in data["added_tokens"] if t["content"] in data["model"]["vocab"]
    ]
    for token in data["added_tokens"]:
        token["id"] = data["model"]["vocab"][token["content"]]
    tokenizer_json.write_text(json.dumps(data), encoding="utf-8")
    settings = Settings(engine="torch", threads=1, index="none")
    with pytest.raises(ModelUnavailableError, match="has only special tokens \\(5 of the model's"):
        FillMasker.load(str(folder), settings)
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["vocab_size"] = 4  # ids past the model's scores
    config_file.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ModelUnavailableError, match="token ids up to 4, but the model scores 4"):
        FillMasker.load(str(folder), settings)


def test_ids_a_padded_vocabulary_has_no_token_for_are_never_answers(tmp_path: Path) -> None:
    """A model may score more ids than its tokenizer spells (a vocabulary padded to a round
    size). Those ids decode to nothing; given the best scores here, they must not be answers."""
    import torch
    from tiny_bert import build_tiny_bert
    from transformers import BertForMaskedLM

    from tiankong import FillMasker, Settings

    folder = build_tiny_bert(tmp_path / "padded")
    model = BertForMaskedLM.from_pretrained(folder)
    model.resize_token_embeddings(model.config.vocab_size + 64)
    with torch.no_grad():
        model.cls.predictions.bias[-64:] = 100.0  # the padding would win every blank
    model.save_pretrained(folder)
    masker = FillMasker.load(str(folder), Settings(engine="torch", threads=1, index="none"))
    answers = masker.predict("画龙点[MASK]", top_k=5).masks[0]
    assert all(answer.token and answer.token_id < 21128 for answer in answers)
    # the constraint and whole-word masks are a row's width, not the tokenizer's (IndexError)
    for options in (
        {"preset": "chinese_only"},
        {"exclude": ["睛"]},
        {"allowed": ["睛", "笔"]},
        {"mode": "whole_word"},
    ):
        result = masker.predict("画龙点[MASK]", top_k=3, **options)
        assert all(answer.token and answer.token_id < 21128 for answer in result.masks[0])
    blank = masker.predict("画龙点[BLANK]", top_k=3).sequences
    assert blank and all(sequence.fill for sequence in blank)


@pytest.mark.parametrize("engine", ["torch", "onnx"])
def test_a_model_whose_scores_are_not_numbers_is_refused_at_load(
    tmp_path: Path, tiny_model_dir: Path, engine: str
) -> None:
    """A diverged training run's weights (NaN): the torch engine's predict was an IndexError
    traceback, serve's warm-up another, and export wrote the graph with exit 0 (a review)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from tiankong import FillMasker, Settings

    broken = tmp_path / "nan-model"
    shutil.copytree(tiny_model_dir, broken)
    weights = load_file(broken / "model.safetensors")
    nan = {name: torch.full_like(value, float("nan")) if value.is_floating_point() else value
           for name, value in weights.items()}  # fmt: skip
    save_file(nan, broken / "model.safetensors")
    settings = Settings(engine=engine, precision="fp32", threads=1, onnx_cache_dir=str(tmp_path))
    with pytest.raises(ModelUnavailableError, match=r"scores are not numbers \(NaN\)"):
        FillMasker.load(str(broken), settings=settings, index="none")
