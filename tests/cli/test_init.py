"""``runlane-certify init``: a new driver package that installs and certifies as generated.

What a driver author relies on: the package names its driver under the entry-point
group the toolkit discovers drivers by; both styles certify at level ``core`` as
generated; a bad name or a non-empty target is refused with one line, exit 2 and
nothing written; and the CI workflow it writes is the documented one, valid
against GitHub's workflow schema and built for least privilege.

Installing the package into a fresh virtual environment is slow, so here the
generated ``src`` directory is put on ``sys.path`` and the driver named as
``module:harness``; ``scripts/scaffold_smoke.sh`` does the full pip install.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from runlane_conformance.cli.app import app, main
from runlane_conformance.run.model import RequirementOutcome
from runlane_conformance.runner import run_suites
from runlane_conformance.scaffold import DriverStyle, plan_scaffold, render_scaffold

ROOT = Path(__file__).resolve().parents[2]
DOCS_WORKFLOW = ROOT / "docs" / "ci" / "certify.yml"
WORKFLOW = Path(".github", "workflows", "certify.yml")
SCHEMA = "vendor.github-workflows"
BAD_NAMES = ["", "Mixed", "1st", "has-dash", "two__underscores", "trailing_", "has space", "x" * 41]
BAD_NAMES += ["local", "process"]  # the toolkit's own drivers


def _init(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["init", *args])
    return result.exit_code, result.stdout, result.stderr


def _tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))


def _workflow(path: Path) -> dict[str, object]:
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


# -- what is written --------------------------------------------------------------------------


@pytest.mark.parametrize("style", list(DriverStyle))
def test_init_registers_the_driver_under_the_entry_point_group_the_toolkit_discovers(
    tmp_path: Path, style: DriverStyle
) -> None:
    target = tmp_path / "driver"
    code, out, err = _init(str(target), "--name", "json_file", "--style", style.value)
    assert code == 0, err
    pyproject = tomllib.loads((target / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["name"] == "runlane-json-file-driver"
    assert pyproject["project"]["entry-points"]["runlane.storage_drivers"] == {
        "json_file": "runlane_json_file_driver:harness"
    }
    assert pyproject["tool"]["pytest"]["ini_options"]["runlane_driver"] == "json_file"
    for expected in (
        "README.md",
        "src/runlane_json_file_driver/__init__.py",
        "src/runlane_json_file_driver/py.typed",
        "tests/test_conformance.py",
        ".github/workflows/certify.yml",
    ):
        assert (target / expected).is_file(), f"{expected} was not written"
    assert "import_suites(globals())" in (target / "tests" / "test_conformance.py").read_text()
    assert "runlane-certify run --driver json_file" in out


def test_init_fills_in_every_placeholder_of_its_templates() -> None:
    for style in DriverStyle:
        for relative, text in render_scaffold(plan_scaffold("demo", style)).items():
            assert "__DRIVER__" not in text and "__PACKAGE__" not in text and "__STYLE" not in text, relative


def test_the_optimistic_style_shows_read_sets_scanned_ranges_validation_and_replay() -> None:
    files = render_scaffold(plan_scaffold("demo", DriverStyle.OPTIMISTIC))
    driver = files[next(p for p in files if p.name == "__init__.py")]
    for shown in ("self._rules.reads", "ScannedRange", "def _validate", "LostRace", "MAX_ATTEMPTS"):
        assert shown in driver, f"the optimistic driver does not show {shown}"
    lock = render_scaffold(plan_scaffold("demo", DriverStyle.LOCK))
    assert "LostRace" not in lock[next(p for p in lock if p.name == "__init__.py")]


def test_init_writes_into_an_existing_empty_directory(tmp_path: Path) -> None:
    code, _out, err = _init(str(tmp_path), "--name", "demo")
    assert code == 0, err
    assert (tmp_path / "pyproject.toml").is_file()


@pytest.mark.parametrize("style", list(DriverStyle))
def test_the_generated_package_is_ruff_clean(tmp_path: Path, style: DriverStyle) -> None:
    code, _out, err = _init(str(tmp_path / "pkg"), "--name", "demo", "--style", style.value)
    assert code == 0, err
    for command in (["check", "--no-cache"], ["format", "--check", "--no-cache"]):
        ruff = subprocess.run(
            [sys.executable, "-m", "ruff", *command, str(tmp_path / "pkg")],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ruff.returncode == 0, ruff.stdout + ruff.stderr


# -- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    BAD_NAMES,
)
def test_init_refuses_a_name_that_cannot_name_a_package_with_one_line_and_writes_nothing(
    tmp_path: Path, name: str
) -> None:
    target = tmp_path / "driver"
    code, _out, err = _init(str(target), "--name", name)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "driver name" in err
    assert not target.exists() and _tree(tmp_path) == []


def test_init_refuses_a_non_empty_directory_with_one_line_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    code, _out, err = _init(str(tmp_path), "--name", "demo")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "not empty" in err, err
    assert _tree(tmp_path) == ["notes.txt"]


def test_init_refuses_a_path_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("mine", encoding="utf-8")
    code, _out, err = _init(str(target), "--name", "demo")
    assert code == 2 and "not a directory" in err, err
    assert target.read_text(encoding="utf-8") == "mine" and _tree(tmp_path) == ["file"]


def test_init_that_fails_halfway_leaves_nothing_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Path.write_text
    written: list[Path] = []

    def disk_full_on_the_third_file(self: Path, *args: object, **kwargs: object) -> int:
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(self)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", disk_full_on_the_third_file)
    code, _out, err = _init(str(tmp_path / "driver"), "--name", "demo")
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err, err
    assert len(written) == 2 and _tree(tmp_path) == [], "a failed init left files behind"


def test_init_refuses_an_unknown_style_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["init", str(tmp_path / "d"), "--name", "demo", "--style", "clever"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "--style" in err, err
    assert not (tmp_path / "d").exists()


# -- it certifies as generated ----------------------------------------------------------------


# A whole certification: the 120 s this checkout gives each test is too little on a busy machine.
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("style", list(DriverStyle))
def test_a_generated_driver_certifies_at_level_core_as_generated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: DriverStyle
) -> None:
    name = f"scaffolded_{style.value}"
    code, _out, err = _init(str(tmp_path / "pkg"), "--name", name, "--style", style.value)
    assert code == 0, err
    monkeypatch.syspath_prepend(str(tmp_path / "pkg" / "src"))
    result = run_suites(f"runlane_{name}_driver:harness", seed=0)
    failed = {
        req.id: "; ".join(f"{test.nodeid}: {test.message}" for test in req.failures)
        for req in result.requirements
        if req.outcome is not RequirementOutcome.PASSED and req.outcome is not RequirementOutcome.GATED
    }
    assert not failed, f"the {style.value} scaffold is not certified: {failed}"
    assert result.certified and result.level == "core"
    assert any(req.outcome is RequirementOutcome.PASSED for req in result.requirements)


# -- the CI workflow --------------------------------------------------------------------------


def test_init_writes_the_documented_workflow_with_only_the_driver_name_and_database_switch_changed(
    tmp_path: Path,
) -> None:
    code, _out, err = _init(str(tmp_path), "--name", "json_file")
    assert code == 0, err
    documented = DOCS_WORKFLOW.read_text(encoding="utf-8").splitlines()
    generated = (tmp_path / WORKFLOW).read_text(encoding="utf-8").splitlines()
    differing = [(d, g) for d, g in zip(documented, generated, strict=True) if d != g]
    assert differing == [
        ("  RUNLANE_DRIVER: mydriver", "  RUNLANE_DRIVER: json_file"),
        ('  RUNLANE_NEEDS_DSN: "true"', '  RUNLANE_NEEDS_DSN: "false"'),
    ]


def _workflow_files(tmp_path: Path) -> list[Path]:
    code, _out, err = _init(str(tmp_path / "pkg"), "--name", "demo")
    assert code == 0, err
    return [DOCS_WORKFLOW, tmp_path / "pkg" / WORKFLOW]


def test_the_workflows_pass_the_github_workflow_schema_offline(tmp_path: Path) -> None:
    # check-jsonschema's vendored copy of the schema: no network.
    for path in _workflow_files(tmp_path):
        check = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", SCHEMA, str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert check.returncode == 0, f"{path}: {check.stdout}{check.stderr}"


def test_every_job_asks_for_its_own_least_privilege() -> None:
    workflow = _workflow(DOCS_WORKFLOW)
    assert workflow["permissions"] == {}, "the workflow must grant nothing by default"
    jobs = workflow["jobs"]
    assert isinstance(jobs, dict)
    for name, job in jobs.items():
        assert "permissions" in job, f"job {name} does not declare its permissions"
    writes = {
        name: sorted(scope for scope, level in job["permissions"].items() if level == "write")
        for name, job in jobs.items()
    }
    assert writes == {
        "certify": [],
        "junit": ["checks"],
        "attest": ["attestations", "id-token"],
        "badge": ["contents"],
    }
    junit_steps = [step.get("uses", "") for step in jobs["junit"]["steps"]]
    assert any(uses.startswith("mikepenz/action-junit-report") for uses in junit_steps)
    assert not any("junit-report" in step.get("uses", "") for step in jobs["certify"]["steps"])


def test_no_secret_or_token_is_interpolated_into_a_command_line() -> None:
    for job in _workflow(DOCS_WORKFLOW)["jobs"].values():  # type: ignore[attr-defined]
        for step in job["steps"]:
            script = step.get("run", "")
            assert "${{" not in script, f"step {step.get('name')!r} puts an expression into its script"


def test_the_badge_job_keys_on_the_exit_status_before_touching_any_artifact() -> None:
    jobs = _workflow(DOCS_WORKFLOW)["jobs"]
    assert isinstance(jobs, dict)
    for name in ("badge", "junit"):
        condition = jobs[name]["if"]
        assert "needs.certify.outputs.status == '0'" in condition, name
        assert "needs.certify.outputs.status == '1'" in condition, name
    assert jobs["certify"]["outputs"]["status"] == "${{ steps.certify.outputs.status }}"
    publish = jobs["badge"]["steps"][-1]["run"]
    assert publish.index("runlane-badge.json ]") < publish.index("git init")


def _certify_step(tmp_path: Path, env: dict[str, str]) -> tuple[int, list[str], str, str]:
    """Run the workflow's Certify script with a stand-in ``runlane-certify`` that records its argv."""
    jobs = _workflow(DOCS_WORKFLOW)["jobs"]
    assert isinstance(jobs, dict)
    script = next(step["run"] for step in jobs["certify"]["steps"] if step.get("id") == "certify")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    argv_file = tmp_path / "argv"
    fake = bin_dir / "runlane-certify"
    fake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {argv_file}\nexit 1\n', encoding="utf-8")
    fake.chmod(0o755)
    output, summary = tmp_path / "output", tmp_path / "summary"
    result = subprocess.run(
        ["bash", "-e", "-c", script],
        env={
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "RUNLANE_DRIVER": "mydriver",
            **env,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    argv = argv_file.read_text(encoding="utf-8").splitlines() if argv_file.exists() else []
    return result.returncode, argv, output.read_text(encoding="utf-8"), result.stdout


def test_a_pull_request_without_the_secret_is_skipped_with_a_clear_message(tmp_path: Path) -> None:
    code, argv, output, stdout = _certify_step(tmp_path, {"RUNLANE_NEEDS_DSN": "true", "DSN": ""})
    assert code == 0 and argv == [], "a run without its secret must not start"
    assert "status=skipped" in output
    assert "RUNLANE_DSN secret is empty" in stdout


def test_the_dsn_reaches_the_driver_as_one_argument_whatever_it_contains(tmp_path: Path) -> None:
    dsn = "postgresql://u:p@h/db?sslmode=require&application_name=a b;echo pwned"
    code, argv, output, _stdout = _certify_step(tmp_path, {"RUNLANE_NEEDS_DSN": "true", "DSN": dsn})
    assert code == 1, "the exit status of the run is the step's"
    assert f"dsn={dsn}" in argv
    assert "status=1" in output


def test_a_driver_without_a_database_runs_without_the_secret(tmp_path: Path) -> None:
    code, argv, output, _stdout = _certify_step(tmp_path, {"RUNLANE_NEEDS_DSN": "false", "DSN": ""})
    assert code == 1 and argv[:3] == ["run", "--driver", "mydriver"]
    assert not any(arg.startswith("dsn=") for arg in argv)
    assert "status=1" in output


def test_the_ci_page_includes_the_workflow_file_instead_of_a_copy_that_could_drift() -> None:
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert '--8<-- "ci/certify.yml"' in page
    assert "runs-on:" not in page, "docs/ci.md carries its own copy of a workflow"


def test_init_into_the_current_directory_keeps_that_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = os.stat(tmp_path).st_ino
    code, _out, err = _init(".", "--name", "demo")
    assert code == 0, err
    assert os.stat(tmp_path).st_ino == before, "init replaced the directory the user is in"
    assert (tmp_path / "pyproject.toml").is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".runlane-init-")]


def test_init_into_an_empty_directory_that_fails_halfway_leaves_it_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = os.rename
    calls: list[object] = []

    def rename_fails_on_the_third_entry(src: object, dst: object) -> None:
        calls.append(src)
        if len(calls) == 3:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        original(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "rename", rename_fails_on_the_third_entry)
    code, _out, err = _init(str(tmp_path), "--name", "demo")
    assert code == 2 and "cross-device" in err, err
    assert _tree(tmp_path) == [], "a failed init left entries in the directory"


@pytest.mark.parametrize(
    ("toolkit", "installs"),
    [
        ("runlane-conformance @ git+https://github.com/YOUR-ORG/runlane-conformance@v0.1.0", False),
        ("", False),
        ("runlane-conformance", False),
        ("runlane-conformance>=0.1", False),
        ("runlane-conformance @ git+https://example.invalid/acme/runlane-conformance@v0.1.0", True),
        ("https://example.invalid/dist/runlane_conformance-0.1.0-py3-none-any.whl", True),
    ],
)
def test_the_workflow_installs_the_toolkit_only_from_a_pinned_requirement(
    toolkit: str, installs: bool
) -> None:
    # The install step's guard, run as the runner runs it: a placeholder, an empty value or a bare name
    # (which a package index could serve from anyone) stops the job before pip is called.
    steps = _workflow(DOCS_WORKFLOW)["jobs"]["certify"]["steps"]  # type: ignore[index]
    (install,) = [step for step in steps if "TOOLKIT" in step.get("env", {})]
    script = install["run"]
    guard = script[script.index('case "$TOOLKIT" in') : script.index("esac") + len("esac")]
    assert "runlane-conformance}" not in script, "no fallback to an unpublished name"
    done = subprocess.run(
        ["bash", "-c", guard + "\necho INSTALL"],
        env={"TOOLKIT": toolkit, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=False,
    )
    assert ("INSTALL" in done.stdout) is installs, done.stdout + done.stderr
    assert (done.returncode == 0) is installs
