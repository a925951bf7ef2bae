"""`python -m trainspotter.flows.cli ARGS`: the `trainspotter` command."""

from trainspotter.flows.cli.command import main

main()
