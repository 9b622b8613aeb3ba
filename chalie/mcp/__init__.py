"""MCP servers lend Chalie their tools.

`McpConnection` keeps one server connected (the official SDK, on its own thread and asyncio
loop), publishes its tools in the ToolCatalog and restarts it with backoff when it fails;
`McpTool` is one of those tools; `results` turns what a call answers into text for the model.
The core floor: nothing here knows about actors or the edge.
"""
