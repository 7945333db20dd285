"""The public facade: ``runlane_conformance`` exports exactly its public names, including every spec name."""

from __future__ import annotations
import __future__

import ast
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import runlane_conformance


def public_facade_names() -> set[str]:
    """Names a user sees on the facade: no underscore, no submodule, no ``from __future__`` feature.

    The facade resolves its names lazily, so the ones not yet asked for are in its lazy table.
    """
    return {
        name
        for name, value in vars(runlane_conformance).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType)
        and not isinstance(value, __future__._Feature)
    } | set(runlane_conformance._LAZY)


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    tree = ast.parse(Path(runlane_conformance.__file__).read_text(encoding="utf-8"))
    (guard,) = [node for node in tree.body if isinstance(node, ast.If)]
    return {
        alias.asname or alias.name: (str(node.module), alias.name)
        for node in guard.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def test_the_lazy_table_matches_the_names_the_type_checker_sees() -> None:
    assert _type_checking_imports() == runlane_conformance._LAZY


def test_importing_the_facade_loads_neither_pytest_nor_hypothesis_nor_the_contract() -> None:
    probe = (
        "import sys, runlane_conformance; "
        "print(sorted(m for m in ('pytest', 'hypothesis', 'jsonschema', 'runlane_conformance.contract') "
        "if m in sys.modules))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = runlane_conformance.no_such_name  # type: ignore[attr-defined]


def test_all_equals_the_public_names_of_the_facade() -> None:
    declared = {name for name in runlane_conformance.__all__ if not name.startswith("_")}
    assert declared == public_facade_names(), {
        "imported but not in __all__": sorted(public_facade_names() - declared),
        "in __all__ but not imported": sorted(declared - public_facade_names()),
    }


def test_all_has_no_duplicates() -> None:
    assert len(runlane_conformance.__all__) == len(set(runlane_conformance.__all__))


def test_every_name_in_all_resolves() -> None:
    missing = [name for name in runlane_conformance.__all__ if not hasattr(runlane_conformance, name)]
    assert missing == []


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from runlane_conformance import *", namespace)
    namespace.pop("__builtins__")
    assert set(namespace) == set(runlane_conformance.__all__)


# The names the storage contract spells out, in Python spelling (design section 3).
SPEC_NAMES = [
    "encode_storage_document",
    "parse_new_storage_record",
    "parse_append_records_command",
    "storage_tuple_codec",
    "storage_record_key_codec",
    "have_equal_storage_record_keys",
    "compare_storage_encoded_values",
    "encode_storage_tuple_prefix_upper_bound",
    "iso_date_codec",
    "storage_unsigned_integer_codec",
    "encode_storage_query_cursor",
    "decode_storage_query_cursor",
    "parse_query_records_result",
    "StorageStreamName",
    "storage_stream_layouts",
    "materialize_storage_append",
    "read_storage_stream_position",
    "measure_storage_append",
    "create_storage_limit_error",
    "StorageIndexName",
    "StorageCandidateMode",
    "NewStorageRecord",
    "StorageRecordVersion",
    "StorageDriver",
    "StorageTransaction",
    "OperatorReadDriver",
    "create_local_storage_driver",
    "RunCompletionWaitPresence",
]


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_spec_name_is_exported_from_the_facade(name: str) -> None:
    assert name in runlane_conformance.__all__
    assert getattr(runlane_conformance, name) is not None
