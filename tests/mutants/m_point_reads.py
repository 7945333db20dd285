"""Broken drivers for the point_reads area."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from runlane_conformance import StorageDocument, StoredRecord
from runlane_conformance.catalogue import append, point_reads
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


class DropsDuplicates(WrappedTransaction):
    """Answers each distinct key once, so duplicate positions go missing."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        unique = list(dict.fromkeys(keys))
        return self.inner.get(unique)  # type: ignore[no-any-return]


class ReversesOrder(WrappedTransaction):
    """Returns the right records in the wrong order when several are asked for."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return list(reversed(self.inner.get(list(keys))))


class GhostReads(WrappedTransaction):
    """Reads absent keys as a stale copy of the first present record instead of None."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        results = self.inner.get(keys)
        present = [r for r in results if r is not None]
        return [r if r is not None or not present else present[0] for r in results]


class DropsIndexes(WrappedTransaction):
    """Returns records without their index entries."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return [None if r is None else _rebuilt(r, indexes=()) for r in self.inner.get(keys)]


def _rebuilt(record: StoredRecord, **changes: Any) -> StoredRecord:
    """A StoredRecord with some fields swapped, bypassing validation (mutants lie on purpose)."""
    fields = {
        "key": record.key,
        "version": record.version,
        "document": record.document,
        "indexes": record.indexes,
        **changes,
    }
    rebuilt = object.__new__(StoredRecord)
    for name, value in fields.items():
        object.__setattr__(rebuilt, name, value)
    return rebuilt


class _LeakyDocument(StorageDocument):
    """A document whose ``to_json`` hands out the store's own mutable dict."""


class SharesMutableDocuments(WrappedTransaction):
    """Hands out one shared mutable JSON dict per record, so a caller's edits reach every later read."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        shared: dict[str, Any] = self.driver.store.shared.setdefault("documents", {})
        results = self.inner.get(keys)
        leaked = []
        for record in results:
            if record is None:
                leaked.append(None)
                continue
            body = shared.setdefault(record.key.encoded, record.document.to_json())
            document = object.__new__(_LeakyDocument)
            for name, value in (
                ("_value", record.document.value),
                ("_text", record.document.text),
                ("_size", record.document.size),
            ):
                object.__setattr__(document, name, value)
            object.__setattr__(document, "to_json", lambda body=body: body)  # type: ignore[misc]
            leaked.append(_rebuilt(record, document=document))
        return leaked


class KeepsCallerInput(WrappedTransaction):
    """Keeps the caller's own document mapping and rebuilds reads from it, so later edits leak in."""

    def create(self, record: Any) -> None:
        self.inner.create(record)
        if isinstance(record, dict):
            self.driver.store.shared.setdefault("inputs", {})[tuple(record["key"]["id"])] = record

    def get(self, keys: Sequence[Any]) -> list[Any]:
        inputs = self.driver.store.shared.get("inputs", {})
        results = []
        for record in self.inner.get(keys):
            raw = None if record is None else inputs.get(record.key.id)
            if raw is not None:
                record = _rebuilt(record, document=StorageDocument(raw["document"]["value"]))
            results.append(record)
        return results


MUTANTS = [
    Mutant(
        "drops-duplicate-positions",
        "tests.mutants.m_point_reads:drops_duplicates",
        point_reads.POSITIONS,
        "answers each distinct key once",
    ),
    Mutant(
        "reverses-positions",
        "tests.mutants.m_point_reads:reverses_order",
        point_reads.POSITIONS,
        "returns results in reverse order",
    ),
    Mutant(
        "ghost-reads",
        "tests.mutants.m_point_reads:ghost_reads",
        point_reads.ABSENT_IS_NONE,
        "absent keys read as another record",
    ),
    Mutant(
        "drops-index-entries",
        "tests.mutants.m_point_reads:drops_indexes",
        point_reads.RETURNED_CONTENT,
        "returns records without index entries",
    ),
    Mutant(
        "shares-mutable-documents",
        "tests.mutants.m_point_reads:shares_documents",
        point_reads.COPIES_OUT,
        "hands out the store's own mutable JSON",
    ),
    Mutant(
        "keeps-caller-input",
        "tests.mutants.m_point_reads:keeps_input",
        point_reads.COPIES_IN,
        "reads are rebuilt from the caller's mutable input",
    ),
]

drops_duplicates = mutant_harness(transaction_class=DropsDuplicates)
reverses_order = mutant_harness(transaction_class=ReversesOrder)
ghost_reads = mutant_harness(transaction_class=GhostReads)
drops_indexes = mutant_harness(transaction_class=DropsIndexes)
shares_documents = mutant_harness(transaction_class=SharesMutableDocuments)
keeps_input = mutant_harness(transaction_class=KeepsCallerInput)


class _DefersWrites(WrappedDriver):
    """Runs the callback, then stages every write it asked for, reading the caller's inputs only then."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> T:
            wrapped = self.transaction_class(tx, self)
            result = callback(wrapped)
            for stage in getattr(wrapped, "pending", []):
                stage()
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


class SerializesAtCommit(WrappedTransaction):
    """Keeps the caller's record mappings and parses them only when the attempt commits."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pending: list[Callable[[], None]] = []

    def create(self, record: Any) -> None:
        self.pending.append(lambda: self.inner.create(record))

    def replace(self, current: Any, record: Any) -> None:
        self.pending.append(lambda: self.inner.replace(current, record))


class AppendsAtCommit(WrappedTransaction):
    """Keeps the caller's append command and hands it over only when the attempt commits."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.pending: list[Callable[[], None]] = []

    def append(self, command: Any) -> None:
        self.pending.append(lambda: self.inner.append(command))


MUTANTS += [
    Mutant(
        "serializes-input-at-commit",
        "tests.mutants.m_point_reads:serializes_at_commit",
        point_reads.INPUT_READ_AT_CALL,
        "create()/replace() keep the caller's mapping and parse it when the attempt commits",
    ),
    Mutant(
        "serializes-append-at-commit",
        "tests.mutants.m_point_reads:appends_at_commit",
        append.COPIES,
        "append() keeps the caller's command and reads its values when the attempt commits",
    ),
]

serializes_at_commit = mutant_harness(_DefersWrites, transaction_class=SerializesAtCommit)
appends_at_commit = mutant_harness(_DefersWrites, transaction_class=AppendsAtCommit)


# -- keys stored under a lossy native form ---------------------------------------------------------------


def _collated(text: str) -> str:
    """What a case- and accent-insensitive, space-padding collation (MariaDB's default) compares."""
    import unicodedata

    stripped = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return stripped.casefold().rstrip(" ")


def _collation_form(key: Any) -> str:
    return "\x1f".join([key.table, *(_collated(part) for part in key.id)])


def _raw_join_form(key: Any) -> str:
    return "/".join([key.table, *key.id])


class _LossyKeys(WrappedTransaction):
    """Keys live in a native column under ``form(key)``: two keys with one form are one row.

    Reads of a key find the row of whichever key claimed its form first; a create of a key whose
    form another key already holds fails as a duplicate row.
    """

    form: Callable[[Any], str] = staticmethod(_raw_join_form)

    def _claims(self) -> dict[str, Any]:
        return self.driver.store.shared.setdefault("claims", {})  # type: ignore[no-any-return]

    def get(self, keys: Sequence[Any]) -> list[Any]:
        claims = self._claims()
        return self.inner.get([claims.get(self.form(key), key) for key in keys])  # type: ignore[no-any-return]

    def create(self, record: Any) -> None:
        from runlane_conformance import StorageConflictError, parse_new_storage_record

        key = parse_new_storage_record(record).key
        owner = self._claims().setdefault(self.form(key), key)
        if owner != key:
            raise StorageConflictError(f"duplicate row: {key} collides with {owner}")
        self.inner.create(record)


class _CollatedKeys(_LossyKeys):
    form = staticmethod(_collation_form)


raw_joined_keys = mutant_harness(transaction_class=_LossyKeys)
collated_keys = mutant_harness(transaction_class=_CollatedKeys)

MUTANTS += [
    Mutant(
        "raw-joined-keys",
        "tests.mutants.m_point_reads:raw_joined_keys",
        point_reads.KEY_SHAPES,
        "keys are stored as raw components joined by '/', so ('a/b', 'c') and ('a', 'b/c') are one row",
    ),
    Mutant(
        "collated-keys",
        "tests.mutants.m_point_reads:collated_keys",
        point_reads.KEY_SHAPES,
        "keys compare under a case/accent-insensitive, space-padding collation",
    ),
]


class _FoundThenMissing(WrappedTransaction):
    """Answers from a lookup of the distinct keys: found records first, then one None per miss."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        results = self.inner.get(keys)
        found = [record for record in results if record is not None]
        return found + [None] * (len(results) - len(found))


found_then_missing = mutant_harness(transaction_class=_FoundThenMissing)

MUTANTS += [
    Mutant(
        "found-then-missing",
        "tests.mutants.m_point_reads:found_then_missing",
        point_reads.POSITIONS,
        "records found come first and misses last, not at the positions they were asked for",
    ),
]


# -- records given a time to live ----------------------------------------------------------------------


def _expired(record: Any) -> bool:
    """A lease whose expiresAt is behind the wall clock (what a store-side TTL at that time would drop)."""
    from datetime import UTC, datetime

    if record is None:
        return False
    expires = record.document.value.get("expiresAt")
    if not isinstance(expires, str):
        return False
    return datetime.fromisoformat(expires.replace("Z", "+00:00")) < datetime.now(UTC)


class _ExpiringLeases(WrappedTransaction):
    """Stores each lease with a TTL at its expiresAt, so an expired lease reads as absent."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        return [None if _expired(record) else record for record in self.inner.get(keys)]


expiring_leases = mutant_harness(transaction_class=_ExpiringLeases)

MUTANTS += [
    Mutant(
        "leases-expire-at-their-expiry",
        "tests.mutants.m_point_reads:expiring_leases",
        point_reads.RETURNED_CONTENT,
        "a lease is stored with a time to live at its expiresAt, so an expired lease vanishes",
    ),
]


# -- issue 20: a miss answered by a neighbour key; strings and instants changed by the store --------------


def _other_splits(key: Any) -> list[Any]:
    """Every other key of the same table whose components joined by '/' give the same text."""
    from runlane_conformance import StorageRecordKey

    parts = "/".join(key.id).split("/")

    def splits(rest: list[str], count: int) -> list[list[str]]:
        if count == 1:
            return [["/".join(rest)]]
        return [
            ["/".join(rest[:cut]), *tail]
            for cut in range(1, len(rest) - count + 2)
            for tail in splits(rest[cut:], count - 1)
        ]

    found = []
    for shape in splits(parts, len(key.id)) if len(parts) >= len(key.id) else []:
        other = StorageRecordKey(key.table, tuple(shape))
        if other.encoded != key.encoded:
            found.append(other)
    return found


class _NeighbourFallback(WrappedTransaction):
    """A miss on a multi-component key is retried under the other '/'-splits of its joined text."""

    def get(self, keys: Sequence[Any]) -> list[Any]:
        found = self.inner.get(keys)
        answers = []
        for key, record in zip(keys, found, strict=True):
            if record is None and len(key.id) > 1:
                for other in _other_splits(key):
                    [record] = self.inner.get([other])
                    if record is not None:
                        break
            answers.append(record)
        return answers


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {change(key): _map_strings(inner, change) for key, inner in value.items()}
    if isinstance(value, list):
        return [_map_strings(inner, change) for inner in value]
    return value


def _nfc(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFC", text)


def _milliseconds(text: str) -> str:
    """An ISO instant with a fraction cut to milliseconds (a JavaScript Date, a DATETIME(3) column)."""
    import re

    return re.sub(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\d+(Z|[+-]\d\d:\d\d)$", r"\g<1>000\g<2>", text)


class _StringsChangedByTheStore(WrappedTransaction):
    """Every string of a document read back has gone through ``change`` on its way into the store."""

    change: Callable[[str], str] = staticmethod(_nfc)

    def get(self, keys: Sequence[Any]) -> list[Any]:
        from runlane_conformance.contract.json_boundary import thaw_json

        return [
            None
            if record is None
            else _rebuilt(
                record, document=StorageDocument(_map_strings(thaw_json(record.document.value), self.change))
            )
            for record in self.inner.get(keys)
        ]


class _MillisecondInstants(_StringsChangedByTheStore):
    change = staticmethod(_milliseconds)


neighbour_fallback = mutant_harness(transaction_class=_NeighbourFallback)
normalises_strings = mutant_harness(transaction_class=_StringsChangedByTheStore)
millisecond_instants = mutant_harness(transaction_class=_MillisecondInstants)

MUTANTS += [
    Mutant(
        "neighbour-key-fallback",
        "tests.mutants.m_point_reads:neighbour_fallback",
        point_reads.KEY_SHAPES,
        "a miss on ('a', 'b/c') is retried as ('a/b', 'c'), so a key never written reads as its neighbour",
    ),
    Mutant(
        "normalises-strings",
        "tests.mutants.m_point_reads:normalises_strings",
        point_reads.RETURNED_CONTENT,
        "document strings come back NFC-normalised ('e' + U+0301 reads as U+00E9)",
    ),
    Mutant(
        "millisecond-instants",
        "tests.mutants.m_point_reads:millisecond_instants",
        point_reads.RETURNED_CONTENT,
        "instants in documents come back cut to the millisecond",
    ),
]
