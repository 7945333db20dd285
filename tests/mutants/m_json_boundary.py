"""Broken drivers for the json_boundary area: each "repairs" bad caller input instead of refusing it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from runlane_conformance import (
    NewStorageRecord,
    StorageValidationError,
    build_storage_record,
    parse_storage_document,
)
from runlane_conformance.catalogue import json_boundary
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedTransaction, mutant_harness


class Repairs(WrappedTransaction):
    """Passes mapping input through ``repair`` before the real driver sees it."""

    def repair(self, record: Any) -> Any:
        return record

    def create(self, record: Any) -> None:
        self.inner.create(self.repair(record) if isinstance(record, Mapping) else record)

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(current, self.repair(record) if isinstance(record, Mapping) else record)


def _rebuild(value: Any, leaf: Callable[[Any], Any], active: frozenset[int] = frozenset()) -> Any:
    """A copy of ``value`` with ``leaf`` applied to scalars and reference cycles cut (to None)."""
    if isinstance(value, (Mapping, list, tuple)):
        if id(value) in active:
            return None
        inner = active | {id(value)}
        if isinstance(value, Mapping):
            return {key: _rebuild(item, leaf, inner) for key, item in value.items()}
        return [_rebuild(item, leaf, inner) for item in value]
    return leaf(value)


class RefusesMappings(WrappedTransaction):
    """Refuses every plain mapping, even a perfectly valid one."""

    def create(self, record: Any) -> None:
        if not isinstance(record, NewStorageRecord):
            raise StorageValidationError("only built NewStorageRecord values are accepted")
        self.inner.create(record)

    def replace(self, current: Any, record: Any) -> None:
        if not isinstance(record, NewStorageRecord):
            raise StorageValidationError("only built NewStorageRecord values are accepted")
        self.inner.replace(current, record)


class AcceptsNonFinite(Repairs):
    """Turns NaN and infinities into null instead of refusing them."""

    def repair(self, record: Any) -> Any:
        return _rebuild(record, lambda v: None if isinstance(v, float) and not math.isfinite(v) else v)


class AcceptsCycles(Repairs):
    """Cuts reference cycles (to null) instead of refusing them."""

    def repair(self, record: Any) -> Any:
        return _rebuild(record, lambda v: v)


class AcceptsAnySchemaVersion(Repairs):
    """Reads any envelope as schema version 1."""

    def repair(self, record: Any) -> Any:
        document = record.get("document")
        if isinstance(document, (str, bytes)):
            document = json.loads(document)
        if isinstance(document, Mapping):
            document = {"schemaVersion": 1, "value": document.get("value")}
        return {**record, "document": document}


class DerivesKeyAndIndexes(Repairs):
    """Ignores the given key and index entries and derives both from the document."""

    def repair(self, record: Any) -> Any:
        document = parse_storage_document(record["document"])
        return build_storage_record(record["key"]["table"], document.value)


MUTANTS = [
    Mutant(
        "refuses-mappings",
        "tests.mutants.m_json_boundary:refuses_mappings",
        json_boundary.VALID_MAPPING,
        "refuses valid plain-mapping input",
    ),
    Mutant(
        "accepts-non-finite",
        "tests.mutants.m_json_boundary:accepts_non_finite",
        json_boundary.NON_FINITE,
        "stores NaN/Infinity as null",
    ),
    Mutant(
        "accepts-cycles",
        "tests.mutants.m_json_boundary:accepts_cycles",
        json_boundary.CYCLES,
        "cuts reference cycles instead of refusing them",
    ),
    Mutant(
        "accepts-any-schema-version",
        "tests.mutants.m_json_boundary:accepts_any_schema_version",
        json_boundary.SCHEMA_VERSION,
        "reads schemaVersion 2 (or none) as 1",
    ),
    Mutant(
        "derives-key-and-indexes",
        "tests.mutants.m_json_boundary:derives_key_and_indexes",
        json_boundary.MISMATCH,
        "overrides a disagreeing key and index entries instead of refusing them",
    ),
]

refuses_mappings = mutant_harness(transaction_class=RefusesMappings)
accepts_non_finite = mutant_harness(transaction_class=AcceptsNonFinite)
accepts_cycles = mutant_harness(transaction_class=AcceptsCycles)
accepts_any_schema_version = mutant_harness(transaction_class=AcceptsAnySchemaVersion)
derives_key_and_indexes = mutant_harness(transaction_class=DerivesKeyAndIndexes)


# -- numbers that a lossy store changes ----------------------------------------------------------------


def _through_doubles(value: Any) -> Any:
    """What JSON.parse in a JavaScript store makes of a number: every integer becomes a double."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(float(value))
    if isinstance(value, list):
        return [_through_doubles(item) for item in value]
    if isinstance(value, dict):
        return {key: _through_doubles(item) for key, item in value.items()}
    return value


def _integral_floats_as_ints(value: Any) -> Any:
    """What JSON.stringify writes for 1.0, 100.0 and -0.0: the integers 1, 100 and 0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    return value


class _LossyNumbers(WrappedTransaction):
    lose: Callable[[Any], Any] = staticmethod(_through_doubles)

    def get(self, keys: Sequence[Any]) -> list[Any]:
        from runlane_conformance import StoredRecord, parse_storage_document, thaw_json

        records = self.inner.get(keys)
        out: list[Any] = []
        for record in records:
            if record is None:
                out.append(None)
                continue
            document = parse_storage_document(
                {"schemaVersion": 1, "value": self.lose(thaw_json(record.document.value))}
            )
            out.append(StoredRecord(record.key, record.version, document, record.indexes))
        return out


class _IntegralFloats(_LossyNumbers):
    lose = staticmethod(_integral_floats_as_ints)


numbers_through_doubles = mutant_harness(transaction_class=_LossyNumbers)
integral_floats_as_ints = mutant_harness(transaction_class=_IntegralFloats)

MUTANTS += [
    Mutant(
        "numbers-through-doubles",
        "tests.mutants.m_json_boundary:numbers_through_doubles",
        json_boundary.NUMBERS,
        "documents pass through doubles: integers past 2**53 come back rounded",
    ),
    Mutant(
        "integral-floats-as-ints",
        "tests.mutants.m_json_boundary:integral_floats_as_ints",
        json_boundary.NUMBERS,
        "1.0, 100.0 and -0.0 are written back as the integers 1, 100 and 0",
    ),
]
