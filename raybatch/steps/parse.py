"""Parse one chunk's answer: JSON (repaired once when it is near-JSON), pydantic, then page checks.

The repair rebuilds the text token by token from its first ``{``: code fences and prose around the
object go, single-quoted strings become JSON strings, Python's True/False/None become JSON literals,
trailing commas go, and a truncated tail is closed when that adds nothing but closing brackets (the
text ends after a complete string, object, array, comma or opening bracket; never inside a string
or right after a bare number, which may itself be cut short). Anything else is ``UnparseableAnswer``.
Error messages name positions and error kinds, never the answer's text (it quotes the pages).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from raybatch.claude.answer import ChunkAnswer, FoundDocument, PageRotation
from raybatch.errors import UnparseableAnswer

_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_TOKEN = re.compile(r"""\s+|"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|[{}\[\],:]|[^\s{}\[\],:"']+""", re.S)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}
_CLOSER = {"{": "}", "[": "]"}


@dataclass(frozen=True)
class ParsedAnswer:
    """A validated answer and the repairs its text needed (empty when it was valid JSON)."""

    answer: ChunkAnswer
    repairs: tuple[str, ...] = ()

    @property
    def repaired(self) -> bool:
        return bool(self.repairs)


def parse_answer(text: str, *, first_page: int, last_page: int) -> ChunkAnswer:
    """The validated answer for pages ``first_page..last_page``; raises ``UnparseableAnswer``."""
    return read_answer(text, first_page=first_page, last_page=last_page).answer


def read_answer(text: str, *, first_page: int, last_page: int) -> ParsedAnswer:
    """``parse_answer``, also telling which repairs the text needed."""
    where = f"answer for pages {first_page}-{last_page}"
    repairs: tuple[str, ...] = ()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data, repairs = _load_repaired(text, where)
    answer = check_pages(_validate(data, where), first_page, last_page, where)
    if repairs:  # kept with the answer: a repaired answer is marked on its documents
        answer = answer.model_copy(update={"repairs": list(repairs)})
    return ParsedAnswer(answer, repairs)


def _load_repaired(text: str, where: str) -> tuple[Any, tuple[str, ...]]:
    repairs: list[str] = []
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1)
        repairs.append("code fence")
    rebuilt = _Rebuilder(text, repairs).run(where)
    try:
        return json.loads(rebuilt, strict=False), tuple(repairs)
    except json.JSONDecodeError as exc:
        raise UnparseableAnswer(f"{where}: not JSON even after repair (at char {exc.pos})") from exc


class _Rebuilder:
    """One pass over near-JSON tokens, writing compact JSON and noting each repair."""

    def __init__(self, text: str, repairs: list[str]) -> None:
        start = text.find("{")
        self.text = text[start:] if start >= 0 else ""
        if start > 0 and text[:start].strip():
            repairs.append("prose before")
        self.repairs = repairs
        self.out: list[str] = []
        self.stack: list[str] = []
        self.last = "start"  # open, close, comma, colon, key, value, bare

    def run(self, where: str) -> str:
        pos = 0
        while pos < len(self.text) and (pos == 0 or self.stack):
            match = _TOKEN.match(self.text, pos)
            if match is None:
                raise UnparseableAnswer(f"{where}: unterminated string at char {pos}")
            pos = match.end()
            if not match.group().isspace() and not self._take(match.group()):
                raise UnparseableAnswer(f"{where}: mismatched bracket at char {match.start()}")
        if not self.out:
            raise UnparseableAnswer(f"{where}: no JSON object in the answer")
        if self.text[pos:].strip():
            self._note("prose after")
        if self.stack:
            self._close_tail(where)
        return "".join(self.out)

    def _take(self, token: str) -> bool:
        if token in "{[":
            self.stack.append(token)
            self._emit(token, "open")
        elif token in "}]":
            if not self.stack or _CLOSER[self.stack.pop()] != token:
                return False
            self._drop_trailing_comma()
            self._emit(token, "close")
        elif token in ",:":
            self._emit(token, "comma" if token == "," else "colon")
        elif token[0] in "\"'":
            is_key = self.stack[-1:] == ["{"] and self.last in ("open", "comma")
            self._emit(self._string(token), "key" if is_key else "value")
        else:
            self._emit(self._bare(token), "bare")
        return True

    def _string(self, token: str) -> str:
        if token[0] == '"':
            return token
        self._note("single quotes")
        inner = token[1:-1].replace("\\'", "'").replace('"', '\\"')
        return f'"{inner}"'

    def _bare(self, token: str) -> str:
        if token in _PY_LITERALS:
            self._note("python literals")
            return _PY_LITERALS[token]
        return token

    def _emit(self, token: str, kind: str) -> None:
        self.out.append(token)
        self.last = kind

    def _drop_trailing_comma(self) -> None:
        if self.out and self.out[-1] == ",":
            self.out.pop()
            self._note("trailing comma")

    def _close_tail(self, where: str) -> None:
        if self.last not in ("open", "close", "comma", "value"):
            raise UnparseableAnswer(f"{where}: truncated where it cannot be closed safely")
        self._drop_trailing_comma()
        self.out.extend(_CLOSER[opener] for opener in reversed(self.stack))
        self.stack.clear()
        self._note("truncated tail closed")

    def _note(self, repair: str) -> None:
        if repair not in self.repairs:
            self.repairs.append(repair)


def _validate(data: Any, where: str) -> ChunkAnswer:
    try:
        return ChunkAnswer.model_validate(data)
    except ValidationError as exc:
        # locations and kinds only: pydantic's own message quotes the input, i.e. page text
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '<root>'}: {error['type']}"
            for error in exc.errors()[:5]
        )
        raise UnparseableAnswer(f"{where}: does not fit the answer model ({problems})") from None


def check_pages(answer: ChunkAnswer, first_page: int, last_page: int, where: str = "answer") -> ChunkAnswer:
    """The answer with documents in order and a rotation for every page; refuses bad page ranges."""
    documents = sorted(answer.documents, key=lambda doc: doc.first_page)
    _check_documents(documents, first_page, last_page, where)
    pages = _rotations(answer.pages, first_page, last_page, where)
    return answer.model_copy(update={"documents": documents, "pages": pages})


def _check_documents(documents: list[FoundDocument], first: int, last: int, where: str) -> None:
    if not documents:
        raise UnparseableAnswer(f"{where}: no documents")
    expected = first
    for doc in documents:
        if doc.first_page > doc.last_page:
            raise UnparseableAnswer(f"{where}: document {doc.first_page}-{doc.last_page} runs backwards")
        if doc.first_page != expected:
            gap_or_overlap = "leaves out pages before" if doc.first_page > expected else "overlaps at"
            raise UnparseableAnswer(
                f"{where}: document {doc.first_page}-{doc.last_page} {gap_or_overlap} "
                f"page {min(expected, doc.first_page)}"
            )
        expected = doc.last_page + 1
    if expected != last + 1:
        raise UnparseableAnswer(f"{where}: documents end at page {expected - 1}, not {last}")


def _rotations(pages: list[PageRotation], first: int, last: int, where: str) -> list[PageRotation]:
    found: dict[int, int] = {}
    for entry in pages:
        if not first <= entry.page <= last:
            raise UnparseableAnswer(f"{where}: rotation given for page {entry.page}, outside the chunk")
        if found.setdefault(entry.page, entry.rotation) != entry.rotation:
            raise UnparseableAnswer(f"{where}: two rotations for page {entry.page}")
    return [PageRotation(page=page, rotation=found.get(page, 0)) for page in range(first, last + 1)]  # type: ignore[arg-type]
