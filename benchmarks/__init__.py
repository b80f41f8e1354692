"""Benchmarks of ouroactors against raw thespian on the same base (multiprocTCPBase).

Run ``python -m benchmarks.bench_supervision [--quick]`` from the repository root; see README.md.
"""
