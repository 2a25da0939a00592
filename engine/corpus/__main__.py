"""``python -m engine.corpus build [--out PATH] [--tarball PATH]``: see ``engine.corpus.build``."""

import sys

from engine.corpus.build import main

sys.exit(main())
