"""The corpus scripts are data for the tests: never import them (doctest collection would
run them)."""

collect_ignore_glob = ["corpus/*"]
