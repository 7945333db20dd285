"""``runlane-certify``: certify a Runlane storage driver against the storage contract.

Exit codes are part of the interface, so CI can branch on them:

* 0 -- certified: every applicable MUST requirement passed;
* 1 -- at least one MUST requirement failed (the run itself was fine);
* 2 -- usage or driver-loading problem, reported on one line without a traceback;
* 3 -- the run itself broke (the suites could not be collected, pytest or the toolkit failed);
* 4 -- inconclusive: nothing failed, but a check could not finish inside its deadline, so there is
  no verdict (give it more time with ``--check-timeout`` or the machine less to do with ``--workers``);
* 130 -- interrupted (Ctrl-C or SIGTERM); a ``--report`` is still written, marked interrupted.

From the moment ``run`` starts, its ``--report`` and ``--junit`` files say "running" (an
earlier file there is replaced at once), and a run that ends without a verdict leaves them
marked broken (exit 2 or 3) or interrupted (130): a file at those paths is never an earlier
run's. ``-`` (or ``/dev/stdout``) writes a machine output to standard output; all human
output then goes to standard error. Before any output is written, every process the driver
left behind is ended (``run.reaper``).

A run restricted with ``--area`` or ``--requirement`` is never a certification:
it exits 0 when everything that ran passed, 1 otherwise, and its report is
marked partial (``badge`` refuses it).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from . import init_cmd
from .badge_cmd import badge
from .check_history_cmd import check_history_command
from .common import ExitCode, console, own_process, shown
from .help_format import hide_flag_types
from .html_cmd import html_command
from .list_cmd import list_drivers
from .report_cmd import report_command
from .requirements_cmd import requirements_command
from .run_cmd import run
from .schema_cmd import schema
from .termination import interrupt_on_termination, release_termination
from .version import version_text

__all__ = ["ExitCode", "app", "console", "main"]

hide_flag_types()

app = typer.Typer(
    name="runlane-certify",
    help="Certify a Runlane storage driver against the storage contract.\n\n"
    "Exit codes: 0 certified, 1 a requirement failed, 2 usage or driver-loading error, "
    "3 the run itself broke, 4 inconclusive (a check could not finish in time), 130 interrupted.\n\n"
    "Shell completion: run [bold]runlane-certify --install-completion[/bold] once, then open a new shell.",
    no_args_is_help=True,
    # Typer's own completion: --install-completion / --show-completion for bash, zsh, fish, PowerShell.
    add_completion=True,
    # -h works wherever --help does, on the app and on every command.
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit(0)


@app.callback()
def _root(
    context: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            help="Print the toolkit version and exit.",
            callback=_show_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Options of the program itself (the app's help text above is what users see)."""
    if context.invoked_subcommand != "run":
        release_termination()  # ``run`` releases SIGTERM once its outputs say running


# One module per command (cli/*_cmd.py); here they are only registered, in the order --help lists them.
app.command()(run)
app.command("report")(report_command)
app.command("list")(list_drivers)
app.command()(schema)
app.command()(badge)
app.command("html")(html_command)
app.command("requirements")(requirements_command)
app.command("check-history")(check_history_command)
app.command("init")(init_cmd.init)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: like the typer app, but command-line mistakes are one line too.

    The process it runs in is the CLI's own, so ``run`` and ``report`` may adopt and end every
    process the driver leaves behind (see ``common.own_process``).
    """
    own_process()
    interrupt_on_termination()
    command = typer.main.get_command(app)
    try:
        code = command.main(args=list(argv) if argv is not None else None, standalone_mode=False)
    except Exception as error:
        # typer may vendor click, so its usage errors are recognised by shape: exit_code 2 and a message.
        show = getattr(error, "show", None)
        format_message = getattr(error, "format_message", None)
        if type(error).__name__ == "NoArgsIsHelpError" and callable(show):
            show()
            sys.exit(int(ExitCode.USAGE))
        if getattr(error, "exit_code", None) == 2 and callable(format_message):
            context = getattr(error, "ctx", None)
            path = str(getattr(context, "command_path", "") or "runlane-certify")
            message = " ".join(shown(format_message()).split())
            typer.echo(f"runlane-certify: error: {message} (see: {shown(path)} --help)", err=True)
            sys.exit(int(ExitCode.USAGE))
        if isinstance(error, typer.Abort) or type(error).__name__ == "Abort":
            typer.echo("runlane-certify: interrupted", err=True)
            sys.exit(130)
        raise
    sys.exit(code if isinstance(code, int) else 0)
