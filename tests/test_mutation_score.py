"""The mutation benchmark's bookkeeping: identities, samples, skipped spans, triage, the score.

The benchmark itself runs by hand (hours of suite runs); these tests exercise
the parts that decide what it runs and how it counts, without Cosmic Ray or
any suite run, so a change that would silently shift the sample or break the
triage keys fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "mutation_score.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The script as a module, registered under its name (its dataclasses look themselves up there)."""
    spec = importlib.util.spec_from_file_location("mutation_score", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("mutation_score", module)
    spec.loader.exec_module(sys.modules["mutation_score"])
    return sys.modules["mutation_score"]


def _mutant(
    bench: ModuleType, identity: str, line: int = 1, path: str = "runlane_conformance/local/store.py"
) -> object:
    return bench.Mutant("job", Path(path), "core/AddNot", 0, (line, 0), (line, 1), "f", identity)


def test_identity_ignores_line_numbers_and_indentation_but_not_the_mutated_text(bench: ModuleType) -> None:
    one = bench.mutant_identity("m", "f", "core/AddNot", "    if x < y:", "x < y")
    assert one == bench.mutant_identity("m", "f", "core/AddNot", "if x < y:", "x < y")
    assert one != bench.mutant_identity("m", "f", "core/AddNot", "if x <= y:", "x <= y")
    assert one != bench.mutant_identity("m", "g", "core/AddNot", "if x < y:", "x < y")


def test_equal_base_keys_get_ordinals_in_enumeration_order(bench: ModuleType) -> None:
    mutants = [_mutant(bench, "a"), _mutant(bench, "b"), _mutant(bench, "a")]
    assert [m.identity for m in bench.with_ordinals(mutants)] == ["a:0", "b:0", "a:1"]


def test_a_sample_depends_only_on_the_identities_and_the_seed(bench: ModuleType) -> None:
    mutants = [_mutant(bench, f"m{i}:0", line=i + 1) for i in range(40)]
    chosen = {m.identity for m in bench.sample(mutants, 10, 0)}
    assert len(chosen) == 10
    assert chosen == {m.identity for m in bench.sample(list(reversed(mutants)), 10, 0)}
    assert chosen != {m.identity for m in bench.sample(mutants, 10, 1)}
    grown = {m.identity for m in bench.sample([*mutants, _mutant(bench, "new:0")], 10, 0)}
    assert len(chosen - grown) <= 1
    assert bench.sample(mutants, None, 0) == mutants


def test_annotations_and_the_keyword_only_marker_are_found(bench: ModuleType) -> None:
    source = (
        "from __future__ import annotations\n"
        "def f(a: int | None, *, b: str = 'x') -> A | B:\n"
        "    return a | b\n"
    )
    spans = bench.annotation_spans(source)
    line = source.splitlines()[1]
    in_parameter = (2, line.index("int | None") + 4)
    in_return = (2, line.index("A | B") + 2)
    in_body = (3, source.splitlines()[2].index("|"))
    assert any(bench.inside(span, in_parameter, (2, in_parameter[1] + 1)) for span in spans)
    assert any(bench.inside(span, in_return, (2, in_return[1] + 1)) for span in spans)
    assert not any(bench.inside(span, in_body, (3, in_body[1] + 1)) for span in spans)
    star = line.index("*")
    assert bench.is_keyword_only_marker(line, (2, star), (2, star + 1))
    product = "    return a * b"
    assert not bench.is_keyword_only_marker(product, (1, 13), (1, 14))


def test_a_line_inside_a_statement_maps_to_its_first_line(bench: ModuleType) -> None:
    source = "x = f(\n    1,\n    2,\n)\nif x:\n    y = 1\n"
    first = bench.statement_lines(source)
    assert first[1] == first[3] == 1
    assert first[5] == 5
    assert first[6] == 6


def test_the_triage_file_is_well_formed_and_its_verdicts_are_known(bench: ModuleType) -> None:
    entries = bench.load_triage()
    assert all(entry.verdict in bench.TRIAGE_VERDICTS and entry.reason for entry in entries.values())
    assert all(identity.count(":") == 4 for identity in entries), "identity: module:function:operator:hash:n"


def test_a_triage_entry_without_a_reason_is_refused(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "triage.toml"
    path.write_text('[mutant."m:f:core/AddNot:abc:0"]\nverdict = "equivalent"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="needs verdict"):
        bench.load_triage(path)


def test_the_score_leaves_out_skipped_and_incompetent_and_divides_by_the_non_equivalent(
    bench: ModuleType,
) -> None:
    score = bench.Score()
    status = bench.Status
    for outcome in (status.KILLED, status.KILLED, status.KILLED, status.SURVIVED, status.UNCOVERED):
        score.add(bench.Outcome(outcome), None)
    score.add(bench.Outcome(status.SURVIVED), bench.TriageEntry("equivalent", "same behaviour"))
    score.add(bench.Outcome(status.SKIPPED), None)
    score.add(bench.Outcome(status.INCOMPETENT), None)
    assert score.ran == 6
    assert score.raw == pytest.approx(3 / 6)
    assert score.denominator == 5
    assert score.triaged == pytest.approx(3 / 5)
