-- Recall keeps the sign bits of every vector in memory (chalie/memory/bit_index.py) and reads
-- them from `vectors`, every transcript message included: the sqlite-vec bit indexes
-- (vec_index_<space>, one a vector space, named at run time) are dropped by the Python step of
-- this migration in chalie/store/db.py (_drop_bit_indexes).
SELECT 1;
