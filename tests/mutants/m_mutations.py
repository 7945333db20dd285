"""Broken drivers for the mutations area."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from runlane_conformance import (
    NewStorageRecord,
    QueryRecordsResult,
    StorageConflictError,
    StorageDuplicateMutationError,
    StorageIndexReference,
    StorageKeyChangeError,
    StorageQueryDirection,
    StoredRecord,
    parse_new_storage_record,
)
from runlane_conformance.catalogue import mutations
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

T = TypeVar("T")


def _key_of(record: Any) -> Any:
    return record.key if isinstance(record, NewStorageRecord) else None


class BlindCreateOverwrites(WrappedTransaction):
    """A create of an unread key first deletes whatever is there (in a side transaction): an upsert."""

    def create(self, record: Any) -> None:
        key = _key_of(record)
        if key is not None:

            def wipe(tx: Any) -> None:
                (current,) = tx.get([key])
                if current is not None:
                    tx.delete(current)

            self.driver.inner.transaction(wipe)
        self.inner.create(record)


class TracksReads(WrappedTransaction):
    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.read: dict[Any, Any] = {}

    def get(self, keys: Sequence[Any]) -> list[Any]:
        results = self.inner.get(keys)
        for key, record in zip(keys, results, strict=True):
            self.read[key] = record
        return results  # type: ignore[no-any-return]


class RefusesCreateAfterAbsentRead(TracksReads):
    """Treats a key read as absent like one read as present: its create is refused."""

    def create(self, record: Any) -> None:
        key = _key_of(record)
        if key in self.read and self.read[key] is None:
            raise StorageDuplicateMutationError(f"{key} was read in this attempt")
        self.inner.create(record)


class CreatesOverPresentRead(TracksReads):
    """A create of a key read as present quietly becomes a replacement."""

    def create(self, record: Any) -> None:
        key = _key_of(record)
        current = self.read.get(key)
        if current is not None:
            self.inner.replace(current, record)
            return
        self.inner.create(record)


def _side_replace(driver: WrappedDriver, key: Any, record: Any) -> None:
    driver.inner.transaction(lambda tx: tx.replace(tx.get([key])[0], record))


def _side_delete(driver: WrappedDriver, key: Any) -> None:
    driver.inner.transaction(lambda tx: tx.delete(tx.get([key])[0]))


class ReplaceIgnoresVersion(WrappedTransaction):
    """A replace of a record this attempt did not read (or read at another version) still goes through."""

    def replace(self, current: Any, record: Any) -> None:
        try:
            self.inner.replace(current, record)
        except StorageKeyChangeError:
            if _key_of(record) != current.key:
                raise
            _side_replace(self.driver, current.key, record)


class DeleteIgnoresVersion(WrappedTransaction):
    """A delete of a record this attempt did not read (or read at another version) still goes through."""

    def delete(self, current: Any) -> None:
        try:
            self.inner.delete(current)
        except StorageKeyChangeError:
            _side_delete(self.driver, current.key)


class IgnoresSecondMutation(WrappedTransaction):
    """A second mutation of a key is silently dropped instead of refused."""

    def _quietly(self, action: Callable[[], None]) -> None:
        with contextlib.suppress(StorageDuplicateMutationError):
            action()

    def create(self, record: Any) -> None:
        self._quietly(lambda: self.inner.create(record))

    def replace(self, current: Any, record: Any) -> None:
        self._quietly(lambda: self.inner.replace(current, record))

    def delete(self, current: Any) -> None:
        self._quietly(lambda: self.inner.delete(current))


class ReplaceMovesKey(WrappedTransaction):
    """A replacement with another key deletes the old record and creates the new one."""

    def replace(self, current: Any, record: Any) -> None:
        key = _key_of(record)
        if key is not None and key != current.key:
            self.inner.delete(current)
            self.inner.create(record)
            return
        self.inner.replace(current, record)


class RemembersOldRecords(WrappedTransaction):
    """Notes the records this attempt replaced or deleted (for the lazy-index mutants)."""

    track: tuple[str, ...] = ()

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.old: list[Any] = []

    def replace(self, current: Any, record: Any) -> None:
        self.inner.replace(current, record)
        if "replace" in self.track:
            self.old.append(current)

    def delete(self, current: Any) -> None:
        self.inner.delete(current)
        if "delete" in self.track:
            self.old.append(current)

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return with_stale(self.driver, command, self.inner.query_candidates(command, **kwargs))


def with_stale(driver: WrappedDriver, command: Any, page: QueryRecordsResult) -> QueryRecordsResult:
    """``page`` plus the entries the last commit should have removed, as a lazy index keeps them."""
    stale = driver.store.shared.get("stale", [])
    items = list(page.items)
    present = {(item.key, item.sort) for item in items}
    for key, entry in stale:
        if (
            entry.index == command.index
            and entry.partition == command.partition
            and command.range.contains(entry.sort)
            and (key, entry.sort) not in present
        ):
            items.append(StorageIndexReference(key, entry.sort))
    items.sort(
        key=lambda item: (item.sort, item.key.encoded),
        reverse=command.direction is StorageQueryDirection.DESCENDING,
    )
    return QueryRecordsResult(tuple(items[: command.limit]), page.cursor)


class LazyIndexDriver(WrappedDriver):
    """Index entries of replaced or deleted records linger until the next commit."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        attempts: list[RemembersOldRecords] = []

        def run(tx: Any) -> T:
            wrapped = self.transaction_class(tx, self)
            attempts.append(wrapped)  # type: ignore[arg-type]
            return callback(wrapped)

        result = self.inner.transaction(run)
        old = attempts[-1].old if attempts else []
        self.store.shared["stale"] = [(record.key, entry) for record in old for entry in record.indexes]
        return result  # type: ignore[no-any-return]

    def query(self, command: Any) -> Any:
        return with_stale(self, command, self.inner.query(command))


class LazyOnReplace(RemembersOldRecords):
    track = ("replace",)


class LazyOnDelete(RemembersOldRecords):
    track = ("delete",)


class CommitsOnRaise(WrappedDriver):
    """When the callback raises, the writes it staged are committed anyway before the error is re-raised."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        raised: list[BaseException] = []

        def run(tx: Any) -> T | None:
            raised.clear()
            try:
                return callback(self.transaction_class(tx, self))
            except Exception as error:
                raised.append(error)
                return None

        result = self.inner.transaction(run)
        if raised:
            raise raised[0]
        return result  # type: ignore[no-any-return]


class _MatchesRowById(WrappedTransaction):
    """A replacement that keeps the id but names another table updates the row in place (keyed by id)."""

    def replace(self, current: Any, record: Any) -> None:
        if (
            isinstance(record, NewStorageRecord)
            and isinstance(current, StoredRecord)
            and record.key.id == current.key.id
            and record.key.table != current.key.table
        ):
            moved = object.__new__(NewStorageRecord)  # unvalidated: this driver never compares tables
            for name, value in (("key", current.key), ("document", record.document), ("indexes", ())):
                object.__setattr__(moved, name, value)
            record = moved
        self.inner.replace(current, record)


MUTANTS = [
    Mutant(
        "blind-create-overwrites",
        "tests.mutants.m_mutations:blind_create_overwrites",
        mutations.CREATE_UNREAD,
        "a create of an unread existing key replaces it",
    ),
    Mutant(
        "refuses-create-after-absent-read",
        "tests.mutants.m_mutations:refuses_create_after_absent_read",
        mutations.CREATE_READ_ABSENT,
        "a key read as absent cannot be created",
    ),
    Mutant(
        "creates-over-present-read",
        "tests.mutants.m_mutations:creates_over_present_read",
        mutations.CREATE_READ_PRESENT,
        "a create of a key read as present becomes a replace",
    ),
    Mutant(
        "replace-ignores-version",
        "tests.mutants.m_mutations:replace_ignores_version",
        mutations.EXACT_REPLACE,
        "replaces records this attempt did not read at that version",
    ),
    Mutant(
        "delete-ignores-version",
        "tests.mutants.m_mutations:delete_ignores_version",
        mutations.EXACT_DELETE,
        "deletes records this attempt did not read at that version",
    ),
    Mutant(
        "ignores-second-mutation",
        "tests.mutants.m_mutations:ignores_second_mutation",
        mutations.ONE_PER_KEY,
        "silently drops a second mutation of a key",
    ),
    Mutant(
        "replace-moves-key",
        "tests.mutants.m_mutations:replace_moves_key",
        mutations.NO_KEY_CHANGE,
        "a replacement with another key moves the record",
    ),
    Mutant(
        "lazy-index-on-replace",
        "tests.mutants.m_mutations:lazy_on_replace",
        mutations.INDEX_MOVED,
        "old index entries of a replaced record linger until the next commit",
    ),
    Mutant(
        "lazy-index-on-delete",
        "tests.mutants.m_mutations:lazy_on_delete",
        mutations.INDEX_REMOVED,
        "index entries of a deleted record linger until the next commit",
    ),
    Mutant(
        "commits-on-raise",
        "tests.mutants.m_mutations:commits_on_raise",
        mutations.ROLLBACK,
        "commits the staged writes of a callback that raised",
    ),
    Mutant(
        "replace-matched-by-id",
        "tests.mutants.m_mutations:replace_matched_by_id",
        mutations.NO_KEY_CHANGE,
        "lets a replacement change the key's table when the id components stay the same",
    ),
]

blind_create_overwrites = mutant_harness(transaction_class=BlindCreateOverwrites)
refuses_create_after_absent_read = mutant_harness(transaction_class=RefusesCreateAfterAbsentRead)
creates_over_present_read = mutant_harness(transaction_class=CreatesOverPresentRead)
replace_ignores_version = mutant_harness(transaction_class=ReplaceIgnoresVersion)
delete_ignores_version = mutant_harness(transaction_class=DeleteIgnoresVersion)
ignores_second_mutation = mutant_harness(transaction_class=IgnoresSecondMutation)
replace_moves_key = mutant_harness(transaction_class=ReplaceMovesKey)
lazy_on_replace = mutant_harness(LazyIndexDriver, transaction_class=LazyOnReplace)
lazy_on_delete = mutant_harness(LazyIndexDriver, transaction_class=LazyOnDelete)
commits_on_raise = mutant_harness(CommitsOnRaise)


# -- partially applied batches ------------------------------------------------------------------------


class _HoldsCreates(WrappedTransaction):
    """Keeps creates aside (as a driver building one bulk INSERT does) instead of staging them at once."""

    def create(self, record: Any) -> None:
        self.driver.held.append(record)  # type: ignore[attr-defined]


class _BulkDriver(WrappedDriver):
    transaction_class = _HoldsCreates

    def __init__(self, inner: Any, store: Any) -> None:
        super().__init__(inner, store)
        self.held: list[Any] = []

    def existing(self, records: list[Any]) -> list[bool]:
        """Which of ``records`` exist right now (the bulk statement's own view of the table)."""
        found = self.store.inner.connect().transaction(lambda tx: tx.get([r.key for r in records]))
        return [record is not None for record in found]


class InsertIgnoresTakenKeys(_BulkDriver):
    """One INSERT ... ON CONFLICT DO NOTHING for all creates: a taken key is skipped, the rest commits."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> Any:
            self.held = []
            result = callback(self.transaction_class(tx, self))
            for record, taken in zip(self.held, self.existing(self.held), strict=True):
                if not taken:
                    tx.create(record)
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


class CreatesInASecondCommit(_BulkDriver):
    """Commits replacements and deletes first, then the bulk insert in its own commit; a failing insert
    raises, but the first group stays committed."""

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> Any:
            self.held = []
            return callback(self.transaction_class(tx, self))

        result = self.inner.transaction(attempt)
        held = list(self.held)
        if held:
            if any(self.existing(held)):
                raise StorageConflictError("the bulk insert hit an existing key")
            self.inner.transaction(lambda tx: [tx.create(record) for record in held])
        return result  # type: ignore[no-any-return]


insert_ignores_taken_keys = mutant_harness(InsertIgnoresTakenKeys)
creates_in_a_second_commit = mutant_harness(CreatesInASecondCommit)

MUTANTS += [
    Mutant(
        "insert-ignores-taken-keys",
        "tests.mutants.m_mutations:insert_ignores_taken_keys",
        mutations.NO_PARTIAL_BATCH,
        "creates go out as one insert that skips keys already taken; the rest of the batch commits",
    ),
    Mutant(
        "creates-in-a-second-commit",
        "tests.mutants.m_mutations:creates_in_a_second_commit",
        mutations.NO_PARTIAL_BATCH,
        "replacements and deletes commit before the bulk insert, which then fails on its own",
    ),
]


# -- a delete followed by a create of the same key -----------------------------------------------------


class _DeleteThenCreateIsReplace(WrappedTransaction):
    """Holds deletes back; a create of a key deleted earlier in the attempt turns the pair into a replace
    (the 'delete, then insert the new version' upsert), instead of refusing the second mutation."""

    def __init__(self, inner: Any, driver: WrappedDriver) -> None:
        super().__init__(inner, driver)
        self.deleted: dict[str, Any] = {}

    def delete(self, current: Any) -> None:
        self.deleted[current.key.encoded] = current

    def create(self, record: Any) -> None:
        current = self.deleted.pop(parse_new_storage_record(record).key.encoded, None)
        if current is None:
            self.inner.create(record)
        else:
            self.inner.replace(current, record)

    def flush(self) -> None:
        for current in self.deleted.values():
            self.inner.delete(current)
        self.deleted = {}


class RecreateAfterDelete(WrappedDriver):
    transaction_class = _DeleteThenCreateIsReplace

    def transaction(self, callback: Callable[[Any], T]) -> T:
        def attempt(tx: Any) -> Any:
            wrapped = _DeleteThenCreateIsReplace(tx, self)
            result = callback(wrapped)
            wrapped.flush()
            return result

        return self.inner.transaction(attempt)  # type: ignore[no-any-return]


recreate_after_delete = mutant_harness(RecreateAfterDelete)

MUTANTS += [
    Mutant(
        "recreate-after-delete",
        "tests.mutants.m_mutations:recreate_after_delete",
        mutations.ONE_PER_KEY,
        "a create of a key deleted earlier in the attempt is accepted (delete + create become a replace)",
    ),
]


# -- a delete that drops the main index entry only --------------------------------------------------------


class _DeleteKeepsSecondaryEntries(WrappedTransaction):
    """Deletes the record and its first index entry; entries of its other indexes stay behind."""

    def delete(self, current: Any) -> None:
        ghosts: list[Any] = self.driver.store.shared.setdefault("ghosts", [])
        ghosts.extend((entry, current.key) for entry in current.indexes[1:])
        self.inner.delete(current)

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        return _with_ghosts(self.driver, command, self.inner.query_candidates(command, **kwargs))


def _with_ghosts(driver: Any, command: Any, page: Any) -> Any:
    ghosts = [
        StorageIndexReference(key, entry.sort)
        for entry, key in driver.store.shared.get("ghosts", [])
        if entry.index is command.index and entry.partition == command.partition
    ]
    if not ghosts or command.cursor is not None:
        return page
    items = sorted([*page.items, *ghosts], key=lambda item: (item.sort, item.key.encoded))
    if command.direction is StorageQueryDirection.DESCENDING:
        items.reverse()
    return QueryRecordsResult(tuple(items[: command.limit]), None)


class DeleteKeepsSecondaryEntries(WrappedDriver):
    transaction_class = _DeleteKeepsSecondaryEntries

    def query(self, command: Any) -> Any:
        return _with_ghosts(self, command, self.inner.query(command))


delete_keeps_secondary_entries = mutant_harness(DeleteKeepsSecondaryEntries)

MUTANTS += [
    Mutant(
        "delete-keeps-secondary-entries",
        "tests.mutants.m_mutations:delete_keeps_secondary_entries",
        mutations.INDEX_REMOVED,
        "a delete removes the record's first index entry only; its other indexes keep listing it",
    ),
]


class _ReplaceKeepsSecondaryEntries(_DeleteKeepsSecondaryEntries):
    """Replaces the record and moves its first index entry; old entries of its other indexes linger."""

    def delete(self, current: Any) -> None:
        self.inner.delete(current)

    def replace(self, current: Any, record: Any) -> None:
        ghosts: list[Any] = self.driver.store.shared.setdefault("ghosts", [])
        ghosts.extend((entry, current.key) for entry in current.indexes[1:])
        self.inner.replace(current, record)


replace_keeps_secondary_entries = mutant_harness(
    DeleteKeepsSecondaryEntries, transaction_class=_ReplaceKeepsSecondaryEntries
)

MUTANTS += [
    Mutant(
        "replace-keeps-secondary-entries",
        "tests.mutants.m_mutations:replace_keeps_secondary_entries",
        mutations.INDEX_MOVED,
        "a replace moves the record's first index entry only; its other indexes keep the old entries",
    ),
]
replace_matched_by_id = mutant_harness(transaction_class=_MatchesRowById)
