import sys

from canlib.cli import main

sys.exit(main())
