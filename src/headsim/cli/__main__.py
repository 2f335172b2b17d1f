"""``python -m headsim.cli``."""

from . import main

main()
