"""Helpers shared by the tests (not collected): small series and sites, the safety and
reliability case generators, the release fixture, the action runner, the upstream table."""
