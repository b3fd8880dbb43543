import sys

from lnorm.cli import main

sys.exit(main())
