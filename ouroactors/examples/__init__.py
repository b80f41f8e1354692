"""Small workers used by the shipped example trees, the demo, tests and benchmarks."""
