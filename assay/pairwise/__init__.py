"""Pairwise A/B comparison (SPEC §8): `compare` (the comparison), `report` (its record) and
`render`."""
