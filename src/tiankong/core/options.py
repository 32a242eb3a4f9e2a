"""The options of one fill request and their checks, run once where a request is prepared
(``core/request.py``): mode, beam, order, candidates, constraints, blank length, the index."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from typing import Any

from tiankong.config import Settings
from tiankong.core.beam_search import ORDERS
from tiankong.core.decoding import PRESETS, Constraints
from tiankong.core.text import BLANK, MASK, check_unicode, has_blank
from tiankong.errors import BadOptionError

MODES = ("single", "whole_word", "candidates")
MAX_CANDIDATES = 50
# allowed / exclude entries (and the HF route's targets) an HTTP request may list: each is
# tokenized on its own, about 25 us, on the server's event loop, and a list of 100,000 held
# every other request (its /health too) for 4-5 s (a review). The library and the CLI take
# any number (the 3,500 characters of a list of common characters, say).
MAX_CONSTRAINT_ENTRIES = 2000
# each numeric option's range, checked here and published in the OpenAPI document
RANGES: dict[str, tuple[float, float]] = {
    "beam_width": (1, 64),
    "max_blank_length": (1, 4),
    "length_alpha": (0.0, 2.0),
}
MAX_OPTION_CHARS = 8
MASK_RUN = re.compile(r"(?:\[MASK\])+")


@dataclass(frozen=True)
class PredictOptions:
    """Everything that shapes one prediction; hashable, so it can key a result cache."""

    top_k: int = Settings.default_top_k
    mode: str = "single"  # single | whole_word | candidates
    beam_width: int = 8
    order: str = "left_to_right"  # left_to_right | confident_first
    candidates: tuple[str, ...] = ()
    constraints: Constraints | None = None
    max_blank_length: int = 4  # for [BLANK]: try fills of 1..this many characters
    # rank [BLANK] fills by log P / length ** alpha. 0.5: on 400 whole words of 1-4 characters
    # blanked in held-out modern text (scripts/heldout_cloze.py --words), top-1 / top-5 / MRR
    # 9.0% / 19.2% / 0.135 at 0, 9.5% / 19.2% / 0.134 at 0.5, 8.8% / 13.2% / 0.106 at 1, the
    # default before: 1 let the GPU-trained model's long fills win (床前没有灯光, 赶紧去赶紧赶紧)
    length_alpha: float = 0.5
    index: bool = True  # mix in the corpus index, when the model has one (False: the model's own)

    def validated(self) -> PredictOptions:
        options = self.typed()
        if options.candidates and options.mode == "single":
            options = replace(options, mode="candidates")
        if options.candidates and options.mode == "whole_word":
            raise BadOptionError("Candidates rank options for one blank; drop mode 'whole_word'.")
        if options.mode not in MODES:
            raise BadOptionError(f"Unknown mode '{options.mode}'; use one of {', '.join(MODES)}.")
        if options.order not in ORDERS:
            raise BadOptionError(f"Unknown order '{options.order}'; use {' or '.join(ORDERS)}.")
        for name, (least, most) in RANGES.items():
            if not least <= getattr(options, name) <= most:
                raise BadOptionError(f"{name} must be from {least:g} to {most:g}.")
        if not isinstance(options.index, bool):
            raise BadOptionError("index must be true or false.")
        if options.mode == "candidates":
            check_candidates(options.candidates)
        if options.constraints is not None:
            check_constraint_words(options.constraints)
            options = replace(options, constraints=stripped(options.constraints))
        preset = options.constraints.preset if options.constraints else None
        if preset is not None and preset not in PRESETS:
            raise BadOptionError(
                f"Unknown constraints preset '{preset}'; use one of {', '.join(PRESETS)}."
            )
        if options.constraints is not None and not options.constraints.active:
            options = replace(options, constraints=None)
        if options.mode == "candidates" and options.constraints is not None:
            raise BadOptionError(  # they were ignored before: the options are the blank's fills
                "Candidates are the blank's only fills, so allowed, exclude and preset don't "
                "apply to them; leave those out or the candidates."
            )
        return options

    def typed(self) -> PredictOptions:
        """The options' types, checked before their values (the library takes any Python
        value: beam_width="8" was a TypeError from the search, candidates="充电" two candidates
        充 and 电, constraints={...} an AttributeError)."""
        for name in ("beam_width", "max_blank_length"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadOptionError(f"{name} must be a whole number, not {value!r}.")
        alpha = self.length_alpha
        if not isinstance(alpha, int | float) or isinstance(alpha, bool):
            raise BadOptionError(f"length_alpha must be a number, not {alpha!r}.")
        for name in ("mode", "order"):
            if not isinstance(getattr(self, name), str):
                raise BadOptionError(f"{name} must be a string, not {getattr(self, name)!r}.")
        if not isinstance(self.candidates, tuple | list):
            raise BadOptionError(
                f"candidates must be a list of strings, not {type(self.candidates).__name__} "
                f"({self.candidates!r})."
            )
        if self.constraints is not None and not isinstance(self.constraints, Constraints):
            raise BadOptionError(
                "constraints must be a Constraints (tiankong.core.decoding), not "
                f"{type(self.constraints).__name__}."
            )
        if isinstance(self.candidates, tuple):
            return self
        return replace(self, candidates=tuple(self.candidates))


# keywords of a call that stand for a Constraints (``keyword_options``), and the lists whose
# emptiness would read as "no limit" or "no candidates" where the caller asked for some
CONSTRAINT_KEYWORDS = ("allowed", "exclude", "preset")
EMPTY_LISTS = {
    "candidates": "candidates is an empty list; give at least one option to rank, or leave it out.",
    "allowed": "allowed is an empty list; give at least one, or leave it out.",
}
UNSET_WHEN_NONE = ("candidates", "constraints", *CONSTRAINT_KEYWORDS)
# the keywords a call may give besides top_k, in the dataclass's order (made once: this runs on
# every request)
KEYWORDS = (
    *(item.name for item in fields(PredictOptions) if item.name != "top_k"),
    *CONSTRAINT_KEYWORDS,
)


def given_keywords(changes: dict[str, Any]) -> dict[str, Any]:
    """A call's keywords less the ones given as None where None means "not given" (a JSON
    null: candidates, constraints, allowed, exclude, preset)."""
    return {k: v for k, v in changes.items() if not (k in UNSET_WHEN_NONE and v is None)}


def keyword_options(top_k: int, changes: dict[str, Any]) -> PredictOptions:
    """PredictOptions from a call's keywords, the one door for the library's ``predict(...,
    **changes)`` and the servers' fields: any PredictOptions field, and ``allowed``,
    ``exclude`` and ``preset`` for a ``Constraints`` (None: not given). An unknown keyword
    (``topk=3``, ``preset=`` once), an empty ``candidates`` or ``allowed`` list (the library
    answered as if none was given, where HTTP refused), or constraints given both ways is a
    ``BadOptionError``."""
    given = given_keywords(changes)
    unknown = sorted(set(given).difference(KEYWORDS))
    if unknown:
        raise BadOptionError(
            f"Unknown option {', '.join(repr(name) for name in unknown)}; the options are "
            f"top_k, {', '.join(KEYWORDS)}."
        )
    for name, message in EMPTY_LISTS.items():
        if isinstance(given.get(name), list | tuple) and not given[name]:
            raise BadOptionError(message)
    parts = {name: given.pop(name) for name in CONSTRAINT_KEYWORDS if name in given}
    if parts:
        if "constraints" in given:
            raise BadOptionError(
                "Give allowed, exclude and preset as keywords or in constraints=, not both."
            )
        for name in ("allowed", "exclude"):
            if name in parts and not isinstance(parts[name], list | tuple):
                raise BadOptionError(
                    f"{name} must be a list of strings, not {type(parts[name]).__name__} "
                    f"({parts[name]!r})."
                )
        given["constraints"] = Constraints(
            allowed=tuple(parts.get("allowed", ())),
            exclude=tuple(parts.get("exclude", ())),
            preset=parts.get("preset"),
        )
    return PredictOptions(top_k=top_k, **given)


def check_candidates(candidates: tuple[str, ...]) -> None:
    if not candidates:
        raise BadOptionError("Candidate mode needs at least one option in 'candidates'.")
    if len(candidates) > MAX_CANDIDATES:
        raise BadOptionError(f"At most {MAX_CANDIDATES} candidates; got {len(candidates)}.")
    seen: set[str] = set()
    for option in candidates:
        check_option(option, "candidate")
        if option.strip() in seen:
            raise BadOptionError(f"The candidate {option.strip()!r} is given twice.")
        seen.add(option.strip())


def check_option(option: object, name: str) -> None:
    """One candidate's (or Hugging Face target's, ``name``) rule: a non-empty string of at most
    MAX_OPTION_CHARS characters, without a blank marker, not a word piece."""
    if not isinstance(option, str) or not option.strip():
        raise BadOptionError(f"Every {name} must be a non-empty string.")
    # an option is text: a lone surrogate (GBK bytes in --candidates) was a TypeError traceback
    check_unicode(option, f"One {name}", BadOptionError)
    if len(option.strip()) > MAX_OPTION_CHARS:
        raise BadOptionError(
            f"The {name} '{option[:20]}' is longer than {MAX_OPTION_CHARS} characters."
        )
    if has_blank(option):
        raise BadOptionError(f"A {name} can't contain [MASK] or [BLANK].")
    check_not_word_piece(option, name)


def check_not_word_piece(entry: str, name: str) -> None:
    """A candidate, target or constraint entry is a character or word, never a word piece:
    ##好 was read as # # 好 (the Hugging Face route scored the token #), and an allowed ##好
    put the piece 好 beside the character 好 in the answers."""
    entry = entry.strip()
    if entry.startswith("##") and entry != "##":
        raise BadOptionError(
            f"The {name} '{entry}' is a word piece; give the character or word "
            f"('{entry.removeprefix('##')}')."
        )


def check_constraint_words(constraints: Constraints) -> None:
    """Each ``allowed`` and ``exclude`` entry is a character or word: an empty one would match
    the vocabulary's empty token (bert-base-chinese has one) and fill the blank with nothing."""
    for field, words in (("allowed", constraints.allowed), ("exclude", constraints.exclude)):
        if any(not isinstance(word, str) or not word.strip() for word in words):
            raise BadOptionError(f"Every entry of '{field}' must be a non-empty string.")
        if any(has_blank(word) for word in words):
            # as for a candidate: [BLANK] was read as its characters and answered ] and [
            raise BadOptionError(f"An entry of '{field}' can't contain [MASK] or [BLANK].")
        for word in words:
            check_unicode(word, f"One {field} entry", BadOptionError)
            check_not_word_piece(word, f"{field} entry")


ENTRY_COUNT_ADVICE = "to keep to Han characters, use the preset chinese_only"


def check_entry_count(entries: object, field: str, advice: str = ENTRY_COUNT_ADVICE) -> None:
    """A request's list of at most MAX_CONSTRAINT_ENTRIES entries, counted before any entry is
    tokenized (the server's limit: ``server/dispatch.options_from_fields``, ``server/hf``);
    ``advice``: what the route offers instead."""
    if isinstance(entries, tuple | list) and len(entries) > MAX_CONSTRAINT_ENTRIES:
        raise BadOptionError(
            f"At most {MAX_CONSTRAINT_ENTRIES} entries in {field}; got {len(entries)} ({advice})."
        )


def stripped(constraints: Constraints) -> Constraints:
    """The entries as they are read everywhere (the CLI's lists, the tokenizer), each once: the
    whole fills compared " 好" with 好 and found none."""
    return replace(
        constraints,
        allowed=tuple(dict.fromkeys(word.strip() for word in constraints.allowed)),
        exclude=tuple(dict.fromkeys(word.strip() for word in constraints.exclude)),
    )


def check_blank(text: str) -> None:
    """A [BLANK] of unknown length is searched alone: one per text, and no [MASK] beside it."""
    if text.count(BLANK) != 1 or MASK in text:
        raise BadOptionError("Use exactly one [BLANK] per text, and no [MASK] beside it.")


def one_blank(text: str) -> str:
    """The text with its single blank (a [BLANK] or a run of [MASK]s) written as [BLANK]."""
    if BLANK in text:
        if text.count(BLANK) != 1 or MASK in text:
            raise BadOptionError("Candidate ranking takes exactly one blank.")
        return text
    runs = MASK_RUN.findall(text)
    if len(runs) != 1:
        raise BadOptionError(
            "Candidate ranking takes exactly one blank: one [MASK] (or one run of [MASK]s)."
        )
    return MASK_RUN.sub(BLANK, text)
