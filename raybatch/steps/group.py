"""Group: documents of one deal (same counterparty, same contract or deal reference) share a key.

The fields come from the classes file's ``group_by`` (the default file: counterparty, reference):
the first is compared as a name, the others as references; a document is in a group when every one
of them says something. Pure.

Names are compared as skeletons that shrug off what OCR and people vary: case, spaces, quotes,
punctuation, legal forms (ООО, LLC, Ltd, ...), and Cyrillic/Latin look-alike letters.
``group_documents`` also forgives a letter or two lost from a counterparty's name when the
reference is the same.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

# Cyrillic letters that look like Latin ones, folded to the Latin (after casefolding).
LOOKALIKES = str.maketrans("авекмнорстухёіјѕ", "abekmhopctyxeijs")
_TOKEN = re.compile(r"[^\W_]+")
_GLUED_NO = re.compile(r"\bno(?=\d)")  # "No5": the mark written against its number
_SHORT_FORMS = (
    *("ооо", "оао", "зао", "пао", "нао", "ао", "ип", "чп", "тоо", "нко", "гуп", "муп", "фгуп"),
    *("llc", "ltd", "limited", "inc", "incorporated", "corp", "corporation", "co", "company"),
    *("gmbh", "ag", "sa", "plc", "llp", "lp", "bv", "nv"),
)
_LONG_FORMS = (
    "общество с ограниченной ответственностью",
    "публичное акционерное общество",
    "закрытое акционерное общество",
    "открытое акционерное общество",
    "акционерное общество",
    "индивидуальный предприниматель",
    "limited liability company",
    "public limited company",
)
_REFERENCE_FILLERS = (
    *("n", "no", "nr", "num", "number", "ref", "reference", "contract", "agreement", "deal"),
    *("договор", "контракт", "сделка", "номер", "основание"),
)


def _skeleton_tokens(text: str) -> list[str]:
    # "№" first: NFKC would spell it "No" and glue it to the number.
    folded = unicodedata.normalize("NFKC", text.replace("№", " ")).casefold()
    folded = _GLUED_NO.sub("no ", folded)
    tokens: list[str] = []
    initials = False  # the last token was built from one-letter tokens
    for token in _TOKEN.findall(folded):
        single = len(token) == 1 and token.isalpha()
        if single and initials:
            tokens[-1] += token.translate(LOOKALIKES)  # "L.L.C." reads as "llc", "О.О.О." as "ооо"
            continue
        tokens.append(token.translate(LOOKALIKES))
        initials = single
    return tokens


_SHORT = frozenset(token for form in _SHORT_FORMS for token in _skeleton_tokens(form))
_LONG = tuple(tuple(_skeleton_tokens(form)) for form in _LONG_FORMS)
_FILLERS = frozenset(token for word in _REFERENCE_FILLERS for token in _skeleton_tokens(word))


def normalize_counterparty(name: str | None) -> str:
    """The skeleton of a counterparty's name: no legal form, quotes, case, spaces or look-alikes."""
    tokens = _skeleton_tokens(name or "")
    for form in _LONG:
        tokens = _drop_phrase(tokens, form)
    return "".join(token for token in tokens if token not in _SHORT)


def normalize_reference(reference: str | None) -> str:
    """The skeleton of a contract or deal number: no "No."/"№"/"Contract", punctuation or case."""
    tokens = _skeleton_tokens(reference or "")
    while len(tokens) > 1 and tokens[0] in _FILLERS:
        tokens = tokens[1:]
    return "".join(tokens)


def _drop_phrase(tokens: list[str], phrase: tuple[str, ...]) -> list[str]:
    size = len(phrase)
    out, at = [], 0
    while at < len(tokens):
        if tuple(tokens[at : at + size]) == phrase:
            at += size
        else:
            out.append(tokens[at])
            at += 1
    return out


@dataclass(frozen=True)
class GroupIdentity:
    """What makes a group: its key, a label for people, and the skeletons it was made from (the
    name's, and the references' joined)."""

    key: str
    label: str
    counterparty: str
    reference: str


def group_identity(*values: object) -> GroupIdentity | None:
    """The group of the ``group_by`` values (a name, then references); None unless all say something."""
    texts = [None if value is None else str(value) for value in values]
    if not texts:
        return None
    party, refs = normalize_counterparty(texts[0]), [normalize_reference(text) for text in texts[1:]]
    if not party or not all(refs):
        return None
    digest = hashlib.sha1("\x1f".join([party, *refs]).encode(), usedforsecurity=False).hexdigest()
    label = " · ".join(" ".join((text or "").split()) for text in texts)
    return GroupIdentity(key=f"g_{digest[:16]}", label=label, counterparty=party, reference="\x1f".join(refs))


def group_key(*values: object) -> str | None:
    """A short stable key (``g_`` + 16 hex) for a counterparty and a reference; None if either is missing."""
    identity = group_identity(*values)
    return identity.key if identity else None


def group_label(*values: object) -> str | None:
    """A label for people: the counterparty and the reference as written."""
    identity = group_identity(*values)
    return identity.label if identity else None


def same_group(a: GroupIdentity, b: GroupIdentity) -> bool:
    """Same reference and the same counterparty, give or take a quarter of its letters."""
    if a.reference != b.reference:
        return False
    allowed = max(len(a.counterparty), len(b.counterparty)) // 4
    return edit_distance(a.counterparty, b.counterparty, limit=allowed) <= allowed


def edit_distance(a: str, b: str, *, limit: int) -> int:
    """Levenshtein distance, or ``limit + 1`` as soon as it is sure to exceed ``limit``."""
    if abs(len(a) - len(b)) > limit:
        return limit + 1
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, start=1):
        current = [i]
        for j, other in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


class Groupable(Protocol):
    """Anything with a counterparty and a reference (``DocumentRecord`` among others)."""

    @property
    def counterparty(self) -> str | None: ...

    @property
    def reference(self) -> str | None: ...


D = TypeVar("D")


DEFAULT_GROUP_BY = ("counterparty", "reference")


def resolve_identities(
    pairs: Iterable[Sequence[object]], known: Sequence[GroupIdentity] = ()
) -> list[GroupIdentity | None]:
    """The group of each tuple of values, near-spellings merged into a known group or the most
    common spelling."""
    identities = [group_identity(*values) for values in pairs]
    counts = Counter(identity for identity in identities if identity)
    chosen: list[GroupIdentity] = list(known)
    for identity, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0].key)):
        if not any(same_group(identity, other) for other in chosen):
            chosen.append(identity)
    return [_canonical(identity, chosen) for identity in identities]


def _canonical(identity: GroupIdentity | None, chosen: Sequence[GroupIdentity]) -> GroupIdentity | None:
    if identity is None:
        return None
    return next(other for other in chosen if same_group(identity, other))


def group_documents(
    docs: Sequence[D], known: Sequence[GroupIdentity] = (), fields: Sequence[str] = DEFAULT_GROUP_BY
) -> dict[str, list[D]]:
    """Documents by group key, in the order given; documents without a group are left out."""
    groups: dict[str, list[D]] = {}
    for doc, identity in zip(docs, resolve_identities(_pairs(docs, fields), known), strict=True):
        if identity is not None:
            groups.setdefault(identity.key, []).append(doc)
    return groups


def assign_groups(
    docs: Sequence[Any], known: Sequence[GroupIdentity] = (), fields: Sequence[str] = DEFAULT_GROUP_BY
) -> list[Any]:
    """Copies of frozen dataclass records (``DocumentRecord``) with ``group_key`` filled in (or None)."""
    identities = resolve_identities(_pairs(docs, fields), known)
    return [
        replace(doc, group_key=identity.key if identity else None)
        for doc, identity in zip(docs, identities, strict=True)
    ]


def group_values(doc: Any, fields: Sequence[str] = DEFAULT_GROUP_BY) -> tuple[object, ...]:
    """A document's ``group_by`` values: from its ``values`` (a record) or its attributes."""
    values = getattr(doc, "values", None)
    if isinstance(values, Mapping):
        return tuple(values.get(name) for name in fields)
    return tuple(getattr(doc, name, None) for name in fields)


def _pairs(docs: Sequence[Any], fields: Sequence[str]) -> list[tuple[object, ...]]:
    if not fields:
        return [() for _ in docs]
    return [group_values(doc, fields) for doc in docs]
