"""Checks of the repository as a whole: typing and lint, CI's contract, the test mirror."""
