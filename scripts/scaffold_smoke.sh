#!/usr/bin/env bash
# End to end, as a new driver author would: build the toolkit's wheel, install it into a fresh virtual
# environment outside this checkout, `runlane-certify init` a package in each style, pip-install it,
# certify it with `runlane-certify run --driver NAME --profile quick`, run its own pytest, and
# type-check it with mypy --strict. Fails on the first step that fails. Slow (two full certifications
# and two pytest runs of every suite), so it is a CI step, not a test:
#   bash scripts/scaffold_smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

step() { echo "== scaffold smoke: $* ($(date +%T))"; }

step "build the toolkit's wheel"
python -m build --wheel --outdir "$work/dist" "$root" >/dev/null
python -m venv "$work/venv"
pip=("$work/venv/bin/python" -m pip install -q --disable-pip-version-check)
"${pip[@]}" "$work"/dist/runlane_conformance-*.whl mypy

for style in lock optimistic; do
  name="smoke_${style}"
  package="$work/packages/$name"
  step "init --style $style"
  (cd "$work" && "$work/venv/bin/runlane-certify" init "$package" --name "$name" --style "$style")
  step "pip install the $style scaffold"
  "${pip[@]}" -e "$package"
  step "runlane-certify run --driver $name --profile quick"
  (cd "$package" && "$work/venv/bin/runlane-certify" run --driver "$name" --profile quick --workers auto \
    --report "$work/$name.json")
  step "the $style scaffold's own pytest"
  (cd "$package" && "$work/venv/bin/python" -m pytest -q)
  step "mypy --strict on the $style scaffold"
  (cd "$package" && "$work/venv/bin/python" -m mypy --strict src)
done
step "passed"
