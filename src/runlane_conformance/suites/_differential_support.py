"""A differential workload: the driver under test and the reference driver run the same random program.

A *program* is a sequence of steps drawn over every dimension at once: which
of several driver instances runs the step, how far the injected clock jumps
before it, which table and which key shapes a write touches (environments and
run ids that are prefixes of one another, code points from the whole of
Unicode), what JSON shape a document carries (deep nesting, every number
spelling the codecs accept), whether the callback raises (an ``Exception``, a
``BaseException`` subclass), and which index, partition, range, direction,
page size and selection mode a scan uses.

Each step runs on the driver under test and on a fresh reference store
(``runlane_conformance.local``, given the same limits), strictly one after
the other. With no two transactions in flight at once, the contract allows
exactly one outcome for each step: the serial one (competing steps below
excepted). So every observable must
match: what each point read returns position by position (documents, index
entries, misses), the joined pages of each scan, the type of each error, and,
at the end of the program, every key and every index scope the program
touched. Versions are opaque and never compared by value: each driver's own
versions must follow the contract's rules (equal within a read and while a
record is unchanged, new on each commit that writes it, never handed out
again for the key). An eventual index is settled before it is compared.

After the drawn steps, a *sweep* crosses each table of the catalogue (a drawn
half of them per program) with what its records meet: neighbours whose run ids
or names prefix one another and whose dates lie across 2038, another
environment, a read on one instance after others committed, two transactions
that overlap (a write skew, two blind creates of one key), and an identical
rewrite. Overlapping transactions are the one place the serial outcome is not
unique: the reference runs both serial orders from the same state, and the
driver's answers and the state it leaves must be one of the two. Appends (and
callbacks that raise after them) are drawn too, and the read-back covers
stream heads and the operator read model.

A mismatch raises ``Divergence``: the rule family it breaks (the requirement
the check reports), the program up to the step that diverged, and both
answers in words; Hypothesis shrinks the program first.

``COVERAGE`` records which cells of the dimension matrix the run exercised
(``benchmarks/differential_matrix.py`` prints it).

The workload is split by concern: ``_differential_programs`` draws programs
(and records coverage), ``_differential_oracle`` runs them on both sides and
compares, ``_differential_sweep`` holds the searches and the relations. This
module re-exports what the model checks and the coverage benchmark use.
"""

from __future__ import annotations

from runlane_conformance.suites._differential_oracle import coverage_json, run_program
from runlane_conformance.suites._differential_programs import (
    COVERAGE,
    FAMILIES,
    READS,
    SCANS,
    Divergence,
    Program,
)
from runlane_conformance.suites._differential_sweep import (
    RELATIONS,
    differential_search,
    dimensions,
    program_count,
    relations_search,
)

__all__ = [
    "COVERAGE",
    "FAMILIES",
    "READS",
    "RELATIONS",
    "SCANS",
    "Divergence",
    "Program",
    "coverage_json",
    "differential_search",
    "dimensions",
    "program_count",
    "relations_search",
    "run_program",
]
