"""Tests: a package, so that test helpers are imported by their module path (tests.cref, tests.formats.formats_testlib, ...)."""
