"""World state: signals from other programs, their salience and decay.

The bottom of the core floor: it imports only the ground floor."""
