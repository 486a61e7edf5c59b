"""`streamer COMMAND --help`: what each command takes, its examples and exit codes.

Only the text lives here (each command's module declares its options); each command's epilog
lists the URL forms and URL options it accepts, nothing it does not.
"""

from __future__ import annotations

from streamer.util.exitcodes import help_block

DEST_URLS = """\
endpoint URLs (--dest, repeatable):
  file:///abs/events.jsonl      JSON lines, monitord's AMQP form (keys with . -> _)
  file:///abs/events.bp         NetLogger BP lines (the suffix decides, or ?encoding=json|bp)
  /abs/events.bp, out.jsonl     a bare path is a file (its directory must exist)
  -  or  term:                   the terminal (--dest '-?events=stampede.xwf.*' works)
  amqp://user:pass@host:5672/vhost/exchange   RabbitMQ topic exchange (amqps:// for TLS)
  postgresql://user@host:5432/db              Stampede schema, created if missing
  sqlite:///relative.db  sqlite:////abs.db    Stampede schema, embedded
  mysql://user:pass@host:3306/db              Stampede schema in MySQL / MariaDB (mariadb:// too)
  (database endpoints: --upgrade-schema upgrades an older Stampede schema, else it is refused)

URL options (?name=value&..., or keys of an [[endpoint]] table in --config):
  every endpoint   events=PATTERNS  buffer=N (50000)  batch=N (5000)  overflow=BYTES|off (1G)
                   overflow_dir=DIR  password_file=PATH  password_env=NAME
  file             encoding=json|bp  mode=append|truncate  fsync=true|false  spool=DIR (below)
  terminal         format=pretty|bp|json  color=auto|always|never  fields=compact|all
  amqp, amqps      exchange_type=topic  durable=true  declare=true|passive|false
                   routing_key=event|underscore  mandatory=true  heartbeat=60  connect_timeout=10
                   confirm_timeout=30  retry_max=30  drain_timeout=300  window=2000
                   spool=DIR|off  spool_size=1G  cafile=  certfile=  keyfile=  verify=true
  postgresql       retry_for=300  connect_for=30  replay=true|false  upgrade_schema=true
                   wait_parents=SECONDS
  sqlite           busy_timeout=SECONDS  synchronous=off|normal|full  replay=true|false
  mysql, mariadb   retry_for=300  connect_for=30  replay=true|false  upgrade_schema=true
  spooling         (postgresql, mysql, file) spool=DIR: batches the server cannot take for
                   spool_grace=5 seconds wait in DIR (fsync'd, spool_size=1G) and are replayed
                   in order once it is back, first thing in the next run; drain_timeout=300
                   (by default a server never reached, or away at Ctrl-C/SIGTERM, is not
                   waited for: the spool stays for the next run; given, it is waited for)
"""

FILTERS = """\
filters (?events=, --events): comma-separated globs, OR-ed; * matches any run
of characters (dots too), ? one character, !pattern excludes.
  'stampede.xwf.*,stampede.inv.end'   'stampede.job_inst.*,!stampede.job_inst.image.info'
"""

EXIT_LOAD = help_block("load")
EXIT_MONITOR = help_block("replay")
EXIT_TAIL = help_block("tail")

EPILOGS = {
    "load": DEST_URLS + "\n" + FILTERS + """
examples:
  streamer load run.bp --dest file:///tmp/all.jsonl --dest 'file:///tmp/wf.bp?events=stampede.xwf.*'
  streamer load run.bp --follow --checkpoint run.ckpt --dest amqp://guest:guest@localhost:5672/%2F/pegasus
  streamer load montage.bp --dest postgresql://postgres@localhost/stampede
  streamer load provdb/anomalies.jsonl provdb/func_stats.json --dest postgresql://postgres@localhost/prov

""" + EXIT_LOAD,
    "tail": """\
sources:
  FILE                            a .bp / .jsonl event file (or a Chimbuko provenance export)
  amqp://user:pass@host/vhost/exchange   a RabbitMQ exchange, read through a private queue
                                  (--queue NAME reads and consumes an existing durable queue)

""" + FILTERS + """
examples:
  streamer tail /tmp/all.jsonl                                   # new events, like tail -F
  streamer tail /tmp/all.bp --from-start --no-follow --events 'stampede.job_inst.main.end'
  streamer tail /tmp/all.bp --format json                        # or bp; pretty is the default
  streamer tail amqp://guest:guest@localhost/%2F/pegasus --events 'stampede.job_inst.*'
  streamer tail provdb/anomalies.jsonl --from-start --no-follow  # function, rank, step, runtime, score

""" + EXIT_TAIL,
    "replay": DEST_URLS + "\n" + FILTERS + """
examples:
  streamer replay /path/to/submit/dir            # jobstate.log + <dag>.stampede.db, like monitord -r
  streamer replay run0001 --dest - --timezone America/Los_Angeles
  streamer replay run0001 --dest postgresql://postgres@localhost/stampede --no-jobstate
  streamer replay /archive/run0001 --no-jobstate --state /tmp/run0001.state --dest out.jsonl  # read-only dir
  streamer replay /path/to/dag/jobstate.log      # a plain DAG's JOBSTATE_LOG -> <dag>.stampede.db

time zones (--timezone): an IANA name (America/Los_Angeles, Europe/Berlin), UTC, or a fixed
offset (-08:00, +0530); by default the offset the workflow recorded (braindump.yml's timestamp).

""" + EXIT_MONITOR,
    "follow": DEST_URLS + "\n" + FILTERS + """
examples:
  streamer follow /path/to/submit/dir            # live, until DAGMan exits
  streamer follow run0001 --dest amqp://guest:guest@localhost/%2F/pegasus --dest -
  streamer follow run0001/process-0.dag.dagman.out --keep-alive   # and wait for a rescue DAG's restart

time zones (--timezone): an IANA name, UTC, or a fixed offset (-08:00); by default the
offset the workflow recorded (braindump.yml's timestamp).

""" + EXIT_MONITOR,
    "demo": """\
example:
  streamer demo --out /tmp/streamer-demo   # a small workflow with a retry, a held job and a sub-workflow
  streamer demo --live --out /tmp/live      # a workflow that grows for 60 s: try follow, tail, status --watch

""" + help_block("demo"),
}


def epilog(command: str) -> str:
    return EPILOGS[command]
