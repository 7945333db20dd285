"""The protocol's JSON Schema (shipped as package data) and a tap that checks live traffic against it.

``protocol_schema()`` is the draft 2020-12 schema of every message;
``validating_tap()`` returns a ``MessageTap`` for ``BackendProcess`` that
validates each message in both directions: a request against its
operation's schema, a reply against the result schema of the request it
answers. The ``process`` driver installs it with ``--option validate=true``;
the toolkit's tests use it so that both this toolkit and every backend they
run are held to the documented shapes.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Mapping
from importlib.resources import files
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from ..contract.errors import RunlaneError
from .client import MessageTap

__all__ = ["ProtocolSchemaError", "protocol_schema", "validate_message", "validating_tap"]


class ProtocolSchemaError(RunlaneError, ValueError):
    """A message does not match the protocol's JSON Schema."""


@functools.cache
def protocol_schema() -> Mapping[str, Any]:
    """The JSON Schema of the driver backend protocol."""
    text = (
        files("runlane_conformance.protocol")
        .joinpath("schemas/driver-protocol.schema.json")
        .read_text("utf-8")
    )
    schema: Mapping[str, Any] = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return schema


@functools.cache
def _validator(pointer: str) -> Draft202012Validator:
    return Draft202012Validator({"$ref": f"#{pointer}", "$defs": protocol_schema()["$defs"]})


def _check(pointer: str, value: object, what: str) -> None:
    try:
        _validator(pointer).validate(value)
    except ValidationError as error:
        where = "/".join(str(part) for part in error.absolute_path) or "(top)"
        raise ProtocolSchemaError(
            f"{what} does not match the protocol schema at {where}: {error.message}"
        ) from None


def validate_message(message: Mapping[str, Any], request_op: str | None = None) -> None:
    """Validate one message; a reply's ``ok`` is checked only when the op it answers is given."""
    if "op" in message:
        op = message["op"]
        if op not in protocol_schema()["$defs"]["request"]:
            raise ProtocolSchemaError(f"unknown operation {op!r}")
        _check(f"/$defs/request/{op}", message, f"the {op!r} request")
        return
    _check("/$defs/reply", message, "a reply")
    if request_op is not None and "ok" in message:
        _check(f"/$defs/result/{request_op}", message["ok"], f"the result of {request_op!r}")


def validating_tap() -> MessageTap:
    """A tap that validates traffic in both directions, pairing each reply with its request's op."""
    lock = threading.Lock()
    sent: dict[object, str] = {}  # our requests (toolkit -> backend) by id
    received: dict[object, str] = {}  # the backend's requests by id

    def tap(direction: str, message: Mapping[str, Any]) -> None:
        mine, theirs = (sent, received) if direction == "out" else (received, sent)
        if "op" in message:
            validate_message(message)
            with lock:
                mine[message["id"]] = message["op"]
            return
        with lock:
            op = theirs.pop(message.get("re"), None)
        validate_message(message, op)

    return tap
