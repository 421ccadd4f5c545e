"""Test beds for tilegraph: :mod:`tilegraph.testing.cluster` emulates many hosts on one Linux
machine (network namespaces joined by a bridge, a private ``/tmp`` per host, links of a set
latency and bandwidth). Nothing in the package imports this subpackage; it is for tests,
benchmarks and anyone who wants to see a program meet a network before a real cluster."""
