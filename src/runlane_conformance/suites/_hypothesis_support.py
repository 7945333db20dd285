"""Hypothesis's own complaints, said in plain words, and a search that stops when its budget is spent.

A property check fails for one of three reasons, and a driver author needs
to know which one they are looking at:

* the driver broke the rule: Hypothesis found an example (a counterexample)
  and reports it, shrunk;
* Hypothesis itself gave up: the same example failed once and passed when
  replayed (``FlakyFailure``), the data drawn while replaying an example
  differed (``FlakyStrategyDefinition``), a health check or an unsatisfiable
  strategy stopped the run. These carry Hypothesis's vocabulary, not the
  contract's; ``plain_hypothesis_errors`` turns each into an
  ``AssertionError`` that says what happened, what it usually means for a
  driver, and the original type name;
* the check could not finish in time: ``SearchBudget`` is a hang guard that
  lets a search stop on its own before an outside deadline kills it. With a
  counterexample in hand it reports that example (unshrunk) as a failure;
  without one the check is *inconclusive* (``CheckInconclusive``): neither a
  pass nor a failure, and never a certification. The evidence a finished
  search gathered is fixed by the profile and seed, never by the clock.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from hypothesis.errors import (
    FailedHealthCheck,
    Flaky,
    FlakyFailure,
    FlakyStrategyDefinition,
    Unsatisfiable,
)
from hypothesis.stateful import RuleBasedStateMachine, invariant

from runlane_conformance.fixtures.evidence import CheckInconclusive, record_search

if TYPE_CHECKING:
    import pytest

__all__ = [
    "CountedMachine",
    "SearchBudget",
    "check_seconds",
    "plain_hypothesis_errors",
    "record_machine",
    "searches",
    "with_plain_hypothesis_errors",
]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class SearchBudget:
    """A hang guard for one property search, what the search ran, its first counterexample, a stop switch.

    The evidence a search gathers is fixed by the Hypothesis profile and the
    seed: it runs the profile's examples and steps, however fast the machine is.
    ``seconds`` is only a guard against a search that cannot finish (a hung or
    very slow driver): generous, and checked between steps so the check can say
    what it ran before the supervisor's deadline kills it. Hypothesis treats
    anything raised by an example as a failure to shrink and replay, so a search
    cannot be cut short by raising: once the guard fires or ``stop()`` was called,
    each later example asks ``active()``, does nothing, and the run ends at once.
    ``raise_if_stopped()`` then ends the check: with a counterexample in hand, as a
    failure (the example is evidence, shrunk or not); with none after the guard
    fired, as *inconclusive* (``CheckInconclusive``: no evidence either way); after
    ``stop()``, as a failure with its reason. ``seconds`` of ``None`` means no guard.
    """

    seconds: float | None
    started: float = field(default_factory=time.monotonic)
    examples: int = 0
    steps: int = 0
    first_failure: str | None = None
    reason: str | None = None
    timed_out: bool = False

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def active(self) -> bool:
        """True when the next example should run (and counts it); False once the search is stopped."""
        if self.expired():
            return False
        self.examples += 1
        return True

    def step(self) -> None:
        """Count one step of the current example (the evidence the report shows)."""
        self.steps += 1

    def expired(self) -> bool:
        """True once the search is stopped or its guard fired; for checking between the steps of one
        example, so a long example (a locking driver making each step wait) cannot run far past the
        guard. Counts nothing."""
        if self.reason is None and self.seconds is not None and self.elapsed() > self.seconds:
            self.timed_out = True
            self.reason = self.exhausted_message()
        return self.reason is not None

    def stop(self, reason: str) -> None:
        """Stop the search: every later example does nothing, and the check fails with ``reason``."""
        if self.reason is None:
            self.reason = reason

    def give_up(self, what: str) -> None:
        """Stop the search without a verdict: an example could not finish (``what``), which is no
        evidence either way; the check ends *inconclusive* unless a counterexample was already found."""
        if self.reason is None:
            self.reason = what
            self.timed_out = True

    def note_failure(self, description: str) -> None:
        if self.first_failure is None:
            self.first_failure = description

    def raise_if_stopped(self, what: str) -> None:
        if self.reason is None:
            return
        if self.timed_out and self.first_failure is None:
            raise CheckInconclusive(f"{what}: {self.reason}")
        raise AssertionError(f"{what}: {self.reason}")

    def exhausted_message(self) -> str:
        spent = f"{self.elapsed():.1f} s"
        if self.first_failure is not None:
            return (
                f"ran past its {self.seconds:.1f} s hang guard after {spent} while shrinking a "
                f"counterexample; the first failing example, not shrunk, was:\n{self.first_failure}"
            )
        return (
            f"could not finish inside its {self.seconds:.1f} s hang guard: {self.examples} examples "
            f"({self.steps} steps) ran in {spent} and found nothing, but the profile asks for more"
        )


class CountedMachine(RuleBasedStateMachine):
    """A state machine that counts the examples and steps it runs into its class's ``tally``.

    Subclass it instead of ``RuleBasedStateMachine`` and give the concrete class a fresh
    ``tally`` (a ``SearchBudget`` without a guard); after the run, ``record_search`` the tally's
    counts. A step is counted by an invariant, which Hypothesis checks after a machine's
    initialisation and after every rule, so ``steps`` is that count less one per example. Both
    numbers follow from the profile and the seed alone.
    """

    tally: SearchBudget

    def __init__(self) -> None:
        super().__init__()
        self.tally.active()

    @invariant()
    def _count_a_step(self) -> None:
        self.tally.step()


def record_machine(tally: SearchBudget) -> None:
    """Record what a ``CountedMachine`` ran (see ``fixtures.evidence.record_search``)."""
    record_search(tally.examples, max(0, tally.steps - tally.examples))


def searches(test: F) -> F:
    """Mark a check that runs a Hypothesis state machine (not an ``@given`` test) as a search.

    The runner hands searches out before ordinary checks in a parallel run, so
    a long search does not start last and leave one worker running alone. A
    ``@given`` test is recognised as a search without this.
    """
    setattr(test, "runlane_searches", True)  # noqa: B010 (a plain function has no declared attribute)
    return test


def check_seconds(request: pytest.FixtureRequest) -> float:
    """The wall-clock limit the running check has, in seconds, however it was started.

    Run directly under pytest, the plugin keeps the limit in the check's stash
    (``--runlane-timeout``, else the profile's budget) and sets pytest-timeout's
    marker a grace later as a backstop; a check's own ``timeout`` marker, where
    it declares one, is its limit instead. Under
    ``runlane-certify`` the supervisor enforces the limit from outside and no
    marker is set; the plugin's ``check_timeout`` gives the same value there
    (the CLI passes ``--check-timeout`` on as ``--runlane-timeout``). Both come
    from ``hypothesis_profiles.check_budget``, so a check that plans its own
    search (the model checks) scales with the profile instead of carrying a
    fixed number that a harder profile outgrows.
    """
    from runlane_conformance.fixtures.plugin import BUDGET_KEY, check_timeout

    budget = request.node.stash.get(BUDGET_KEY, None)
    if budget is not None:
        return float(budget)
    marker = request.node.get_closest_marker("timeout")
    if marker is not None and marker.args:
        value = marker.args[0]
        if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
            return float(value)
    return check_timeout(request.config)


def _first_error(group: FlakyFailure) -> str:
    inner = group.exceptions[0] if group.exceptions else None
    return "unknown" if inner is None else f"{type(inner).__name__}: {inner}"


def _timeout_in(error: BaseException) -> str | None:
    """The time-limit message inside ``error`` (Hypothesis wraps a timeout that interrupted an example)."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        text = str(current)
        if "Timeout" in text and type(current).__name__ in (
            "Failed",
            "_WrappedBaseException",
            "TimeoutError",
        ):
            return text.strip().splitlines()[0] if text.strip() else "Timeout"
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)
    return None


def _unfinished_in(error: BaseException) -> CheckInconclusive | None:
    """A ``CheckInconclusive`` (say a competitor that did not finish in time) inside a flaky replay."""
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, CheckInconclusive):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return None


@contextmanager
def plain_hypothesis_errors(what: str, budget: SearchBudget | None = None) -> Iterator[None]:
    """Re-raise Hypothesis's own errors from the ``with`` block as plain ``AssertionError`` failures.

    ``what`` names the property (``"random histories"``). With a ``budget``,
    a search that was stopped (out of time, or ``stop()``) fails with that
    reason even when the block itself returned, and the first counterexample
    seen is added to the explanation of a flaky run.
    """
    with _translated(what, budget):
        try:
            yield
        except Flaky:
            # A search stopped while shrinking leaves Hypothesis replaying an example that now does
            # nothing, which it calls flaky; the reason for the stop is the real story.
            if budget is not None:
                budget.raise_if_stopped(what)
            raise
        if budget is not None:
            budget.raise_if_stopped(what)


@contextmanager
def _translated(what: str, budget: SearchBudget | None) -> Iterator[None]:
    try:
        yield
    except Flaky as error:
        timeout = _timeout_in(error)
        if timeout is not None and (budget is None or budget.first_failure is None):
            # The check's time limit interrupted an example: it did not finish, and found nothing.
            raise CheckInconclusive(
                f"{what}: timed out ({timeout}) while Hypothesis was still running examples"
            ) from None
        unfinished = _unfinished_in(error)
        if unfinished is not None and (budget is None or budget.first_failure is None):
            # An example stopped without a verdict (a competitor still running at its bound) and its
            # replay did not: still no evidence of a violation either way.
            raise unfinished from None
        raise AssertionError(_flaky_message(what, error, budget)) from None
    except FailedHealthCheck as error:
        raise AssertionError(
            f"{what}: Hypothesis refused to run the property (FailedHealthCheck: {error}); this is a "
            "problem of the check's setup on this driver, not a verdict on the driver"
        ) from None
    except Unsatisfiable as error:
        raise AssertionError(
            f"{what}: Hypothesis could not generate enough valid examples (Unsatisfiable: {error}); "
            "nothing was checked"
        ) from None


def _flaky_message(what: str, error: Flaky, budget: SearchBudget | None) -> str:
    """Say what a ``Flaky`` error from Hypothesis means for the driver under test."""
    timeout = _timeout_in(error)
    if timeout is not None:
        return (
            f"{what}: timed out ({timeout}) while Hypothesis was still running examples; Hypothesis "
            f"reported this as {type(error).__name__}, but it is the check's time limit, not a contract "
            "violation and not flaky behaviour: the check did not finish, so it cannot pass"
        )
    seen = ""
    if budget is not None and budget.first_failure is not None:
        seen = f"\nthe first failing example was:\n{budget.first_failure}"
    if isinstance(error, FlakyFailure):
        return (
            f"{what}: an example failed once and passed when Hypothesis ran it again (FlakyFailure). The "
            "driver answered the same input differently on two runs, which usually means the failure "
            f"depends on timing (a race this interleaving hits only sometimes). First failure: "
            f"{_first_error(error)}{seen}"
        )
    if isinstance(error, FlakyStrategyDefinition):
        return (
            f"{what}: replaying an example did not retrace the same steps (FlakyStrategyDefinition: "
            f"{error}). The choices the check makes depend on what the driver returns, so the driver "
            f"answered the same history differently the second time: its behaviour is not repeatable{seen}"
        )
    return (
        f"{what}: Hypothesis could not reproduce a failure it saw ({type(error).__name__}: {error}); "
        "the driver's behaviour for one input changed between runs"
    )


def with_plain_hypothesis_errors(what: str) -> Callable[[F], F]:
    """Decorate a ``@given`` test so Hypothesis's own errors reach the report in plain words.

    Put it between the requirement and ``@given``. ``functools.wraps`` keeps the
    test's signature, marks and Hypothesis handle, so fixtures, seeds and the
    printed reproduce blob work as before.
    """

    def decorate(test: F) -> F:
        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            with plain_hypothesis_errors(what):
                return test(*args, **kwargs)

        return cast(F, run)

    return decorate
