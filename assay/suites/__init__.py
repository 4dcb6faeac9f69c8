"""Suites: the versioned golden data sets (`suite`) and their content-addressed registry."""
