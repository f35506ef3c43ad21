"""The official Python MCP SDK signing in to Loom's /mcp with its own OAuth
client provider (`mcp.client.auth.OAuthClientProvider`).

usage: mcp_oauth_client.py BASE_URL USERNAME PASSWORD
The SDK meets the 401, discovers the protected-resource and
authorization-server metadata, registers itself, builds the PKCE request and
hands the authorization URL to `redirect_handler`; that handler plays the
person at a browser with a cookie jar (the real sign-in and consent forms)
and gives the code to `callback_handler`. The SDK then exchanges the code,
checks `state` and `iss`, and retries /mcp with the token. The script lists
the tools, writes and reads a memory, and prints one JSON line with
"ok": true. Exits non-zero on any mismatch.
"""
import asyncio
import json
import re
import sys
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
import requests
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT = "http://127.0.0.1:53999/callback"


class MemoryStorage(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def hidden(html: str, name: str) -> str:
    m = re.search(rf'name="{name}" value="([^"]*)"', html)
    if not m:
        raise RuntimeError(f"no hidden {name} on the page: {html[:300]}")
    return m.group(1)


def sign_in_through_the_pages(base: str, authorization_url: str, username: str, password: str) -> dict:
    """What a person does at the browser; the redirect's query parameters."""
    s = requests.Session()
    page = s.get(authorization_url, allow_redirects=False)
    if page.status_code != 200 or "Sign in to Loom" not in page.text:
        raise RuntimeError(f"sign-in page: {page.status_code} {page.text[:300]}")
    request, csrf = hidden(page.text, "request"), hidden(page.text, "csrf")
    r = s.post(
        f"{base}/oauth/authorize/login",
        data={"request": request, "csrf": csrf, "username": username, "password": password},
        allow_redirects=False,
    )
    if r.status_code != 303:
        raise RuntimeError(f"login: {r.status_code} {r.text[:300]}")
    consent = s.get(urljoin(base, r.headers["location"]), allow_redirects=False)
    if consent.status_code != 200 or "Allow access to Loom?" not in consent.text:
        raise RuntimeError(f"consent page: {consent.status_code}")
    r = s.post(
        f"{base}/oauth/authorize/consent",
        data={"request": request, "csrf": hidden(consent.text, "csrf"), "decision": "allow"},
        allow_redirects=False,
    )
    location = r.headers.get("location", "")
    if r.status_code != 303 or not location.startswith(REDIRECT):
        raise RuntimeError(f"consent: {r.status_code} {location}")
    return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}


async def main(base: str, username: str, password: str) -> int:
    seen: dict = {}

    async def redirect_handler(url: str) -> None:
        seen["authorization_url"] = url
        seen["redirect"] = await asyncio.to_thread(
            sign_in_through_the_pages, base, url, username, password
        )

    async def callback_handler() -> AuthorizationCodeResult:
        q = seen["redirect"]
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

    storage = MemoryStorage()
    provider = OAuthClientProvider(
        server_url=f"{base}/mcp",
        client_metadata=OAuthClientMetadata(
            client_name="MCP SDK OAuth client",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=30)
    async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        await client.call_tool(
            "loom_memory_set", {"memory_key": "oauth_sdk", "content": "written after OAuth sign-in"}
        )
        read = await client.call_tool("loom_memory_get", {"memory_key": "oauth_sdk"})
    struct = getattr(read, "structured_content", None) or getattr(read, "structuredContent", None) or {}
    auth_q = parse_qs(urlparse(seen.get("authorization_url", "")).query)
    out = {
        "signed_in": "redirect" in seen,
        "code_challenge_method": auth_q.get("code_challenge_method", [None])[0],
        "resource": auth_q.get("resource", [None])[0],
        "registered": storage.client is not None,
        "has_token": storage.tokens is not None,
        "has_refresh": bool(storage.tokens and storage.tokens.refresh_token),
        "tools": len(names),
        "content": struct.get("content"),
    }
    out["ok"] = (
        out["signed_in"]
        and out["registered"]
        and out["has_token"]
        and out["code_challenge_method"] == "S256"
        and "loom_memory_set" in names
        and out["content"] == "written after OAuth sign-in"
    )
    print(json.dumps(out))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
