"""The requirement catalogue of the fake suite: what a run over ``fake_suite/`` must account for."""

from __future__ import annotations

from runlane_conformance.catalogue import Requirement, RequirementLevel

_CAPABILITY = {
    "append.contiguous-positions": "append",
    "exclusive_selection.disjoint-selections": "exclusive_candidates",
    "profile.durable-survives-reconnect": "durable",
    "profile.client-clock-follows-injected-clock": "client_clock",
}

FAKE_IDS = (
    "append.contiguous-positions",
    "conflicts.lost-update",
    "conflicts.write-skew-advice",
    "exclusive_selection.disjoint-selections",
    "limits.point-reads-boundary",
    "limits.query-results-boundary",
    "limits.record-bytes-boundary",
    "limits.transaction-bytes-boundary",
    "limits.transaction-records-boundary",
    "profile.advertised-profile-coherent",
    "profile.client-clock-follows-injected-clock",
    "profile.durable-survives-reconnect",
    "profile.strong-index-visible-across-instances",
)

FAKE_CATALOG: dict[str, Requirement] = {
    rid: Requirement(rid, RequirementLevel.MUST, "fake clause", "fake rule", _CAPABILITY.get(rid))
    for rid in FAKE_IDS
}


def fake_catalog() -> dict[str, Requirement]:
    return dict(FAKE_CATALOG)
