"""Helpers of the table tests: phone-sized browser contexts, what a phone can tap and scroll, and QR codes
read back from a page's pixels with a real decoder (zxing-cpp)."""

from __future__ import annotations

import io
from typing import Any

import pytest

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1400, "height": 900}
# The smallest touch target a phone page may have, in CSS pixels.
TOUCH = 44

# Each visible control a finger taps, and its size: a radio button or a checkbox is tapped through its
# label, so the label is measured.
CONTROLS_JS = """() => [...document.querySelectorAll('button, a, input, select')].map((e) => {
    const target = (e.type === 'radio' || e.type === 'checkbox') ? (e.closest('label') ?? e) : e;
    const box = target.getBoundingClientRect();
    const style = getComputedStyle(target);
    const words = (e.textContent || e.value || '').trim().slice(0, 30);
    return {what: `${e.tagName.toLowerCase()}#${e.id}.${e.className} "${words}"`,
            width: box.width, height: box.height, shown: box.width > 0 && box.height > 0
              && style.visibility !== 'hidden'};
}).filter((c) => c.shown)"""


async def new_phone(browser: Any, errors: list[str]) -> Any:
    """A page in a phone-sized context (390x844, touch); its script errors go to `errors`."""
    context = await browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=1)
    page = await context.new_page()
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    return page


async def new_desktop(browser: Any, errors: list[str]) -> Any:
    """A page in a desktop-sized context (1400x900)."""
    context = await browser.new_context(viewport=DESKTOP)
    page = await context.new_page()
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))
    return page


async def check_fits_phone(page: Any) -> None:
    """The page scrolls no sideways on a 390 px screen, and each control a finger taps is 44 px or more."""
    width = await page.evaluate("() => document.scrollingElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width} px wide"
    small = [
        c for c in await page.evaluate(CONTROLS_JS) if c["width"] < TOUCH - 0.5 or c["height"] < TOUCH - 0.5
    ]
    assert small == [], f"{page.url}: touch targets under {TOUCH} px: {small}"


def zxing() -> Any:
    """The zxing-cpp module, or a skip naming the missing package."""
    try:
        import zxingcpp
    except ImportError:
        pytest.skip("zxing-cpp is not installed (pip install -e '.[test]')")
    return zxingcpp


def decode_qrs(png: bytes) -> list[str]:
    """The text of every QR code in a PNG screenshot, read by zxing-cpp."""
    from PIL import Image

    found = zxing().read_barcodes(Image.open(io.BytesIO(png)).convert("L"))
    return [result.text for result in found if result.format == zxing().BarcodeFormat.QRCode]


async def qr_texts(page: Any) -> list[str]:
    """What the QR codes drawn on the page hold, decoded from a screenshot of its pixels."""
    return decode_qrs(await page.screenshot(full_page=True))
