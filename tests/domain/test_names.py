"""Player names (domain.names): trimmed, NFC, 1 to 32 characters, nothing invisible, unique ignoring case."""

from __future__ import annotations

import unicodedata

import pytest

import domain
from domain import BadName, BadRequest, CreateGame, GameCreated, decide
from domain.names import MAX_NAME, player_names


def test_names_are_trimmed_and_kept_in_nfc() -> None:
    decomposed = "Zoe\u0301"  # e + combining acute accent
    assert player_names(["  Ada ", "\tBen\u00a0", decomposed]) == ("Ada", "Ben", "Zo\u00e9")
    (kept,) = player_names([decomposed])
    assert kept is not None and unicodedata.is_normalized("NFC", kept)


def test_a_created_game_keeps_the_names_in_their_kept_form() -> None:
    (event,) = decide(domain.Game(), CreateGame(game_id="g", players=(" Ada ", "Be\u0301a")))
    assert isinstance(event, GameCreated)
    assert event.players == ("Ada", "B\u00e9a")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("x" * MAX_NAME, id="32-characters"),
        pytest.param("  " + "x" * MAX_NAME + "  ", id="32-characters-once-trimmed"),
        pytest.param("é" * MAX_NAME, id="32-characters-of-2-bytes"),
        pytest.param("Jean Paul", id="an-inner-space"),
        pytest.param("李小龍", id="cjk"),
        pytest.param("🎻", id="an-emoji"),
    ],
)
def test_names_within_the_rules_are_accepted(name: str) -> None:
    assert player_names([name]) == (unicodedata.normalize("NFC", name).strip(),)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("", "1 to 32 characters", id="empty"),
        pytest.param("   \t ", "1 to 32 characters", id="only-whitespace"),
        pytest.param("x" * (MAX_NAME + 1), "1 to 32 characters", id="33-characters"),
        pytest.param("Ada\x00", "U\\+0000", id="nul"),
        pytest.param("A\x1bda", "U\\+001B", id="escape"),
        pytest.param("A\x7fda", "U\\+007F", id="delete"),
        pytest.param("Ada\u202eneB", "U\\+202E", id="bidi-override"),
        pytest.param("A\u2066da", "U\\+2066", id="bidi-isolate"),
        pytest.param("\u200fAda", "U\\+200F", id="right-to-left-mark"),
        pytest.param("A\u200bda", "U\\+200B", id="zero-width-space"),
        pytest.param("A\u200dda", "U\\+200D", id="zero-width-joiner"),
        pytest.param("A\ufeffda", "U\\+FEFF", id="byte-order-mark"),
        pytest.param("A\u2028da", "U\\+2028", id="line-separator"),
        pytest.param("A\ue000da", "U\\+E000", id="private-use"),
        pytest.param("A\ud800da", "U\\+D800", id="lone-surrogate"),
        pytest.param("A\U000e0001da", "U\\+E0001", id="language-tag"),
    ],
)
def test_names_breaking_the_rules_are_refused_with_a_reason(name: str, message: str) -> None:
    with pytest.raises(BadName, match=message) as refused:
        player_names(["Ben", name])
    assert refused.value.code == "bad_request" and isinstance(refused.value, BadRequest)
    assert refused.value.message.startswith("seat 1: ")


@pytest.mark.parametrize(
    "other",
    [
        pytest.param("Ada", id="same"),
        pytest.param("ADA", id="other-case"),
        pytest.param(" ada ", id="other-case-padded"),
        pytest.param("Ａｄａ", id="fullwidth"),
    ],
)
def test_names_are_unique_in_a_game_ignoring_case_and_width(other: str) -> None:
    with pytest.raises(BadName, match="already seat 0's"):
        decide(domain.Game(), CreateGame(game_id="g", players=("Ada", other)))


def test_the_sharp_s_and_its_capital_form_are_one_name() -> None:
    with pytest.raises(BadName):
        player_names(["Straße", "STRASSE"])
