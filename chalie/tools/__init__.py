"""Tools the ACT loop can call: innate ones here, interface tools later, one registry."""
