import sys

from op_sdk_cli import main

sys.exit(main())
