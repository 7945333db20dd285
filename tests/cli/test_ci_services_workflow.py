"""The database-driver workflow (docs/ci/certify-services.yml): a service container instead of a DSN secret.

It is judged like docs/ci/certify.yml (tests/cli/test_init.py): GitHub's workflow schema (offline,
check-jsonschema's vendored copy), least privilege, nothing pasted into a script. On top of that it
must need no secret at all, so a pull request from a fork is certified like any other run, and its
job may start its steps only once the database answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "ci" / "certify-services.yml"
SCHEMA = "vendor.github-workflows"


def workflow() -> dict[str, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def certify_job() -> dict[str, Any]:
    job: dict[str, Any] = workflow()["jobs"]["certify"]
    return job


def test_the_services_workflow_passes_the_github_workflow_schema_offline() -> None:
    check = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", SCHEMA, str(WORKFLOW)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_it_grants_nothing_by_default_and_the_driver_s_job_only_reads() -> None:
    assert workflow()["permissions"] == {}
    for name, job in workflow()["jobs"].items():
        assert "write" not in job["permissions"].values(), name


def test_it_uses_no_secret_so_fork_pull_requests_are_certified_too() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text
    for step in certify_job()["steps"]:
        script = step.get("run", "")
        assert "${{" not in script, f"step {step.get('name')!r} puts an expression into its script"


def test_postgresql_and_redis_start_as_services_the_steps_wait_for() -> None:
    services = certify_job()["services"]
    assert set(services) == {"postgres", "redis"}
    for name, service in services.items():
        assert "--health-cmd" in service["options"], f"{name} has no health check: steps may start too early"
        assert service["ports"], f"{name} publishes no port for the driver to reach"
    assert services["postgres"]["ports"] == ["5432:5432"]
    assert services["redis"]["ports"] == ["6379:6379"]
    option = workflow()["env"]["RUNLANE_OPTION"]
    assert option.startswith("dsn=postgresql://") and "@127.0.0.1:5432/" in option


def test_the_toolkit_comes_only_from_a_pinned_requirement_written_in_the_workflow() -> None:
    install = next(step for step in certify_job()["steps"] if "TOOLKIT" in step.get("env", {}))
    assert " @ git+https://" in install["env"]["TOOLKIT"]
    assert '*" @ "*@*|*.whl) ;;' in install["run"], "an unpinned requirement must be refused"


def test_the_certify_step_passes_the_option_as_one_argument_and_keeps_the_exit_status(tmp_path: Path) -> None:
    script = next(step["run"] for step in certify_job()["steps"] if step.get("id") == "certify")
    bin_dir, argv_file, output = tmp_path / "bin", tmp_path / "argv", tmp_path / "output"
    bin_dir.mkdir()
    fake = bin_dir / "runlane-certify"
    fake.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {argv_file}\nexit 1\n', encoding="utf-8")
    fake.chmod(0o755)
    option = "dsn=postgresql://u:p@127.0.0.1:5432/db?application_name=a b;echo pwned"
    result = subprocess.run(
        ["bash", "-e", "-c", script],
        env={
            "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output),
            "RUNNER_TEMP": str(tmp_path),
            "RUNLANE_DRIVER": "mydriver",
            "RUNLANE_OPTION": option,
        },
        capture_output=True,
        text=True,
        check=False,
    )
    argv = argv_file.read_text(encoding="utf-8").splitlines()
    assert result.returncode == 1 and "status=1" in output.read_text(encoding="utf-8")
    assert argv[:3] == ["run", "--driver", "mydriver"]
    assert argv[argv.index("--option") + 1] == option
    assert argv[argv.index("--sandbox-network") + 1] == "host"
    assert argv[argv.index("--html") + 1] == "runlane-report.html"


def test_the_ci_page_includes_the_services_workflow_file() -> None:
    page = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    assert '--8<-- "ci/certify-services.yml"' in page
