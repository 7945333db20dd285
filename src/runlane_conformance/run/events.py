"""The pytest plugin that turns a pytest session into a stream of typed child events.

It runs wherever the checks run: in a supervised child (each event goes down a pipe as the JSON line
``run.child_events.encode_line`` makes of it) or, for the toolkit's own fast tests, in-process (the
callback gets the values themselves). Either way the events are the ``run.child_events`` values:

* ``Plugins``: the pytest plugins of the session;
* ``Collected``: every check pytest collected, with its requirement id;
* ``CollectError``: a suite module could not be collected;
* ``CheckStart``: a check is about to run (its setup begins);
* ``CheckShrinking``: the running check found a failure and is now shrinking it
  (the ``pytest_runlane_shrinking`` hook), so the parent can say why it takes long;
* ``CheckEnd``: a check finished (after its teardown), with its raw, unjudged result;
* ``Ready`` and ``SessionDone`` (child mode): the session waits for checks; its cleanup begins.

The plugin judges nothing. It does make sure that whatever a driver raises
inside a check stays *inside that check*: ``pytest.exit``, ``KeyboardInterrupt``
and ``SystemExit`` raised during a check's setup, call or teardown become
failures of that check naming what was raised, instead of ending the session.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import unittest
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from ..fixtures.evidence import WITNESS_PROPERTY
from ..safe_text import DETAILS_LIMIT, MESSAGE_LIMIT, details_text, one_line
from .child_events import (
    CheckEnd,
    CheckShrinking,
    CheckStart,
    ChildEvent,
    Collected,
    CollectError,
    Plugins,
    Ready,
    SessionDone,
)
from .plan import PlannedCheck
from .raw import RawCheck

__all__ = ["CheckAbortedError", "EventPlugin", "RawCheck", "requirement_of"]

#: Longest failure text and one-line message carried per check. Both sit a little below the
#: report's own caps, so the report keeps the marker written here, which counts what the driver
#: actually produced (a 10 MB message says "... (9999990 more characters)"), instead of re-capping
#: an already capped text and counting only the last cut.
MAX_LONGREPR_CHARS = DETAILS_LIMIT - 64
MAX_MESSAGE_CHARS = MESSAGE_LIMIT - 64
#: Longest complete failure message carried per check (its every line, both ends kept when cut).
MAX_FULL_MESSAGE_CHARS = 8_000

#: The paragraph Hypothesis appends to a failure offering a ``@reproduce_failure`` blob. The blob
#: cannot be used on the installed suites (they live in site-packages), so it is left out of the
#: message shown to the user; the full traceback keeps it.
_BLOB_PARAGRAPH = re.compile(
    r"\n*You can reproduce this example by temporarily adding @reproduce_failure.*", re.S
)

Emit = Callable[[ChildEvent], None]


class CheckAbortedError(Exception):
    """A check raised something that would have ended the whole pytest session; it fails that check."""


def requirement_of(item: pytest.Item) -> str | None:
    """The requirement id a collected check enforces (its ``runlane_requirement`` marker)."""
    marker = item.get_closest_marker("runlane_requirement")
    if marker is None or not marker.args:
        return None
    return str(marker.args[0])


def limit_gates_of(item: pytest.Item) -> list[str]:
    """The limit gates a collected check names (its ``runlane_limit_gate`` markers, on the function and
    on its parameters), if any."""
    return [str(name) for marker in item.iter_markers("runlane_limit_gate") for name in marker.args]


def _declared_timeout(item: pytest.Item) -> float | None:
    """The seconds a check itself says it may need (its ``timeout`` marker), if it says."""
    marker = item.get_closest_marker("timeout")
    if marker is None or not marker.args or isinstance(marker.args[0], bool):
        return None
    value = marker.args[0]
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _is_property(item: pytest.Item) -> bool:
    """Whether the check searches (a Hypothesis property, or a state machine marked by the suites with
    ``_hypothesis_support.searches``), so it tends to run long."""
    from hypothesis import is_hypothesis_test

    test = getattr(item, "obj", None)
    return bool(is_hypothesis_test(test)) or getattr(test, "runlane_searches", False) is True


def _short_message(report: Any) -> str:
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if isinstance(message, str) and message.strip():
        return message.strip().splitlines()[0]
    text = str(getattr(report, "longreprtext", "") or getattr(report, "longrepr", "") or "")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("E "):
            return line[1:].strip()
    return lines[-1] if lines else "failed"


def _full_message(report: Any) -> str | None:
    """The whole text of what failed (every line of the exception's message), without Hypothesis's
    unusable ``@reproduce_failure`` advice; ``None`` when pytest kept no crash message."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    message = getattr(crash, "message", None)
    if not isinstance(message, str) or not message.strip():
        return None
    return _BLOB_PARAGRAPH.sub("", message).rstrip()


#: A recorded witness is one line of JSON with the cycle's attempts and operations: kept whole up to
#: this size (a capped one would not parse, and the report then leaves the witness out).
MAX_WITNESS_CHARS = 100_000


def _property_text(value: object, key: str = "") -> str:
    if isinstance(value, str):
        return one_line(value, MAX_WITNESS_CHARS if key == WITNESS_PROPERTY else MAX_MESSAGE_CHARS)
    try:
        return json.dumps(value, default=str)[:2_000]
    except (TypeError, ValueError):
        return one_line(value, MAX_MESSAGE_CHARS)


def _raised_at(error: BaseException) -> str:
    """The file of the innermost frame of ``error``'s traceback outside pytest and pluggy."""
    tb = error.__traceback__
    where = ""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not any(part in filename for part in ("/_pytest/", "/pluggy/", "/unittest/")):
            where = filename
        tb = tb.tb_next
    return where


@contextlib.contextmanager
def _contained(trusted: tuple[str, ...]) -> Iterator[None]:
    """Turn what would end the session, or skip outside our gating, into a failure of the check.

    A skip is left alone only when it was raised from a file under one of the
    ``trusted`` directories (our fixtures and the suites): that is our profile
    gating, which the parent then still compares with its plan.
    """
    try:
        yield
    except pytest.exit.Exception as error:
        raise CheckAbortedError(f"the check raised pytest.exit({one_line(error.msg, 500)!r})") from None
    except KeyboardInterrupt:
        raise CheckAbortedError("the check raised KeyboardInterrupt") from None
    except pytest.xfail.Exception as error:
        raise CheckAbortedError(f"the check raised pytest.xfail({one_line(error.msg, 500)!r})") from None
    except (pytest.skip.Exception, unittest.SkipTest) as error:
        if _raised_at(error).startswith(trusted):
            raise
        kind = "unittest.SkipTest" if isinstance(error, unittest.SkipTest) else "pytest.skip"
        message = getattr(error, "msg", None) or (error.args[0] if error.args else "")
        raise CheckAbortedError(
            f"the check raised {kind}({one_line(message, 500)!r}) outside the profile gating"
        ) from None


class EventPlugin:
    """Emits ``Collected`` / ``CheckStart`` / ``CheckEnd`` events; optionally runs checks as told.

    ``trusted`` are the directories whose skips are profile gating (our fixtures and the suites).
    ``commands`` (child mode) yields node ids to run, one at a time, ending when
    the parent says stop; without it pytest's own loop runs every collected check.
    ``stop_requested`` (child mode) is asked before each check: once it says yes
    (``--maxfail`` was reached in the parent) no further check starts, and the
    session ends normally, so the driver's fixtures are still torn down.
    """

    def __init__(
        self,
        emit: Emit,
        trusted: tuple[str, ...],
        commands: Iterator[str | None] | None = None,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self._emit = emit
        self._trusted = trusted
        self._commands = commands
        self._stop_requested = stop_requested
        self._pending: dict[str, RawCheck] = {}
        self._requirements: dict[str, str | None] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        from .environment import loaded_plugins

        self._emit(Plugins(tuple(loaded_plugins(config))))

    # --- collection -------------------------------------------------------------------------
    def pytest_collectreport(self, report: Any) -> None:
        if report.failed:
            self._emit(CollectError(one_line(f"{report.nodeid or 'suite'}: {_short_message(report)}")))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        checks = []
        for item in session.items:
            requirement_id = requirement_of(item)
            self._requirements[item.nodeid] = requirement_id
            checks.append(
                PlannedCheck(
                    nodeid=item.nodeid,
                    requirement_id=requirement_id,
                    declared_timeout=_declared_timeout(item),
                    searches=_is_property(item),
                    limit_gates=tuple(limit_gates_of(item)),
                )
            )
        self._emit(Collected(tuple(checks)))

    # --- keep a check's abnormal exits inside that check -------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Generator[None, object, object]:
        with _contained(self._trusted):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        with _contained(self._trusted):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, object, object]:
        with _contained(self._trusted):
            return (yield)

    # --- execution --------------------------------------------------------------------------
    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._emit(CheckStart(nodeid))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        pending = self._pending.get(report.nodeid)
        if pending is None:
            pending = self._pending[report.nodeid] = RawCheck(
                report.nodeid, self._requirements.get(report.nodeid)
            )
        pending.duration += float(getattr(report, "duration", 0.0) or 0.0)
        wasxfail = getattr(report, "wasxfail", None)
        if report.failed:
            text = details_text(report.longreprtext, MAX_LONGREPR_CHARS)
            if pending.status in ("failed", "error"):
                pending.longrepr = f"{pending.longrepr or ''}\n{text}".strip()[-MAX_LONGREPR_CHARS:]
            else:
                message = one_line(_short_message(report), MAX_MESSAGE_CHARS)
                full = _full_message(report)
                full = details_text(full, MAX_FULL_MESSAGE_CHARS) if full is not None else message
                if report.when == "call":
                    pending.status, pending.message = "failed", message
                    pending.full_message = full
                else:
                    pending.status, pending.message = "error", f"error in {report.when}: {message}"
                    pending.full_message = f"error in {report.when}: {full}"
                pending.longrepr = text
        elif report.skipped and pending.status == "passed":
            if wasxfail is not None:
                pending.status = "xfailed"
                pending.skip_reason = one_line(wasxfail or "xfail", MAX_MESSAGE_CHARS)
            else:
                pending.status = "skipped"
                longrepr = report.longrepr
                if isinstance(longrepr, tuple) and len(longrepr) == 3:
                    pending.skip_origin = one_line(longrepr[0], 1_000)
                    pending.skip_reason = one_line(str(longrepr[2]).removeprefix("Skipped: "))
                else:
                    pending.skip_reason = one_line(longrepr or "skipped", MAX_MESSAGE_CHARS)
        elif report.passed and wasxfail is not None and report.when == "call":
            pending.status = "xpassed"
            pending.skip_reason = one_line(wasxfail or "xfail", MAX_MESSAGE_CHARS)
        if report.when == "call":
            pending.properties = [(str(k), _property_text(v, str(k))) for k, v in report.user_properties]
        if report.when == "teardown":
            raw = self._pending.pop(report.nodeid)
            if not raw.properties:
                raw.properties = [(str(k), _property_text(v, str(k))) for k, v in report.user_properties]
            self._emit(CheckEnd(raw))

    # --- progress a check reports about itself ---------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_runlane_shrinking(self, item: pytest.Item) -> None:
        """A check found a failure and is shrinking it: say so, so a long shrink is not a silent one."""
        self._emit(CheckShrinking(item.nodeid))

    # --- child mode: run the checks the parent hands out, one at a time ---------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> object:
        if self._commands is None:
            return None
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} error(s) during collection")
        items = {item.nodeid: item for item in session.items}
        # What exists now (pytest, Hypothesis, the driver, the collected suites) lives as long as this
        # child: moving it out of the collector's reach spares every full collection during the checks
        # a walk over it. Measured on a quick run of the reference driver: the collector's time fell
        # from 1.0 s to 0.6 s, about 8% of the run's CPU.
        gc.freeze()
        self._emit(Ready())
        current = next(self._commands, None)
        while current is not None:
            upcoming = next(self._commands, None)
            if self._stop_requested():  # asked after the parent answered: it has seen every end so far
                break
            item = items[current]
            next_item = items.get(upcoming) if upcoming is not None else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=next_item)
            current = upcoming
        self._emit(SessionDone())
        return True
