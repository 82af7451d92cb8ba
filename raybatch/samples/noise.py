"""OCR-like noise for page text: flipped case, Cyrillic/Latin look-alikes, lost spaces, dropped letters.

Digits are never touched: a dropped digit is lost information no reader can recover, while the
rules must shrug off everything else.
"""

from __future__ import annotations

import random
import re

_LATIN, _CYRILLIC = "ABCEHKMOPTXaceopxy", "АВСЕНКМОРТХасеорху"
LOOKALIKES = dict(zip(_LATIN + _CYRILLIC, _CYRILLIC + _LATIN, strict=True))
_WORD = re.compile(r"[^\W\d_]{5,}")


def add_ocr_noise(text: str, seed: int | str, rate: float = 0.08) -> str:
    """``text`` as a sloppy OCR engine might read it; the same seed gives the same noise."""
    rng = random.Random(f"ocr-noise:{seed}")
    text = _WORD.sub(lambda m: _drop_letter(m.group(0), rng, rate * 2), text)
    chars = []
    for char in text:
        roll = rng.random()
        if char == " " and roll < rate / 2:
            continue  # a lost space
        if char.isalpha() and roll < rate:
            char = char.swapcase()
        elif char in LOOKALIKES and roll < 3 * rate:
            char = LOOKALIKES[char]
        chars.append(char)
    return "".join(chars)


def _drop_letter(word: str, rng: random.Random, rate: float) -> str:
    if rng.random() >= rate:
        return word
    at = rng.randrange(len(word))
    return word[:at] + word[at + 1 :]
