"""Text stage: mask normalisation, validation, tokenization and windowing around the masks.

Everything here happens before a request is queued, so a request that can't succeed never takes
a batch slot. The output, ``PreparedText``, is all later stages need.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer, normalizers, pre_tokenizers
from tokenizers.implementations import BertWordPieceTokenizer

from tiankong.errors import (
    BadInputError,
    EmptyTextError,
    MasksDoNotFitError,
    NoMaskError,
    TextTooLongError,
    TooManyMasksError,
)

MASK = "[MASK]"
BLANK = "[BLANK]"  # a blank of unknown length (1 to max_blank_length characters)


def marker_variants(word: str) -> re.Pattern[str]:
    """``[WORD]`` as users type it: any case, ASCII or full-width letters (what an input
    method in full-width mode types: ［ＭＡＳＫ］ was refused as a text without a mask), ASCII,
    full-width or lenticular brackets, spaces inside."""
    letters = "".join(
        f"[{char}{char.lower()}{chr(ord(char) + 0xFEE0)}{chr(ord(char.lower()) + 0xFEE0)}]"
        for char in word
    )
    return re.compile(rf"[\[【［]\s*{letters}\s*[\]】］]")


MASK_VARIANTS = marker_variants("MASK")
BLANK_VARIANTS = marker_variants("BLANK")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # a str from bad UTF-8 (surrogateescape)


def normalize_masks(text: str) -> str:
    """Rewrite every typed variant of the mask and blank markers to ``[MASK]`` / ``[BLANK]``.

    >>> normalize_masks("画龙点【mask】，[blank]，［ＭＡＳＫ］")
    '画龙点[MASK]，[BLANK]，[MASK]'
    """
    return BLANK_VARIANTS.sub(BLANK, MASK_VARIANTS.sub(MASK, text))


def has_blank(text: str) -> bool:
    """Whether ``text`` has a [MASK] or a [BLANK], in any of their typed forms."""
    marked = normalize_masks(text)
    return MASK in marked or BLANK in marked


@dataclass(frozen=True)
class TextLimits:
    max_masks: int = 16
    max_length: int = 128
    max_text_chars: int = 10_000


@dataclass(frozen=True)
class PreparedText:
    """A validated text, tokenized and cut to a window that holds every mask."""

    text: str  # normalised input
    input_ids: list[int]  # [CLS] window [SEP]
    mask_indices: list[int]  # positions of [MASK] inside input_ids
    truncated: bool

    @property
    def segments(self) -> list[str]:
        """The text around the masks: ``len(mask_indices) + 1`` pieces."""
        return self.text.split(MASK)


class TextEncoder:
    """Wraps a fast `tokenizers` tokenizer (no transformers needed) and applies the limits."""

    def __init__(self, tokenizer: Tokenizer, limits: TextLimits) -> None:
        self.tokenizer = tokenizer
        self.limits = limits
        self.vocab = tokenizer.get_vocab()
        self.mask_id = self.vocab[MASK]
        self.cls_id = self.vocab["[CLS]"]
        self.sep_id = self.vocab["[SEP]"]
        self.pad_id = self.vocab.get("[PAD]", 0)

    @classmethod
    def from_folder(cls, folder: Path, limits: TextLimits) -> TextEncoder:
        """Load ``tokenizer.json`` if present, else build the BERT tokenizer from ``vocab.txt``."""
        config = read_json(folder / "tokenizer_config.json")
        strip_accents = config.get("strip_accents")
        # transformers' BertTokenizer reads these from tokenizer_config.json, with these
        # defaults, and builds its normalizer from them (transformers 5 over tokenizer.json's)
        lowercase = bool(config.get("do_lower_case", True))
        strip = strip_accents if isinstance(strip_accents, bool) else None
        chinese = bool(config.get("tokenize_chinese_chars", True))
        if (folder / "tokenizer.json").is_file():
            tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
            if bert_class(folder, config):
                # whatever tokenizer.json holds, as transformers' BertTokenizer reads it: a
                # cased BertNormalizer beside a config that doesn't say so (the pipeline
                # lower-cased Café and iPhone, tiankong read them as [UNK]), none at all or
                # another (今天 read as 今 ##天, ＡＢＣ as abc), another pre-tokenizer (Mr.Smith's
                # read whole)
                tokenizer.normalizer = normalizers.BertNormalizer(
                    clean_text=True,
                    handle_chinese_chars=chinese,
                    strip_accents=strip,
                    lowercase=lowercase,
                )
                tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        else:
            tokenizer = BertWordPieceTokenizer(
                str(folder / "vocab.txt"),
                lowercase=lowercase,
                strip_accents=strip,
                handle_chinese_chars=chinese,
            )._tokenizer
            add_folder_tokens(tokenizer, folder, config)
        keep_special_tokens(tokenizer, config)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return cls(tokenizer, limits)

    def prepare(self, raw_text: str) -> PreparedText:
        """Validate and encode one text; raises a typed BadInputError."""
        if not isinstance(raw_text, str):
            raise BadInputError(f"The text must be a string, not {type(raw_text).__name__}.")
        if not raw_text.strip():
            raise EmptyTextError("The text is empty; type a sentence containing [MASK].")
        if len(raw_text) > self.limits.max_text_chars:
            raise TextTooLongError(  # counted as typed, each [MASK] six characters
                f"The text has {len(raw_text):,} characters; fill-mask takes at most "
                f"{self.limits.max_text_chars:,} per text: split it into parts."
            )
        check_unicode(raw_text)
        text = normalize_masks(raw_text)
        mask_count = text.count(MASK)
        if mask_count == 0:
            raise NoMaskError("The text has no [MASK]; mark each blank with [MASK].")
        if mask_count > self.limits.max_masks:
            raise TooManyMasksError(
                f"The text has {mask_count} [MASK]s; the limit is {self.limits.max_masks}."
            )
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        mask_indices = [index for index, token in enumerate(ids) if token == self.mask_id]
        if len(mask_indices) != mask_count:  # the tokenizer merged or lost a marker
            raise NoMaskError("The [MASK] markers could not be read; separate them from letters.")
        body, truncated = self.window(ids, mask_indices)
        input_ids = [self.cls_id, *body, self.sep_id]
        return PreparedText(
            text=text,
            input_ids=input_ids,
            mask_indices=[index for index, token in enumerate(input_ids) if token == self.mask_id],
            truncated=truncated,
        )

    def window(self, ids: list[int], mask_indices: list[int]) -> tuple[list[int], bool]:
        """Cut ``ids`` to the window, centred on the masks; never drops a mask."""
        room = self.limits.max_length - 2
        if len(ids) <= room:
            return ids, False
        first, last = mask_indices[0], mask_indices[-1]
        span = last - first + 1
        if span > room:
            raise MasksDoNotFitError(
                f"The masks span {span} tokens, more than the {room}-token window; "
                "split the text or raise the window (the max_length setting, --max-length)."
            )
        start = max(0, min(first - (room - span) // 2, len(ids) - room))
        return ids[start : start + room], True

    def token_string(self, token_id: int) -> str:
        token = self.tokenizer.id_to_token(token_id) or ""
        return token[2:] if token.startswith("##") else token


SPECIAL_TOKENS = {  # tokenizer_config.json's names, and BERT's tokens where it names none
    "mask_token": MASK,
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
}


def keep_special_tokens(tokenizer: Tokenizer, config: dict[str, object]) -> None:
    """The special tokens the vocabulary holds are read whole, as transformers reads them
    (it adds tokenizer_config.json's, or BERT's, to any tokenizer): a tokenizer.json whose
    ``added_tokens`` left out [MASK] split every [MASK] into [, mask, ], and each text was
    refused as if its markers were the user's fault."""
    from tokenizers import AddedToken

    vocab = tokenizer.get_vocab(with_added_tokens=False)
    added = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    for name, default in SPECIAL_TOKENS.items():
        token = config.get(name, default)
        if isinstance(token, dict):  # transformers 4 wrote an AddedToken's fields
            token = token.get("content")
        if isinstance(token, str) and token in vocab and token not in added:
            tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False)])


def add_folder_tokens(tokenizer: Tokenizer, folder: Path, config: dict[str, object]) -> None:
    """The tokens a vocab.txt-only folder adds past its vocabulary (``added_tokens.json``, or
    ``added_tokens_decoder`` in tokenizer_config.json), at the ids it gives them: without them
    a text holding one was tokenized as pieces, and the model's answers were for another text.
    Ids that can't be reproduced in order are a ``ModelUnavailableError``, never a guess."""
    from tokenizers import AddedToken

    from tiankong.errors import ModelUnavailableError

    added: dict[int, tuple[str, bool]] = {}
    path = folder / "added_tokens.json"
    listed: object = {}
    if path.is_file():  # read strictly: read_json's {} for a broken file would drop its tokens
        try:
            listed = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            listed = None
    if not isinstance(listed, dict):
        raise ModelUnavailableError(
            f"The added_tokens.json of model '{folder.name}' is unreadable or corrupt."
        )
    for token, index in listed.items():
        if isinstance(index, int):
            added[index] = (token, False)
    decoder = config.get("added_tokens_decoder")
    for key, entry in decoder.items() if isinstance(decoder, dict) else []:
        if str(key).isdigit() and isinstance(entry, dict) and isinstance(entry.get("content"), str):
            added[int(key)] = (entry["content"], bool(entry.get("special", False)))
    size = tokenizer.get_vocab_size(with_added_tokens=False)
    for index in sorted(i for i in added if i >= size):
        token, special = added[index]
        tokenizer.add_tokens([AddedToken(token, special=special, normalized=not special)])
        if tokenizer.token_to_id(token) != index:
            raise ModelUnavailableError(
                f"The tokenizer of model '{folder.name}' adds '{token}' at id {index}, which "
                "tiankong can't reproduce from vocab.txt; add the model's tokenizer.json."
            )


def check_unicode(
    text: str, what: str = "The text", error: type[BadInputError] = BadInputError
) -> None:
    """A lone surrogate (a str made from bad UTF-8, as Python decodes a command line or stdin)
    has no UTF-8 form: the tokenizer and OpenCC raise on it. Checked before either sees the
    text, on every path that takes one (``what``, ``error``: an option's name and
    BadOptionError; the value itself is not repeated, it can't be printed)."""
    if LONE_SURROGATE.search(text):
        raise error(  # GBK bytes on stdin were told "a lone surrogate" alone
            f"{what} is not valid Unicode (bytes that aren't UTF-8, or a lone surrogate); "
            "send UTF-8."
        )


def fill_text(text: str, fills: list[str], marker: str = MASK) -> str:
    """Put ``fills`` into the markers of ``text``, left to right (no spaces added)."""
    segments = text.split(marker)
    return segments[0] + "".join(
        fill + segment for fill, segment in zip(fills, segments[1:], strict=True)
    )


def read_json(path: Path) -> dict[str, object]:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


# transformers' WordPiece tokenizer classes that build their normalizer from
# tokenizer_config.json's keys (BertTokenizer and those made like it), and the model types whose
# tokenizer is one of them when the config names no class
BERT_TOKENIZERS = frozenset({"BertTokenizer", "DistilBertTokenizer", "ElectraTokenizer"})
# (transformers 5.24's TOKENIZER_MAPPING_NAMES, the text models that map to BertTokenizer)
BERT_TOKENIZER_TYPES = frozenset(
    {
        "bert", "convbert", "distilbert", "electra", "ernie", "layoutlm", "megatron-bert",
        "nezha", "nomic_bert", "qdqbert", "realm", "retribert", "squeezebert",
    }
)  # fmt: skip


def bert_class(folder: Path, config: dict[str, object]) -> bool:
    """Whether transformers reads ``folder``'s tokenizer as a BertTokenizer, which takes its
    normalizer from ``config`` (tokenizer_config.json) and not from tokenizer.json; another
    class (PreTrainedTokenizerFast, a tokenizer trained with the tokenizers library) reads
    tokenizer.json as it is."""
    named = config.get("tokenizer_class")
    if isinstance(named, str):
        return named.removesuffix("Fast") in BERT_TOKENIZERS
    model_type = read_json(folder / "config.json").get("model_type")
    return model_type in BERT_TOKENIZER_TYPES


def mask_runs(mask_indices: Sequence[int]) -> list[list[int]]:
    """The blanks of ``mask_indices``: the numbers of each run of adjacent masks."""
    runs: list[list[int]] = []
    for number, index in enumerate(mask_indices):
        if runs and mask_indices[runs[-1][-1]] + 1 == index:
            runs[-1].append(number)
        else:
            runs.append([number])
    return runs
