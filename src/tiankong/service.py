"""FillMasker: the library facade that ties the stages together.

text -> validate/tokenize (text.py) -> pad (engines.pad_batch) -> engine -> decode -> result.

>>> from tiankong import FillMasker
>>> fm = FillMasker.load()                      # the bundled model  # doctest: +SKIP
>>> fm.predict("春眠不觉晓，处处闻啼[MASK]。").masks[0][0].token  # doctest: +SKIP
'鸟'
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cached_property, partial
from typing import Any, TypeVar, cast

import numpy as np

from tiankong.config import Settings, check_settings
from tiankong.core.beam_search import RowScorer
from tiankong.core.decoding import (
    NOT_NUMBERS,
    Constraints,
    allowed_token_mask,
    any_of,
    banned_token_ids,
    not_numbers,
    ranked_candidates,
    softmax,
)
from tiankong.core.memory import FillMemory, MixedRows
from tiankong.core.models import (
    ResolvedModel,
    model_outputs,
    read_model_config,
    usable_positions,
)
from tiankong.core.modes import ScheduledScorer, SearchModes
from tiankong.core.options import PredictOptions, given_keywords, keyword_options
from tiankong.core.request import (
    EngineJob,
    PlainJob,
    PreparedRequest,
    ResultStep,
    plain_groups,
    prepare_request,
    result_steps,
)
from tiankong.core.results import FillResult
from tiankong.core.text import (
    MASK,
    PreparedText,
    TextEncoder,
    TextLimits,
    fill_text,
)
from tiankong.engines import Engine, create_engine, engine_calls, pad_batch
from tiankong.errors import (
    BadOptionError,
    ModelUnavailableError,
    TiankongError,
    TopKOutOfRangeError,
    each_text,
)
from tiankong.host import process_thread
from tiankong.index.grounding import MemoryChoice, choose_memory
from tiankong.model_sources import resolve_model

DEFAULT_TOP_K = Settings.default_top_k  # written once, in config.py


# Models whose mixing of tokens ignores the attention mask (ConvBERT's convolution, Funnel's
# pooling, FNet's Fourier transform): padding changes their answers, so they run unpadded.
READS_PADDING = ("convbert", "funnel", "fnet")


def model_config(model: ResolvedModel) -> dict[str, Any]:
    """The model's config.json, or {} where it has none to read."""
    return read_model_config(model.path)


def reads_padding(model: ResolvedModel) -> bool:
    """Whether a padded row's answer differs from the row alone (``READS_PADDING``): a text
    batched with longer ones got other answers (ConvBERT: 8 of 12 top-1s), kept by the cache."""
    return model_config(model).get("model_type") in READS_PADDING


def check_window(model: ResolvedModel, max_length: int) -> None:
    """Refuse a window longer than the model has positions for (``core.models
    .usable_positions``), before its engine starts: a longer row fails in the engine, and in a
    server every request batched with it fails too. Refused rather than cut to fit, so the
    window in force is the one asked for; the default (128) is within every BERT's 512."""
    positions = usable_positions(model.path)
    if positions is None or max_length <= positions.usable:
        return
    if max_length == Settings.max_length:  # the default: maybe no window was asked for
        raise BadOptionError(
            f"Model '{model.name}' reads at most {positions.usable} tokens "
            f"({positions.source}), fewer than the window of {max_length} (--max-length, "
            f"{max_length} by default); pass --max-length {positions.usable} (or less)."
        )
    raise BadOptionError(
        f"--max-length {max_length} is more than model '{model.name}' can read: it has "
        f"{positions.usable} positions ({positions.source}); use --max-length "
        f"{positions.usable} or less."
    )


def row_width(vocab: dict[str, int], outputs: int | None) -> int:
    """The ids a row of the model's scores holds: its vocab_size (``outputs``), which a
    vocabulary padded past its tokenizer makes more than the tokenizer's tokens."""
    return max(len(vocab), outputs or 0)


def check_vocabulary(model: ResolvedModel, vocab: dict[str, int]) -> int | None:
    """Refuse a tokenizer that doesn't belong to the model, before its engine starts, and
    return the model's scores a row (``core.models.model_outputs``). A token id past the
    model's scores can't be scored; a tokenizer with nothing but special tokens (transformers
    5 ignores ``BertTokenizerFast(vocab_file=...)`` and saves five) read every character as
    [UNK], and the answers were ids it has no token for: empty strings, exit 0."""
    outputs = model_outputs(model.path)
    if outputs is None:
        return None
    largest = max(vocab.values(), default=-1)
    if largest >= outputs:
        raise ModelUnavailableError(
            f"The tokenizer of model '{model.name}' has token ids up to {largest:,}, but the "
            f"model scores {outputs:,} (vocab_size in config.json): they don't belong together."
        )
    if len(banned_token_ids(vocab, outputs)) >= outputs:
        raise ModelUnavailableError(
            f"The tokenizer of model '{model.name}' has only special tokens ({len(vocab)} of "
            f"the model's {outputs:,} ids), so no character can be read or answered: it is "
            "not this model's tokenizer."
        )
    return outputs


def find_onnx_export(model: ResolvedModel, precision: str, settings: Settings) -> Any:
    """The ONNX engine's file from the export cache (built there on first use). Imported here,
    lazily, so the export machinery loads only when an ONNX engine is asked for."""
    from tiankong.export.export_cache import ensure_export

    return ensure_export(model, precision, settings)


Answer = TypeVar("Answer")  # a FillResult, or a batch's error in its place
BRACKETED = re.compile(r"\[[^\[\]\s]+\]")  # [unused3], [SEP]: a vocabulary's special form
NO_INDEX_WARNING = (
    "index was asked for, but no corpus index is loaded: {reason}; the answers are the "
    "model's own."  # the reason may hold brackets of its own: (--index none)
)


class FillMasker:
    """Fill [MASK]s in Chinese text with a masked language model."""

    def __init__(
        self,
        model: ResolvedModel,
        encoder: TextEncoder,
        engine: Engine,
        settings: Settings,
        index: MemoryChoice | None = None,
    ) -> None:
        self.model = model
        self.encoder = encoder
        self.engine = engine
        self.settings = settings
        outputs = model_outputs(model.path)
        self.banned = banned_token_ids(encoder.vocab, outputs)
        self.width = row_width(encoder.vocab, outputs)  # the constraint masks' length
        self.unpadded = reads_padding(model)  # each engine call's rows of one length
        self.index = index or MemoryChoice("none", None, "no index was given")
        # the corpus index, mixed in at the decode stage (None: the model's own numbers)
        self.memory: FillMemory | None = self.index.memory
        # after decoding, on every path: the user's script, then the warnings
        self.result_steps: list[ResultStep] = result_steps(encoder.vocab)

    @classmethod
    def load(
        cls,
        source: str | None = None,
        settings: Settings | None = None,
        index: str | os.PathLike[str] | bool | None = None,
    ) -> FillMasker:
        """Resolve ``source`` (bundled name, folder or hub id), start its engine and open the
        corpus index: ``index`` is auto (default: the bundled index for a bundled model),
        bundled, none or an index folder (``tiankong.index.grounding``).

        >>> FillMasker.load(index="none").index.used  # doctest: +SKIP
        'none'
        """
        if settings is not None and not isinstance(settings, Settings):
            raise BadOptionError(  # it was an AttributeError (with_overrides)
                f"settings must be a tiankong.Settings, not {type(settings).__name__}; "
                "Settings(threads=2, ...) makes one."
            )
        if index is False:  # as predict(index=False) spells it: "--index must be a string"
            index = "none"  # named a CLI flag in a Python call (a review)
        elif index is not None and not isinstance(index, str | os.PathLike):
            raise BadOptionError(
                f"index must be auto, bundled, none or an index folder (a str or a Path), or "
                f"False for none; not {type(index).__name__} ({index!r})."
            )
        settings = settings or Settings()
        settings = settings.with_overrides(model=source, index=index)
        check_settings(settings)  # the CLI and the servers checked theirs: this returns at once
        model = resolve_model(settings.model)
        check_window(model, settings.max_length)
        limits = TextLimits(settings.max_masks, settings.max_length, settings.max_text_chars)
        encoder = TextEncoder.from_folder(model.path, limits)
        outputs = check_vocabulary(model, encoder.vocab)
        choice = choose_memory(settings.index, model, encoder.tokenizer)
        # the fake engine's rows as wide as the model's (a vocabulary padded past its tokenizer)
        engine = create_engine(model, settings, row_width(encoder.vocab, outputs), find_onnx_export)
        masker = cls(model, encoder, engine, settings, choice)
        # one short text through the engine: a model whose scores are not numbers (a training
        # run that diverged) is refused here in one sentence (softmax's), not at its first
        # request or in a server's warm-up, whose traceback Starlette prints (a review)
        masker.predict(f"{MASK}。", top_k=1, index=False)
        return masker

    def check_top_k(self, k: int) -> int:
        """``k`` as a Python int within 1..max_top_k: a numpy integer (a top_k read from pandas
        or numpy) counts as the integer it is (it was refused as not one: a review)."""
        if type(k) is not int and isinstance(k, numbers.Integral) and not isinstance(k, bool):
            k = int(k)  # (an ABC's isinstance only off the plain int's path)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= self.settings.max_top_k:
            raise TopKOutOfRangeError(
                f"top_k must be an integer from 1 to {self.settings.max_top_k}; got {k!r}."
            )
        return k

    def options(self, top_k: int = DEFAULT_TOP_K, **changes: Any) -> PredictOptions:
        """Validated PredictOptions from keywords (``core.options.keyword_options``: any
        PredictOptions field, and allowed, exclude, preset); raises a typed BadInputError for
        bad values."""
        return self._checked(keyword_options(top_k, changes))

    def _checked(self, options: PredictOptions) -> PredictOptions:
        """The one check of a request's options, where they enter: top_k against this model's
        ``max_top_k``, then every option's rule (``PredictOptions.validated``)."""
        top_k = self.check_top_k(options.top_k)
        if type(options.top_k) is not int:  # a numpy integer: the options hold Python's
            options = replace(options, top_k=top_k)
        options = options.validated()
        if options.mode == "candidates":  # refused here, before a server spends any allowance
            for option in options.candidates:
                self.option_tokens(option, "candidate")
        if options.constraints is not None:  # [SEP] read as its characters: [ S E P ]
            unknown = self.encoder.vocab.get("[UNK]")
            for field in ("allowed", "exclude"):
                for entry in getattr(options.constraints, field):
                    if unknown in self.option_tokens(entry, f"{field} entry"):
                        # it was dropped without a word (😀 allowed beside 好 did nothing)
                        raise BadOptionError(
                            f"The {field} entry {entry.strip()!r} has a character the model "
                            "doesn't know, so it can never be a fill; leave it out."
                        )
        return options

    def option_tokens(self, option: str, name: str) -> list[int]:
        """The token ids of a candidate or a Hugging Face target (stripped): the one rule
        for both. One with no character the model reads, or holding a special token ([SEP],
        [unused1]: never a fill), is a ``BadOptionError``; a character outside the vocabulary
        reads as [UNK], which the caller weighs (a candidate is ranked, a target refused)."""
        option = option.strip()
        encoding = self.encoder.tokenizer.encode(option, add_special_tokens=False)
        ids = encoding.ids
        if not ids:  # only characters the tokenizer drops (zero-width, control)
            raise BadOptionError(f"The {name} {option!r} has no character the model reads.")
        unknown = self.encoder.vocab.get("[UNK]")
        typed_unknown = any(  # "[UNK]" typed, not a character the model doesn't know
            token == unknown and option[start:end] == "[UNK]"
            for token, (start, end) in zip(ids, encoding.offsets, strict=True)
        )
        # a vocabulary's own bracketed token typed in it ([unused3], 鸟[unused3]): the tokenizer
        # reads its letters, and allowed [unused3] answered d, e, 3 (a review)
        vocab = self.encoder.vocab
        bracketed = any(token in vocab for token in BRACKETED.findall(option))
        if typed_unknown or bracketed or self.banned_in([i for i in ids if i != unknown]):
            raise BadOptionError(f"The {name} {option!r} is a special token, never a fill.")
        return ids

    def prepare(self, text: str) -> PreparedText:
        """Validate and tokenize; raises a typed BadInputError for bad input."""
        return self.encoder.prepare(text)

    def prepare_request(self, text: str, options: PredictOptions) -> PreparedRequest:
        """Validate, tokenize and decide the kind (``core/request.py``); typed errors."""
        return self._prepared(text, self._checked(options))

    def _prepared(self, text: str, options: PredictOptions) -> PreparedRequest:
        """``prepare_request`` for options checked already (``options`` or ``_checked``)."""
        return prepare_request(text, options, self.prepare, self.converts_script(options))

    def converts_script(self, options: PredictOptions) -> bool:
        """Traditional input is converted (and answered back in its script) where the request
        uses the corpus index, whose text is simplified; with the index off, the model sees the
        text as typed (transformers' pipeline's numbers)."""
        return self.memory is not None and options.index

    def predict(
        self,
        text: str,
        top_k: int | None = None,
        options: PredictOptions | None = None,
        **changes: Any,
    ) -> FillResult:
        """Top-k candidates for every [MASK] in ``text`` (``top_k``: default the settings'
        ``default_top_k``); whole words, candidates and constraints through ``options`` or
        keywords (any PredictOptions field, and allowed, exclude, preset), not both.

        >>> fm.predict("春眠不觉晓，处处闻啼[MASK]。", preset="chinese_only").masks[0][0].token
        ... # doctest: +SKIP
        '鸟'
        """
        options = self._asked(top_k, options, changes)
        results = self.run_requests([self._prepared(text, options)])
        return self.index_warned(results, changes.get("index") is True)[0]

    def predict_batch(
        self,
        texts: Sequence[str],
        top_k: int | None = None,
        options: PredictOptions | None = None,
        **changes: Any,
    ) -> list[FillResult]:
        """Like ``predict`` for many texts; the plain ones share engine calls."""
        options = self._asked(top_k, options, changes)
        prepared = each_text(texts, partial(self._prepared, options=options), "predict")
        return self.index_warned(self.run_requests(prepared), changes.get("index") is True)

    def index_warned(self, results: list[Answer], asked: bool) -> list[Answer]:
        """``results`` with a warning where ``index`` was asked for (true, given: left unset,
        the default says nothing) and this model has no index: they are the model's own, and
        said nothing of it (``predict(..., index=True)``; the server's requests likewise).
        Anything in ``results`` that is no FillResult (a batch's error) is left as it is."""
        if not asked or self.memory is not None:
            return results
        warning = NO_INDEX_WARNING.format(reason=self.index.reason)
        return [
            replace(result, warnings=[*result.warnings, warning])
            if isinstance(result, FillResult)
            else result
            for result in results
        ]

    def _asked(
        self, top_k: int | None, options: PredictOptions | None, changes: dict[str, Any]
    ) -> PredictOptions:
        """The options of a library call, checked: ``options``, or ``top_k`` and keyword
        arguments; both at once is a ``BadOptionError`` (options= with top_k=2 answered 3, and
        mode= beside options= was dropped without a word)."""
        if options is not None and not isinstance(options, PredictOptions):
            raise BadOptionError(  # it was an AttributeError from deep in the run
                f"options must be a PredictOptions (tiankong.core.options), not "
                f"{type(options).__name__}; or pass the options as keywords."
            )
        if options is not None:
            changes = given_keywords(changes)  # candidates=None is not given
            if top_k is not None or changes:
                given = ", ".join(["top_k"] * (top_k is not None) + sorted(changes))
                raise BadOptionError(
                    f"Pass the options either as options= or as keyword arguments ({given}), "
                    "not both."
                )
            return self._checked(options)
        return self.options(self.settings.default_top_k if top_k is None else top_k, **changes)

    def run_requests(self, requests: Sequence[PreparedRequest]) -> list[FillResult]:
        """Answers in input order (``answer_each``); a request's own error fails the call."""
        return cast(list[FillResult], raise_first(self.answer_each(requests)))

    def answer_each(self, requests: Sequence[PreparedRequest]) -> list[FillResult | TiankongError]:
        """Answers in input order: plain requests share engine calls (one per top-k), search
        requests run one by one; every answer passes ``finish``. A plain request the model
        gives no numbers for has its error in its place (``run_jobs``), so the others sharing
        its engine call are answered (``fill``'s records); a search's error is raised."""
        results: list[FillResult | TiankongError | None] = [None] * len(requests)
        for index, request in enumerate(requests):
            if not request.plain:
                results[index] = self.run_search(request)
        for (k, use_index), indices in plain_groups(requests).items():
            jobs = [PlainJob(requests[index].prepared, k, None, use_index) for index in indices]
            for index, result in zip(indices, run_jobs(self, jobs), strict=True):
                results[index] = result
        return [
            result if isinstance(result, TiankongError) else self.finish(request, result)
            for request, result in zip(requests, results, strict=True)
            if result is not None
        ]

    def run_search(
        self, request: PreparedRequest, score_rows: RowScorer | None = None
    ) -> FillResult:
        """The search path for one request: several engine calls, each through ``score_rows``
        (default: this masker's engine, on the calling thread; the server passes one that
        sends each call through its batcher and stops the search at its deadline)."""
        if score_rows is None:
            return self.modes.predict(request)
        return SearchModes(ScheduledScorer(self, score_rows)).predict(request)

    def finish(self, request: PreparedRequest, result: FillResult) -> FillResult:
        """The steps after decoding, in order (``result_steps``: the answer in the user's
        script, then the text's warnings), on every path: the library, the server, fill."""
        for step in self.result_steps:
            result = step(request, result)
        return result

    def score_rows(
        self, rows: Sequence[list[int]], asked: Sequence[list[int]], numbers_only: bool = True
    ) -> list[np.ndarray]:
        """Softmax at the ``asked`` indices of each row: one engine call per slice of rows
        within the batch limits (``engine_calls``: rows, padded tokens, and output rows, at most
        a full batch of texts with the most masks each), on every path, so no caller can make
        one engine call larger than a server's batches. A score that is not a number is
        ``ModelUnavailableError``, or with ``numbers_only`` off a row of NaN (``run_jobs``)."""
        results: list[np.ndarray] = []
        for start, end in self.call_slices(rows, asked):
            batch = pad_batch(list(rows[start:end]), list(asked[start:end]), self.encoder.pad_id)
            logits = self.engine.mask_logits(batch)  # the softmax is taken in place
            probabilities = softmax(logits, overwrite=True, numbers_only=numbers_only)
            first = 0
            for item in asked[start:end]:  # slices: views, as np.split made
                results.append(probabilities[first : first + len(item)])
                first += len(item)
        return results

    def call_slices(
        self, rows: Sequence[list[int]], asked: Sequence[list[int]]
    ) -> list[tuple[int, int]]:
        """Where ``score_rows`` cuts ``rows`` into engine calls: ``engine_calls`` at this
        masker's batch limits. A caller that reads a little of many distributions (the
        proofreader's first pass) scores one slice at a time, so it never holds more of them
        than one engine call makes."""
        settings = self.settings
        return engine_calls(
            rows,
            asked,
            settings.max_batch_size,
            settings.max_batch_tokens,
            settings.max_batch_size * settings.max_masks,
            same_length=self.unpadded,
        )

    def mask_probabilities(self, prepared: Sequence[PreparedText]) -> list[np.ndarray]:
        """One ``[masks, vocab]`` probability array per text."""
        return self.score_rows(
            [item.input_ids for item in prepared], [item.mask_indices for item in prepared]
        )

    def run_prepared(
        self,
        prepared: Sequence[PreparedText],
        k: int,
        allowed: np.ndarray | None = None,
        use_index: bool = True,
    ) -> list[FillResult]:
        """One forward pass (``score_rows``) for all of ``prepared``; ``allowed`` limits the
        candidates. A text the model gives no numbers for fails the call."""
        return raise_first(
            run_jobs(self, [PlainJob(item, k, allowed, use_index) for item in prepared])
        )

    def start_lookups(
        self, prepared: Sequence[PreparedText], use_index: Sequence[bool]
    ) -> Callable[[], list[object]]:
        """Start the corpus-index lookups of ``prepared`` on the lookup thread and return a
        call that waits for them. A lookup needs only the token ids, so it runs while the engine
        computes the same texts (the engines release the GIL) instead of after it."""
        memory = self.memory
        if memory is None or not any(use_index):
            return lambda: [None] * len(prepared)

        def find_all() -> list[object]:
            return [
                memory.find(item.input_ids, item.mask_indices) if use else None
                for item, use in zip(prepared, use_index, strict=True)
            ]

        return self.lookup_thread.submit(find_all).result

    @property
    def lookup_thread(self) -> ThreadPoolExecutor:
        return process_thread(self, "tiankong-index")  # one per process, a forked one too

    def decode(
        self,
        item: PreparedText,
        probabilities: np.ndarray,
        k: int,
        allowed: np.ndarray | None = None,
        use_index: bool = True,
        found: object = None,
        open_ended: bool = False,
    ) -> FillResult:
        """The decode stage: the corpus index mixed into each mask's distribution (when there
        is one and ``use_index``), then top-k with the model's own score and the evidence.
        ``found``: the lookups ``start_lookups`` already made for this text; ``open_ended``:
        the per-mask rows of a [BLANK] or candidates request, whose one-character reading the
        index grounds as it does the request's fills (``FillMemory.mix``)."""
        mixed = (
            self.memory.mix(item.input_ids, item.mask_indices, probabilities, found, open_ended)
            if self.memory is not None and use_index
            else MixedRows(probabilities)
        )
        masks = [
            ranked_candidates(
                scores,
                model_row,
                k,
                self.banned,
                allowed,
                self.encoder.token_string,
                partial(mixed.evidence, number),
            )
            for number, (scores, model_row) in enumerate(
                zip(mixed.probabilities, probabilities, strict=True)
            )
        ]
        return FillResult(
            text=item.text,
            masks=masks,
            sequence=fill_text(item.text, [candidates[0].token for candidates in masks]),
            truncated=item.truncated,
            model=self.model.name,
        )

    @cached_property
    def modes(self) -> SearchModes:
        return SearchModes(self)

    def allowed_tokens(self, constraints: Constraints) -> np.ndarray:
        return allowed_token_mask(constraints, self.encoder.vocab, self.banned, self.width)

    def banned_in(self, token_ids: Sequence[int]) -> bool:
        """Whether any of ``token_ids`` is one that never appears in results."""
        return any_of(token_ids, self.banned)


def raise_first(results: list[Answer]) -> list[Answer]:
    """``results``, where none is an error (``run_jobs`` puts a job's own in its place); the
    first one raised otherwise: a library call fails as a whole."""
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


def run_jobs(masker: FillMasker, jobs: Sequence[EngineJob]) -> list[Any]:
    """The one run of engine work, whatever asked for it (``FillMasker.run_prepared``, the
    server's batcher, a Ray replica): one forward pass for every job (``score_rows``: engine
    calls within the batch limits), then each plain job's decoding, in order. A plain job is
    answered with its ``FillResult`` (the corpus index, when on, is mixed in; its lookups run
    during the forward pass), a search row with the probabilities at its asked indices. A job
    whose scores are not numbers (a broken model, on some texts) is answered with the error
    ``ModelUnavailableError(NOT_NUMBERS)`` in its place, so the batch's other jobs are answered
    (its caller raises it for that job alone)."""
    if not jobs:
        return []
    plain = [job for job in jobs if isinstance(job, PlainJob)]
    looked_up = masker.start_lookups(
        [job.prepared for job in plain], [job.use_index for job in plain]
    )
    probabilities = masker.score_rows(
        [job.row for job in jobs],
        [job.prepared.mask_indices if isinstance(job, PlainJob) else job.asked for job in jobs],
        numbers_only=False,
    )
    found = iter(looked_up())
    results: list[Any] = []
    for job, rows in zip(jobs, probabilities, strict=True):
        lookups = next(found) if isinstance(job, PlainJob) else None
        if not_numbers(rows):
            results.append(ModelUnavailableError(NOT_NUMBERS))
        elif isinstance(job, PlainJob):
            results.append(
                masker.decode(job.prepared, rows, job.top_k, job.allowed, job.use_index, lookups)
            )
        else:
            results.append(rows)
    return results


__all__ = ["MASK", "FillMasker", "PredictOptions", "run_jobs"]
