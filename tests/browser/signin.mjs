// A native-app OAuth client whose user signs in through Loom's real pages
// in Debian's headless chromium (driven by playwright-core):
//   node signin.mjs LOOM_URL USERNAME PASSWORD
// It listens on a loopback port for the redirect (as a desktop MCP client
// does), registers itself, opens /oauth/authorize, is refused once with a
// wrong password, signs in, allows on the consent page, receives the code
// at its loopback redirect and exchanges it. Prints one JSON line:
// {"ok": true, "access_token": …, "checked": [...]} or exits 1 with FAIL.
// LOOM_TEST_SCREENSHOTS=DIR saves a PNG of each page there.
import http from 'node:http';
import crypto from 'node:crypto';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [base, username, password] = process.argv.slice(2);
const shots = process.env.LOOM_TEST_SCREENSHOTS;
const checked = [];

function check(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
  checked.push(what);
}

async function shot(page, name) {
  if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

const b64url = (buf) => buf.toString('base64url');

let redirected;
const arrived = new Promise((resolve) => { redirected = resolve; });
const listener = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end('<!doctype html><title>Signed in</title><p>You can close this window.</p>');
  redirected(new URL(req.url, 'http://127.0.0.1'));
});
await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve));
const redirectUri = `http://127.0.0.1:${listener.address().port}/callback`;

let browser;
try {
  const reg = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'Browser Test Client',
      redirect_uris: [redirectUri],
      token_endpoint_auth_method: 'none',
    }),
  });
  check(reg.status === 201, 'registration answers 201');
  const { client_id: clientId } = await reg.json();

  const verifier = b64url(crypto.randomBytes(32));
  const challenge = b64url(crypto.createHash('sha256').update(verifier).digest());
  const state = b64url(crypto.randomBytes(16));
  const authorize = new URL(`${base}/oauth/authorize`);
  for (const [k, v] of Object.entries({
    response_type: 'code', client_id: clientId, redirect_uri: redirectUri,
    code_challenge: challenge, code_challenge_method: 'S256', state,
  })) authorize.searchParams.set(k, v);

  browser = await chromium.launch({
    executablePath: process.env.LOOM_TEST_CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage();
  page.setDefaultTimeout(30_000);

  let resp = await page.goto(authorize.href);
  check(resp.status() === 200, 'the sign-in page answers 200');
  check(resp.headers()['x-frame-options'] === 'DENY', 'the sign-in page refuses framing');
  check((await page.title()) === 'Sign in to Loom', 'the sign-in page has its title');
  check(await page.getByRole('heading', { name: 'Sign in to Loom' }).isVisible(), 'its heading is visible');
  check((await page.locator('body').innerText()).includes('Browser Test Client'), 'it names the client');
  await shot(page, '1-sign-in');

  // A wrong password: the page comes back with an alert.
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill('not the password');
  [resp] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/oauth/authorize/login')),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ]);
  check(resp.status() === 401, 'a wrong password answers 401');
  await page.getByRole('alert').waitFor();
  check((await page.getByRole('alert').innerText()).includes('Wrong username or password'), 'a wrong password is said so');
  await shot(page, '2-wrong-password');

  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await Promise.all([
    page.waitForURL(/\/oauth\/authorize\/consent\?/),
    page.getByRole('button', { name: 'Sign in' }).click(),
  ]);
  check(await page.getByRole('heading', { name: 'Allow access to Loom?' }).isVisible(), 'the consent page shows');
  const consentText = await page.locator('body').innerText();
  check(consentText.includes(`Signed in as ${username}`), 'the consent page names the user');
  check(consentText.includes(`127.0.0.1:${listener.address().port}`), 'the consent page names the redirect host');
  await shot(page, '3-consent');

  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(redirectUri)),
    page.getByRole('button', { name: 'Allow' }).click(),
  ]);
  const back = await arrived;
  check(back.searchParams.get('state') === state, 'the redirect carries the state');
  check(back.searchParams.get('iss') === base, 'the redirect names the issuer');
  const code = back.searchParams.get('code');
  check(!!code, 'the redirect carries a code');
  await shot(page, '4-redirected');

  const tok = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code', code, redirect_uri: redirectUri,
      client_id: clientId, code_verifier: verifier,
    }),
  });
  check(tok.status === 200, 'the code exchanges for tokens');
  const tokens = await tok.json();
  console.log(JSON.stringify({ ok: true, access_token: tokens.access_token, checked }));
} catch (e) {
  console.log(`FAIL: ${e.stack || e}`);
  console.log(`checked so far: ${checked.join('; ')}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  listener.close();
}
