"""Broken drivers for the cursors area.

Each mutant lets the reference driver compute the correct, complete scan,
then orders, filters or pages it wrongly in one specific way and hands out
pages (with cursors from the public encoder) as a driver with that bug would.
The paging is done here, so each mutant breaks exactly its own rule and
keeps producing well-formed pages otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from runlane_conformance import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageCandidateMode,
    StorageCursorError,
    StorageIndexName,
    StorageIndexReference,
    StorageQueryDirection,
    StorageQueryRange,
    StorageRangeBound,
    decode_storage_query_cursor,
    encode_storage_query_cursor,
    parse_new_storage_record,
    storage_tuple_codec,
)
from runlane_conformance.catalogue import cursors
from runlane_conformance.contract.catalog import StorageTableName
from runlane_conformance.contract.cursors import StorageCursorPosition, is_after_cursor
from runlane_conformance.contract.tables import get_storage_table
from tests.mutants.catalog import Mutant
from tests.mutants.wrapping import WrappedDriver, WrappedTransaction, mutant_harness

ASC, DESC = StorageQueryDirection.ASCENDING, StorageQueryDirection.DESCENDING
Scan = Callable[[QueryRecordsCommand], QueryRecordsResult]


def _intact(cursor: str) -> bool:
    """Whether a cursor has the public format and a matching checksum (scope not considered)."""
    if not cursor.startswith("rlc1."):
        return False
    token, dot, digest = cursor[5:].partition(".")
    try:
        body = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except ValueError:
        return False
    return bool(dot) and hashlib.sha256(body).hexdigest()[:16] == digest


def _raw_position(cursor: str) -> StorageCursorPosition | None:
    """The position inside a public cursor, ignoring its scope and checksum; None if undecodable."""
    if not cursor.startswith("rlc1."):
        return None
    token, dot, _digest = cursor[5:].partition(".")
    if not dot:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except ValueError:
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("s"), str):
        return None
    if not isinstance(payload.get("k"), str):
        return None
    return StorageCursorPosition(payload["s"], payload["k"])


class RescanDriver(WrappedDriver):
    """Pages a complete correct scan itself; subclasses override one hook to break one rule."""

    # -- hooks ---------------------------------------------------------------------------------

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        """The range actually scanned."""
        return command.range

    def partitions(self, command: QueryRecordsCommand) -> list[str]:
        """The partitions actually scanned."""
        return [command.partition]

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        """The emission order, given the complete ascending scan."""
        return ascending if command.direction is ASC else list(reversed(ascending))

    def position(self, command: QueryRecordsCommand) -> StorageCursorPosition | None:
        """Where a cursor says to continue (scope-checked by default)."""
        return decode_storage_query_cursor(command)

    def resume(self, emitted: list[StorageIndexReference], start: int) -> int:
        """Index in ``emitted`` of the first item after the cursor."""
        return start

    def has_more(self, remaining: int, limit: int) -> bool:
        """Whether a page hands out a cursor, given how many entries follow it."""
        return remaining > 0

    def cursor_item(self, command: QueryRecordsCommand, chosen: list[StorageIndexReference]) -> Any:
        """The entry a page's cursor continues after."""
        return chosen[-1]

    # -- machinery -----------------------------------------------------------------------------

    def rescan(self, scan: Scan, command: QueryRecordsCommand) -> QueryRecordsResult:
        position = self.position(command)
        limit = self.profile.limits.max_query_results
        ascending: list[StorageIndexReference] = []
        for partition in self.partitions(command):
            base = QueryRecordsCommand(command.index, partition, limit, self.inner_range(command), ASC)
            page = scan(base)
            ascending.extend(page.items)
            while page.cursor is not None:
                page = scan(base.with_cursor(page.cursor))
                ascending.extend(page.items)
        ascending.sort(key=lambda item: (item.sort, item.key.encoded))
        emitted = self.arrange(command, ascending)
        start = 0
        if position is not None:
            start = len(emitted)
            for index, item in enumerate(emitted):
                if (item.sort, item.key.encoded) == (position.sort, position.key):
                    start = index + 1
                    break
            else:
                for index, item in enumerate(emitted):
                    if is_after_cursor(item.sort, item.key.encoded, position, command.direction):
                        start = index
                        break
            start = self.resume(emitted, start)
        chosen = emitted[start : start + command.limit]
        more = self.has_more(len(emitted) - (start + command.limit), command.limit)
        cursor = (
            encode_storage_query_cursor(command, self.cursor_item(command, chosen))
            if more and chosen
            else None
        )
        return QueryRecordsResult(tuple(chosen), cursor)

    def query(self, command: Any) -> Any:
        return self.rescan(self.inner.query, command)


class RescanTransaction(WrappedTransaction):
    driver: RescanDriver

    def query_candidates(self, command: Any, **kwargs: Any) -> Any:
        mode = kwargs.get("mode", StorageCandidateMode.ADVISORY)
        if mode is not StorageCandidateMode.ADVISORY:
            return self.inner.query_candidates(command, **kwargs)
        return self.driver.rescan(self.inner.query_candidates, command)


class KeyMajorOrder(RescanDriver):
    """Orders by record key first and sort second (an index keyed the wrong way round)."""

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        ordered = sorted(ascending, key=lambda item: (item.key.encoded, item.sort))
        return ordered if command.direction is ASC else list(reversed(ordered))


class ReversesEachPage(RescanDriver):
    """Descending pages are the ascending pages, each reversed on its own."""

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        if command.direction is ASC:
            return ascending
        emitted: list[StorageIndexReference] = []
        for start in range(0, len(ascending), command.limit):
            emitted.extend(reversed(ascending[start : start + command.limit]))
        return emitted


class TiesByDescendingKey(RescanDriver):
    """Breaks ties between equal sort values by descending record key."""

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        by_sort: dict[str, list[StorageIndexReference]] = {}
        for item in ascending:
            by_sort.setdefault(item.sort, []).append(item)
        ordered = [
            item
            for sort in sorted(by_sort)
            for item in sorted(by_sort[sort], key=lambda item: item.key.encoded, reverse=True)
        ]
        return ordered if command.direction is ASC else list(reversed(ordered))


class ExclusiveLowerIsInclusive(RescanDriver):
    """Treats an exclusive lower bound as inclusive (an off-by-one at the start of a range)."""

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        lower = command.range.lower
        if lower is not None and not lower.inclusive:
            return replace(command.range, lower=StorageRangeBound(lower.value, True))
        return command.range


class TruncatesPrefixBound(RescanDriver):
    """Rounds a bound that is not a whole tuple encoding down to one (drops the prefix bound's last digit)."""

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        upper = command.range.upper
        if upper is not None and len(upper.value.rpartition("/")[2]) % 2:
            return replace(command.range, upper=StorageRangeBound(upper.value[:-1], upper.inclusive))
        return command.range


class CursorSkipsOne(RescanDriver):
    """Continues one item too late after a cursor, so one entry between pages is lost."""

    def resume(self, emitted: list[StorageIndexReference], start: int) -> int:
        return start + 1


class CursorCrossesScopes(RescanDriver):
    """Applies a cursor's position to whatever scope it is used with."""

    def position(self, command: QueryRecordsCommand) -> StorageCursorPosition | None:
        if command.cursor is None:
            return None
        position = _raw_position(command.cursor)
        if position is None:
            return decode_storage_query_cursor(command)  # garbled cursors are still refused
        try:
            return decode_storage_query_cursor(command)
        except StorageCursorError:
            return position


class GarbledCursorRestarts(RescanDriver):
    """Reads a cursor it cannot decode (bad format or checksum) as 'start from the beginning'."""

    def position(self, command: QueryRecordsCommand) -> StorageCursorPosition | None:
        if command.cursor is not None and not _intact(command.cursor):
            return None
        return decode_storage_query_cursor(command)


class _PartitionRegistry(RescanTransaction):
    def create(self, record: Any) -> None:
        self._register(record)
        self.inner.create(record)

    def replace(self, current: Any, record: Any) -> None:
        self._register(record)
        self.inner.replace(current, record)

    def _register(self, record: Any) -> None:
        known: set[tuple[str, str]] = self.driver.store.shared.setdefault("partitions", set())
        for entry in parse_new_storage_record(record).indexes:
            known.add((entry.index.value, entry.partition))


class PartitionPrefixScan(RescanDriver):
    """Scans every partition whose name starts with the requested one (a prefix scan over partitions)."""

    def partitions(self, command: QueryRecordsCommand) -> list[str]:
        known: set[tuple[str, str]] = self.store.shared.get("partitions", set())
        return sorted(
            {command.partition}
            | {p for index, p in known if index == command.index.value and p.startswith(command.partition)}
        )


MUTANTS = [
    Mutant(
        "key-major-order",
        "tests.mutants.m_cursors:key_major_order",
        cursors.ASCENDING,
        "orders index results by key, then sort",
    ),
    Mutant(
        "descending-reverses-each-page",
        "tests.mutants.m_cursors:reverses_each_page",
        cursors.DESCENDING,
        "descending pages are ascending pages reversed one by one",
    ),
    Mutant(
        "ties-by-descending-key",
        "tests.mutants.m_cursors:ties_by_descending_key",
        cursors.TIES,
        "equal sorts come in descending key order",
    ),
    Mutant(
        "exclusive-lower-bound-inclusive",
        "tests.mutants.m_cursors:exclusive_lower_inclusive",
        cursors.RANGE_BOUNDS,
        "an exclusive lower bound also returns entries equal to it",
    ),
    Mutant(
        "truncates-prefix-upper-bound",
        "tests.mutants.m_cursors:truncates_prefix_bound",
        cursors.TUPLE_PREFIX,
        "the prefix upper bound loses its last digit",
    ),
    Mutant(
        "cursor-skips-one",
        "tests.mutants.m_cursors:cursor_skips_one",
        cursors.PAGES,
        "continuing from a cursor skips the next entry",
    ),
    Mutant(
        "cursor-crosses-scopes",
        "tests.mutants.m_cursors:cursor_crosses_scopes",
        cursors.SCOPE,
        "a cursor is applied under any index, partition, range or direction",
    ),
    Mutant(
        "garbled-cursor-restarts",
        "tests.mutants.m_cursors:garbled_cursor_restarts",
        cursors.GARBLED,
        "an unreadable cursor restarts the scan",
    ),
    Mutant(
        "partition-prefix-scan",
        "tests.mutants.m_cursors:partition_prefix_scan",
        cursors.PARTITIONS,
        "a scan also returns partitions whose names extend the requested one",
    ),
]


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be")


class TiesByUtf16(RescanDriver):
    """Breaks ties between equal sorts by comparing key components as UTF-16 code units."""

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        ordered = sorted(ascending, key=lambda item: (item.sort, tuple(_utf16(part) for part in item.key.id)))
        return ordered if command.direction is ASC else list(reversed(ordered))


class SortsByUtf16(RescanDriver):
    """Orders sort values by their components' UTF-16 code units (as JavaScript or Java compare strings)."""

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        def order(item: StorageIndexReference) -> tuple[tuple[bytes, ...], str]:
            parts = storage_tuple_codec.decode(item.sort)
            return (tuple(_utf16(str(part)) for part in parts), item.key.encoded)

        ordered = sorted(ascending, key=order)
        return ordered if command.direction is ASC else list(reversed(ordered))


MUTANTS += [
    Mutant(
        "ties-by-utf16-code-units",
        "tests.mutants.m_cursors:ties_by_utf16",
        cursors.TIES,
        "ties are ordered by UTF-16 code units of the key, not code points",
    ),
    Mutant(
        "sorts-by-utf16-code-units",
        "tests.mutants.m_cursors:sorts_by_utf16",
        cursors.ASCENDING,
        "sort values are ordered by UTF-16 code units of their components",
    ),
    Mutant(
        "sorts-by-utf16-code-units-descending",
        "tests.mutants.m_cursors:sorts_by_utf16",
        cursors.DESCENDING,
        "descending scans reverse a UTF-16 code unit order",
    ),
]


def _harness(
    driver_class: type[RescanDriver], transaction_class: type[RescanTransaction] = RescanTransaction
) -> Any:
    return mutant_harness(driver_class, transaction_class=transaction_class)


key_major_order = _harness(KeyMajorOrder)
reverses_each_page = _harness(ReversesEachPage)
ties_by_descending_key = _harness(TiesByDescendingKey)
exclusive_lower_inclusive = _harness(ExclusiveLowerIsInclusive)
truncates_prefix_bound = _harness(TruncatesPrefixBound)
cursor_skips_one = _harness(CursorSkipsOne)
cursor_crosses_scopes = _harness(CursorCrossesScopes)
garbled_cursor_restarts = _harness(GarbledCursorRestarts)
partition_prefix_scan = _harness(PartitionPrefixScan, _PartitionRegistry)
ties_by_utf16 = _harness(TiesByUtf16)
sorts_by_utf16 = _harness(SortsByUtf16)


# -- every index of the closed catalogue -------------------------------------------------------------


def _planned(scan: Scan, command: QueryRecordsCommand, shape: str) -> QueryRecordsResult:
    from runlane_conformance import StorageIndexName

    forgotten = shape == "forgotten" and command.index is StorageIndexName.RUNS_BY_PARENT
    copied = shape == "copied" and command.index is StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN
    if forgotten:
        return QueryRecordsResult(items=(), cursor=None)
    if copied:
        result = scan(replace(command, index=StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, cursor=None))
        return QueryRecordsResult(items=result.items, cursor=None)
    return scan(command)


def _plan_mutant(shape: str) -> Callable[[Any], Any]:
    class PlanTransaction(WrappedTransaction):
        def query_candidates(self, command: Any, **kwargs: Any) -> Any:
            return _planned(lambda c: self.inner.query_candidates(c, **kwargs), command, shape)

    class PlanDriver(WrappedDriver):
        transaction_class = PlanTransaction

        def query(self, command: Any) -> Any:
            return _planned(self.inner.query, command, shape)

    return mutant_harness(PlanDriver)


forgets_one_index = _plan_mutant("forgotten")
copies_a_sibling_plan = _plan_mutant("copied")

MUTANTS += [
    Mutant(
        "forgets-one-index",
        "tests.mutants.m_cursors:forgets_one_index",
        cursors.EVERY_INDEX,
        "RunsByParent has no query plan: every scan of it comes back empty",
    ),
    Mutant(
        "copies-a-sibling-plan",
        "tests.mutants.m_cursors:copies_a_sibling_plan",
        cursors.EVERY_INDEX,
        "WaitTokenLinksByToken is answered by the WaitTokenLinksByRun plan (a copy-pasted mapping)",
    ),
]


# -- the page before the last, and the descending cursor ------------------------------------------------


class DropsCursorBeforeShortPage(RescanDriver):
    """Hands out a cursor only when another full page follows: a short last page is never reached."""

    def has_more(self, remaining: int, limit: int) -> bool:
        return remaining >= limit


class DescendingCursorFromFirstItem(RescanDriver):
    """Descending pages continue after their first entry instead of their last (a mirrored index)."""

    def cursor_item(self, command: QueryRecordsCommand, chosen: list[StorageIndexReference]) -> Any:
        return chosen[0] if command.direction is DESC else chosen[-1]


drops_cursor_before_short_page = _harness(DropsCursorBeforeShortPage)
descending_cursor_from_first_item = _harness(DescendingCursorFromFirstItem)

MUTANTS += [
    Mutant(
        "drops-cursor-before-short-page",
        "tests.mutants.m_cursors:drops_cursor_before_short_page",
        cursors.PAGES,
        "a full page gets a cursor only when another full page follows, so a short last page is lost",
    ),
    Mutant(
        "descending-cursor-from-first-item",
        "tests.mutants.m_cursors:descending_cursor_from_first_item",
        cursors.PAGES,
        "a descending page's cursor continues after its first entry, so pages repeat",
    ),
]


class SentinelPrefixBound(RescanDriver):
    """Rebuilds a tuple-prefix upper bound as the prefix plus a U+10FFFF component, inclusive: entries
    whose next component starts with U+10FFFF and goes on are cut off."""

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        upper = command.range.upper
        if upper is None or upper.inclusive or not upper.value.endswith("0"):
            return command.range
        try:
            prefix = storage_tuple_codec.decode(upper.value[:-1])
        except ValueError:
            return command.range
        sentinel = storage_tuple_codec.encode((*prefix, "\U0010ffff"))
        return replace(command.range, upper=StorageRangeBound(sentinel, True))


sentinel_prefix_bound = _harness(SentinelPrefixBound)

MUTANTS += [
    Mutant(
        "sentinel-prefix-bound",
        "tests.mutants.m_cursors:sentinel_prefix_bound",
        cursors.TUPLE_PREFIX,
        "a prefix range ends at the prefix plus a U+10FFFF component (a Unicode sentinel)",
    ),
]


# -- an exclusive path written as a second query --------------------------------------------------------


def _exclusive_mutant(shape: str) -> Callable[[Any], Any]:
    class ExclusivePathTransaction(WrappedTransaction):
        def query_candidates(self, command: Any, **kwargs: Any) -> Any:
            if kwargs.get("mode", StorageCandidateMode.ADVISORY) is not StorageCandidateMode.EXCLUSIVE:
                return self.inner.query_candidates(command, **kwargs)
            if shape == "ascending" and command.direction is DESC:
                page = self.inner.query_candidates(replace(command, direction=ASC, cursor=None), **kwargs)
                items = page.items
                cursor = encode_storage_query_cursor(command, items[-1]) if page.cursor and items else None
                return QueryRecordsResult(items, cursor)
            if shape == "open-lower" and command.range.lower is not None:
                widened = replace(command, range=replace(command.range, lower=None), cursor=None)
                return self.inner.query_candidates(widened, **kwargs)
            return self.inner.query_candidates(command, **kwargs)

    return mutant_harness(transaction_class=ExclusivePathTransaction)


exclusive_ignores_direction = _exclusive_mutant("ascending")
exclusive_ignores_lower_bound = _exclusive_mutant("open-lower")

MUTANTS += [
    Mutant(
        "exclusive-ignores-direction",
        "tests.mutants.m_cursors:exclusive_ignores_direction",
        cursors.EXCLUSIVE_PAGES,
        "the exclusive selection query always scans ascending",
    ),
    Mutant(
        "exclusive-ignores-lower-bound",
        "tests.mutants.m_cursors:exclusive_ignores_lower_bound",
        cursors.EXCLUSIVE_PAGES,
        "the exclusive selection query forgets the range's lower bound",
    ),
]


# -- issue 20: cursor scope keyed by too few fields, and a cursor read as an entry's identity --------


def _intact_payload(cursor: str | None) -> dict[str, Any] | None:
    """The JSON body of an intact public cursor (checksum verified), or None."""
    if cursor is None or not _intact(cursor):
        return None
    token = cursor[5:].partition(".")[0]
    payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    return payload if isinstance(payload, dict) else None


def _table_of(index: str) -> str | None:
    for table in StorageTableName:
        if index in {name.value for name in getattr(get_storage_table(table), "indexes", ())}:
            return table.value
    return None


class LooseScopeDriver(RescanDriver):
    """Decodes a cursor against a scope that leaves some components out (``loose`` says which match)."""

    def loose(self, issued: dict[str, Any], command: QueryRecordsCommand) -> bool:
        raise NotImplementedError

    def position(self, command: QueryRecordsCommand) -> StorageCursorPosition | None:
        try:
            return decode_storage_query_cursor(command)
        except StorageCursorError:
            issued = _intact_payload(command.cursor)
            if issued is None or not self.loose(issued, command):
                raise
            return StorageCursorPosition(str(issued["s"]), str(issued["k"]))


def _range_values(command: QueryRecordsCommand) -> list[str | None]:
    return [None if bound is None else bound.value for bound in (command.range.lower, command.range.upper)]


class CursorScopeIgnoresInclusivity(LooseScopeDriver):
    """Binds the range's bound values into the cursor scope but not whether each end is inclusive."""

    def loose(self, issued: dict[str, Any], command: QueryRecordsCommand) -> bool:
        bounds = issued.get("r") or [None, None]
        values = [None if bound is None else bound[0] for bound in bounds]
        return (
            values == _range_values(command)
            and issued.get("i") == command.index.value
            and issued.get("p") == command.partition
            and issued.get("d") == command.direction.value
        )


class CursorScopeNamesTheTable(LooseScopeDriver):
    """Binds the table of the index into the cursor scope, not the index: sibling indexes share cursors."""

    def loose(self, issued: dict[str, Any], command: QueryRecordsCommand) -> bool:
        table = _table_of(str(issued.get("i")))
        return (
            table is not None
            and table == _table_of(command.index.value)
            and issued.get("p") == command.partition
            and issued.get("r") == [_bound_json(command.range.lower), _bound_json(command.range.upper)]
            and issued.get("d") == command.direction.value
        )


def _bound_json(bound: StorageRangeBound | None) -> list[Any] | None:
    return None if bound is None else [bound.value, bound.inclusive]


class CursorFindsItsLastEntry(RescanDriver):
    """Continues after the entry the cursor names; once that entry is gone, the listing is over."""

    _last: StorageCursorPosition | None = None

    def rescan(self, scan: Scan, command: QueryRecordsCommand) -> QueryRecordsResult:
        self._last = decode_storage_query_cursor(command)
        return super().rescan(scan, command)

    def resume(self, emitted: list[StorageIndexReference], start: int) -> int:
        last = self._last
        if last is None or any((item.sort, item.key.encoded) == (last.sort, last.key) for item in emitted):
            return start
        return len(emitted)


cursor_scope_ignores_inclusivity = _harness(CursorScopeIgnoresInclusivity)
cursor_scope_names_the_table = _harness(CursorScopeNamesTheTable)
cursor_finds_its_last_entry = _harness(CursorFindsItsLastEntry)

MUTANTS += [
    Mutant(
        "cursor-scope-ignores-inclusivity",
        "tests.mutants.m_cursors:cursor_scope_ignores_inclusivity",
        cursors.SCOPE,
        "a cursor is accepted under the same bound values with either end's inclusivity flipped",
    ),
    Mutant(
        "cursor-scope-names-the-table",
        "tests.mutants.m_cursors:cursor_scope_names_the_table",
        cursors.SCOPE,
        "a cursor binds the table, not the index: WaitTokenLinksByToken cursors continue WaitTokenLinksByRun",
    ),
    Mutant(
        "cursor-finds-its-last-entry",
        "tests.mutants.m_cursors:cursor_finds_its_last_entry",
        cursors.PAGES,
        "a cursor continues after the entry it names, and ends the scan once that entry was deleted",
    ),
]


def _to_milliseconds(sort: str) -> str:
    """The sort value as a millisecond timestamp column stores it (the fraction cut after 3 digits)."""
    parts = storage_tuple_codec.decode(sort)
    return storage_tuple_codec.encode(
        tuple(
            part[:23] + "000" + part[26:] if len(part) == 27 and part[19] == "." else part for part in parts
        )
    )


class MillisecondPruneAfter(RescanDriver):
    """TombstonesByPruneAfter is a DATETIME(3)-style column: its entries and bounds compare to the ms."""

    def inner_range(self, command: QueryRecordsCommand) -> StorageQueryRange:
        if command.index is StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER:
            return StorageQueryRange()
        return command.range

    def arrange(self, command: QueryRecordsCommand, ascending: list[StorageIndexReference]) -> list[Any]:
        if command.index is StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER:
            lower, upper = command.range.lower, command.range.upper
            coarse = StorageQueryRange(
                None if lower is None else StorageRangeBound(_to_milliseconds(lower.value), lower.inclusive),
                None if upper is None else StorageRangeBound(_to_milliseconds(upper.value), upper.inclusive),
            )
            ascending = [item for item in ascending if coarse.contains(_to_milliseconds(item.sort))]
        return super().arrange(command, ascending)


millisecond_prune_after = _harness(MillisecondPruneAfter)

MUTANTS += [
    Mutant(
        "millisecond-prune-after",
        "tests.mutants.m_cursors:millisecond_prune_after",
        cursors.RANGE_BOUNDS,
        "TombstonesByPruneAfter compares instants to the millisecond, so a bound splits no millisecond",
    ),
]
