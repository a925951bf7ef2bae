"""Evaluation with known ground truth: per-sample MIA methods, metrics, benchmarks and
the built-in testbeds (TDDBench Sec. 3; EZ-MIA Sec. 4)."""
