import sys

from dpfair_analysis.cli import main

sys.exit(main())
