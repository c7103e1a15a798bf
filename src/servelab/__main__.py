"""`python -m servelab` runs the command-line interface."""

from servelab.cli import main

main()
