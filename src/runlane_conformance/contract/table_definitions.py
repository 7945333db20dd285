"""The definitions of every table in the catalog (registered on import)."""

from __future__ import annotations

from typing import Any, ClassVar

from .catalog import StorageIndexName, StorageTableName
from .json_boundary import FrozenJsonObject
from .tables import StorageTable, iso, register_storage_table
from .values import StorageIndexEntry

_NAME = {"type": "string", "minLength": 1, "maxLength": 256}
_ISO = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$"}


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

    def derive_indexes(self, value: FrozenJsonObject) -> tuple[StorageIndexEntry, ...]:
        if value["holder"] is None:
            return ()
        return (
            StorageIndexEntry.of(
                StorageIndexName.LEASES_BY_EXPIRY, str(value["environment"]), iso(value, "expiresAt")
            ),
        )


register_storage_table(LeasesTable())
from . import stream_tables  # noqa: E402,F401
