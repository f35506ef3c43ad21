"""An independent OAuth 2.1 client for Loom, built on authlib.

Discovers the authorization server from the 401 challenge, registers a
public client, signs in through the real HTML forms with a cookie jar,
exchanges the code with PKCE, calls the API with the token, refreshes, and
checks that replaying a rotated refresh token is refused.

Usage: oauth_client.py BASE_URL USERNAME PASSWORD
"""

import html.parser
import re
import sys
import urllib.parse

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from authlib.integrations.base_client.errors import OAuthError

REDIRECT = "http://127.0.0.1:48123/callback"


class Inputs(html.parser.HTMLParser):
    """Collects the name/value of every <input> on a page."""

    def __init__(self):
        super().__init__()
        self.values = {}

    def handle_starttag(self, tag, attrs):
        if tag == "input":
            a = dict(attrs)
            if "name" in a:
                self.values[a["name"]] = a.get("value", "")


def inputs(page):
    p = Inputs()
    p.feed(page)
    return p.values


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    print(f"ok: {what}")


def main(base, username, password):
    # 1. Discovery from the 401 challenge (RFC 9728 §5.1).
    r = requests.post(f"{base}/v1/ops.capabilities", json={})
    check(r.status_code == 401, "an unauthenticated call is 401")
    m = re.search(r'resource_metadata="([^"]+)"', r.headers.get("WWW-Authenticate", ""))
    check(m is not None, "the challenge names resource_metadata")
    prm = requests.get(m.group(1)).json()
    resource = prm["resource"]
    # /v1 is the whole server's: its metadata is the root one, whose
    # resource is a prefix of the URL asked (RFC 9728 §3.3).
    check(m.group(1) == f"{base}/.well-known/oauth-protected-resource", "root PRM URL for /v1")
    check(f"{base}/v1/ops.capabilities".startswith(resource), "the PRM's resource covers the URL asked")
    issuer = prm["authorization_servers"][0]
    asm = requests.get(f"{issuer}/.well-known/oauth-authorization-server").json()
    check(asm["issuer"] == issuer, "AS metadata issuer matches")
    check("S256" in asm["code_challenge_methods_supported"], "S256 advertised")

    # 2. Dynamic client registration (RFC 7591).
    reg = requests.post(
        asm["registration_endpoint"],
        json={
            "client_name": "authlib interop",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        },
    )
    check(reg.status_code == 201, "registered")
    client_id = reg.json()["client_id"]

    # 3. Authorization request with PKCE S256 and the resource indicator.
    oauth = OAuth2Session(
        client_id=client_id,
        token_endpoint_auth_method="none",
        scope="loom",
        redirect_uri=REDIRECT,
        code_challenge_method="S256",
    )
    verifier = generate_token(64)
    url, state = oauth.create_authorization_url(
        asm["authorization_endpoint"], code_verifier=verifier, resource=resource
    )

    # 4. The browser: real forms, a cookie jar, redirects by hand.
    browser = requests.Session()
    page = browser.get(url, allow_redirects=False)
    check(page.status_code == 200 and "Sign in to Loom" in page.text, "sign-in page")
    check(page.headers.get("X-Frame-Options") == "DENY", "sign-in page refuses framing")
    form = inputs(page.text)
    form.update({"username": username, "password": password})
    r = browser.post(f"{issuer}/oauth/authorize/login", data=form, allow_redirects=False)
    check(r.status_code == 303, "303 after the credential POST")
    consent = browser.get(urllib.parse.urljoin(issuer, r.headers["Location"]), allow_redirects=False)
    check(consent.status_code == 200 and "authlib interop" in consent.text, "consent names the client")
    check("127.0.0.1:48123" in consent.text, "consent names the redirect host")
    form = inputs(consent.text)
    form["decision"] = "allow"
    r = browser.post(f"{issuer}/oauth/authorize/consent", data=form, allow_redirects=False)
    check(r.status_code == 303, "consent redirects")
    callback = r.headers["Location"]
    check(callback.startswith(REDIRECT), "back to the registered redirect URI")
    q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(callback).query))
    check(q.get("iss") == issuer, "iss in the authorization response")

    # 5. Code exchange (authlib checks state).
    token = oauth.fetch_token(
        asm["token_endpoint"], authorization_response=callback, code_verifier=verifier
    )
    check(token["token_type"].lower() == "bearer", "bearer token issued")
    first_refresh = token["refresh_token"]

    # 6. The token calls the API.
    r = requests.post(
        f"{base}/v1/ops.capabilities",
        json={},
        headers={"Authorization": f"Bearer {token['access_token']}"},
    )
    check(r.status_code == 200, "the access token calls the API")

    # 7. Refresh rotates.
    new = oauth.refresh_token(asm["token_endpoint"], refresh_token=first_refresh)
    check(new["refresh_token"] != first_refresh, "refresh rotates the refresh token")
    r = requests.post(
        f"{base}/v1/ops.capabilities",
        json={},
        headers={"Authorization": f"Bearer {new['access_token']}"},
    )
    check(r.status_code == 200, "the refreshed token calls the API")

    # 8. Replaying the rotated token is refused.
    try:
        oauth.refresh_token(asm["token_endpoint"], refresh_token=first_refresh)
        check(False, "a replayed refresh token is refused")
    except OAuthError as e:
        check(e.error == "invalid_grant", "a replayed refresh token is refused (invalid_grant)")
    print("ALL OK")


if __name__ == "__main__":
    main(*sys.argv[1:4])
