// A real OpenID provider for the JWT tests (oidc-provider, installed by scripts/setup-oidc-provider).
// It serves discovery, JWKS and the token endpoint (client_credentials with a resource indicator,
// so access tokens are JWTs), and what an MCP client's OAuth login needs: open dynamic client
// registration (RFC 7591), the authorization-code flow with PKCE, resource indicators (RFC 8707:
// the access token is a JWT whose `aud` is the resource the client named, the REST audience when
// it named none), and the provider's own login and consent pages (any login, any password).
// Test-only routes under /_test/:
//   POST /_test/mint {sub, scope?, ttl?}  an access token (JWT) for any subject, through the
//                                          provider's own AccessToken model
//   POST /_test/sign {header, claims}     those exact claims and header fields, signed RS256 with
//                                          the current key (tokens a real provider would not
//                                          issue: expired, another audience, no exp...)
//   POST /_test/rotate                     a new signing key first; the old ones stay published
//   POST /_test/retire                     only the newest key stays published
//   GET  /_test/stats                      how many times the JWKS was fetched
// Usage: node tests/oidc_provider.mjs PORT AUDIENCE FOLDER (where the package is installed)
import * as crypto from 'node:crypto';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const port = Number(process.argv[2]);
const audience = process.argv[3];
const requireThere = createRequire(path.join(path.resolve(process.argv[4]), 'package.json'));
const { default: Provider } = await import(pathToFileURL(requireThere.resolve('oidc-provider')));
const issuer = `http://127.0.0.1:${port}`;
const SCOPES = 'memory:read memory:write';
let keys = [];
let provider;
let jwksFetches = 0;
let keyNumber = 0;

function newKey() {
  keyNumber += 1;
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: `key-${keyNumber}`, alg: 'RS256', use: 'sig' };
}

function resourceInfo(indicator = audience) {
  return { scope: SCOPES, audience: indicator, accessTokenFormat: 'jwt', accessTokenTTL: 600, jwt: { sign: { alg: 'RS256' } } };
}

function build() {
  provider = new Provider(issuer, {
    clients: [{
      client_id: 'svc-reporter',
      client_secret: 'reporter-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: SCOPES,
    }],
    jwks: { keys },
    scopes: ['openid', 'offline_access', ...SCOPES.split(' ')],
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => audience,
        getResourceServerInfo: (ctx, indicator) => resourceInfo(indicator),
        useGrantedResource: () => true,
      },
    },
  });
}

async function body(req) {
  let text = '';
  for await (const chunk of req) text += chunk;
  return text ? JSON.parse(text) : {};
}

function answer(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

async function mint(req, res) {
  const { sub, scope, ttl } = await body(req);
  const client = await provider.Client.find('svc-reporter');
  const token = new provider.AccessToken({
    accountId: sub,
    client,
    scope: scope === undefined ? SCOPES : scope,
    expiresIn: ttl || 600,
  });
  token.resourceServer = new provider.ResourceServer(audience, resourceInfo());
  token.setAudience(audience);
  answer(res, 200, { token: await token.save(), kid: keys[0].kid });
}

function b64url(value) {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

async function sign(req, res) {
  const { header, claims } = await body(req);
  const key = keys[0];
  const head = { alg: 'RS256', typ: 'at+jwt', kid: key.kid, ...header };
  const input = `${b64url(head)}.${b64url(claims)}`;
  const privateKey = crypto.createPrivateKey({ key, format: 'jwk' });
  const signature = crypto.sign('sha256', Buffer.from(input), privateKey).toString('base64url');
  answer(res, 200, { token: `${input}.${signature}`, kid: key.kid });
}

keys = [newKey()];
build();
http.createServer((req, res) => {
  const path = req.url.split('?')[0];
  const routes = {
    '/_test/mint': () => mint(req, res),
    '/_test/sign': () => sign(req, res),
    '/_test/rotate': () => { keys = [newKey(), ...keys]; build(); answer(res, 200, { kid: keys[0].kid }); },
    '/_test/retire': () => { keys = [keys[0]]; build(); answer(res, 200, { kid: keys[0].kid }); },
    '/_test/stats': () => answer(res, 200, { jwksFetches, kids: keys.map((k) => k.kid) }),
  };
  if (routes[path]) {
    Promise.resolve(routes[path]()).catch((err) => answer(res, 500, { error: String(err) }));
    return;
  }
  if (path === '/jwks') jwksFetches += 1;
  provider.callback()(req, res);
}).listen(port, '127.0.0.1', () => console.log(`listening ${issuer}`));
