"""A workflow's progress counted from its Stampede events (pegasus-status's numbers)."""
