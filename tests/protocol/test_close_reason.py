"""Close reasons fit a close frame: at most 123 UTF-8 bytes, cut at a character boundary."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from server.protocol.codes import POLICY
from server.protocol.session import MAX_CLOSE_REASON_BYTES, CloseConnection, Session, close_reason


def test_a_short_reason_is_kept_whole() -> None:
    assert close_reason("no such game") == "no such game"
    assert close_reason("é" * 61) == "é" * 61  # 122 bytes


def test_a_long_reason_is_cut_at_123_bytes_never_inside_a_character() -> None:
    assert close_reason("x" * 200) == "x" * 123
    cut = close_reason("é" * 100)  # 2 bytes each: 61 whole characters fit, the 62nd would not
    assert cut == "é" * 61 and len(cut.encode()) == 122
    cut = close_reason("a" + "🎻" * 40)  # 1 + 4 * 30 = 121 bytes; the 31st would need 125
    assert cut == "a" + "🎻" * 30


def test_a_character_utf8_cannot_encode_becomes_a_question_mark() -> None:
    assert close_reason("bad \ud800 reason") == "bad ? reason"


@given(st.text(max_size=300))
def test_any_reason_cut_is_a_prefix_of_at_most_123_bytes(text: str) -> None:
    cut = close_reason(text)
    data = cut.encode("utf-8")  # encodes: no lone surrogate is left
    assert len(data) <= MAX_CLOSE_REASON_BYTES
    assert text.encode("utf-8", "replace").startswith(data)
    if len(text.encode("utf-8", "replace")) <= MAX_CLOSE_REASON_BYTES:
        assert data == text.encode("utf-8", "replace")


def test_a_refusal_with_a_long_non_ascii_message_closes_with_a_reason_that_fits() -> None:
    session = Session()
    actions = session.refuse("forbidden", "é" * 200, POLICY)
    close = actions[-1]
    assert isinstance(close, CloseConnection) and close.code == POLICY
    assert close.reason == "é" * 61 and len(close.reason.encode()) <= MAX_CLOSE_REASON_BYTES
