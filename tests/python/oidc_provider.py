"""A local OpenID Connect provider for Loom's OIDC sign-in tests.

Runs oidc-provider-mock (a real provider: discovery, authorization form,
token endpoint, JWKS, RS256 id_tokens) on 127.0.0.1 at an ephemeral port
and prints `LISTENING http://127.0.0.1:PORT` once it accepts connections.
It stops when its standard input closes, so it never outlives the test.

    --tamper CLAIM=JSON   re-sign every id_token the token endpoint issues
                          with CLAIM set to JSON (e.g. aud='"someone-else"'),
                          using the provider's own key: only that claim is
                          wrong. Repeatable.
    --foreign-key         sign the id_token with a key the JWKS does not hold
                          (under the provider's key id).
"""

import argparse
import json
import os
import sys
import threading

import flask
import werkzeug.serving
from authlib import jose

import oidc_provider_mock


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tamper", action="append", default=[])
    parser.add_argument("--foreign-key", action="store_true")
    args = parser.parse_args()
    tamper = {}
    for t in args.tamper:
        name, _, value = t.partition("=")
        tamper[name] = json.loads(value)

    os.environ["AUTHLIB_INSECURE_TRANSPORT"] = "1"
    app = oidc_provider_mock.app(require_nonce=True)
    foreign = jose.RSAKey.generate_key(is_private=True)

    @app.after_request
    def resign(response: flask.Response) -> flask.Response:
        if flask.request.path != "/oauth2/token" or response.status_code != 200:
            return response
        if not tamper and not args.foreign_key:
            return response
        body = response.get_json()
        own = flask.g.oidc_provider_mock_storage.jwk
        claims = dict(jose.jwt.decode(body["id_token"], own))
        claims.update(tamper)
        key = foreign if args.foreign_key else own
        # The provider's own key id even on a foreign key: an impostor's
        # token must fail on its signature, not merely on a missing key.
        header = {"alg": "RS256", "kid": own.as_dict()["kid"]}
        body["id_token"] = jose.jwt.encode(header, claims, key).decode()
        response.set_data(json.dumps(body))
        return response

    server = werkzeug.serving.make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"LISTENING http://127.0.0.1:{server.server_port}", flush=True)
    # Until the test closes our standard input (or dies).
    sys.stdin.read()
    server.shutdown()


if __name__ == "__main__":
    main()
