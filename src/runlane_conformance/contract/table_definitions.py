"""The definitions of every table in the catalog (registered on import).

Each table says three things about a document ``value``: the record key it
must live under, the index entries it must carry, and the identity rules a
JSON Schema cannot state. Shared conventions:

* Almost every record is owned by an environment, and the environment is the
  first key component and the partition of every index entry. Records that
  belong to a run (events, steps, outbox messages, tombstones) carry the run
  id as the second key component, so ``owner_fields`` ties both to the key.
* Timestamps are ``iso_date_codec`` strings (fixed width, so text order is
  time order and they can be used as sort components directly).
* Unsigned 64-bit counters, sequences and attempts are canonical decimal
  strings checked with ``storage_unsigned_integer_codec``; where they appear
  in keys or sorts they use the 20-digit ordered form so text order is
  numeric order.
* Derived identities (step tokens, schedule occurrence ids) are lowercase
  sha256 hex digests of a storage tuple encoding that starts with a versioned
  domain label, so no two kinds of identity can ever collide and every
  runtime can recompute them byte for byte.

Every rule violation raises ``StorageDocumentRuleError`` with the rule's name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar

from .catalog import StorageIndexName, StorageTableName
from .encodings import iso_date_codec, storage_tuple_codec, storage_unsigned_integer_codec
from .errors import StorageValidationError
from .json_boundary import FrozenJson, FrozenJsonObject, JsonValue, freeze_json, thaw_json
from .keys import StorageIndexEntry, StorageRecordKey
from .table_rules import StorageDocumentRuleError, StorageTable, iso, unsigned_integer

__all__ = [
    "CORE_TABLES",
    "TERMINAL_RUN_STATUSES",
    "EventsTable",
    "LeasesTable",
    "OutboxMessagesTable",
    "OwnerScope",
    "OwnersTable",
    "QueueCapacityTable",
    "RunCompletionWaitPresenceTable",
    "RunStatus",
    "RunsTable",
    "SchedulesTable",
    "StepStatus",
    "StepsTable",
    "TombstonesTable",
    "WaitTokenLinksTable",
    "WaitTokenOutcome",
    "WaitTokenStatus",
    "WaitTokensTable",
    "check_reciprocal_idempotency",
    "event_record_key",
    "outbox_message_record_key",
    "owner_record_key",
    "queue_capacity_record_key",
    "run_completion_wait_presence_record_key",
    "run_record_key",
    "schedule_occurrence_id",
    "schedule_record_key",
    "step_record_key",
    "step_token",
    "tombstone_for_run",
    "tombstone_record_key",
    "wait_token_link_record_key",
    "wait_token_record_key",
]

_NAME = {"type": "string", "minLength": 1, "maxLength": 256}
_ISO = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$"}
_ISO_OR_NULL = {"anyOf": [_ISO, {"type": "null"}]}
_NAME_OR_NULL = {"anyOf": [_NAME, {"type": "null"}]}
# Canonical unsigned decimal; the exact 2**64-1 ceiling is an identity check (a pattern cannot say it).
_U64 = {"type": "string", "pattern": r"^(0|[1-9][0-9]{0,19})$"}
_DIGEST = {"type": "string", "pattern": r"^[0-9a-f]{64}$"}
_ERROR = {
    "type": "object",
    "required": ["message"],
    "properties": {"message": {"type": "string"}, "code": {"type": "string"}},
}
_COUNT_FIELDS = ("events", "outboxMessages", "steps", "waitTokenLinks")
_COUNTS = {
    "type": "object",
    "additionalProperties": False,
    "required": list(_COUNT_FIELDS),
    "properties": {field: _U64 for field in _COUNT_FIELDS},
}
_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


def _object(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    """A closed object schema: every ``required`` property must be present, nothing unknown."""
    return {
        "$schema": _SCHEMA,
        "type": "object",
        "additionalProperties": False,
        "required": list(required),
        "properties": {**required, **(optional or {})},
    }


# --------------------------------------------------------------------------- status enums


class RunStatus(StrEnum):
    """Lifecycle of a run. The last three are terminal: a terminal run never changes status again."""

    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_RUN_STATUSES: frozenset[RunStatus] = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}
)
"""The run statuses a run never leaves: only a run in one of them may be tombstoned."""


class StepStatus(StrEnum):
    """Lifecycle of one memoised step execution."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class WaitTokenStatus(StrEnum):
    """A wait token is pending until it is resolved, exactly once."""

    PENDING = "pending"
    RESOLVED = "resolved"


class WaitTokenOutcome(StrEnum):
    """How a resolved wait token was resolved: by a caller (with a value) or by its timeout."""

    COMPLETED = "completed"
    TIMED_OUT = "timed_out"


class OwnerScope(StrEnum):
    """What an idempotency owner record reserves a key for, and so which table it points at."""

    RUN = "run"
    WAIT_TOKEN = "wait_token"


_OWNER_SCOPE_TABLES: Mapping[OwnerScope, StorageTableName] = {
    OwnerScope.RUN: StorageTableName.RUNS,
    OwnerScope.WAIT_TOKEN: StorageTableName.WAIT_TOKENS,
}

# --------------------------------------------------------------------------- derived identities

_STEP_TOKEN_DOMAIN = "runlane/step-token/v1"
_OCCURRENCE_DOMAIN = "runlane/schedule-occurrence/v1"


def _digest(components: tuple[str, ...]) -> str:
    return hashlib.sha256(storage_tuple_codec.encode(components).encode("utf-8")).hexdigest()


def step_token(environment: str, run_id: str, step_name: str, sequence: int) -> str:
    """The deterministic token of the ``sequence``-th call (from 1) of ``step_name`` in a run.

    It is the sha256 hex digest of the storage tuple encoding of
    ``("runlane/step-token/v1", environment, run_id, step_name, decimal sequence)``.
    A replayed run recomputes the same token for the same call, which is what
    lets core find the memoised result with one point read and lets pruning
    delete exactly the steps a run owns.
    """
    if type(sequence) is not int or sequence < 1:
        raise StorageValidationError(f"a step sequence is a positive integer, got {sequence!r}")
    decimal = storage_unsigned_integer_codec.encode(sequence)
    for part in (environment, run_id, step_name):
        if not isinstance(part, str) or not part:
            raise StorageValidationError("environment, run id and step name are non-empty strings")
    return _digest((_STEP_TOKEN_DOMAIN, environment, run_id, step_name, decimal))


def schedule_occurrence_id(environment: str, schedule_id: str, occurrence_at: datetime | str) -> str:
    """The deterministic id of one occurrence of a schedule.

    The sha256 hex digest of the storage tuple encoding of
    ``("runlane/schedule-occurrence/v1", environment, schedule_id, iso time)``,
    where the time is in ``iso_date_codec`` form (a string must already be
    canonical). Two schedulers that race to fire the same occurrence derive the
    same id, so only one of their conditional creates can win.
    """
    if isinstance(occurrence_at, datetime):
        at = iso_date_codec.encode(occurrence_at)
    else:
        at = occurrence_at
        iso_date_codec.decode(at)  # refuses anything that is not canonical
        if iso_date_codec.encode(iso_date_codec.decode(at)) != at:
            raise StorageValidationError(f"not a canonical iso date: {at!r}")
    for part in (environment, schedule_id):
        if not isinstance(part, str) or not part:
            raise StorageValidationError("environment and schedule id are non-empty strings")
    return _digest((_OCCURRENCE_DOMAIN, environment, schedule_id, at))


# --------------------------------------------------------------------------- record keys


def _key(table: StorageTableName, *components: str) -> StorageRecordKey:
    return StorageRecordKey(table, components)


def run_record_key(environment: str, run_id: str) -> StorageRecordKey:
    """Where a run lives: ``runs / environment / runId``."""
    return _key(StorageTableName.RUNS, environment, run_id)


def event_record_key(environment: str, run_id: str, sequence: int) -> StorageRecordKey:
    """Where a run's ``sequence``-th event lives; the sequence is 20-digit ordered, so keys sort by it."""
    return _key(
        StorageTableName.EVENTS, environment, run_id, storage_unsigned_integer_codec.encode_ordered(sequence)
    )


def step_record_key(environment: str, run_id: str, token: str) -> StorageRecordKey:
    """Where the step with ``token`` (see ``step_token``) lives."""
    return _key(StorageTableName.STEPS, environment, run_id, token)


def outbox_message_record_key(environment: str, run_id: str, message_id: str) -> StorageRecordKey:
    """Where a run's outbox message lives."""
    return _key(StorageTableName.OUTBOX_MESSAGES, environment, run_id, message_id)


def schedule_record_key(environment: str, schedule_id: str) -> StorageRecordKey:
    """Where a schedule lives."""
    return _key(StorageTableName.SCHEDULES, environment, schedule_id)


def owner_record_key(environment: str, scope: OwnerScope | str, idempotency_key: str) -> StorageRecordKey:
    """Where the idempotency owner of ``idempotency_key`` in ``scope`` lives."""
    return _key(StorageTableName.OWNERS, environment, OwnerScope(scope).value, idempotency_key)


def queue_capacity_record_key(environment: str, queue: str) -> StorageRecordKey:
    """Where a queue's concurrency counter lives."""
    return _key(StorageTableName.QUEUE_CAPACITY, environment, queue)


def tombstone_record_key(environment: str, run_id: str) -> StorageRecordKey:
    """Where a pruned run's tombstone lives (same id components as the run)."""
    return _key(StorageTableName.TOMBSTONES, environment, run_id)


def wait_token_record_key(environment: str, token_id: str) -> StorageRecordKey:
    """Where a wait token lives."""
    return _key(StorageTableName.WAIT_TOKENS, environment, token_id)


def wait_token_link_record_key(environment: str, token_id: str, run_id: str) -> StorageRecordKey:
    """Where the link between a wait token and a run waiting on it lives."""
    return _key(StorageTableName.WAIT_TOKEN_LINKS, environment, token_id, run_id)


def run_completion_wait_presence_record_key(environment: str, source_run_id: str) -> StorageRecordKey:
    """Where the completion-wait marker of a source run id lives (the source need not exist)."""
    return _key(StorageTableName.RUN_COMPLETION_WAIT_PRESENCE, environment, source_run_id)


def _key_json(key: StorageRecordKey) -> dict[str, JsonValue]:
    return {"table": key.table.value, "id": list(key.id)}


# --------------------------------------------------------------------------- shared checks


def _text(value: FrozenJsonObject, field: str) -> str:
    """A field the schema guarantees is a string."""
    return str(value[field])


def _optional_text(value: FrozenJsonObject, field: str) -> str | None:
    item = value.get(field)
    return None if item is None else str(item)


def _object_field(value: FrozenJsonObject, field: str) -> FrozenJsonObject | None:
    item = value.get(field)
    return item if isinstance(item, FrozenJsonObject) else None


class _EnvironmentTable(StorageTable):
    """A table whose records belong to one environment; adds timestamp and counter checks.

    Subclasses list their timestamp fields (null allowed where the schema
    allows it) and unsigned counter fields; ``check_rules`` adds the
    table-specific identity rules.
    """

    owner_fields: ClassVar[tuple[str, ...]] = ("environment",)
    timestamp_fields: ClassVar[tuple[str, ...]] = ()
    counter_fields: ClassVar[tuple[str, ...]] = ()

    def _fail(self, rule: str, message: str) -> StorageDocumentRuleError:
        return StorageDocumentRuleError(f"{self.name.value}: {message}", table=self.name, rule=rule)

    def check_identity(self, value: FrozenJsonObject) -> None:
        for field in self.timestamp_fields:
            if value.get(field) is not None:
                iso(value, field, self.name)
        for field in self.counter_fields:
            unsigned_integer(value, field, self.name, rule="counter")
        self.check_rules(value)

    def check_rules(self, value: FrozenJsonObject) -> None:
        """Table-specific identity rules (none by default)."""
        return None

    def _counts(self, value: FrozenJsonObject) -> None:
        counts = value["counts"]
        assert isinstance(counts, FrozenJsonObject)  # the schema guarantees it
        for field in _COUNT_FIELDS:
            unsigned_integer(counts, field, self.name, rule="counter")

    def _entry(self, index: StorageIndexName, value: FrozenJsonObject, *sort: str) -> StorageIndexEntry:
        return StorageIndexEntry.of(index, _text(value, "environment"), *sort)


# --------------------------------------------------------------------------- leases (frozen)


class LeasesTable(StorageTable):
    """A named lease in an environment. Held leases are indexed by expiry; released ones are not.

    Because releasing a lease (``holder`` null) removes its index entry, the
    table is also how suites move a record out of an index.
    """

    name = StorageTableName.LEASES
    indexes = (StorageIndexName.LEASES_BY_EXPIRY,)
    schema: ClassVar[dict[str, Any]] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "required": ["environment", "name", "holder", "expiresAt"],
        "properties": {
            "environment": _NAME,
            "name": _NAME,
            "holder": {"type": ["string", "null"]},
            "expiresAt": _ISO,
        },
    }

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (str(value["environment"]), str(value["name"]))

    def check_identity(self, value: FrozenJsonObject) -> None:
        # A released lease keeps its expiry too, so it must be a real date even when unindexed.
        iso(value, "expiresAt", self.name)

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        if value["holder"] is None:
            return ()
        return (
            StorageIndexEntry.of(
                StorageIndexName.LEASES_BY_EXPIRY, str(value["environment"]), iso(value, "expiresAt")
            ),
        )


# --------------------------------------------------------------------------- runs


class RunsTable(_EnvironmentTable):
    """A workflow run, keyed by (environment, runId).

    A visible run is indexed by status and by creation time; a child run is
    also indexed under its parent (so pruning can find children), and a run
    waiting for another run to finish is indexed under the source run id in
    ``RunsWaitingForCompletion``, the authoritative waiter set. A tombstoned
    run leaves every index at once: it has left operational reads, and only
    its exact child counts still matter until cleanup drives them to zero.

    Rules: ``run-completion`` (``completedAt`` is set exactly when the status
    is terminal), ``completion-wait`` (only a ``waiting`` run waits on a source,
    and never on itself), ``parent`` (a run is not its own parent),
    ``tombstone-terminal`` (only a terminal run can be tombstoned), ``counter``
    (the four child counts are unsigned 64-bit decimals).
    """

    name = StorageTableName.RUNS
    owner_fields = ("environment", "runId")
    indexes = (
        StorageIndexName.RUNS_BY_STATUS,
        StorageIndexName.RUNS_BY_CREATED_AT,
        StorageIndexName.RUNS_BY_PARENT,
        StorageIndexName.RUNS_WAITING_FOR_COMPLETION,
    )
    timestamp_fields = ("createdAt", "updatedAt", "completedAt", "tombstonedAt")
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "runId": _NAME,
            "workflow": _NAME,
            "status": {"enum": [status.value for status in RunStatus]},
            "input": {},
            "output": {},
            "error": {"anyOf": [_ERROR, {"type": "null"}]},
            "parentRunId": _NAME_OR_NULL,
            "waitingForRunId": _NAME_OR_NULL,
            "createdAt": _ISO,
            "updatedAt": _ISO,
            "completedAt": _ISO_OR_NULL,
            "tombstonedAt": _ISO_OR_NULL,
            "counts": _COUNTS,
        }
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "runId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        self._counts(value)
        status = RunStatus(_text(value, "status"))
        terminal = status in TERMINAL_RUN_STATUSES
        run_id = _text(value, "runId")
        if terminal != (value["completedAt"] is not None):
            raise self._fail("run-completion", f"status {status.value} and completedAt disagree")
        source = _optional_text(value, "waitingForRunId")
        if source is not None and (status is not RunStatus.WAITING or source == run_id):
            raise self._fail(
                "completion-wait", f"a {status.value} run {run_id} cannot wait for completion of {source}"
            )
        if _optional_text(value, "parentRunId") == run_id:
            raise self._fail("parent", f"run {run_id} names itself as its parent")
        if value["tombstonedAt"] is not None and not terminal:
            raise self._fail("tombstone-terminal", f"a {status.value} run cannot be tombstoned")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        if value["tombstonedAt"] is not None:
            return ()
        created = iso(value, "createdAt", self.name)
        entries = [
            self._entry(StorageIndexName.RUNS_BY_STATUS, value, _text(value, "status"), created),
            self._entry(StorageIndexName.RUNS_BY_CREATED_AT, value, created),
        ]
        parent = _optional_text(value, "parentRunId")
        if parent is not None:
            entries.append(self._entry(StorageIndexName.RUNS_BY_PARENT, value, parent, created))
        source = _optional_text(value, "waitingForRunId")
        if source is not None:
            entries.append(self._entry(StorageIndexName.RUNS_WAITING_FOR_COMPLETION, value, source))
        return tuple(entries)


class _RunOwnedTable(_EnvironmentTable):
    """A record that belongs to one run of one environment: both lead its key."""

    owner_fields = ("environment", "runId")


# --------------------------------------------------------------------------- events


class EventsTable(_RunOwnedTable):
    """One entry of a run's history, keyed by (environment, runId, 20-digit sequence).

    Sequences start at 1 and are allocated by the run; the ordered form in the
    key and in ``EventsByRun`` makes a run's history read back in order.
    Rule ``sequence``: a canonical unsigned 64-bit decimal of at least 1.
    """

    name = StorageTableName.EVENTS
    indexes = (StorageIndexName.EVENTS_BY_RUN,)
    timestamp_fields = ("occurredAt",)
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "runId": _NAME,
            "sequence": _U64,
            "type": _NAME,
            "occurredAt": _ISO,
            "data": {"type": "object"},
        }
    )

    def _sequence(self, value: FrozenJsonObject) -> str:
        number = unsigned_integer(value, "sequence", self.name, minimum=1, rule="sequence")
        return storage_unsigned_integer_codec.encode_ordered(number)

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "runId"), self._sequence(value))

    def check_rules(self, value: FrozenJsonObject) -> None:
        self._sequence(value)

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        return (
            self._entry(StorageIndexName.EVENTS_BY_RUN, value, _text(value, "runId"), self._sequence(value)),
        )


# --------------------------------------------------------------------------- steps


class StepsTable(_RunOwnedTable):
    """A memoised step of a run, keyed by (environment, runId, token).

    The token is ``step_token(environment, runId, stepName, sequence)``, so the
    record is the exact owner of that token and core finds it by point read.
    ``StepsByRun`` lists a run's steps by (runId, stepName, sequence) for pruning.

    Rules: ``step-token`` (the token is the derived one), ``sequence`` (at
    least 1), ``counter`` (``attempts`` is an unsigned decimal),
    ``step-outcome`` (``completedAt`` is set exactly when the step finished,
    and ``error`` exactly when it failed).
    """

    name = StorageTableName.STEPS
    indexes = (StorageIndexName.STEPS_BY_RUN,)
    timestamp_fields = ("createdAt", "updatedAt", "completedAt")
    counter_fields = ("attempts",)
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "runId": _NAME,
            "stepName": _NAME,
            "sequence": _U64,
            "token": _DIGEST,
            "status": {"enum": [status.value for status in StepStatus]},
            "attempts": _U64,
            "output": {},
            "error": {"anyOf": [_ERROR, {"type": "null"}]},
            "createdAt": _ISO,
            "updatedAt": _ISO,
            "completedAt": _ISO_OR_NULL,
        }
    )

    def _sequence(self, value: FrozenJsonObject) -> int:
        return unsigned_integer(value, "sequence", self.name, minimum=1, rule="sequence")

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "runId"), _text(value, "token"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        sequence = self._sequence(value)
        expected = step_token(
            _text(value, "environment"), _text(value, "runId"), _text(value, "stepName"), sequence
        )
        if value["token"] != expected:
            raise self._fail("step-token", f"token {value['token']} is not the derived {expected}")
        status = StepStatus(_text(value, "status"))
        if (status is StepStatus.RUNNING) != (value["completedAt"] is None):
            raise self._fail("step-outcome", f"status {status.value} and completedAt disagree")
        if (status is StepStatus.FAILED) != (value["error"] is not None):
            raise self._fail("step-outcome", f"status {status.value} and error disagree")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        ordered = storage_unsigned_integer_codec.encode_ordered(self._sequence(value))
        return (
            self._entry(
                StorageIndexName.STEPS_BY_RUN,
                value,
                _text(value, "runId"),
                _text(value, "stepName"),
                ordered,
            ),
        )


# --------------------------------------------------------------------------- outbox messages

_CLAIM_FIELDS = ("claimedBy", "claimedUntil", "claimToken")


class OutboxMessagesTable(_RunOwnedTable):
    """A message a run asked to be delivered, keyed by (environment, runId, messageId).

    An undelivered message is indexed in ``OutboxByAvailability`` at the time
    it may next be handed to a relay: ``availableAt`` when unclaimed, or the end
    of the current claim (an expired claim makes it available again). A
    delivered message leaves that index; ``OutboxByRun`` keeps every message of
    a run findable for pruning.

    Rules: ``outbox-claim`` (``claimedBy``, ``claimedUntil`` and ``claimToken``
    are all present or all absent, and a delivered message holds no claim),
    ``counter`` (``attempts``).
    """

    name = StorageTableName.OUTBOX_MESSAGES
    indexes = (StorageIndexName.OUTBOX_BY_AVAILABILITY, StorageIndexName.OUTBOX_BY_RUN)
    timestamp_fields = ("createdAt", "availableAt", "deliveredAt", "claimedUntil")
    counter_fields = ("attempts",)
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "runId": _NAME,
            "messageId": _NAME,
            "topic": _NAME,
            "payload": {},
            "attempts": _U64,
            "createdAt": _ISO,
            "availableAt": _ISO,
            "deliveredAt": _ISO_OR_NULL,
        },
        {"claimedBy": _NAME, "claimedUntil": _ISO, "claimToken": _NAME},
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "runId"), _text(value, "messageId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        present = [field for field in _CLAIM_FIELDS if field in value]
        if present and len(present) != len(_CLAIM_FIELDS):
            missing = [field for field in _CLAIM_FIELDS if field not in value]
            raise self._fail("outbox-claim", f"claim has {present} but lacks {missing}")
        if present and value["deliveredAt"] is not None:
            raise self._fail("outbox-claim", "a delivered message still holds a claim")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        entries = [
            self._entry(
                StorageIndexName.OUTBOX_BY_RUN,
                value,
                _text(value, "runId"),
                iso(value, "createdAt", self.name),
            )
        ]
        if value["deliveredAt"] is None:
            field = "claimedUntil" if "claimedUntil" in value else "availableAt"
            entries.append(
                self._entry(StorageIndexName.OUTBOX_BY_AVAILABILITY, value, iso(value, field, self.name))
            )
        return tuple(entries)


# --------------------------------------------------------------------------- schedules


class SchedulesTable(_EnvironmentTable):
    """A recurring trigger, keyed by (environment, scheduleId).

    An enabled schedule with a next occurrence is indexed by that time in
    ``SchedulesByNextOccurrence``. Each occurrence id is derived from
    (environment, scheduleId, time) with ``schedule_occurrence_id`` so that two
    schedulers firing the same occurrence agree on its identity.

    Rules: ``occurrence-id`` (each of next/last occurrence has a time and id
    together, or neither, and the id is the derived one), ``occurrence-order``
    (the last occurrence is before the next).
    """

    name = StorageTableName.SCHEDULES
    indexes = (StorageIndexName.SCHEDULES_BY_NEXT_OCCURRENCE,)
    timestamp_fields = ("createdAt", "updatedAt", "nextOccurrenceAt", "lastOccurrenceAt")
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "scheduleId": _NAME,
            "workflow": _NAME,
            "spec": {
                "oneOf": [
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["kind", "everySeconds"],
                        "properties": {
                            "kind": {"const": "interval"},
                            "everySeconds": {"type": "integer", "minimum": 1},
                        },
                    },
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["kind", "expression"],
                        "properties": {"kind": {"const": "cron"}, "expression": _NAME},
                    },
                ]
            },
            "enabled": {"type": "boolean"},
            "input": {},
            "nextOccurrenceAt": _ISO_OR_NULL,
            "nextOccurrenceId": {"anyOf": [_DIGEST, {"type": "null"}]},
            "lastOccurrenceAt": _ISO_OR_NULL,
            "lastOccurrenceId": {"anyOf": [_DIGEST, {"type": "null"}]},
            "createdAt": _ISO,
            "updatedAt": _ISO,
        }
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "scheduleId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        environment, schedule_id = _text(value, "environment"), _text(value, "scheduleId")
        for which in ("next", "last"):
            at, ident = value[f"{which}OccurrenceAt"], value[f"{which}OccurrenceId"]
            if (at is None) != (ident is None):
                raise self._fail("occurrence-id", f"{which} occurrence time and id must come together")
            if at is not None and ident != schedule_occurrence_id(environment, schedule_id, str(at)):
                raise self._fail("occurrence-id", f"{which}OccurrenceId is not derived from {at}")
        last, upcoming = value["lastOccurrenceAt"], value["nextOccurrenceAt"]
        if last is not None and upcoming is not None and str(last) >= str(upcoming):
            raise self._fail("occurrence-order", f"last occurrence {last} is not before next {upcoming}")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        if value["enabled"] is not True or value["nextOccurrenceAt"] is None:
            return ()
        return (
            self._entry(
                StorageIndexName.SCHEDULES_BY_NEXT_OCCURRENCE,
                value,
                iso(value, "nextOccurrenceAt", self.name),
            ),
        )


# --------------------------------------------------------------------------- owners

_RECORD_KEY_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["table", "id"],
    "properties": {
        "table": {"enum": [table.value for table in StorageTableName]},
        "id": {"type": "array", "minItems": 1, "items": {"type": "string"}},
    },
}


class OwnersTable(_EnvironmentTable):
    """The idempotency owner of a key, keyed by (environment, scope, idempotencyKey).

    Creating the owner record is how core claims an idempotency key: the
    conditional create has exactly one winner. The owner names the record it
    reserved the key for twice, as ``targetId`` and as the full record key
    ``target``, and both must agree (rule ``owner-target``): the target table
    follows from the scope and its key is (environment, targetId). The
    reserved record names the owner back (see ``WaitTokensTable``);
    ``check_reciprocal_idempotency`` checks the pair.
    """

    name = StorageTableName.OWNERS
    timestamp_fields = ("createdAt",)
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "scope": {"enum": [scope.value for scope in OwnerScope]},
            "idempotencyKey": _NAME,
            "targetId": _NAME,
            "target": _RECORD_KEY_SCHEMA,
            "createdAt": _ISO,
        }
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "scope"), _text(value, "idempotencyKey"))

    @staticmethod
    def expected_target(value: FrozenJsonObject) -> StorageRecordKey:
        """The record key an owner document must name, from its scope and targetId."""
        table = _OWNER_SCOPE_TABLES[OwnerScope(_text(value, "scope"))]
        return _key(table, _text(value, "environment"), _text(value, "targetId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        expected = freeze_json(_key_json(self.expected_target(value)))
        if value["target"] != expected:
            raise self._fail(
                "owner-target", f"target {thaw_json(value['target'])} is not {thaw_json(expected)}"
            )


# --------------------------------------------------------------------------- queue capacity


class QueueCapacityTable(_EnvironmentTable):
    """How many runs of a queue may be active, and how many are, keyed by (environment, queue).

    Both are unsigned decimals (rule ``counter``); ``limit`` is at least 1
    (rule ``capacity-limit``). ``active`` may exceed ``limit`` after an
    operator lowers the limit, so that is deliberately not a corruption: core
    simply admits nothing until enough holders finish.
    """

    name = StorageTableName.QUEUE_CAPACITY
    timestamp_fields = ("updatedAt",)
    counter_fields = ("active",)
    schema: ClassVar[dict[str, Any]] = _object(
        {"environment": _NAME, "queue": _NAME, "limit": _U64, "active": _U64, "updatedAt": _ISO}
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "queue"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        unsigned_integer(value, "limit", self.name, minimum=1, rule="capacity-limit")


# --------------------------------------------------------------------------- tombstones


class TombstonesTable(_RunOwnedTable):
    """The pruning marker of a run, keyed like the run, indexed by when cleanup may start.

    It starts with an exact copy of the run's child counts (see
    ``tombstone_for_run``); cleanup passes lower them as they delete children,
    and the run and its tombstone go only when all four reach zero.

    Rules: ``counter`` (the counts), ``prune-after`` (``pruneAfter`` is not
    before ``tombstonedAt``).
    """

    name = StorageTableName.TOMBSTONES
    indexes = (StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER,)
    timestamp_fields = ("tombstonedAt", "pruneAfter")
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "runId": _NAME,
            "tombstonedAt": _ISO,
            "pruneAfter": _ISO,
            "counts": _COUNTS,
        }
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "runId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        self._counts(value)
        if _text(value, "pruneAfter") < _text(value, "tombstonedAt"):
            raise self._fail("prune-after", "pruneAfter is before tombstonedAt")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        return (
            self._entry(
                StorageIndexName.TOMBSTONES_BY_PRUNE_AFTER, value, iso(value, "pruneAfter", self.name)
            ),
        )


# --------------------------------------------------------------------------- wait tokens

_RESOLUTION = {
    "oneOf": [
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["outcome", "value"],
            "properties": {"outcome": {"const": WaitTokenOutcome.COMPLETED.value}, "value": {}},
        },
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["outcome"],
            "properties": {"outcome": {"const": WaitTokenOutcome.TIMED_OUT.value}},
        },
        {"type": "null"},
    ]
}


class WaitTokensTable(_EnvironmentTable):
    """A token a run can wait on until someone resolves it or it times out; keyed by (environment, tokenId).

    Indexes: ``WaitTokensByTimeout`` (pending tokens with a timeout, by
    timeout), ``WaitTokensByRun`` (by the run that created it), and
    ``WaitTokensByStatus`` (by status, then the time the token entered it:
    ``resolvedAt`` for resolved tokens, ``createdAt`` for pending ones, so
    pruning scans the oldest resolved tokens first).

    Rules: ``wait-token-resolution`` (a resolved token carries a resolution and
    ``resolvedAt``, a pending one neither; a timed-out resolution needs a
    timeout it did not precede), ``idempotency-owner`` (``idempotencyOwner`` is
    the owners key of (environment, ``wait_token``, ``idempotencyKey``)),
    ``counter`` (``linkCount``, the number of run links still holding it).
    """

    name = StorageTableName.WAIT_TOKENS
    indexes = (
        StorageIndexName.WAIT_TOKENS_BY_TIMEOUT,
        StorageIndexName.WAIT_TOKENS_BY_RUN,
        StorageIndexName.WAIT_TOKENS_BY_STATUS,
    )
    timestamp_fields = ("createdAt", "timeoutAt", "resolvedAt")
    counter_fields = ("linkCount",)
    schema: ClassVar[dict[str, Any]] = _object(
        {
            "environment": _NAME,
            "tokenId": _NAME,
            "runId": _NAME,
            "status": {"enum": [status.value for status in WaitTokenStatus]},
            "createdAt": _ISO,
            "timeoutAt": _ISO_OR_NULL,
            "resolution": _RESOLUTION,
            "resolvedAt": _ISO_OR_NULL,
            "idempotencyKey": _NAME,
            "idempotencyOwner": _RECORD_KEY_SCHEMA,
            "linkCount": _U64,
        }
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "tokenId"))

    def check_rules(self, value: FrozenJsonObject) -> None:
        status = WaitTokenStatus(_text(value, "status"))
        resolution = _object_field(value, "resolution")
        resolved_at = value["resolvedAt"]
        if status is WaitTokenStatus.RESOLVED:
            if resolution is None or resolved_at is None:
                raise self._fail("wait-token-resolution", "a resolved token needs resolution and resolvedAt")
            if resolution["outcome"] == WaitTokenOutcome.TIMED_OUT.value:
                timeout = value["timeoutAt"]
                if timeout is None or str(resolved_at) < str(timeout):
                    raise self._fail(
                        "wait-token-resolution", "a token timed out without reaching its timeout"
                    )
        elif resolution is not None or resolved_at is not None:
            raise self._fail("wait-token-resolution", "a pending token carries a resolution")
        owner = owner_record_key(
            _text(value, "environment"), OwnerScope.WAIT_TOKEN, _text(value, "idempotencyKey")
        )
        if value["idempotencyOwner"] != freeze_json(_key_json(owner)):
            raise self._fail("idempotency-owner", f"idempotencyOwner is not {owner}")

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        status = _text(value, "status")
        entered = "resolvedAt" if status == WaitTokenStatus.RESOLVED.value else "createdAt"
        entries = [
            self._entry(
                StorageIndexName.WAIT_TOKENS_BY_RUN,
                value,
                _text(value, "runId"),
                iso(value, "createdAt", self.name),
            ),
            self._entry(
                StorageIndexName.WAIT_TOKENS_BY_STATUS, value, status, iso(value, entered, self.name)
            ),
        ]
        if status == WaitTokenStatus.PENDING.value and value["timeoutAt"] is not None:
            entries.append(
                self._entry(
                    StorageIndexName.WAIT_TOKENS_BY_TIMEOUT, value, iso(value, "timeoutAt", self.name)
                )
            )
        return tuple(entries)


class WaitTokenLinksTable(_EnvironmentTable):
    """One run waiting on one wait token, keyed by (environment, tokenId, runId).

    The link is counted on both sides (the token's ``linkCount`` and the run's
    ``counts.waitTokenLinks``) and indexed from both sides, so resolving a
    token finds its waiting runs and pruning a run finds its links.
    """

    name = StorageTableName.WAIT_TOKEN_LINKS
    owner_fields = ("environment", "tokenId", "runId")
    indexes = (StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN)
    timestamp_fields = ("createdAt",)
    schema: ClassVar[dict[str, Any]] = _object(
        {"environment": _NAME, "tokenId": _NAME, "runId": _NAME, "createdAt": _ISO}
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "tokenId"), _text(value, "runId"))

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        token, run = _text(value, "tokenId"), _text(value, "runId")
        return (
            self._entry(StorageIndexName.WAIT_TOKEN_LINKS_BY_RUN, value, run, token),
            self._entry(StorageIndexName.WAIT_TOKEN_LINKS_BY_TOKEN, value, token, run),
        )


# --------------------------------------------------------------------------- completion-wait presence


class RunCompletionWaitPresenceTable(_EnvironmentTable):
    """The marker that a completion wait was ever registered for a source run id.

    Keyed by (environment, sourceRunId) and never indexed: core only point-reads
    and conditionally creates it. Its absence lets a terminal transition skip
    the ``RunsWaitingForCompletion`` query; its presence only says "query".
    """

    name = StorageTableName.RUN_COMPLETION_WAIT_PRESENCE
    owner_fields = ("environment", "sourceRunId")
    timestamp_fields = ("createdAt",)
    schema: ClassVar[dict[str, Any]] = _object(
        {"environment": _NAME, "sourceRunId": _NAME, "createdAt": _ISO}
    )

    def key_id(self, value: FrozenJsonObject) -> tuple[str, ...]:
        return (_text(value, "environment"), _text(value, "sourceRunId"))


# --------------------------------------------------------------------------- cross-record helpers


def check_reciprocal_idempotency(token: Mapping[str, Any], owner: Mapping[str, Any]) -> None:
    """Raise ``StorageDocumentRuleError`` (rule ``reciprocal-owner``) unless a wait token and its owner agree.

    Both documents must be valid on their own; then the token must name this
    owner's key and the owner must name this token. Pruning calls this before
    deleting the pair: a non-reciprocal pair is an invariant failure, never
    permission to delete one side.
    """
    tokens, owners = _WAIT_TOKENS, _OWNERS
    token_value, owner_value = _frozen(token), _frozen(owner)
    tokens.check_value(token_value)
    owners.check_value(owner_value)
    owner_key = owners.key_for(owner_value)
    reciprocal = token_value["idempotencyOwner"] == freeze_json(
        _key_json(owner_key)
    ) and OwnersTable.expected_target(owner_value) == tokens.key_for(token_value)
    if not reciprocal:
        raise StorageDocumentRuleError(
            f"wait token {tokens.key_for(token_value)} and owner {owner_key} do not name each other",
            table=StorageTableName.WAIT_TOKENS,
            rule="reciprocal-owner",
        )


def tombstone_for_run(
    run: Mapping[str, Any], *, tombstoned_at: datetime, prune_after: datetime
) -> dict[str, JsonValue]:
    """The tombstone value of a visible run: same identity, an exact copy of its child counts."""
    value = _frozen(run)
    _RUNS.check_value(value)
    return {
        "environment": _text(value, "environment"),
        "runId": _text(value, "runId"),
        "tombstonedAt": iso_date_codec.encode(tombstoned_at),
        "pruneAfter": iso_date_codec.encode(prune_after),
        "counts": thaw_json(value["counts"]),
    }


def _frozen(source: Mapping[str, Any]) -> FrozenJsonObject:
    frozen: FrozenJson = freeze_json(source)
    if not isinstance(frozen, FrozenJsonObject):  # pragma: no cover - a Mapping always freezes to an object
        raise StorageValidationError("a document value is a JSON object")
    return frozen


_RUNS = RunsTable()
_OWNERS = OwnersTable()
_WAIT_TOKENS = WaitTokensTable()


#: Core's table definitions, one instance each; the catalogue (``tables``) lists them with the streams'.
CORE_TABLES: tuple[StorageTable, ...] = (
    LeasesTable(),
    _RUNS,
    EventsTable(),
    StepsTable(),
    OutboxMessagesTable(),
    SchedulesTable(),
    _OWNERS,
    QueueCapacityTable(),
    TombstonesTable(),
    _WAIT_TOKENS,
    WaitTokenLinksTable(),
    RunCompletionWaitPresenceTable(),
)
