"""`python -m streamer`."""

import sys

from streamer.cli.entry import main

sys.exit(main())
