import sys

from tb_opcompare.cli.main import main

sys.exit(main())
