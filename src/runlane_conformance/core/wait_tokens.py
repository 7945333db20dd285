"""Wait tokens: created with a reciprocal owner, linked to runs, resolved once, pruned with the owner.

The flow (``docs/wait-tokens.md`` has the step lists and interleavings):

1. ``create_wait_token``: one commit point-reads the owner key of
   (environment, ``wait_token``, idempotency key); if it is absent it creates
   the pending token and its owner, each naming the other. A second caller
   with the same idempotency key finds the owner and gets the existing token.
2. ``link_run``: one commit creates the link (token, run) and raises both
   counters, the token's ``linkCount`` and the run's ``counts.waitTokenLinks``.
3. ``complete_wait_token`` / ``time_out_wait_token``: one commit point-reads
   the token and, only if it is still pending, replaces it as resolved. Two
   resolutions racing on two instances both read "pending", so only the
   driver's version fence picks the winner: the loser replays, reads
   "resolved" and reports ``ALREADY_RESOLVED``. A timeout needs the attempt's
   own time to be at or after ``timeoutAt``; sweepers find candidates through
   ``WaitTokensByTimeout`` (``due_wait_tokens``).
4. Run pruning deletes links (see ``core.pruning``), lowering ``linkCount``.
5. ``prune_wait_token``: one commit point-reads a token and its owner; a
   pending token or one with links is kept; a resolved, unlinked token is
   deleted together with its exact owner. A missing or non-reciprocal owner
   raises ``CoreInvariantError`` and deletes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from ..contract.catalog import StorageIndexName, StorageTableName
from ..contract.encodings import iso_date_codec, storage_tuple_codec
from ..contract.json_boundary import JsonValue, thaw_json
from ..contract.protocols import StorageTransaction
from ..contract.records import build_storage_record, parse_storage_record_key
from ..contract.table_definitions import (
    OwnerScope,
    WaitTokenOutcome,
    WaitTokenStatus,
    check_reciprocal_idempotency,
    owner_record_key,
    run_record_key,
    wait_token_link_record_key,
    wait_token_record_key,
)
from ..contract.tables import StorageDocumentRuleError
from ..contract.values import (
    QueryRecordsCommand,
    QueryRecordsResult,
    StorageQueryRange,
    StorageRangeBound,
    StorageRecordKey,
    StoredRecord,
)
from .runs import ChildKind, CoreInvariantError, child_counts, replace_counts

__all__ = [
    "LinkOutcome",
    "ResolveOutcome",
    "TokenPruneOutcome",
    "WaitTokenSpec",
    "complete_wait_token",
    "create_wait_token",
    "due_wait_tokens",
    "link_run",
    "prune_wait_token",
    "time_out_wait_token",
]


def _iso(moment: datetime) -> str:
    return iso_date_codec.encode(moment)


@dataclass(frozen=True)
class WaitTokenSpec:
    """Everything needed to create a token; ids are chosen before the transaction (no randomness inside)."""

    environment: str
    token_id: str
    run_id: str
    idempotency_key: str
    timeout_at: datetime | None = None

    @property
    def key(self) -> StorageRecordKey:
        return wait_token_record_key(self.environment, self.token_id)

    @property
    def owner_key(self) -> StorageRecordKey:
        return owner_record_key(self.environment, OwnerScope.WAIT_TOKEN, self.idempotency_key)

    def token_value(self, created_at: datetime) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "tokenId": self.token_id,
            "runId": self.run_id,
            "status": WaitTokenStatus.PENDING.value,
            "createdAt": _iso(created_at),
            "timeoutAt": None if self.timeout_at is None else _iso(self.timeout_at),
            "resolution": None,
            "resolvedAt": None,
            "idempotencyKey": self.idempotency_key,
            "idempotencyOwner": {"table": StorageTableName.OWNERS.value, "id": list(self.owner_key.id)},
            "linkCount": "0",
        }

    def owner_value(self, created_at: datetime) -> dict[str, Any]:
        return {
            "environment": self.environment,
            "scope": OwnerScope.WAIT_TOKEN.value,
            "idempotencyKey": self.idempotency_key,
            "targetId": self.token_id,
            "target": {"table": StorageTableName.WAIT_TOKENS.value, "id": list(self.key.id)},
            "createdAt": _iso(created_at),
        }


def create_wait_token(tx: StorageTransaction, spec: WaitTokenSpec) -> str:
    """Create the token and its owner in this attempt, or return the token id the owner already names.

    The owner is the idempotency claim: its conditional create has one
    winner, so two callers with one key end with one token. An existing
    owner must be reciprocal with its token, or ``CoreInvariantError``.
    """
    owner, token = tx.get([spec.owner_key, spec.key])
    if owner is not None:
        target = str(owner.document.value["targetId"])
        [existing] = tx.get([wait_token_record_key(spec.environment, target)])
        _check_pair(existing, owner)
        return target
    if token is not None:
        raise CoreInvariantError(
            f"wait token {spec.key} exists without its owner {spec.owner_key}", rule="reciprocal-owner"
        )
    at = tx.now()
    tx.create(build_storage_record(StorageTableName.WAIT_TOKENS, spec.token_value(at)))
    tx.create(build_storage_record(StorageTableName.OWNERS, spec.owner_value(at)))
    return spec.token_id


def _check_pair(token: StoredRecord | None, owner: StoredRecord | None) -> None:
    if token is None or owner is None:
        missing = "token" if token is None else "owner"
        present = owner if token is None else token
        assert present is not None
        raise CoreInvariantError(f"the {missing} of {present.key} is missing", rule="reciprocal-owner")
    try:
        check_reciprocal_idempotency(_plain(token), _plain(owner))
    except StorageDocumentRuleError as error:
        raise CoreInvariantError(str(error), rule="reciprocal-owner") from error


def _plain(record: StoredRecord) -> dict[str, Any]:
    """A record's value as a fresh mutable dict (the next version of it is built from this)."""
    value = thaw_json(record.document.value)
    assert isinstance(value, dict)
    return value


class LinkOutcome(StrEnum):
    LINKED = "linked"
    ALREADY_LINKED = "already_linked"


def link_run(tx: StorageTransaction, environment: str, token_id: str, run_id: str) -> LinkOutcome:
    """Record that a visible run waits on a token: the link plus both counters, in one commit."""
    link_key = wait_token_link_record_key(environment, token_id, run_id)
    token, run, link = tx.get(
        [wait_token_record_key(environment, token_id), run_record_key(environment, run_id), link_key]
    )
    if link is not None:
        return LinkOutcome.ALREADY_LINKED
    if token is None:
        raise CoreInvariantError(f"cannot link {run_id} to missing wait token {token_id}", rule="link-token")
    if run is None or run.document.value["tombstonedAt"] is not None:
        raise CoreInvariantError(f"cannot link missing or tombstoned run {run_id}", rule="tombstone")
    at = tx.now()
    tx.create(
        build_storage_record(
            StorageTableName.WAIT_TOKEN_LINKS,
            {"environment": environment, "tokenId": token_id, "runId": run_id, "createdAt": _iso(at)},
        )
    )
    token_value = _plain(token)
    token_value["linkCount"] = str(int(str(token_value["linkCount"])) + 1)
    tx.replace(token, build_storage_record(StorageTableName.WAIT_TOKENS, token_value))
    counts = child_counts(run)
    counts[ChildKind.WAIT_TOKEN_LINKS] += 1
    tx.replace(run, build_storage_record(StorageTableName.RUNS, replace_counts(run.document.value, counts)))
    return LinkOutcome.LINKED


class ResolveOutcome(StrEnum):
    RESOLVED = "resolved"
    ALREADY_RESOLVED = "already_resolved"  # someone resolved it first: this resolution lost
    NOT_DUE = "not_due"  # a timeout before ``timeoutAt`` (or of a token without one)
    MISSING = "missing"


def _resolve(
    tx: StorageTransaction,
    environment: str,
    token_id: str,
    resolution: dict[str, JsonValue],
    *,
    timeout: bool,
) -> ResolveOutcome:
    [token] = tx.get([wait_token_record_key(environment, token_id)])
    if token is None:
        return ResolveOutcome.MISSING
    value = _plain(token)
    if value["status"] != WaitTokenStatus.PENDING.value:
        return ResolveOutcome.ALREADY_RESOLVED
    at = _iso(tx.now())
    if timeout and (value["timeoutAt"] is None or at < str(value["timeoutAt"])):
        return ResolveOutcome.NOT_DUE
    value.update(status=WaitTokenStatus.RESOLVED.value, resolution=resolution, resolvedAt=at)
    tx.replace(token, build_storage_record(StorageTableName.WAIT_TOKENS, value))
    return ResolveOutcome.RESOLVED


def complete_wait_token(
    tx: StorageTransaction, environment: str, token_id: str, value: JsonValue
) -> ResolveOutcome:
    """Resolve a pending token with ``value``; a token already resolved is left alone (this call lost)."""
    return _resolve(
        tx,
        environment,
        token_id,
        {"outcome": WaitTokenOutcome.COMPLETED.value, "value": value},
        timeout=False,
    )


def time_out_wait_token(tx: StorageTransaction, environment: str, token_id: str) -> ResolveOutcome:
    """Resolve a pending token as timed out, only if the attempt's time is at or after its ``timeoutAt``."""
    return _resolve(tx, environment, token_id, {"outcome": WaitTokenOutcome.TIMED_OUT.value}, timeout=True)


def due_wait_tokens(
    tx: StorageTransaction, environment: str, *, as_of: datetime, limit: int, cursor: str | None = None
) -> QueryRecordsResult:
    """Candidates from ``WaitTokensByTimeout`` with ``timeoutAt`` at or before ``as_of``.

    Point-read each before acting (``time_out_wait_token`` does): the page is
    advisory, and an eventual index may still list a resolved token.
    """
    upper = StorageRangeBound(storage_tuple_codec.encode((_iso(as_of),)), True)
    command = QueryRecordsCommand(
        StorageIndexName.WAIT_TOKENS_BY_TIMEOUT,
        environment,
        limit,
        StorageQueryRange(None, upper),
        cursor=cursor,
    )
    return tx.query_candidates(command)


class TokenPruneOutcome(StrEnum):
    PRUNED = "pruned"  # token and owner deleted together
    KEPT_PENDING = "kept_pending"
    KEPT_LINKED = "kept_linked"  # a run still links it
    GONE = "gone"


def prune_wait_token(tx: StorageTransaction, environment: str, token_id: str) -> TokenPruneOutcome:
    """Delete a resolved, unlinked token with its exact owner, or say why it stays.

    The owner key comes from the token itself; both documents must name each
    other (``check_reciprocal_idempotency``). A missing or non-reciprocal
    owner raises ``CoreInvariantError`` before anything is staged: deleting
    only the token would orphan the owner's claim, deleting a foreign owner
    would free a key another token holds.
    """
    [token] = tx.get([wait_token_record_key(environment, token_id)])
    if token is None:
        return TokenPruneOutcome.GONE
    value = token.document.value
    if value["status"] == WaitTokenStatus.PENDING.value:
        return TokenPruneOutcome.KEPT_PENDING
    if int(str(value["linkCount"])) > 0:
        return TokenPruneOutcome.KEPT_LINKED
    [owner] = tx.get([parse_storage_record_key(thaw_json(value["idempotencyOwner"]))])
    _check_pair(token, owner)
    assert owner is not None
    tx.delete(token)
    tx.delete(owner)
    return TokenPruneOutcome.PRUNED
