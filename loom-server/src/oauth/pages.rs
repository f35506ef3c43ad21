//! The sign-in, consent and error pages. Every value is HTML-escaped; every
//! page refuses framing (`X-Frame-Options: DENY`, CSP `frame-ancestors
//! 'none'`), runs no script, and is never cached.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::no_store;

/// Escapes text for an HTML element or a double-quoted attribute.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;color:#222}\
h1{font-size:1.4rem}label{display:block;margin:.8rem 0 .2rem}input[type=text],input[type=password]{width:100%;padding:.4rem;box-sizing:border-box}\
button{margin-top:1rem;padding:.5rem 1rem;margin-right:.5rem}.error{color:#b00020}.muted{color:#666;font-size:.9rem}code{word-break:break-all}";

fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        escape(title)
    );
    let mut r = no_store((status, Html(html)).into_response());
    let h = r.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

/// What the sign-in and consent pages say about the client asking.
#[derive(Debug)]
pub struct Asking<'a> {
    /// The client's registered name.
    pub client_name: &'a str,
    /// The client id.
    pub client_id: &'a str,
    /// The host (or app scheme) the authorization will be sent to.
    pub redirect_host: &'a str,
    /// The full redirect URI.
    pub redirect_uri: &'a str,
}

fn asking_text(a: &Asking<'_>) -> String {
    format!(
        // <bdi>: what a client wrote keeps its direction to itself.
        "<p><strong><bdi>{}</bdi></strong> <span class=\"muted\">(client <code>{}</code>)</span> asks to use Loom as you. \
         The authorization will be sent to <strong><bdi>{}</bdi></strong>.</p>\
         <p class=\"muted\">Redirect: <code><bdi>{}</bdi></code></p>",
        escape(a.client_name),
        escape(a.client_id),
        escape(a.redirect_host),
        escape(a.redirect_uri)
    )
}

/// The sign-in page.
pub fn sign_in(a: &Asking<'_>, request: &str, csrf: &str, error: Option<&str>) -> Response {
    let error = error.map_or_else(String::new, |e| {
        format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e))
    });
    let body = format!(
        "<h1>Sign in to Loom</h1>{}{error}\
         <form method=\"post\" action=\"/oauth/authorize/login\">\
         <input type=\"hidden\" name=\"request\" value=\"{}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label for=\"username\">Username</label>\
         <input type=\"text\" id=\"username\" name=\"username\" autocomplete=\"username\" required autofocus>\
         <label for=\"password\">Password</label>\
         <input type=\"password\" id=\"password\" name=\"password\" autocomplete=\"current-password\" required>\
         <button type=\"submit\">Sign in</button></form>",
        asking_text(a),
        escape(request),
        escape(csrf)
    );
    page(StatusCode::OK, "Sign in to Loom", &body)
}

/// The consent page, after sign-in.
pub fn consent(a: &Asking<'_>, username: &str, request: &str, csrf: &str) -> Response {
    let body = format!(
        "<h1>Allow access to Loom?</h1>\
         <p>Signed in as <strong>{}</strong>.</p>{}\
         <p>If you allow it, <strong><bdi>{}</bdi></strong> can call Loom with your roles and namespaces \
         until its sign-in expires or your account is disabled.</p>\
         <form method=\"post\" action=\"/oauth/authorize/consent\">\
         <input type=\"hidden\" name=\"request\" value=\"{}\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <button type=\"submit\" name=\"decision\" value=\"allow\">Allow</button>\
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>",
        escape(username),
        asking_text(a),
        escape(a.client_name),
        escape(request),
        escape(csrf)
    );
    page(StatusCode::OK, "Allow access to Loom?", &body)
}

/// The refusal of a web client's malformed request before sign-in: the
/// error, and a link back to the client that carries it, which the person
/// may follow (Loom does not send the browser there itself).
pub fn error_for_client(message: &str, host: &str, link: &str) -> Response {
    let body = format!(
        "<h1>Sign-in cannot continue</h1><p class=\"error\">{}</p>\
         <p>The application that sent you here made a request Loom cannot serve. \
         <a href=\"{}\" rel=\"noreferrer\">Return to {}</a> to tell it so.</p>",
        escape(message),
        escape(link),
        escape(host)
    );
    page(StatusCode::BAD_REQUEST, "Sign-in cannot continue", &body)
}

/// An error page: shown instead of redirecting when the client or redirect
/// URI cannot be trusted, or when the sign-in cannot continue.
pub fn error(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<h1>Sign-in cannot continue</h1><p class=\"error\">{}</p>\
         <p class=\"muted\">Start again from the application you were connecting.</p>",
        escape(message)
    );
    page(status, "Sign-in cannot continue", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;"
        );
    }
}
