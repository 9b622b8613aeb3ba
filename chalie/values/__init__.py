"""The plain values the store and the core share, on the ground floor.

The store writes and reads them; the core reasons with them; neither owns them, so neither has
to import the other for them. Each is a frozen struct (or a pure function over one) with no
behaviour that needs a connection, a clock or a model: what memory is made of and its one
integer key (`memory`), knowledge keys in their one spelling (`keys`), a trait, a concept and a
link with their decay (`cognition`), an image the person attached (`images`) and a signal as
world state keeps it (`signals`). A type only the store uses is a row type in `chalie/store/`;
a type only the core uses stays in its package.
"""
