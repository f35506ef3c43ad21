"""The official Python MCP SDK's streamable HTTP client against a running Loom.

usage: mcp_sdk_client.py URL TOKEN
Initializes (the SDK probes server/discover first and falls back to
initialize), lists the tools, calls loom_memory_set then loom_memory_get, and
prints one JSON line with what it saw. Exits non-zero on any mismatch.
"""
import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


def field(obj, *names):
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return None


async def main(url: str, token: str) -> int:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        wrote = await client.call_tool(
            "loom_memory_set", {"memory_key": "sdk_check", "content": "written by the Python SDK"}
        )
        read = await client.call_tool("loom_memory_get", {"memory_key": "sdk_check"})
        read_struct = field(read, "structured_content", "structuredContent") or {}
        out = {
            "tools": names,
            "set_is_error": bool(field(wrote, "is_error", "isError")),
            "get_is_error": bool(field(read, "is_error", "isError")),
            "content": read_struct.get("content"),
            "version": read_struct.get("version"),
        }
        print(json.dumps(out))
        ok = (
            "loom_memory_set" in names
            and "loom_search" in names
            and not out["set_is_error"]
            and not out["get_is_error"]
            and out["content"] == "written by the Python SDK"
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
