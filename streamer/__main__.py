"""`python -m streamer`."""

import sys

from streamer.cli.main import main

sys.exit(main())
