"""Tools the ACT loop can call: the innate ones and the catalog every provider's tools join.

The core floor: nothing here knows about actors or the edge."""
