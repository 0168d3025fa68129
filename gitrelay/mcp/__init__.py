"""The MCP server (`gitrelay mcp`): tools, prompts, resources and their answer models."""
