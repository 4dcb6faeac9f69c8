"""FinOps (SPEC §8): judge prices (`pricing`), the cost ledger (`ledger`), budgets and the
preflight (`budget`), and what the ledger says to people (`costs`)."""
