"""[BLANK] fills of different lengths, ranked with the corpus index. The index's share of a
fill does not shrink with its length as the model's chain does, so a passage that runs on
once past an idiom (守株待兔亡机变) outranked the idiom's own character, which the corpus
holds in every passage, for being longer. Such a run-on keeps only the model's score."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiankong import FillMasker, Settings
from tiankong.index import build_index, combine

PASSAGES = [
    "宋人有耕者，田中有株，兔走触株，折颈而死，因释其耒而守株待兔。",
    "他不肯努力，只想守株待兔。",
    "做生意不能守株待兔，要主动找客户。",
    "与其守株待兔，不如自己去找。",
    "莫学承虚接响人，守株待兔亡机变。",  # the one passage that runs on past 兔
]


@pytest.fixture(scope="module", autouse=True)
def no_plausibility_floor() -> Iterator[None]:
    """A tiny random model finds every real word absurd; the plausibility rule has its own
    tests (test_index_combine.py), this module is about ranking lengths."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(combine, "MIN_MODEL_RATIO", 0.0)
        yield


@pytest.fixture(scope="module")
def grounded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> FillMasker:
    folder = tmp_path_factory.mktemp("idiom-index")
    corpus = folder / "corpus.txt"
    corpus.write_text("\n".join(PASSAGES) + "\n", encoding="utf-8")
    build_index([corpus], folder / "index", progress=False)
    settings = Settings(engine="torch", threads=1)
    return FillMasker.load(str(tiny_model_dir), settings, index=str(folder / "index"))


def test_a_longer_one_off_fill_does_not_outrank_the_idiom(grounded: FillMasker) -> None:
    fills = grounded.predict("守株待[BLANK]", top_k=50).sequences
    assert fills[0].fill == "兔" and fills[0].memory is not None
    assert fills[0].memory["count"] == len(PASSAGES)
    run_ons = [fill for fill in fills if fill.fill.startswith("兔亡")]
    assert run_ons  # still offered, on the model's own score weighed by 兔's model share
    shares = {round(f.score / f.model_score, 9) for f in run_ons if f.model_score}
    assert all(fill.memory is None for fill in run_ons) and len(shares) == 1
    assert 0 < shares.pop() < 1


def test_the_ranking_score_is_the_models_log_p_over_length_to_the_alpha(
    grounded: FillMasker,
) -> None:
    """Fills rank by the model's part, log P / length ** length_alpha, plus the index's part
    unnormalised (best first; the length in tokens: the tiny vocabulary has words, style is
    one); ``normalised`` is the per-token score. An unsupported fill's rank is its model score,
    normalised, weighed by the share the index left it; at alpha 0 the rank is the score."""
    from tiankong.core.options import PredictOptions

    encode = grounded.encoder.tokenizer.encode

    def tokens(fill: str) -> int:
        return len(encode(fill, add_special_tokens=False).ids)

    for alpha in (PredictOptions.length_alpha, 0.0, 1.0):
        fills = grounded.predict("他只想守株[BLANK]。", length_alpha=alpha, top_k=50).sequences
        assert [f.rank_score for f in fills] == sorted((f.rank_score for f in fills), reverse=True)
        for fill in fills:
            assert fill.model_score is not None
            normalised_model = fill.model_score ** (1 / tokens(fill.fill) ** alpha)
            if alpha == 0.0:
                assert fill.rank_score == pytest.approx(fill.score, rel=1e-9)
            elif fill.memory is None:
                share = fill.score / fill.model_score
                assert fill.rank_score == pytest.approx(share * normalised_model, rel=1e-9)
            else:  # (1 - w) x the normalised model score + the index part, score - (1 - w) x model
                assert fill.score <= fill.rank_score <= fill.score + normalised_model
        supported = [f for f in fills if f.memory is not None]
        assert supported and (alpha == 0.0 or any(f.rank_score > f.score for f in fills))
    for fill in fills:  # of the score, which for an unsupported fill is the model's, weighed
        per_token = math.exp(math.log(fill.score) / tokens(fill.fill))
        assert fill.normalised == pytest.approx(per_token, rel=1e-9)
