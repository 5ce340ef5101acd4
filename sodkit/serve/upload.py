"""An image out of a request, within sodkit's limits, in memory only.

``POST /predict`` takes the image as the raw body (``Content-Type: image/...`` or
``application/octet-stream``) or as a multipart form's file field ``image`` (or ``file``, as
rembg names it), beside optional text fields (``save``, ...). Everything else is refused in one
line before any decoding:

* a body over the file limit (``SODKIT_MAX_FILE_MB``, :mod:`sodkit.limits`): 413, from its
  ``Content-Length`` before a byte is read, or as soon as a chunked body passes the limit;
* a content type that carries no image (``text/plain``, ``application/json``, a URL-encoded
  form as ``curl --data-binary`` sends by default): 415, saying how to send it;
* a multipart body that is malformed, has no file field, or more parts than a form needs: 400.

The body is read into memory (never a temporary file: Starlette's own form parser spools
uploads over 1 MiB to disk) and parsed by python-multipart's streaming parser, whose parts are
kept as bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ..limits import MAX_FILE_MB_VARIABLE, MIB, max_file_bytes

IMAGE_FIELDS = ("image", "file")  # the form field of the image: ours, then rembg's name
MAX_PARTS = 16  # a form with an image and a few options; more is no form of ours
MAX_FIELD_BYTES = 4096  # a text field (save=..., background=...)
MULTIPART_SLACK = 64 << 10  # boundaries and part headers around an image at the limit
RAW_TYPES = ("application/octet-stream",)  # besides image/*
HOW = ("send the image as the body with its type (curl -H 'Content-Type: image/jpeg' "
       "--data-binary @photo.jpg URL) or as the form field 'image' (curl -F image=@photo.jpg URL)")


class RequestError(Exception):
    """A request refused: the HTTP status and one line saying why."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None
                 ) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


@dataclass
class Upload:
    """The image's encoded bytes and the form's text fields (empty for a raw body)."""

    data: bytes
    fields: dict[str, str] = field(default_factory=dict)


def body_limit(content_type: str) -> int:
    """The most bytes a request body may have: one image file, plus a form's framing."""
    return max_file_bytes() + (MULTIPART_SLACK if _media_type(content_type) ==
                               "multipart/form-data" else 0)


def too_large(size: int | None = None) -> RequestError:
    said = f"{size / MIB:.1f} MiB, " if size is not None else ""
    return RequestError(413, f"the request body is {said}more than the limit of "
                             f"{max_file_bytes() // MIB} MiB for one image "
                             f"({MAX_FILE_MB_VARIABLE} on the server)")


async def read_body(chunks: AsyncIterator[bytes], content_type: str,
                    content_length: str | None) -> bytes:
    """The whole body, refused (413) as soon as it is known to pass the limit."""
    check_content_type(content_type)
    limit = body_limit(content_type)
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise RequestError(400, f"Content-Length {content_length[:40]!r} is no number"
                               ) from None
        if declared > limit:
            raise too_large(declared)
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise too_large()
    return bytes(body)


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def check_content_type(content_type: str) -> None:
    """415 for a body that cannot be an image, before it is read."""
    media = _media_type(content_type)
    if media.startswith("image/") or media in RAW_TYPES or media == "multipart/form-data":
        return
    said = f"Content-Type {media!r}" if media else "no Content-Type"
    raise RequestError(415, f"{said} carries no image: {HOW}")


def upload_of(body: bytes, content_type: str) -> Upload:
    """The image (and the form's fields) of a body whose type :func:`check_content_type`
    accepted."""
    if _media_type(content_type) != "multipart/form-data":
        if not body:
            raise RequestError(400, f"the request has no body: {HOW}")
        return Upload(body)
    return _form(body, content_type)


def _form(body: bytes, content_type: str) -> Upload:
    from python_multipart.multipart import MultipartParser, parse_options_header

    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise RequestError(400, "a multipart/form-data body without a boundary in its "
                                "Content-Type")
    parts: list[_Part] = []
    header: list[bytearray] = [bytearray(), bytearray()]

    def begin() -> None:
        if len(parts) >= MAX_PARTS:
            raise RequestError(400, f"the form has more than {MAX_PARTS} parts")
        parts.append(_Part())

    def header_end() -> None:
        parts[-1].headers[bytes(header[0]).strip().lower()] = bytes(header[1]).strip()
        header[0], header[1] = bytearray(), bytearray()

    callbacks = {
        "on_part_begin": begin,
        "on_part_data": lambda data, start, end: parts[-1].data.extend(data[start:end]),
        "on_header_field": lambda data, start, end: header[0].extend(data[start:end]),
        "on_header_value": lambda data, start, end: header[1].extend(data[start:end]),
        "on_header_end": header_end,
    }
    parser = MultipartParser(boundary, callbacks)
    try:
        parser.write(body)
        parser.finalize()
    except RequestError:
        raise
    except Exception as exc:  # python-multipart's MultipartParseError and kin
        raise RequestError(400, f"a malformed multipart/form-data body: {exc}") from None
    return _upload_of_parts(parts)


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)

    @property
    def name(self) -> str | None:
        from python_multipart.multipart import parse_options_header

        disposition = self.headers.get(b"content-disposition")
        if disposition is None:
            return None
        name = parse_options_header(disposition)[1].get(b"name")
        return None if name is None else name.decode("utf-8", "replace")


def _upload_of_parts(parts: list[_Part]) -> Upload:
    images = {part.name: part for part in parts if part.name in IMAGE_FIELDS}
    image = next((images[name] for name in IMAGE_FIELDS if name in images), None)
    if image is None:
        raise RequestError(400, f"the form has no field 'image': {HOW}")
    fields = {}
    for part in parts:
        if part is image or part.name is None or part.name in IMAGE_FIELDS:
            continue
        if len(part.data) > MAX_FIELD_BYTES:
            raise RequestError(400, f"the form field {part.name[:40]!r} is over "
                                    f"{MAX_FIELD_BYTES} bytes")
        fields[part.name] = part.data.decode("utf-8", "replace")
    if not image.data:
        raise RequestError(400, f"the form's field 'image' is empty: {HOW}")
    return Upload(bytes(image.data), fields)
