"""The documentation's tools: the reference generated from the code's declarations, and the link check.

`python -m streamer.docs` writes `docs/reference/{urls,events,exit-codes,metrics}.md` from the endpoints' declared
options (`endpoints/options.py`, each class's `schemes` and `declared_options`), the event schema
(`events/schema.py`, `events/chimbuko/`), the exit codes (`util/exitcodes.py`) and the metrics (`run/metrics.py`);
`tests/docs/` checks that the committed pages are current and that every relative link resolves.
An application-level tool: it imports the layers it describes, nothing imports it.
"""
