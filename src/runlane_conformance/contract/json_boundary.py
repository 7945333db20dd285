"""The JSON boundary: canonical encoding, frozen values and the document envelope.

Everything that crosses into storage is JSON. This module turns caller input
into *frozen* JSON (``FrozenJsonObject`` and tuples) that nobody can change
afterwards, and measures its canonical UTF-8 size once so that later
boundaries (limit checks, drivers) reuse the measurement instead of
re-serialising. Non-finite numbers and reference cycles are refused in both
directions, because no other runtime could read them back.

Mutable caller input is always walked again: looking frozen is not proof of
having been validated. Only objects this module produced itself
(``StorageDocument``, ``FrozenJsonObject``) are reused as they are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeAlias, Union

from .errors import StorageValidationError

__all__ = [
    "SCHEMA_VERSION",
    "FrozenJson",
    "FrozenJsonObject",
    "JsonValue",
    "StorageDocument",
    "canonical_json",
    "freeze_json",
    "parse_canonical_storage_document",
    "parse_storage_document",
    "thaw_json",
]

SCHEMA_VERSION = 1

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
FrozenJson: TypeAlias = Union[bool, int, float, str, tuple["FrozenJson", ...], "FrozenJsonObject", None]


class FrozenJsonObject(Mapping[str, "FrozenJson"]):
    """An immutable JSON object. Only ``freeze_json`` builds these."""

    __slots__ = ("_items",)
    _items: dict[str, FrozenJson]

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenJsonObject:
        raise TypeError("FrozenJsonObject is built by freeze_json(), not directly")

    @classmethod
    def _adopt(cls, items: dict[str, FrozenJson]) -> FrozenJsonObject:
        self = object.__new__(cls)
        object.__setattr__(self, "_items", items)
        return self

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FrozenJsonObject is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("FrozenJsonObject is immutable")

    def __getitem__(self, key: str) -> FrozenJson:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(canonical_json(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenJsonObject):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenJsonObject({self._items!r})"


def freeze_json(value: object, *, where: str = "value") -> FrozenJson:
    """Validate ``value`` as JSON and return a deeply immutable copy.

    Refuses NaN and infinities, non-string object keys, values that are not
    JSON (sets, bytes, datetimes ...) and reference cycles. Already frozen
    input is returned as is. Strings (values and keys) must be valid Unicode
    scalar values, because a lone surrogate has no UTF-8 form and could never
    be stored or measured; nesting too deep to walk is refused as well.
    """
    try:
        return _freeze(value, where, set())
    except RecursionError as error:
        raise StorageValidationError(f"{where}: nested too deeply") from error


def _check_text(text: str, where: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise StorageValidationError(f"{where}: string is not valid Unicode (lone surrogate)") from error
    return text


def _freeze(value: object, where: str, active: set[int]) -> FrozenJson:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _check_text(str.__str__(value), where)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StorageValidationError(f"{where}: non-finite number {value!r} is not JSON")
        return value
    if isinstance(value, FrozenJsonObject):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        marker = id(value)
        if marker in active:
            raise StorageValidationError(f"{where}: reference cycle")
        active.add(marker)
        try:
            if isinstance(value, Mapping):
                items: dict[str, FrozenJson] = {}
                for key, item in value.items():
                    if not isinstance(key, str):
                        raise StorageValidationError(f"{where}: object key {key!r} is not a string")
                    items[_check_text(str.__str__(key), where)] = _freeze(item, f"{where}.{key}", active)
                return FrozenJsonObject._adopt(items)
            return tuple(_freeze(item, f"{where}[{i}]", active) for i, item in enumerate(value))
        finally:
            active.discard(marker)
    raise StorageValidationError(f"{where}: {type(value).__name__} is not a JSON value")


def thaw_json(value: FrozenJson) -> JsonValue:
    """Return an independent, mutable (dict/list) copy of a frozen JSON value."""
    if isinstance(value, FrozenJsonObject):
        return {key: thaw_json(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw_json(item) for item in value]
    return value


def _default(value: object) -> object:
    if isinstance(value, FrozenJsonObject):
        return value._items
    raise StorageValidationError(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: object) -> str:
    """Serialise to the canonical text: sorted keys, no whitespace, UTF-8 kept as is.

    Raises ``StorageValidationError`` for non-finite numbers, cycles and
    non-JSON values, the same rules ``freeze_json`` applies.
    """
    frozen = freeze_json(value)
    try:
        return json.dumps(
            frozen,
            default=_default,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
        )
    except (ValueError, TypeError) as error:  # pragma: no cover - freeze_json already refused
        raise StorageValidationError(str(error)) from error


def _reject_constant(name: str) -> object:
    raise StorageValidationError(f"non-finite number {name} is not JSON")


# The fast check of canonical text (``StorageDocument._of_canonical_text``): plain C-speed
# parsing and the same encoding ``canonical_json`` uses, without the hooks.
_decode_plain = json.JSONDecoder(parse_constant=_reject_constant).decode
_encode_canonical = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
#: Longer or more deeply nested text goes to the full parser.
_CANONICAL_LONGEST = 1 << 20
_CANONICAL_NESTING = 64


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # Runtimes disagree about which of two equal keys wins, so such text has no single meaning.
    items = dict(pairs)
    if len(items) != len(pairs):
        raise StorageValidationError("JSON object has a duplicate key")
    return items


def _parse_text(text: str | bytes) -> object:
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
    except StorageValidationError:
        raise
    except RecursionError as error:
        raise StorageValidationError("not JSON: nested too deeply") from error
    except (ValueError, UnicodeDecodeError) as error:
        raise StorageValidationError(f"not JSON: {error}") from error


class StorageDocument:
    """A validated, immutable ``{"schemaVersion": 1, "value": ...}`` envelope.

    It remembers its canonical text and that text's UTF-8 size, so limit
    checks and drivers never serialise the same document twice. Equality is
    equality of the canonical text.
    """

    __slots__ = ("_size", "_text", "_value")
    _value: FrozenJsonObject
    _text: str
    _size: int

    def __init__(self, value: object) -> None:
        frozen = freeze_json(value, where="document.value")
        if not isinstance(frozen, FrozenJsonObject):
            raise StorageValidationError("document.value must be a JSON object")
        text = canonical_json({"schemaVersion": SCHEMA_VERSION, "value": frozen})
        object.__setattr__(self, "_value", frozen)
        object.__setattr__(self, "_text", text)
        object.__setattr__(self, "_size", len(text.encode("utf-8")))

    @classmethod
    def _of_canonical_text(cls, text: str) -> StorageDocument | None:
        """The document whose canonical text is exactly ``text``, or ``None`` if there is none.

        ``text`` is checked by re-encoding what it parses to, at the speed of the ``json``
        module's C code: only the canonical text of a valid envelope survives that (a duplicate
        key, a non-finite number, a lone surrogate or a different spelling of a number each
        make the two differ or fail). The frozen value is built when it is first asked for.
        """
        if len(text) > _CANONICAL_LONGEST or text.count("[") + text.count("{") > _CANONICAL_NESTING:
            return None  # deep values are left to the full parser, which reports them clearly
        try:
            source = _decode_plain(text)
            if not (
                type(source) is dict
                and source.keys() == {"schemaVersion", "value"}
                and type(source["schemaVersion"]) is int
                and source["schemaVersion"] == SCHEMA_VERSION
                and type(source["value"]) is dict
                and _encode_canonical(source) == text
            ):
                return None
            size = len(text.encode("utf-8"))
        except (ValueError, RecursionError, UnicodeEncodeError, StorageValidationError):
            return None
        document = object.__new__(cls)
        object.__setattr__(document, "_text", text)
        object.__setattr__(document, "_size", size)
        return document

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("StorageDocument is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("StorageDocument is immutable")

    @property
    def schema_version(self) -> int:
        """The document format's version; only version 1 exists, and other versions are refused."""
        return SCHEMA_VERSION

    @property
    def value(self) -> FrozenJsonObject:
        """The frozen ``value`` member of the envelope."""
        try:
            return self._value
        except AttributeError:  # parsed from its canonical text, and not frozen until now
            frozen = freeze_json(_decode_plain(self._text)["value"], where="document.value")
            object.__setattr__(self, "_value", frozen)
            return frozen  # type: ignore[return-value]

    @property
    def text(self) -> str:
        """The canonical JSON text of the whole envelope."""
        return self._text

    @property
    def size(self) -> int:
        """UTF-8 byte length of ``text``; what record and transaction byte limits count."""
        return self._size

    def to_json(self) -> dict[str, JsonValue]:
        """A fresh, mutable copy of the envelope, independent of this document."""
        return {"schemaVersion": SCHEMA_VERSION, "value": thaw_json(self.value)}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StorageDocument):
            return self._text == other._text
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"StorageDocument({self._text})"


def parse_canonical_storage_document(text: str) -> StorageDocument:
    """``parse_storage_document`` for text that is expected to be canonical already.

    Text crossing a process boundary (the backend protocol, a store's own column) is
    normally the canonical text the toolkit produced; such text is accepted after one
    re-encoding check, without building the frozen value until someone reads it. Any
    other text gets the full parser, with the same result and the same errors.
    """
    document = StorageDocument._of_canonical_text(text)
    return document if document is not None else parse_storage_document(text)


def parse_storage_document(source: object) -> StorageDocument:
    """Turn an envelope (mapping, JSON text or bytes) into a ``StorageDocument``.

    A ``StorageDocument`` is returned unchanged: it was validated when built.
    Anything else must be exactly ``{"schemaVersion": 1, "value": {...}}``;
    there is no reader for other schema versions.
    """
    if isinstance(source, StorageDocument):
        return source
    if isinstance(source, (str, bytes)):
        source = _parse_text(source)
    if not isinstance(source, Mapping):
        raise StorageValidationError("document must be a JSON object envelope")
    keys = set(source.keys())
    if keys != {"schemaVersion", "value"}:
        raise StorageValidationError(
            f"document envelope must have exactly schemaVersion and value, got {sorted(map(str, keys))}"
        )
    version = source["schemaVersion"]
    if type(version) is not int or version != SCHEMA_VERSION:
        raise StorageValidationError(f"unsupported schemaVersion {version!r}; only 1 is accepted")
    return StorageDocument(source["value"])
