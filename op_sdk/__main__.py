import sys

from op_sdk.app.cli import main

sys.exit(main())
