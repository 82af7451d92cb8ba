"""The emulator's default "model": reads the page texts of one chunk and answers by simple rules.

It relies on the sample corpus's printed conventions (``raybatch.samples.vocab``) and shrugs off
OCR noise: case, lost spaces, a dropped letter, Cyrillic/Latin look-alikes.

- A page whose footer reads ``<number> · Page k of n`` (or ``Стр. k/n``) starts a document when k = 1
  and continues one otherwise; the footer also tells where the document ends (n counts blank pages).
- Without a footer, a title line ``<TITLE> No. <number>`` near the top starts a document.
- A page with neither (blank, or unreadable) continues the current document.
- Fields come from the first page's ``Label: value`` lines; the type from the title's words, else the
  number's prefix (``INV-``, ``ACT-``, ``D-``, ``LTR-``, ``RCP-``), which survives an OCR engine that
  cannot read Cyrillic.
- Rotation cannot be read from text: every page answers 0.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from raybatch.claude.answer import ChunkAnswer, DocType, FoundDocument, NamedField, PageRotation
from raybatch.models import field_values
from raybatch.samples.truth import TruthBundle
from raybatch.steps.group import LOOKALIKES

_NUMBER = r"[a-z]{1,3}-\d{2,4}-\d{3,4}(?!\d)"
_NUMBER_RE = re.compile(rf"\b{_NUMBER}")
# OCR reads the reference's "D" as 0 or O now and then; the digits after it are what matter.
_REFERENCE_RE = re.compile(r"\b[d0o]-\d{4}-\d{3}(?!\d)")
_FOOTER_RE = re.compile(
    rf"\b(?P<num>{_NUMBER})\W*(?:[^\W\d_]+\.?\s*)?(?P<k>\d{{1,3}})\s*(?:/|[^\W\d_]{{1,3}})\s*(?P<n>\d{{1,3}})\b"
)
_TITLE_RE = re.compile(rf"^\W*(?P<words>[^\W\d_][^\d]*?)\s*\bn[o°]?\.?\s*(?P<num>{_NUMBER})")
_ISO_DATE = re.compile(r"(\d{4})\s*-\s*(\d{2})\s*-\s*(\d{2})")
_DOTTED_DATE = re.compile(r"(\d{2})\s*\.\s*(\d{2})\s*\.\s*(\d{4})")
_AMOUNT_RE = re.compile(r"(\d[\d\s.,]*\d|\d)\s*([a-z]{3})\b")
TITLE_LINES = 4  # a title sits among the first lines of its page, never deep in the text

_TYPE_WORDS = {
    DocType.INVOICE: ("invoice", "счет", "оплату"),
    DocType.ACT: ("acceptance", "certificate", "акт", "сдачи", "приемки"),
    DocType.CONTRACT: ("supply", "contract", "договор", "поставки"),
    DocType.LETTER: ("letter", "письмо"),
    DocType.RECEIPT: ("receipt", "квитанция"),
}
_TYPE_BY_PREFIX = {
    "INV": DocType.INVOICE,
    "ACT": DocType.ACT,
    "D": DocType.CONTRACT,
    "LTR": DocType.LETTER,
    "RCP": DocType.RECEIPT,
}
_LABELS = {
    "date": ("date", "дата"),
    "counterparty": ("counterparty", "контрагент"),
    "reference": ("reference", "основание"),
    "amount": ("amount", "сумма"),
}


def fold(text: str) -> str:
    """Lower case, no diacritics, Cyrillic look-alikes as Latin: what survives OCR, compared."""
    decomposed = unicodedata.normalize("NFKD", text)  # "№" becomes "No", "ё" an "е" and a mark
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return plain.lower().translate(LOOKALIKES)


_FOLDED_TYPE_WORDS = {t: tuple(fold(w) for w in words) for t, words in _TYPE_WORDS.items()}
_FOLDED_LABELS = {name: tuple(fold(w) for w in words) for name, words in _LABELS.items()}


def near(word: str, keyword: str) -> bool:
    """Equal, or for keywords of 5+ letters at most one letter dropped, added or changed."""
    if word == keyword:
        return True
    if len(keyword) < 5 or abs(len(word) - len(keyword)) > 1:
        return False
    if len(word) == len(keyword):
        return sum(a != b for a, b in zip(word, keyword, strict=True)) <= 1
    short, long = sorted((word, keyword), key=len)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


@dataclass(frozen=True)
class Footer:
    """``<number> · Page k of n``."""

    number: str
    k: int
    n: int


@dataclass(frozen=True)
class Title:
    """A title line: its text, the type its words name (if any) and the document number."""

    text: str
    type: DocType | None
    number: str


@dataclass
class PageFacts:
    """What one page's text says about where it belongs."""

    page: int
    text: str
    footer: Footer | None
    title: Title | None

    @property
    def starts(self) -> bool | None:
        """True: a document starts here; False: one continues; None: the page does not say."""
        if self.footer:
            return self.footer.k == 1
        return True if self.title else None

    @property
    def number(self) -> str | None:
        """The document number this page prints."""
        return self.footer.number if self.footer else self.title.number if self.title else None


def read_page(page: int, text: str) -> PageFacts:
    """Footer and title of one page."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    footer = None
    for line in reversed(lines):
        match = _FOOTER_RE.search(fold(line))
        if match and 1 <= int(match["k"]) <= int(match["n"]):
            footer = Footer(match["num"].upper(), int(match["k"]), int(match["n"]))
            break
    title = next(filter(None, (read_title(line) for line in lines[:TITLE_LINES])), None)
    return PageFacts(page, text, footer, title)


def read_title(line: str) -> Title | None:
    """A title line, or None."""
    match = _TITLE_RE.match(fold(line))
    if not match:
        return None
    words = re.findall(r"[^\W\d_]+", match["words"])
    if not any(near(words[0], key) for keys in _FOLDED_TYPE_WORDS.values() for key in keys):
        return None  # "Regarding invoice No. ..." mentions a document, it is not a title
    votes = {t: sum(near(w, k) for w in words for k in keys) for t, keys in _FOLDED_TYPE_WORDS.items()}
    best = max(votes, key=lambda t: votes[t])
    return Title(line, best if votes[best] else None, match["num"].upper())


@dataclass
class Part:
    """The pages of one document that lie in this chunk."""

    continued: bool
    pages: list[PageFacts] = field(default_factory=list)

    @property
    def number(self) -> str | None:
        """The first document number any of its pages prints."""
        return next((p.number for p in self.pages if p.number), None)

    @property
    def expected_last(self) -> int | None:
        """The document's last page in the source, from any footer."""
        return next((p.page - p.footer.k + p.footer.n for p in self.pages if p.footer), None)


def split_parts(facts: Sequence[PageFacts]) -> list[Part]:
    """Group consecutive pages into documents."""
    parts: list[Part] = []
    for page in facts:
        current = parts[-1] if parts else None
        foreign = bool(current and page.number and current.number and page.number != current.number)
        if current and page.starts is not True and not foreign:
            current.pages.append(page)
        else:
            parts.append(Part(continued=page.starts is not True, pages=[page]))
    return parts


def answer_chunk(pages: list[tuple[int, str]]) -> ChunkAnswer:
    """Answer one chunk of up to 8 consecutive pages, given each page's number and text."""
    if not pages:
        return ChunkAnswer(first_continues_previous=False, last_continues_next=False, documents=[], pages=[])
    parts = split_parts([read_page(page, text) for page, text in pages])
    last_page = pages[-1][0]
    expected = parts[-1].expected_last
    return ChunkAnswer(
        first_continues_previous=parts[0].continued,
        last_continues_next=expected is None or expected > last_page,
        documents=[describe(part) for part in parts],
        pages=[PageRotation(page=page, rotation=0) for page, _ in pages],
    )


def describe(part: Part) -> FoundDocument:
    """The document a part shows: boundaries, type and the fields its pages print."""
    # title and labels are printed on a document's first page only
    start_text = "" if part.continued else part.pages[0].text
    title = None if part.continued else part.pages[0].title
    labels = read_labels(start_text)
    amount, currency = parse_amount(labels.get("amount", ""))
    found = _first(_REFERENCE_RE, labels.get("reference", "")) or _first(
        _REFERENCE_RE, "\n".join(p.text for p in part.pages)
    )
    reference = f"D{found[1:]}" if found else None
    values = {
        "title": title.text if title else None,
        "date": parse_date(labels.get("date", "")) or parse_date(start_text),
        "number": part.number,
        "counterparty": labels.get("counterparty") or None,
        "amount": amount,
        "currency": currency,
        "reference": reference,
    }
    return FoundDocument.model_validate(
        {
            "first_page": part.pages[0].page,
            "last_page": part.pages[-1].page,
            "type": doc_type(title, part.number),
            "fields": [NamedField(name="language", value=language("\n".join(p.text for p in part.pages)))],
            **values,
        }
    )


def doc_type(title: Title | None, number: str | None) -> DocType:
    """The title's words decide; else the number's prefix (INV-, ACT-, D-, LTR-, RCP-)."""
    if title and title.type:
        return title.type
    prefix = number.split("-", 1)[0] if number else ""
    return _TYPE_BY_PREFIX.get(prefix, DocType.OTHER)


def read_labels(text: str) -> dict[str, str]:
    """The first value of each known ``Label: value`` line (the label may be misspelt by OCR)."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        head, sep, tail = line.partition(":")
        if not sep:
            head, _, tail = line.partition(" ")
        label = fold(head).strip()
        for name, keys in _FOLDED_LABELS.items():
            if name not in found and any(near(label, key) for key in keys):
                found[name] = tail.strip()
    return found


def parse_date(text: str) -> str | None:
    """The first valid date in ``yyyy-mm-dd`` or ``dd.mm.yyyy``, as ISO 8601."""
    candidates = [(m.start(), m[1], m[2], m[3]) for m in _ISO_DATE.finditer(text)]
    candidates += [(m.start(), m[3], m[2], m[1]) for m in _DOTTED_DATE.finditer(text)]
    for _, year, month, day in sorted(candidates):
        try:
            return date(int(year), int(month), int(day)).isoformat()
        except ValueError:
            continue
    return None


def parse_amount(value: str) -> tuple[float | None, str | None]:
    """``12,345.50 USD`` or ``12 345,50 RUB`` → (12345.5, currency)."""
    match = _AMOUNT_RE.search(fold(value))
    if not match:
        return None, None
    digits = re.sub(r"\s", "", match[1])
    decimal = max(digits.rfind(","), digits.rfind("."))
    if decimal >= 0 and len(digits) - decimal - 1 == 2:
        digits = re.sub(r"[.,]", "", digits[:decimal]) + "." + digits[decimal + 1 :]
    else:
        digits = re.sub(r"[.,]", "", digits)
    return float(digits), match[2].upper()


def language(text: str) -> str:
    """``ru`` when a good share of the letters are Cyrillic, else ``en``."""
    letters = [c for c in text if c.isalpha()]
    cyrillic = sum(1 for c in letters if "CYRILLIC" in unicodedata.name(c, ""))
    return "ru" if letters and cyrillic / len(letters) > 0.3 else "en"


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    match = pattern.search(fold(text))
    return match[0].upper() if match else None


def answer_from_truth(truth_bundle: TruthBundle | Mapping[str, Any], pages: list[int]) -> ChunkAnswer:
    """The exact answer for a chunk of a sample bundle, from its truth (an oracle responder)."""
    bundle = (
        truth_bundle if isinstance(truth_bundle, TruthBundle) else TruthBundle.model_validate(truth_bundle)
    )
    first, last = min(pages), max(pages)
    docs = [d for d in bundle.documents if d.first_page <= last and d.last_page >= first]
    found = [
        FoundDocument.model_validate(
            {
                "first_page": max(d.first_page, first),
                "last_page": min(d.last_page, last),
                "type": d.type,
                **field_values(d),
                "fields": [NamedField(name="language", value=d.language)],
            }
        )
        for d in docs
    ]
    rotation = {info.page: info.rotation for info in bundle.page_info}
    return ChunkAnswer(
        first_continues_previous=bool(docs) and docs[0].first_page < first,
        last_continues_next=bool(docs) and docs[-1].last_page > last,
        documents=found,
        pages=[PageRotation(page=p, rotation=rotation.get(p, 0)) for p in pages],
    )
