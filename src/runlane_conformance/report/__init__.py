"""The certification report, as its own layer above ``run/``.

* ``model``: the document's typed shape (``ResultsReport``, ``UnfinishedReport``);
* ``schema``: its JSON Schema, shipped as the data file ``schema.json``, and validation;
* ``builder``: a ``RunResult`` (or a run without one) becomes a document;
* ``verify``: the claim ``badge`` recomputes from a report's own content before vouching for it;
* ``states``: a run's report and JUnit files from start to exit (running, then finished or abandoned);
* ``files``: atomic writes, output targets (``-`` is standard output), reading a report back;
* ``junit`` and ``badge``: renderers that read only the document.

Nothing here prints to a terminal or knows the command line: ``cli/`` does that.
"""
