"""`streamer status`: pegasus-status's numbers, from a submit dir, an event file or an AMQP stream.

- `counts.py`    one DAG's progress counts and pegasus-status's JSON document
- `progress.py`  the progress tables of `*.dag.dagman.out` files, read as pegasus-status reads them
- `tracker.py`   the same counts (and per-job rows, failures) computed from Stampede events
- `text.py`      plain text: pegasus-status's table, per-DAG and per-job rows (--long)
- `live.py`      the rich live view (--watch) and its plain-line fallback
- `command.py`   what `streamer status` runs for each kind of source
"""
