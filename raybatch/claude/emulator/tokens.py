"""Token estimates: text at four characters a token, images by Anthropic's documented rule.

An image costs about width × height / 750 tokens; a larger image is scaled down first, so one image
never costs more than the cap (about 1 600 tokens at a 1568 px long edge).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from PIL import Image, UnidentifiedImageError

_HEADER_BYTES = (1024, 64 * 1024)  # enough of an encoded image to find its size: most need 1 KB
IMAGE_TOKEN_CAP = 1600  # what an image drawn at a 1568 px long edge costs, about


def estimate_input_tokens(params: Mapping[str, Any], image_cap: int) -> int:
    """Input tokens of a Messages request: system, message text, images and the output schema."""
    chars = len(_system_text(params.get("system")))
    images = 0
    for block in _blocks(params.get("messages")):
        if block.get("type") == "text":
            chars += len(str(block.get("text", "")))
        elif block.get("type") == "image":
            images += image_tokens(block.get("source") or {}, image_cap)
    output_format = (params.get("output_config") or {}).get("format")
    if output_format:
        chars += len(json.dumps(output_format, separators=(",", ":")))
    return max(1, math.ceil(chars / 4)) + images


def estimate_output_tokens(text: str) -> int:
    """Output tokens of an answer; never zero, as the API counts at least one."""
    return max(1, math.ceil(len(text) / 4))


def image_tokens(source: Mapping[str, Any], cap: int) -> int:
    """Tokens of one image source: width × height / 750, at most ``cap``; the cap when unknown."""
    size = image_size(source)
    if size is None:
        return cap
    width, height = size
    return min(cap, math.ceil(width * height / 750))


def image_size(source: Mapping[str, Any]) -> tuple[int, int] | None:
    """(width, height) of a base64 image source, read from its header; None if unreadable."""
    if source.get("type") != "base64" or not isinstance(source.get("data"), str):
        return None
    data: str = source["data"]
    for text in (*(data[: size // 3 * 4] for size in _HEADER_BYTES), data):
        try:
            with Image.open(io.BytesIO(base64.b64decode(text))) as image:
                return image.size
        except (UnidentifiedImageError, OSError, binascii.Error, ValueError):
            continue
    return None


def strip_images(params: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` whose image data is emptied (the emulator's model reads only text)."""
    copy = dict(params)
    messages = []
    for message in params.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list):
            content = [_without_data(block) for block in content]
            message = {**message, "content": content}
        messages.append(message)
    copy["messages"] = messages
    return copy


def _without_data(block: Any) -> Any:
    if isinstance(block, Mapping) and block.get("type") == "image":
        source = block.get("source") or {}
        return {**block, "source": {**source, "data": ""}}
    return block


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
    return ""


def _blocks(messages: Any) -> Iterator[Mapping[str, Any]]:
    for message in messages or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            yield {"type": "text", "text": content}
        elif isinstance(content, list):
            yield from (block for block in content if isinstance(block, Mapping))
