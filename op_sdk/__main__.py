import sys

from op_sdk.cli import main

sys.exit(main())
