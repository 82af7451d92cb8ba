"""Compose: the printed lines of each page of one sample document (pure; no PDF is touched here)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date
from functools import cache

import pymupdf

from raybatch.claude.answer import DocType
from raybatch.samples import vocab

PAGE_SIZES = {
    "A4": (595.0, 842.0),
    "Letter": (612.0, 792.0),
    "A5": (420.0, 595.0),
    "A4-landscape": (842.0, 595.0),
}
MARGIN = 48.0
BODY_SIZE = 11.0
TITLE_SIZE = 14.0
SMALL_SIZE = 9.0
FOOTER_SIZE = 10.0


@dataclass(frozen=True)
class Line:
    """One printed line: its text, font size and weight."""

    text: str
    size: float = BODY_SIZE
    bold: bool = False


@dataclass(frozen=True)
class Deal:
    """A counterparty and deal reference that documents across bundles share."""

    key: str
    language: str
    counterparty: str
    reference: str
    currency: str
    start: date


@dataclass
class DocSpec:
    """What one document says, before it is laid out on pages."""

    type: DocType
    deal: Deal
    date: date
    number: str
    amount_cents: int | None
    pages: int
    items: list[tuple[str, int, int]] = field(default_factory=list)  # (name, quantity, unit price cents)
    mention: str | None = None  # an invoice number a letter refers to

    @property
    def language(self) -> str:
        """The document's language: its deal's."""
        return self.deal.language

    @property
    def title(self) -> str:
        """The title line as printed."""
        return vocab.TITLES[self.language][self.type].format(number=self.number)

    @property
    def currency(self) -> str | None:
        """The amount's currency, when there is an amount."""
        return None if self.amount_cents is None else self.deal.currency


@cache
def font(bold: bool = False) -> pymupdf.Font:
    """The sample corpus's font (Noto Sans: Latin and Cyrillic), from pymupdf-fonts."""
    return pymupdf.Font("notosbo" if bold else "notos")


def text_width(text: str, size: float, bold: bool = False) -> float:
    """Printed width of ``text`` in points (per-glyph advances, cached: Font.text_length is slow)."""
    return size * sum(_advance(char, bold) for char in text)


@cache
def _advance(char: str, bold: bool) -> float:
    return font(bold).glyph_advance(ord(char))


def money(cents: int, language: str) -> str:
    """An amount as printed: ``12,345.50`` in English, ``12 345,50`` in Russian."""
    whole, frac = divmod(cents, 100)
    text = f"{whole:,}.{frac:02d}"
    return text.replace(",", " ").replace(".", ",") if language == "ru" else text


def print_date(day: date, language: str) -> str:
    """A date as printed: ISO in English, ``dd.mm.yyyy`` in Russian."""
    return day.isoformat() if language == "en" else day.strftime("%d.%m.%Y")


def wrap(text: str, width: float, size: float = BODY_SIZE) -> list[str]:
    """Split text into lines no wider than ``width`` points."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        candidate = f"{current} {word}".strip()
        if current and text_width(candidate, size) > width:
            lines.append(current)
            current = word
        else:
            current = candidate
    return [*lines, current] if current else lines


def header_lines(spec: DocSpec) -> list[Line]:
    """Letterhead, title and the labelled fields of a first page."""
    lang = spec.language
    labels = vocab.LABELS[lang]
    lines = [
        Line(vocab.LETTERHEAD[lang], SMALL_SIZE),
        Line(spec.title, TITLE_SIZE, bold=True),
        Line(f"{labels['date']}: {print_date(spec.date, lang)}"),
        Line(f"{labels['counterparty']}: {spec.deal.counterparty}"),
        Line(f"{labels['reference']}: {spec.deal.reference}"),
    ]
    if spec.amount_cents is not None:
        lines.append(Line(f"{labels['amount']}: {money(spec.amount_cents, lang)} {spec.currency}"))
    return lines


def footer(spec: DocSpec, k: int) -> str:
    """The footer of page ``k`` of the document."""
    return vocab.FOOTER[spec.language].format(number=spec.number, k=k, n=spec.pages)


def body_texts(spec: DocSpec, rng: random.Random) -> Iterator[str]:
    """Paragraphs of the document's body, without end (pages take what they need)."""
    lang = spec.language
    if spec.type in (DocType.INVOICE, DocType.ACT):
        if spec.type is DocType.ACT:
            yield from vocab.ACT_LINES[lang]
        for i, (name, qty, price) in enumerate(spec.items, start=1):
            yield f"{i}. {name} — {qty} × {money(price, lang)} = {money(qty * price, lang)}"
    elif spec.type is DocType.LETTER:
        *body, closing = vocab.LETTER_LINES[lang]
        yield from body
        if spec.mention:
            yield vocab.LETTER_MENTION[lang].format(number=spec.mention)
        yield closing
    elif spec.type is DocType.RECEIPT:
        yield vocab.RECEIPT_LINES[lang].format(
            counterparty=spec.deal.counterparty, reference=spec.deal.reference
        )
    yield from _filler(lang, spec.type, rng)


def _filler(language: str, doc_type: DocType, rng: random.Random) -> Iterator[str]:
    """Contract clauses in numbered sections; for other documents, notes and terms."""
    if doc_type is not DocType.CONTRACT:
        yield vocab.NOTES_HEADING[language]
        while True:
            yield from rng.sample(vocab.NOTES[language], len(vocab.NOTES[language]))
    section = 0
    while True:
        section += 1
        yield vocab.SECTION[language].format(k=section)
        yield from rng.sample(vocab.CLAUSES[language], 3)


def page_lines(spec: DocSpec, sizes: list[str], blanks: set[int], rng: random.Random) -> list[list[Line]]:
    """The body lines of every page (footer not included); a blank page gets none."""
    paragraphs = body_texts(spec, rng)
    pending: list[str] = []
    pages: list[list[Line]] = []
    for k, size in enumerate(sizes, start=1):
        if k in blanks:
            pages.append([])
            continue
        width = PAGE_SIZES[size][0] - 2 * MARGIN
        pending = wrap(" ".join(pending), width)  # page widths differ: re-wrap what is left over
        lines = header_lines(spec) if k == 1 else []
        budget = rng.randint(6, 14) if size != "A5" else rng.randint(4, 8)
        for _ in range(budget):
            if not pending:
                pending = wrap(next(paragraphs), width)
            lines.append(Line(pending.pop(0)))
        if k == spec.pages and spec.type in (DocType.CONTRACT, DocType.ACT):
            lines.extend(Line(text) for text in vocab.SIGNATURES[spec.language])
        pages.append(lines)
    return pages
