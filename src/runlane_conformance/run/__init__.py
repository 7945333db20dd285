"""How a certification run is made: request -> plan -> supervise -> verdict.

* ``request``: the one frozen ``RunRequest`` the CLI builds from its flags and configuration;
* ``plan``: which checks the driver's profile requires, decided before anything runs;
* ``child`` / ``events``: the pytest process that runs checks and streams what happens, as the typed
  events of ``child_events`` (their one encoding, used by both ends of the pipe);
* ``supervise`` / ``children`` / ``scheduling``: the parent's dispatch loop, its child processes and
  deadlines, and the order checks are handed out in;
* ``verdict`` / ``certification``: check outcomes -> requirement outcomes -> certification -> the
  run's one ``Verdict`` (the certification is also recomputed by ``badge``);
* ``model``: the values all of these exchange.
"""
