"""The generated reference pages of the documentation (docs/reference/), one module a page.

scripts/gen_reference.py writes them and checks them; each module here turns one source of
truth into Markdown: config/chalie.toml and its comments (configuration), the OpenAPI document
of GET /api/openapi.json (rest), the msgspec frame structs of /ws (ws_frames), the Prometheus
registry of chalie.metrics (metrics). markdown.py holds what they share: escaping, paragraphs,
tables, anchors.
"""
