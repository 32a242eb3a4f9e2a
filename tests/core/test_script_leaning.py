"""How a blank of a text that mixes the scripts is written: by the characters typed around it."""

from __future__ import annotations

from tiankong.core.script import (
    TO_SIMPLIFIED,
    TO_TRADITIONAL,
    convert,
    neighbours_traditional,
    script_of,
    simplified_only,
)


def place(typed: str, blank: str = "口") -> tuple[str, str, str, int, int]:
    """``typed`` with ``blank`` standing for the fill, and its two other forms."""
    simplified = convert(typed, TO_SIMPLIFIED)
    whole = convert(simplified, TO_TRADITIONAL[0])
    start = typed.index(blank)
    return typed, simplified, whole, start, start + 1


def test_a_character_both_scripts_write_alike_is_no_sign_of_either() -> None:
    """OpenCC writes 人欲 as 人慾, so 欲 typed beside the blank read as simplified, and the
    blank of 清明時節雨紛紛，路上行人欲[MASK]魂 was answered 断 in a traditional line."""
    assert not simplified_only("欲") and not simplified_only("天") and simplified_only("国")
    typed = "清明時節雨紛紛，路上行人欲口魂。"
    assert script_of(typed.replace("口", "[MASK]")).mixed  # the round trip gives 慾
    assert neighbours_traditional(*place(typed))


def test_a_simplified_form_typed_beside_the_blank_still_counts() -> None:
    """In a traditional line, 国家 typed simplified beside the blank keeps the fill simplified."""
    assert not neighbours_traditional(*place("時節紛紛，我们国家口很好。"))
    assert neighbours_traditional(*place("時節紛紛，我們國家口很好。"))
