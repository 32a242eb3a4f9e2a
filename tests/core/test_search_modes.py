"""Whole-word decoding, candidate ranking, unknown-length blanks and constraints."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tiankong import FillMasker
from tiankong.core.beam_search import beam_search
from tiankong.core.decoding import Constraints
from tiankong.core.request import NO_WHOLE_FILL_WARNING
from tiankong.errors import BadOptionError

SUBSET = ["充", "电", "饭", "水", "鸟"]


def restricted(masker: FillMasker, row: np.ndarray, allowed_ids: list[int]) -> np.ndarray:
    kept = np.zeros_like(row)
    kept[allowed_ids] = row[allowed_ids]
    return kept / kept.sum()


@pytest.mark.parametrize("text", ["手机没电了，赶紧去[MASK][MASK]。", "画[MASK]点[MASK]"])
def test_beam_matches_brute_force(tiny_masker: FillMasker, text: str) -> None:
    """Left-to-right joint scores equal an exhaustive chain enumeration over a vocab subset."""
    vocab = tiny_masker.encoder.vocab
    ids = [vocab[c] for c in SUBSET]
    allowed = np.zeros(len(vocab), dtype=bool)
    allowed[ids] = True
    prepared = tiny_masker.prepare(text)
    first, second = prepared.mask_indices
    beams = beam_search(
        prepared.input_ids,
        prepared.mask_indices,
        tiny_masker.score_rows,
        allowed,
        beam_width=len(ids) ** 2,
        order="left_to_right",
        renormalise=True,
    )
    found = {b.token_ids: b.log_prob for b in beams}
    first_dist = restricted(
        tiny_masker, tiny_masker.score_rows([prepared.input_ids], [[first]])[0][0], ids
    )
    brute = {}
    for a, b in itertools.product(ids, ids):
        row = list(prepared.input_ids)
        row[first] = a
        second_dist = restricted(tiny_masker, tiny_masker.score_rows([row], [[second]])[0][0], ids)
        brute[(a, b)] = math.log(first_dist[a]) + math.log(second_dist[b])
    assert set(found) == set(brute)
    # The beam scores rows in batches and the brute force one at a time: float32 GEMMs round a
    # batch and a lone row differently (AVX-512 and AMX CPUs differ by about 1e-6 at -7), so the
    # tolerance is float32's, not float64's; a wrong chain or renormalisation is off by > 1e-2.
    for key, value in brute.items():
        assert found[key] == pytest.approx(value, abs=1e-5)
    assert [b.token_ids for b in beams] == sorted(brute, key=lambda k: -brute[k])


def test_whole_word_mode_returns_sequences(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict("手机没电了，赶紧去[MASK][MASK]。", mode="whole_word", top_k=3)
    assert len(result.masks) == 2  # per-mask lists stay
    assert 1 <= len(result.sequences) <= 8
    best = result.sequences[0]
    assert len(best.fill) == 2
    assert best.text == f"手机没电了，赶紧去{best.fill}。"
    scores = [s.score for s in result.sequences]
    assert scores == sorted(scores, reverse=True)
    assert result.to_dict()["sequences"][0]["fill"] == best.fill


def test_confident_first_mode(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict(
        "画[MASK]点[MASK]", mode="whole_word", order="confident_first", beam_width=4
    )
    fills = [s.fill for s in result.sequences]
    assert len(fills) == len(set(fills)) and all(len(f) == 2 for f in fills)


def test_beam_batches_hypotheses_into_one_call_per_step(tiny_masker: FillMasker) -> None:
    calls = []
    prepared = tiny_masker.prepare("他[MASK][MASK][MASK]了")

    def counting_scorer(rows, asked):
        calls.append(len(rows))
        return tiny_masker.score_rows(rows, asked)

    allowed = np.ones(len(tiny_masker.encoder.vocab), dtype=bool)
    allowed[tiny_masker.banned] = False
    beam_search(prepared.input_ids, prepared.mask_indices, counting_scorer, allowed, 6)
    assert calls == [1, 6, 6]


def test_candidates_match_a_hand_computed_chain(tiny_masker: FillMasker) -> None:
    text = "手机没电了，赶紧去[MASK]。"
    result = tiny_masker.predict(text, candidates=("充电", "吃饭", "鸟"))
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)
    by_option = {c.option: c for c in result.candidates}
    vocab = tiny_masker.encoder.vocab
    # by hand: P(充 | 去[M][M]) * P(电 | 去充[M])
    two = tiny_masker.prepare("手机没电了，赶紧去[MASK][MASK]。")
    p1 = tiny_masker.score_rows([two.input_ids], [[two.mask_indices[0]]])[0][0][vocab["充"]]
    row = list(two.input_ids)
    row[two.mask_indices[0]] = vocab["充"]
    p2 = tiny_masker.score_rows([row], [[two.mask_indices[1]]])[0][0][vocab["电"]]
    assert by_option["充电"].joint == pytest.approx(p1 * p2, rel=1e-6)
    assert by_option["充电"].score == pytest.approx(math.sqrt(p1 * p2), rel=1e-6)
    one = tiny_masker.prepare(text)
    p = tiny_masker.score_rows([one.input_ids], [one.mask_indices])[0][0][vocab["鸟"]]
    assert by_option["鸟"].joint == pytest.approx(p, rel=1e-6)
    assert by_option["充电"].text == "手机没电了，赶紧去充电。"
    assert result.sequence == result.candidates[0].text


def test_candidate_errors(tiny_masker: FillMasker) -> None:
    with pytest.raises(BadOptionError, match="exactly one blank"):
        tiny_masker.predict("[MASK]和[MASK]", candidates=("好",))
    with pytest.raises(BadOptionError, match="needs at least one option"):
        tiny_masker.predict("好[MASK]", mode="candidates")
    with pytest.raises(BadOptionError, match="longer than 8"):
        tiny_masker.predict("好[MASK]", candidates=("一二三四五六七八九",))


def test_unknown_length_blank(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict("手机没电了，赶紧去【blank】。", top_k=5, max_blank_length=3)
    assert result.text == "手机没电了，赶紧去[BLANK]。"
    assert 1 <= len(result.sequences) <= 5
    # a blank's length counts tokens: the tiny model's vocabulary has words (style is one)
    encode = tiny_masker.encoder.tokenizer.encode
    lengths = {len(encode(s.fill, add_special_tokens=False).ids) for s in result.sequences}
    assert lengths <= {1, 2, 3}
    for fill in result.sequences:
        assert fill.text == f"手机没电了，赶紧去{fill.fill}。"
    with pytest.raises(BadOptionError, match="exactly one \\[BLANK\\]"):
        tiny_masker.predict("[BLANK][BLANK]")


@pytest.mark.parametrize(
    "constraints",
    [
        Constraints(preset="chinese_only"),
        Constraints(allowed=("鸟", "花", "风")),
        Constraints(exclude=("鸟", "花")),
        Constraints(allowed=("春天", "鸟"), exclude=("天",)),
    ],
)
def test_constraints_never_leak(tiny_masker: FillMasker, constraints: Constraints) -> None:
    from tiankong.core.decoding import is_han

    for mode in ("single", "whole_word"):
        result = tiny_masker.predict(
            "处处闻啼[MASK][MASK]。", top_k=20, mode=mode, constraints=constraints
        )
        tokens = [c.token for m in result.masks for c in m]
        tokens += [ch for s in result.sequences for ch in s.fill]
        assert tokens
        for token in tokens:
            if constraints.preset == "chinese_only":
                assert all(is_han(ch) for ch in token)
            if constraints.allowed:
                assert token in "".join(constraints.allowed)
            for excluded in constraints.exclude:
                assert excluded not in token
        for candidates in result.masks:
            # float32 probabilities (decoding.softmax): within a few of float32's eps (1.2e-7)
            assert sum(c.score for c in candidates) <= 1.0 + 1e-6
            for c in candidates:
                assert c.raw_score is not None and c.raw_score <= c.score * (1 + 1e-6)


def test_allowed_words_restrict_whole_fills(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict(
        "[MASK][MASK]来了",
        mode="whole_word",
        beam_width=16,
        constraints=Constraints(allowed=("春天", "秋天")),
    )
    assert result.sequences and {s.fill for s in result.sequences} <= {"春天", "秋天"}


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("他做事一向[MASK][MASK][MASK][MASK]。", {"mode": "whole_word"}),
        ("他做事一向[BLANK]。", {"max_blank_length": 4}),
    ],
)
@pytest.mark.parametrize("beam_width", [1, 2])
def test_allowed_words_are_never_pruned_by_the_beam(
    tiny_masker: FillMasker, text: str, options: dict[str, object], beam_width: int
) -> None:
    """The beam took any of the words' characters at each position, so it held mixtures of
    them (一丝不苟 among 4 ** 4 fills) and the words themselves fell out of a narrow beam: the
    fills came back empty, under a warning that no fill kept to the constraints."""
    words = ("一丝不苟", "马马虎虎", "认真仔细")
    result = tiny_masker.predict(
        text, constraints=Constraints(allowed=words), beam_width=beam_width, **options
    )
    fills = [s.fill for s in result.sequences]
    assert fills and set(fills) <= set(words) and len(fills) == min(beam_width, 3), fills
    assert result.warnings == []
    best = max(result.sequences, key=lambda s: s.score)
    assert result.sequence == text.replace(text[5:-1], best.fill)


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("他[MASK][MASK][MASK]地工作", {"mode": "whole_word"}),  # a 2-character word, 3 masks
        ("他[BLANK]地工作", {"max_blank_length": 1}),  # no fill of one character is the word
    ],
)
def test_no_whole_fill_under_the_constraints_is_said(
    tiny_masker: FillMasker, text: str, options: dict[str, object]
) -> None:
    """The fills came back empty with no word of why, beside each mask's own answers."""
    result = tiny_masker.predict(text, constraints=Constraints(allowed=("一心",)), **options)
    assert result.sequences == [] and result.warnings == [NO_WHOLE_FILL_WARNING]
    assert all(len(row) for row in result.masks)  # each position's own answers are there
    fitting = tiny_masker.predict(
        text.replace("[MASK][MASK][MASK]", "[MASK][MASK]"),
        constraints=Constraints(allowed=("一心",)),
        **{**options, "max_blank_length": 2} if "max_blank_length" in options else options,
    )
    assert [s.fill for s in fitting.sequences] == ["一心"] and fitting.warnings == []


@pytest.mark.parametrize(
    ("text", "options"),
    [("我今天很[BLANK]。", {"max_blank_length": 2}), ("我今天很[MASK]。", {"mode": "whole_word"})],
)
def test_a_character_allowed_beside_words_is_a_fill(
    tiny_masker: FillMasker, text: str, options: dict[str, object]
) -> None:
    """好 beside the word 很好 was dropped from the whole fills: a [BLANK] could only be 很好,
    and one [MASK] had no fill at all."""
    allowed = Constraints(allowed=("好", "坏", "很好"))
    result = tiny_masker.predict(text, constraints=allowed, beam_width=16, **options)
    fills = {s.fill for s in result.sequences}
    assert {"好", "坏"} <= fills <= {"好", "坏", "很好"}, fills
    assert Constraints(allowed=("好", "坏")).allowed_fills == frozenset()  # characters alone
    assert allowed.allowed_fills == frozenset({"好", "坏", "很好"})


def test_constraints_that_exclude_everything(tiny_masker: FillMasker) -> None:
    with pytest.raises(BadOptionError, match="leave no token"):
        tiny_masker.predict(
            "好[MASK]", constraints=Constraints(allowed=("。",), preset="chinese_only")
        )
    with pytest.raises(BadOptionError, match="Unknown constraints preset"):
        tiny_masker.predict("好[MASK]", constraints=Constraints(preset="nope"))


@pytest.mark.parametrize("field", ["allowed", "exclude"])
@pytest.mark.parametrize("marker", ["[BLANK]", "[mask]", "好[MASK]"])
def test_a_blank_marker_in_the_constraints_is_refused(
    tiny_masker: FillMasker, field: str, marker: str
) -> None:
    """As in a candidate: [BLANK] was read as its characters and answered ] and [."""
    with pytest.raises(BadOptionError, match=rf"An entry of '{field}' can't contain \[MASK\]"):
        tiny_masker.predict("好[MASK]", constraints=Constraints(**{field: (marker,)}))


def test_constraint_entries_are_read_stripped(tiny_masker: FillMasker) -> None:
    """Over HTTP " 好" was not 好 to the whole fills (the CLI strips its lists): the fills
    were only 很好, or none."""
    allowed = Constraints(allowed=(" 好", "坏 ", "很好"))
    result = tiny_masker.predict("我今天很[BLANK]。", constraints=allowed, max_blank_length=2)
    assert {"好", "坏"} <= {s.fill for s in result.sequences}


@pytest.mark.parametrize("field", ["allowed", "exclude"])
def test_a_special_token_in_the_constraints_is_refused(tiny_masker: FillMasker, field: str) -> None:
    """[SEP] was read as its characters: allowed, it answered ] and [ (as a candidate or a
    target it is refused)."""
    constraints = Constraints(**{field: ("好", "[SEP]")})
    with pytest.raises(BadOptionError, match=rf"The {field} entry '\[SEP\]' is a special token"):
        tiny_masker.predict("好[MASK]", constraints=constraints)


@pytest.mark.parametrize("field", ["allowed", "exclude"])
def test_an_entry_the_model_does_not_know_is_refused(tiny_masker: FillMasker, field: str) -> None:
    """😀 (read as [UNK]) was dropped without a word: allowed beside 好 it did nothing, alone it
    was 'the constraints leave no token' with no reason."""
    constraints = Constraints(**{field: ("好", "😀")})
    with pytest.raises(BadOptionError, match=f"The {field} entry '😀' has a character the model"):
        tiny_masker.predict("好[MASK]", constraints=constraints)
    tiny_masker.predict("好[MASK]", constraints=Constraints(**{field: ("好", "坏")}))


def test_whole_word_sequence_is_the_best_joint_fill(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict("手机没电了，赶紧去[MASK][MASK]。", mode="whole_word")
    assert result.sequence == result.sequences[0].text


def test_candidates_with_whole_word_mode_is_an_error(tiny_masker: FillMasker) -> None:
    with pytest.raises(BadOptionError, match="drop mode 'whole_word'"):
        tiny_masker.options(5, mode="whole_word", candidates=("充电",))


@pytest.mark.parametrize(
    "constraints",
    [
        Constraints(exclude=("睛",)),
        Constraints(allowed=("头",)),
        Constraints(preset="chinese_only"),
    ],
)
def test_candidates_with_constraints_is_an_error(
    tiny_masker: FillMasker, constraints: Constraints
) -> None:
    """The candidates are the blank's only fills; a constraint beside them was ignored."""
    with pytest.raises(BadOptionError, match="allowed, exclude and preset don't apply"):
        tiny_masker.predict("画龙点[MASK]", candidates=("睛", "头"), constraints=constraints)


def test_a_candidate_given_twice_is_an_error(tiny_masker: FillMasker) -> None:
    with pytest.raises(BadOptionError, match="The candidate '好' is given twice"):
        tiny_masker.predict("他很[MASK]。", candidates=(" 好 ", "坏", "好"))


def test_unknown_options_rank_last(tiny_masker: FillMasker) -> None:
    result = tiny_masker.predict(
        "赶紧去[MASK]。", candidates=("\U0001f600好", "充电", "吃饭", "睡")
    )
    assert [c.in_vocabulary for c in result.candidates] == [True, True, True, False]
    assert result.candidates[-1].option == "\U0001f600好"


PLAIN = "and this text asked for neither."
CANDIDATES = "not used: candidate ranking scores each option whole."
WHOLE = "was not used: max_blank_length and length_alpha are for a [BLANK], and this text has none."


@pytest.mark.parametrize(
    ("text", "options", "warning"),
    [
        ("画龙点[MASK]", {"beam_width": 3}, "beam_width was not used: " + "beam_width and order"),
        ("画龙点[MASK]", {"order": "confident_first"}, "order was not used"),
        ("画龙点[MASK]", {"max_blank_length": 2, "beam_width": 3}, "beam_width and max_blank"),
        ("画龙点[MASK][MASK]", {"mode": "whole_word", "max_blank_length": 2}, WHOLE),
        ("画龙点[MASK]", {"candidates": ("睛",), "beam_width": 3}, CANDIDATES),
        # a [BLANK] with candidates: the text has one, and ranking still reads none of them
        ("赶紧去[BLANK]。", {"candidates": ("充电",), "max_blank_length": 2}, CANDIDATES),
        ("画龙点[MASK][MASK]", {"mode": "whole_word", "beam_width": 3}, None),
        ("画龙点[BLANK]", {"beam_width": 3, "max_blank_length": 2}, None),
        ("画龙点[MASK]", {"beam_width": 8, "max_blank_length": 4}, None),  # the defaults
        ("画龙点[MASK]", {"length_alpha": 1.0}, "length_alpha was not used: beam_width"),
        ("画龙点[MASK][MASK]", {"mode": "whole_word", "length_alpha": 2.0}, WHOLE),
        ("画龙点[BLANK]", {"length_alpha": 1.0}, None),
    ],
)
def test_search_options_a_text_did_not_use_are_said(
    tiny_masker: FillMasker, text: str, options: dict[str, object], warning: str | None
) -> None:
    """They were accepted and did nothing: a plain text's answer under beam_width 3 was the
    answer under 8."""
    options = dict(options)
    mode = "candidates" if "candidates" in options else options.pop("mode", "single")
    warnings = tiny_masker.predict(text, mode=mode, **options).warnings
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0], warnings
        assert warnings[0].endswith(PLAIN) == (mode == "single"), warnings
