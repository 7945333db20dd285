"""The closed catalogs: which tables exist and which indexes can be queried.

Drivers map each ``StorageIndexName`` to a native query plan and expose
nothing else: no generic predicate or scan API. Adding an index is a contract
change, which is why these are enums and not strings.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "StorageCandidateMode",
    "StorageIndexName",
    "StorageQueryDirection",
    "StorageStreamName",
    "StorageTableName",
]


class StorageTableName(StrEnum):
    """Every logical collection core keeps. A record key's first component."""

    RUNS = "runs"
    EVENTS = "events"
    STEPS = "steps"
    OUTBOX_MESSAGES = "outbox_messages"
    SCHEDULES = "schedules"
    OWNERS = "owners"
    QUEUE_CAPACITY = "queue_capacity"
    OBSERVATIONS = "observations"
    LEASES = "leases"
    TOMBSTONES = "tombstones"
    WAIT_TOKENS = "wait_tokens"
    WAIT_TOKEN_LINKS = "wait_token_links"
    RUN_COMPLETION_WAIT_PRESENCE = "run_completion_wait_presence"
    STREAM_HEADS = "stream_heads"


class StorageIndexName(StrEnum):
    """Every index a core flow queries. Nothing outside this enum is queryable."""

    RUNS_BY_STATUS = "RunsByStatus"
    RUNS_BY_CREATED_AT = "RunsByCreatedAt"
    RUNS_WAITING_FOR_COMPLETION = "RunsWaitingForCompletion"
    RUNS_BY_PARENT = "RunsByParent"
    EVENTS_BY_RUN = "EventsByRun"
    STEPS_BY_RUN = "StepsByRun"
    OUTBOX_BY_AVAILABILITY = "OutboxByAvailability"
    OUTBOX_BY_RUN = "OutboxByRun"
    SCHEDULES_BY_NEXT_OCCURRENCE = "SchedulesByNextOccurrence"
    LEASES_BY_EXPIRY = "LeasesByExpiry"
    OBSERVATIONS_BY_POSITION = "ObservationsByPosition"
    TOMBSTONES_BY_PRUNE_AFTER = "TombstonesByPruneAfter"
    WAIT_TOKENS_BY_TIMEOUT = "WaitTokensByTimeout"
    WAIT_TOKENS_BY_RUN = "WaitTokensByRun"
    WAIT_TOKENS_BY_STATUS = "WaitTokensByStatus"
    WAIT_TOKEN_LINKS_BY_RUN = "WaitTokenLinksByRun"
    WAIT_TOKEN_LINKS_BY_TOKEN = "WaitTokenLinksByToken"


class StorageCandidateMode(StrEnum):
    """How ``query_candidates`` selects: advisory (shared) or exclusive (owned until the attempt ends)."""

    ADVISORY = "advisory"
    EXCLUSIVE = "exclusive"


class StorageQueryDirection(StrEnum):
    """Index scan direction; descending reverses the whole (sort, key) order."""

    ASCENDING = "asc"
    DESCENDING = "desc"


class StorageStreamName(StrEnum):
    """The closed set of ordered streams core appends to (``streams`` re-exports it)."""

    OBSERVATIONS = "observations"
