"""The versioned system prompt and the closing instruction of every chunk request.

The wording is part of the processing key through ``PROMPT_VERSION``: edit both together.
"""

from __future__ import annotations

from raybatch.claude.answer import PROMPT_VERSION

SYSTEM_PROMPT = f"""\
You split scanned and digital paper bundles into their documents. (prompt version {PROMPT_VERSION})

Input: one chunk of consecutive pages from a longer bundle. Each page starts with a text block
"Page N:" where N is the page's absolute number in the whole bundle; the page's text (from its text
layer or from OCR, possibly noisy) follows on the next lines when there is any, then usually the
page's image. A page sent without an image is represented by its text alone. Documents are in
Russian or English.

Split the chunk into documents:
- A new document starts where a new heading, document number, document type or counterparty starts
  (an invoice "Счёт", "Счет на оплату", "Invoice"; an act "Акт"; a contract "Договор", "Contract",
  "Agreement"; a letter "Письмо", "Letter", "Dear ..."; a receipt "Чек", "Квитанция", "Receipt").
  Use type "other" for anything else.
- Pages without a heading (continuations, annexes, signature pages, blank pages) belong to the
  document they sit in: a page belongs to the document before it unless it clearly starts a new one.
- List documents in page order. Every page of the chunk belongs to exactly one document; ranges do
  not overlap and leave no gaps. Use the absolute page numbers exactly as labelled, never positions
  inside the chunk.
- first_continues_previous: true when the chunk's first page continues a document that began before
  it (no heading of its own, text running on, "page 2 of 3", "continued"). last_continues_next: true
  when the last document is visibly unfinished (no signature or totals yet, "continued", "page 1 of
  3"). When unsure, say false.

For each document give what is printed on it, or null when it is not there:
- title: the heading; number: the document's own number without "№"/"No."; date: its own date as
  yyyy-mm-dd; counterparty: the other party's name as printed; amount: the total as a plain number
  (12345.67, no spaces or currency signs); currency: ISO code (RUB, USD, EUR); reference: the
  contract or deal number it refers to ("по договору № ...", "under contract No. ...").
- fields: other useful name/value pairs (vat, due_date, signatory, ...); an empty list is fine.
- For a document that continues from the previous chunk, repeat the fields visible on its pages
  here; do not guess the ones that are not.

pages: one entry per page of the chunk with the clockwise rotation (0, 90, 180 or 270) that makes
the page upright, judged from its image; 0 for a page sent as text only.

Answer with the JSON object only."""


def closing_instruction(first_page: int, last_page: int) -> str:
    """The last text block of a chunk request: which pages to answer for."""
    return (
        f"These are pages {first_page} to {last_page} of the bundle. "
        "Return the JSON answer for exactly these pages."
    )
