"""Stampede databases: the loader (events -> rows), the plan, ids and one module per server."""
