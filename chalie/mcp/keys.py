"""An MCP server's key in the ToolCatalog. Apart from connection.py so that the edge can name a
server's tools without importing the MCP SDK."""


def provider_key(name: str) -> str:
    return f"mcp:{name}"
