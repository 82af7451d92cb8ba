"""Plan the sample corpus (pure and deterministic): deals, the documents of each bundle, and every
page's size, text, scan, rotation and blankness. Rendering it to PDF is ``raybatch.samples.render``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta

from raybatch.claude.answer import DocType
from raybatch.samples import vocab
from raybatch.samples.compose import FOOTER_SIZE, Deal, DocSpec, Line, footer, page_lines
from raybatch.samples.truth import group_key

MIN_PAGES, MAX_PAGES = 20, 40
CHUNK = 8  # pages per Claude request: documents are laid across these borders on purpose
ROTATIONS = (90, 180, 270)
# (scanned, rotation) pairs the corpus always holds, whatever the seed
REQUIRED_TURNS = ((False, 90), (False, 180), (False, 270), (True, 90), (True, 180), (True, 270))
PAGES_BY_TYPE = {
    DocType.CONTRACT: (3, 10),
    DocType.INVOICE: (1, 3),
    DocType.ACT: (1, 2),
    DocType.LETTER: (1, 2),
    DocType.RECEIPT: (1, 1),
}


@dataclass
class PlannedPage:
    """One page as it will be printed; ``rotation`` is the clockwise turn that makes it upright."""

    size: str
    scanned: bool = False
    rotation: int = 0
    blank: bool = False
    lines: list[Line] = field(default_factory=list)
    footer: str | None = None

    @property
    def printed(self) -> list[Line]:
        """Every line on the page, top to bottom, footer last."""
        return [*self.lines, Line(self.footer, FOOTER_SIZE)] if self.footer else list(self.lines)

    @property
    def text(self) -> str:
        """The page's text as printed, one line per line, in reading order."""
        return "\n".join(line.text for line in self.printed)


@dataclass
class PlannedDocument:
    """One document of a bundle and its pages."""

    spec: DocSpec
    pages: list[PlannedPage]


@dataclass
class PlannedBundle:
    """One PDF of the corpus."""

    file: str
    documents: list[PlannedDocument]

    @property
    def pages(self) -> list[PlannedPage]:
        """All pages of the bundle, in order."""
        return [page for doc in self.documents for page in doc.pages]


@dataclass
class CorpusPlan:
    """The whole corpus, ready to render."""

    seed: int
    deals: list[Deal]
    bundles: list[PlannedBundle]


def plan_corpus(bundles: int = 6, seed: int = 7) -> CorpusPlan:
    """The corpus that ``write_samples(out, bundles, seed)`` writes, page text included."""
    if bundles < 1:
        raise ValueError("bundles must be at least 1")
    rng = random.Random(f"raybatch-samples:{seed}")
    deals = make_deals(rng, max(3, bundles + 2))
    numbering = _Numbering(rng)
    per_bundle: list[list[DocSpec]] = [[] for _ in range(bundles)]
    for i, deal in enumerate(deals):
        first, later = i % bundles, (i + 2) % bundles
        for spec in deal_documents(deal, rng, numbering):
            home = first if spec.type is DocType.CONTRACT else rng.choice((first, later, later))
            per_bundle[home].append(spec)
    planned = []
    for b, specs in enumerate(per_bundle):
        specs = sorted(specs, key=lambda s: (s.date, s.number))
        fill_bundle(specs, rng, numbering, deals, target=rng.randint(22, 34))
        trim_bundle(specs)
        shape_borders(specs, b)
        trim_bundle(specs)
        fill_bundle(specs, rng, numbering, deals, target=MIN_PAGES)  # appended after page 9: borders hold
        planned.append(PlannedBundle(f"bundle_{b:03d}.pdf", [lay_out(spec, rng) for spec in specs]))
    force_coverage(planned, rng)
    for bundle in planned:
        for doc in bundle.documents:
            compose(doc, rng)
    return CorpusPlan(seed=seed, deals=deals, bundles=planned)


def make_deals(rng: random.Random, count: int) -> list[Deal]:
    """Deals alternate languages; each has its own counterparty, reference, currency and start date."""
    refs = rng.sample(range(1, 999), count)
    parties = {
        lang: rng.sample(vocab.COUNTERPARTIES[lang], len(vocab.COUNTERPARTIES[lang]))
        for lang in vocab.LANGUAGES
    }
    deals = []
    for i in range(count):
        lang = vocab.LANGUAGES[i % 2]
        party = parties[lang][(i // 2) % len(parties[lang])]
        start = date(2024, 1, 8) + timedelta(days=rng.randint(0, 300))
        reference = f"D-{start.year}-{refs[i]:03d}"
        currency = rng.choice(vocab.CURRENCIES[lang])
        deals.append(Deal(group_key(party, reference), lang, party, reference, currency, start))
    return deals


class _Numbering:
    """Unique, increasing document numbers per type: ``INV-24-0153``."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._next = {prefix: rng.randint(10, 400) for prefix in vocab.NUMBER_PREFIX.values()}

    def number(self, doc_type: DocType, deal: Deal, day: date) -> str:
        if doc_type is DocType.CONTRACT:
            return deal.reference
        prefix = vocab.NUMBER_PREFIX[doc_type]
        self._next[prefix] += self._rng.randint(1, 25)
        return f"{prefix}-{day.year % 100:02d}-{self._next[prefix]:04d}"


def deal_documents(deal: Deal, rng: random.Random, numbering: _Numbering) -> list[DocSpec]:
    """A contract, then invoices, an act, and maybe a letter and a receipt, in date order."""
    types = [DocType.CONTRACT] + [DocType.INVOICE] * rng.randint(1, 2) + [DocType.ACT]
    types += [t for t in (DocType.LETTER, DocType.RECEIPT) if rng.random() < 0.6]
    specs: list[DocSpec] = []
    day = deal.start
    for doc_type in types:
        specs.append(new_document(doc_type, deal, day, rng, numbering, specs))
        day += timedelta(days=rng.randint(3, 40))
    return specs


def new_document(
    doc_type: DocType,
    deal: Deal,
    day: date,
    rng: random.Random,
    numbering: _Numbering,
    earlier: list[DocSpec],
) -> DocSpec:
    """One document of a deal, with its items and amount."""
    low, high = PAGES_BY_TYPE[doc_type]
    spec = DocSpec(doc_type, deal, day, numbering.number(doc_type, deal, day), None, rng.randint(low, high))
    if doc_type in (DocType.INVOICE, DocType.ACT, DocType.CONTRACT):
        names = rng.sample(vocab.ITEMS[deal.language], rng.randint(2, 6))
        spec.items = [
            (name, rng.randint(1, 12), rng.randint(50, 5000) * 100 + rng.choice((0, 50))) for name in names
        ]
        spec.amount_cents = sum(qty * price for _, qty, price in spec.items)
    elif doc_type is DocType.RECEIPT:
        spec.amount_cents = rng.randint(1000, 90000) * 10
    invoices = [s.number for s in earlier if s.type is DocType.INVOICE]
    if doc_type is DocType.LETTER and invoices:
        spec.mention = rng.choice(invoices)
    return spec


def fill_bundle(
    specs: list[DocSpec], rng: random.Random, numbering: _Numbering, deals: list[Deal], target: int
) -> list[DocSpec]:
    """Add letters, invoices, acts and receipts of the bundle's deals until it has ``target`` pages."""
    pool = [s.deal for s in specs] or deals[:1]
    while sum(s.pages for s in specs) < target:
        deal = rng.choice(pool)
        latest = max((s.date for s in specs if s.deal is deal), default=deal.start)
        day = latest + timedelta(days=rng.randint(2, 20))
        kind = rng.choice((DocType.LETTER, DocType.INVOICE, DocType.INVOICE, DocType.ACT, DocType.RECEIPT))
        specs.append(new_document(kind, deal, day, rng, numbering, [s for s in specs if s.deal is deal]))
    return specs


def trim_bundle(specs: list[DocSpec]) -> None:
    """Drop documents from the end until the bundle has at most MAX_PAGES pages."""
    while sum(s.pages for s in specs) > MAX_PAGES:
        last = max(i for i, s in enumerate(specs) if s.type is not DocType.CONTRACT)
        specs.pop(last)  # every deal keeps its contract


def starts(specs: list[DocSpec]) -> list[int]:
    """First page of each document, 1-based."""
    firsts, page = [], 1
    for spec in specs:
        firsts.append(page)
        page += spec.pages
    return firsts


def shape_borders(specs: list[DocSpec], b: int) -> None:
    """Bundle 0 holds a contract across two chunk borders; every third bundle has a document that
    starts right on page 9; the others have one that crosses pages 8|9."""
    if b == 0:
        _span_three_chunks(specs)
    if sum(s.pages for s in specs) <= CHUNK:
        return
    firsts = starts(specs)
    holder = max(i for i, first in enumerate(firsts) if first <= CHUNK)
    end = firsts[holder] + specs[holder].pages - 1
    if b % 3 == 1:
        specs[holder].pages = CHUNK - firsts[holder] + 1
    elif end == CHUNK:
        specs[holder].pages += 1


def _span_three_chunks(specs: list[DocSpec]) -> None:
    """A 15-page contract starting on page 3..8, after the smallest documents: it spans three chunks."""
    contract = max(specs, key=lambda s: (s.type is DocType.CONTRACT, s.pages))
    contract.pages = 15
    specs.remove(contract)
    front: list[DocSpec] = []
    for spec in sorted(specs, key=lambda s: s.pages):
        if sum(s.pages for s in front) >= 2:
            break
        front.append(spec)
    rest = [s for s in specs if s not in front]
    specs[:] = [*front, contract, *rest]


def lay_out(spec: DocSpec, rng: random.Random) -> PlannedDocument:
    """Size, scan, rotation and blankness of each page of one document (text comes later)."""
    base = "A5" if spec.type is DocType.RECEIPT else "A4"
    if spec.language == "en" and base == "A4" and rng.random() < 0.4:
        base = "Letter"
    whole_scan = rng.random() < 0.25
    pages = []
    for k in range(1, spec.pages + 1):
        page = PlannedPage(size=base, scanned=whole_scan or rng.random() < 0.06)
        if k > 1 and spec.type in (DocType.CONTRACT, DocType.INVOICE) and rng.random() < 0.12:
            page.size = "A4-landscape"
        page.blank = k > 1 and rng.random() < 0.05
        if not page.blank and rng.random() < 0.1:
            page.rotation = rng.choice(ROTATIONS)
        pages.append(page)
    return PlannedDocument(spec, pages)


def force_coverage(bundles: list[PlannedBundle], rng: random.Random) -> None:
    """Make sure the corpus holds every kind of page the tests and the pipeline must meet."""
    _force_blank_at_border(bundles[2 % len(bundles)])
    every = [
        (b, doc, k, page)
        for b, bundle in enumerate(bundles)
        for doc in bundle.documents
        for k, page in enumerate(doc.pages, start=1)
    ]
    for language in vocab.LANGUAGES:  # a scanned first page in each language: boundaries through OCR
        firsts = [p for _, d, k, p in every if k == 1 and d.spec.language == language]
        if firsts and not any(p.scanned for p in firsts):
            rng.choice(firsts).scanned = True
    for i, (scanned, rotation) in enumerate(REQUIRED_TURNS):
        if not any(p.scanned == scanned and p.rotation == rotation for *_, p in every):
            inner = [(b, p) for b, _, k, p in every if k > 1 and not p.blank]  # first pages keep their scan
            candidates = [p for b, p in inner if b == i % len(bundles)] or [p for _, p in inner]
            page = rng.choice(candidates or [p for *_, p in every if not p.blank])
            page.scanned, page.rotation = scanned, rotation
    _force_sizes(every, rng)


def _force_blank_at_border(bundle: PlannedBundle) -> None:
    """A blank page opening a chunk (page 9 or 17) that belongs to the document before it."""
    pages = bundle.pages
    firsts = {id(doc.pages[0]) for doc in bundle.documents}
    for number in (CHUNK + 1, 2 * CHUNK + 1):
        if number <= len(pages) and id(pages[number - 1]) not in firsts:
            page = pages[number - 1]
            page.blank, page.rotation = True, 0
            return


def _force_sizes(every: list[tuple[int, PlannedDocument, int, PlannedPage]], rng: random.Random) -> None:
    sizes = {p.size for *_, p in every}
    if "A4-landscape" not in sizes:
        rng.choice([p for _, _, k, p in every if k > 1]).size = "A4-landscape"
    if "A5" not in sizes:
        rng.choice([p for _, d, _, p in every if len(d.pages) == 1]).size = "A5"
    if "Letter" not in sizes:
        for page in rng.choice([d for _, d, _, _ in every if d.spec.language == "en"]).pages:
            page.size = "Letter"
    if not any(p.blank for *_, p in every):
        rng.choice([p for _, _, k, p in every if k > 1 and not p.rotation]).blank = True


def compose(doc: PlannedDocument, rng: random.Random) -> None:
    """Fill in each page's lines and footer from the document's spec and the pages' sizes."""
    spec = doc.spec
    blanks = {k for k, page in enumerate(doc.pages, start=1) if page.blank}
    texts = page_lines(spec, [page.size for page in doc.pages], blanks, rng)
    for k, (page, lines) in enumerate(zip(doc.pages, texts, strict=True), start=1):
        page.lines = lines
        page.footer = None if page.blank else footer(spec, k)
        if page.blank:
            page.rotation = 0
