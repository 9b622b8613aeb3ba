"""pykka actors: one owner per piece of mutable state, under a supervisor tree."""
