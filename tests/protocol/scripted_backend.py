"""A scripted backend for the protocol test kit: correct until the one step its scenario breaks.

Run as ``python scripted_backend.py SCENARIO``. It answers ``hello``,
``open``, ``connect``, ``transaction`` (one attempt), ``get`` (every key
absent) and the closing requests correctly, except where ``SCENARIO``
tells it to misbehave. It never depends on the toolkit to finish: a
scenario that stalls sleeps a bounded time and exits.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

PROFILE = {
    "durability": "process",
    "clock_authority": "client",
    "index_consistency": "strong",
    "exclusive_candidates": False,
    "append": False,
    "limits": {
        "max_point_reads": 100,
        "max_query_results": 100,
        "max_transaction_records": 100,
        "max_record_bytes": 409600,
        "max_transaction_bytes": 4194304,
    },
}

out = os.fdopen(os.dup(1), "wb")
scenario = sys.argv[1]


def send(message: Any) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def raw(data: bytes) -> None:
    out.write(data)
    out.flush()


def read() -> dict[str, Any]:
    line = sys.stdin.buffer.readline()
    if not line:
        sys.exit(0)
    return json.loads(line)  # type: ignore[no-any-return]


def answer(request: dict[str, Any], ok: Any) -> None:
    send({"re": request["id"], "ok": ok})


def serve() -> None:
    while True:
        request = read()
        op = request.get("op")
        if op == "hello":
            if scenario == "silent-hello":
                time.sleep(30)
                sys.exit(0)
            version = 2 if scenario == "wrong-protocol" else 1
            answer(
                request,
                {
                    "protocol": version,
                    "name": "scripted",
                    "version": "0",
                    "driver": scenario,
                    "profile": PROFILE,
                },
            )
        elif op == "open":
            misbehave_on_open(request)
        elif op == "connect":
            answer(request, {"connection": "c1", "profile": PROFILE, "operator_reads": False})
        elif op == "transaction":
            run_transaction(request)
        elif op == "get":
            answer_get(request)
        elif op in ("close_store", "disconnect", "shutdown"):
            answer(request, None)
            if op == "shutdown":
                return
        else:
            send({"re": request["id"], "error": {"kind": "usage", "message": f"no {op}"}})


def answer_get(request: dict[str, Any]) -> None:
    if scenario == "corrupt-record":
        answer(request, [{"key": "zz", "version": "1", "document": "{}", "indexes": []}])
    else:
        answer(request, [None for _ in request["keys"]])


def misbehave_on_open(request: dict[str, Any]) -> None:
    ok = {"store": "s1", "address": None}
    if scenario == "wrong-id":
        send({"re": request["id"] + 100, "ok": ok})
    elif scenario == "duplicate-answer":
        answer(request, ok)
        answer(request, ok)
    elif scenario == "late-answer":
        # Answers only once the toolkit has moved on (its next line, or its end of input): the answer
        # is late by events, however slow the machine.
        sys.stdin.buffer.readline()
        answer(request, ok)
    elif scenario == "unknown-error-kind":
        send({"re": request["id"], "error": {"kind": "teapot", "message": "short and stout"}})
    elif scenario == "huge-line":
        send({"re": request["id"], "ok": {"store": "s" * 100_000, "address": None}})
    elif scenario == "invalid-utf8":
        raw(b'{"re": ' + str(request["id"]).encode() + b', "ok": {"store": "\xff\xfe", "address": null}}\n')
    elif scenario == "stdout-pollution":
        raw(b"connecting to the database...\n")
        answer(request, ok)
    elif scenario == "exits":
        print("\x1b[31mfatal:\x1b[0m the storage engine could not start", file=sys.stderr, flush=True)
        sys.exit(3)
    elif scenario == "neither-ok-nor-error":
        send({"re": request["id"]})
    elif scenario == "not-an-object":
        send([request["id"], ok])
    elif scenario == "limit-without-details":
        send({"re": request["id"], "error": {"kind": "limit", "message": "too big"}})
    else:
        answer(request, ok)


def run_transaction(request: dict[str, Any]) -> None:
    if scenario == "attempt-for-unknown-transaction":
        send({"id": 1, "op": "attempt", "transaction": request["id"] + 7, "attempt": "a1"})
        time.sleep(5)
        return
    send({"id": 1, "op": "attempt", "transaction": request["id"], "attempt": "a1"})
    # Serve the attempt's calls until the toolkit answers the attempt request.
    while True:
        message = read()
        if "re" in message:
            break
        if message.get("op") == "get":
            answer_get(message)
        else:
            answer(message, None)
    if scenario == "commits-unknown-attempt":
        answer(request, {"attempt": "a999"})
    elif scenario == "blames-innocent-attempt":
        send({"re": request["id"], "error": {"kind": "conflict", "message": "x", "attempt": "a1"}})
    elif "error" in message:
        error = dict(message["error"])
        error["attempt"] = "a1"
        send({"re": request["id"], "error": error})
    else:
        answer(request, {"attempt": "a1"})


if __name__ == "__main__":
    serve()
