"""ucudnn-bench: measured speedups on DeepBench problems and built-in suites."""
