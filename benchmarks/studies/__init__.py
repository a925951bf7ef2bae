"""The studies behind the committed results (``benchmarks/results/``), one module per study, each
over the library: what it computes, its definitions and the papers' equations. Each script of
``benchmarks/`` is the command that runs one (benchmarks/README.md maps claims to commands and
results). Never part of the library or the wheel."""
