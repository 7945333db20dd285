"""The reference driver configured by options alone, for profiles drawn at random.

``harness`` takes every option ``local`` takes (the five limits, ``index_lag``,
``max_transaction_attempts``) and two more, each an honest change of mechanics
borrowed from ``drivers``:

- ``clock``: ``client`` (the reference driver's own), ``server_sampled`` or
  ``transaction_authoritative`` (one shared store clock, sampled after now()
  sealed the read set);
- ``exclusive``: ``on`` (the reference driver's exclusive candidates) or
  ``off`` (advisory selection only, advertised as such).

Because the whole configuration is options, a drawn profile that a check
refuses reproduces with one command: ``runlane-certify run --driver
tests.profiles.drawn:harness --option ...`` (from the repository root).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runlane_conformance.harness import DriverOptionError, load_harness
from tests.mutants.wrapping import WrappedDriver, WrappedHarness, WrappedStore, WrappedTransaction
from tests.profiles.drivers import (
    NoExclusiveTransaction,
    OperatorReadsDriver,
    ServerSampledDriver,
    StoreSampledTransaction,
    TransactionAuthoritativeDriver,
)

#: The clock authorities this harness offers, by option value.
CLOCKS: dict[str, type[OperatorReadsDriver]] = {
    "client": OperatorReadsDriver,
    "server_sampled": ServerSampledDriver,
    "transaction_authoritative": TransactionAuthoritativeDriver,
}
#: Its exclusive-candidates switch, by option value.
EXCLUSIVE = {"on": True, "off": False}


class SettlingStore(WrappedStore):
    """A wrapped store that passes the reference store's ``settle`` hook through (eventual indexes)."""

    def settle(self, *, timeout: float) -> bool:
        hook = getattr(self.inner, "settle", None)
        return True if hook is None else bool(hook(timeout=timeout))


class SettlingHarness(WrappedHarness):
    def open_store(self) -> WrappedStore:
        return SettlingStore(self.inner.open_store(), self.driver_class)

    def attach(self, address: object) -> WrappedStore:
        return SettlingStore(self.inner.attach(address), self.driver_class)


def _driver_class(clock: str, exclusive: bool) -> type[WrappedDriver]:
    base = CLOCKS[clock]
    bases: list[type[WrappedTransaction]] = []
    if not exclusive:
        bases.append(NoExclusiveTransaction)
    if clock != "client":
        bases.append(StoreSampledTransaction)
    transaction: type[WrappedTransaction] = (
        type("DrawnTransaction", tuple(bases), {}) if bases else WrappedTransaction
    )
    changes: dict[str, Any] = {**base.changes, "exclusive_candidates": exclusive}
    return type("DrawnDriver", (base,), {"changes": changes, "transaction_class": transaction})


def _choice(options: Mapping[str, str], name: str, values: Mapping[str, object], default: str) -> str:
    value = options.get(name, default)
    if value not in values:
        raise DriverOptionError(f"drawn driver option {name}={value!r}; valid values: {', '.join(values)}")
    return value


def harness(options: Mapping[str, str]) -> WrappedHarness:
    """The reference driver with the drawn clock and exclusive switch; other options go to ``local``."""
    clock = _choice(options, "clock", CLOCKS, "client")
    exclusive = EXCLUSIVE[_choice(options, "exclusive", EXCLUSIVE, "on")]
    rest = {key: value for key, value in options.items() if key not in ("clock", "exclusive")}
    return SettlingHarness(load_harness("local", rest), _driver_class(clock, exclusive))
