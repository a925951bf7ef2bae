"""The benchmark a user runs on a testbed with known ground truth (TDDBench Sec. 3; EZ-MIA Sec. 4;
BADI Sec. 5.1): per-sample MIA methods (``mia``, ``mia_scores``, ``query_based``, ``learning_based``;
their index, ``method_index``) and their metrics (``metrics``), TDDBench's protocol (``tddbench``),
the benchmark of methods and dataset-inference configurations (``benchmark``, ``benchmark_cost``,
``benchmark_di``, ``benchmark_tables``, ``plots``) and the ``--suite`` suites (``shift_suite``,
``twins_suite``, ``keyed_suite`` with ``keyed_suite_report``). What measures the project itself (its
timings, the studies behind committed tables) is the repository's ``benchmarks/``, not this package.
"""

MAY_IMPORT = ("backends", "features", "stats", "rewriters", "proofs", "twins", "auditing", "record", "loop", "keyed",
              "testbeds")  # besides the foundation (tests/unit/test_layering.py)
