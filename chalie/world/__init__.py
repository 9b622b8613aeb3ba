"""World state: signals from other programs, their salience and decay."""
