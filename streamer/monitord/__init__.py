"""`streamer monitord`: a drop-in for `pegasus-monitord`.

pegasus-dagman starts `pegasus-monitord -N <dagman.out>` from `$PEGASUS_HOME/bin`
(then `PATH`); monitord finds everything else itself: the braindump, the
properties file it names, the endpoints, the notify file, the user's master
(dashboard) database. This package gives streamer that entry:

- `options.py`     monitord 5.x's command line (every option accepted)
- `properties.py`  properties found where monitord finds them; endpoints and settings from them
- `files.py`       monitord.pid / .started / .done / .log
- `notify.py`      the notify file and its `when` conditions matched on Stampede events
- `notifier.py`    the notifications endpoint: scripts as asyncio subprocesses
- `dashboard.py`   the master workflow database pegasus-dashboard reads
- `launcher.py`    `streamer install-monitord DIR`
- `command.py`     the run itself
"""
