"""``[tool.runlane]``: ``run``'s options kept in ``pyproject.toml`` instead of typed every time.

A driver project usually certifies the same way each time (its driver name, a DSN, the profile it
targets, its declared known failures), so those live in the project's own ``pyproject.toml``::

    [tool.runlane]
    driver = "mydriver"
    profile = "default"
    workers = "auto"

    [tool.runlane.options]
    dsn = "postgresql://127.0.0.1/test"

    [tool.runlane.expect-fail]
    "conflicts.lost-update" = "optimistic retries not done yet"

The section is read from ``pyproject.toml`` in the current directory, or from the file ``--config``
names. A command-line flag always wins: ``--driver``, ``--profile`` and ``--workers`` replace the
file's value, and ``--option`` / ``--expect-fail`` override the file's entry for the same key or
requirement while the file's other entries still apply. Anything the section holds that this
toolkit does not understand (an unknown key, a value of the wrong type) is refused in one line
before the run, never ignored: a typo silently dropped would certify a different configuration.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..contract.errors import RunlaneError
from ..run.scaling import AUTO, parse_workers
from ..suggest import did_you_mean

__all__ = ["CONFIG_KEYS", "ConfigError", "RunConfig", "RunSettings", "load_run_config", "resolve_run"]

#: The keys ``[tool.runlane]`` may hold, each named like ``run``'s flag.
CONFIG_KEYS: tuple[str, ...] = ("driver", "options", "profile", "workers", "expect-fail")

#: The ``run`` defaults that apply when neither the flag nor the file gives a value.
DEFAULT_PROFILE = "quick"
DEFAULT_WORKERS = 1


class ConfigError(RunlaneError, ValueError):
    """The configuration could not be used: unreadable file, bad TOML, unknown key or wrong type.

    The message is one line naming the file, the key and the fix.
    """


@dataclass(frozen=True)
class RunConfig:
    """What ``[tool.runlane]`` says (``None``: the key is absent); ``source`` names where it was read."""

    source: str | None = None
    driver: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    profile: str | None = None
    workers: int | Literal["auto"] | None = None
    expect_fail: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSettings:
    """``run``'s options after the command line and the file are combined (flags first).

    ``options`` and ``expect_fail`` are in the command line's own ``KEY=VALUE`` / ``ID=REASON``
    form, so they go through the same parsing, and the same errors, as typed flags.
    """

    driver: str
    options: tuple[str, ...]
    profile: str
    workers: int | Literal["auto"]
    expect_fail: tuple[str, ...]
    source: str | None


def _option_value(where: str, key: object, value: object) -> str:
    if not isinstance(key, str) or not key.strip():
        raise ConfigError(f"{where}: option names must be non-empty strings")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(
        f"{where}: option {key!r} must be a string, number or boolean, not {type(value).__name__}"
    )


def _table(where: str, name: str, value: object) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{where}: {name!r} must be a table ([tool.runlane.{name}]), not {type(value).__name__}"
        )
    return value


def parse_run_config(section: object, source: str) -> RunConfig:
    """Check a ``[tool.runlane]`` table (as ``tomllib`` parsed it) and return what it sets."""
    where = f"{source} [tool.runlane]"
    if not isinstance(section, dict):
        raise ConfigError(f"{where} must be a table, not {type(section).__name__}")
    for key in section:
        if key not in CONFIG_KEYS:
            hint = did_you_mean(str(key), CONFIG_KEYS, otherwise=f"keys: {', '.join(CONFIG_KEYS)}")
            raise ConfigError(f"{where}: unknown key {key!r}{hint}")
    driver = section.get("driver")
    if driver is not None and (not isinstance(driver, str) or not driver.strip()):
        raise ConfigError(
            f"{where}: 'driver' must be a non-empty string (an installed name or module:factory)"
        )
    profile = section.get("profile")
    if profile is not None and not isinstance(profile, str):
        raise ConfigError(f"{where}: 'profile' must be a string (quick, default or thorough)")
    workers = section.get("workers")
    if workers is not None:
        try:
            if isinstance(workers, str) and workers.strip().lower() != AUTO:
                raise ValueError(workers)  # a count is a TOML integer, not a string
            workers = parse_workers(workers)
        except ValueError:
            raise ConfigError(
                f"{where}: 'workers' must be a positive integer or \"auto\", got {workers!r}"
            ) from None
    options = {
        key: _option_value(where, key, value)
        for key, value in _table(where, "options", section.get("options", {})).items()
    }
    expect_fail: dict[str, str] = {}
    for requirement, reason in _table(where, "expect-fail", section.get("expect-fail", {})).items():
        if not isinstance(reason, str) or not reason.strip():
            raise ConfigError(
                f"{where}: expect-fail {requirement!r} needs a reason string saying why it fails"
            )
        expect_fail[requirement] = reason
    return RunConfig(source, driver, options, profile, workers, expect_fail)


def load_run_config(explicit: Path | None, directory: Path) -> RunConfig:
    """The ``[tool.runlane]`` of ``explicit`` (which must exist and hold the section), or of
    ``directory/pyproject.toml`` when it exists (no section there: nothing configured)."""
    path = explicit if explicit is not None else directory / "pyproject.toml"
    if explicit is None and not path.is_file():
        return RunConfig()
    shown = str(path) if explicit is not None else "pyproject.toml"
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {shown!r} does not exist") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {shown!r}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as error:
        raise ConfigError(f"{shown} is not valid TOML: {error}") from None
    tool = document.get("tool", {})
    section = tool.get("runlane") if isinstance(tool, dict) else None
    if section is None:
        if explicit is not None:
            raise ConfigError(f"{shown} has no [tool.runlane] section")
        return RunConfig()
    return parse_run_config(section, shown)


def _key(pair: str) -> str:
    return pair.partition("=")[0].strip()


def resolve_run(
    config: RunConfig,
    *,
    driver: str | None,
    options: Sequence[str],
    profile: str | None,
    workers: int | Literal["auto"] | None,
    expect_fail: Sequence[str],
) -> RunSettings:
    """Combine flags and file: a flag wins, per key for options and per requirement for known failures.

    Raises ``ConfigError`` when neither gives a driver.
    """
    chosen = driver if driver is not None else config.driver
    if chosen is None:
        where = (
            f" or set driver in {config.source} [tool.runlane]"
            if config.source
            else (" (or set driver in [tool.runlane] of ./pyproject.toml)")
        )
        raise ConfigError(f"no driver given: pass --driver NAME{where}")
    # Later pairs win when the options are parsed, so the flags go last.
    merged_options = tuple(f"{key}={value}" for key, value in config.options.items()) + tuple(options)
    typed = {_key(pair) for pair in expect_fail}
    merged_expected = tuple(
        f"{rid}={reason}" for rid, reason in config.expect_fail.items() if rid not in typed
    ) + tuple(expect_fail)
    return RunSettings(
        driver=chosen,
        options=merged_options,
        profile=profile if profile is not None else (config.profile or DEFAULT_PROFILE),
        workers=workers if workers is not None else (config.workers or DEFAULT_WORKERS),
        expect_fail=merged_expected,
        source=config.source,
    )
