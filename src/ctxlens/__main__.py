import sys

from ctxlens.cli import main

sys.exit(main())
