"""What the benchmark scripts share: where and how a measurement ran (``machine``: commit, load,
medians of repeats, commands in fresh processes, phase clocks) and a backend that answers each text
once (``memo``). Importable beside the scripts (``python benchmarks/SCRIPT.py`` puts this folder on
the path; the tests add it through pytest's ``pythonpath``); never part of the library or the wheel."""
