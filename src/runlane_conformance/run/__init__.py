"""How a certification run is made: plan -> supervise -> verdict.

* ``plan``: which checks the driver's profile requires, decided before anything runs;
* ``child`` / ``events``: the pytest process that runs checks and streams what happens;
* ``supervise``: the parent that starts children, enforces deadlines and survives any of them dying;
* ``verdict``: check outcomes -> requirement outcomes -> certification (also used by ``badge``);
* ``model``: the values all of these exchange.
"""
