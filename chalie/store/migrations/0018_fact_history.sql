-- Knowledge that updates (issue 39): a fact may supersede current facts under other keys
-- ("city: Porto" over "home: Lisbon"), and recall shows a current fact with what it replaced.
-- The facts a fact superseded, found by it.
CREATE INDEX knowledge_superseded_by ON knowledge (superseded_by) WHERE superseded_by IS NOT NULL;
