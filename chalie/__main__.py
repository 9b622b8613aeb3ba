import sys

from chalie.cli import main

sys.exit(main())
