// Copyright 2026 The OpenFief Authors.
// SPDX-License-Identifier: Apache-2.0

// The egress client against a real HTTPS server reached through a real HTTP
// CONNECT proxy on loopback. The proxy is a minimal one written here, not
// the project's egress proxy: that one authenticates with a TokenReview and
// follows the allow-list ConfigMap, so it needs a Kubernetes API server, and
// it refuses loopback targets by design. This one records what the egress
// proxy checks (the CONNECT target and its Proxy-Authorization) and resolves
// the institution's name itself, as the egress proxy does for plugins,
// which have no DNS.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer as createHTTPSServer, type Server as HTTPSServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { EgressClient, EgressError, TokenFile, newEgressClient } from "../src/index.js";
import { parseProxyURL } from "../src/egress.js";
import { ConnectProxy, KubeletDir, packageDir, tempDir } from "./helpers.js";

/** The institution's name, which only the proxy resolves. */
const institution = "institution.test";

const cert = readFileSync(join(packageDir, "test", "testdata", "target-cert.pem"));
const key = readFileSync(join(packageDir, "test", "testdata", "target-key.pem"));

describe("egress client", () => {
  let target: HTTPSServer;
  let proxy: ConnectProxy;
  const seen: string[] = [];
  const tmp = tempDir();
  let tokens: KubeletDir;

  before(async () => {
    target = createHTTPSServer({ cert, key }, (req, res) => {
      seen.push(`${req.method} ${req.url} ${req.headers.host}`);
      if (req.url === "/redirect") {
        res.writeHead(302, { location: "https://elsewhere.test/" }).end();
      } else if (req.url === "/big") {
        res.end("x".repeat(4096));
      } else {
        res.end("rates for 2026-03-31");
      }
    });
    target.listen(0, "127.0.0.1");
    await new Promise((r) => target.once("listening", r));
    proxy = new ConnectProxy((target.address() as AddressInfo).port, institution);
    proxy.server.listen(0, "127.0.0.1");
    await new Promise((r) => proxy.server.once("listening", r));
    tokens = new KubeletDir(tmp.dir, ["token"]);
    tokens.write({ token: "egress-token-1\n" });
  });
  after(() => {
    target.close();
    target.closeAllConnections();
    proxy.server.close();
    tmp.cleanup();
  });

  function client(): EgressClient {
    return newEgressClient({
      HTTPS_PROXY: proxy.url,
      OPENFIEF_EGRESS_TOKEN_FILE: join(tmp.dir, "token"),
    });
  }

  const basic = (token: string) => "Basic " + Buffer.from(`plugin:${token}`).toString("base64");

  test("reaches an institution through the proxy's tunnel with the egress token", async () => {
    const c = client();
    const before = proxy.connects.length;
    const res = await c.request(`https://${institution}/rates?date=2026-03-31`, {
      tls: { ca: cert },
    });
    assert.equal(res.status, 200);
    assert.equal(res.body.toString(), "rates for 2026-03-31");
    assert.deepEqual(proxy.connects.slice(before), [
      { target: `${institution}:443`, auth: basic("egress-token-1") },
    ]);
    assert.ok(seen.includes(`GET /rates?date=2026-03-31 ${institution}`));
    c.close();
  });

  test("a rotated egress token is sent with the next request", async () => {
    const c = client();
    const before = proxy.connects.length;
    await c.request(`https://${institution}/a`, { tls: { ca: cert } });
    tokens.write({ token: "egress-token-2" });
    await c.request(`https://${institution}/b`, { tls: { ca: cert } });
    assert.deepEqual(
      proxy.connects.slice(before).map((x) => x.auth),
      [basic("egress-token-1"), basic("egress-token-2")],
    );
    tokens.write({ token: "egress-token-1\n" });
    c.close();
  });

  test("plain http is refused before anything is sent", async () => {
    const c = client();
    const before = proxy.connections;
    await assert.rejects(c.request(`http://${institution}/rates`), (e: unknown) => {
      assert.ok(e instanceof EgressError);
      assert.equal(e.code, "plain_http");
      return true;
    });
    assert.equal(proxy.connections, before, "the proxy saw a connection");
  });

  test("a proxy's refusal is reported by its status, without its words or the token", async () => {
    const c = client();
    proxy.refuse = true;
    try {
      await assert.rejects(
        c.request(`https://${institution}/rates`, { tls: { ca: cert } }),
        (e: unknown) => {
          assert.ok(e instanceof EgressError);
          assert.equal(e.code, "proxy_refused");
          assert.equal(e.status, 407);
          assert.ok(!e.message.includes("words of the proxy"));
          assert.ok(!e.message.includes("egress-token"));
          return true;
        },
      );
    } finally {
      proxy.refuse = false;
    }
  });

  test("a target the proxy refuses is not reached", async () => {
    const c = client();
    await assert.rejects(c.request("https://127.0.0.1:1/", { tls: { ca: cert } }), /status 403/);
  });

  test("redirects are not followed and bodies are bounded", async () => {
    const c = client();
    const res = await c.request(`https://${institution}/redirect`, { tls: { ca: cert } });
    assert.equal(res.status, 302);
    assert.ok(!seen.some((s) => s.includes("elsewhere")));
    await assert.rejects(
      c.request(`https://${institution}/big`, { tls: { ca: cert }, maxResponseBytes: 1000 }),
      (e: unknown) => e instanceof EgressError && e.code === "too_large",
    );
  });

  test("the target's certificate is checked inside the tunnel", async () => {
    const c = client();
    await assert.rejects(
      c.request(`https://${institution}/rates`),
      /self-signed|unable to verify|certificate/i,
    );
  });

  test("a missing token file fails the request, not open it without a token", async () => {
    const c = new EgressClient(new URL(proxy.url), new TokenFile(join(tmp.dir, "missing")));
    const before = proxy.connections;
    await assert.rejects(
      c.request(`https://${institution}/rates`, { tls: { ca: cert } }),
      /egress: token file/,
    );
    assert.equal(proxy.connections, before);
  });

  test("without a proxy nothing is sent", async () => {
    assert.throws(
      () => newEgressClient({}),
      (e: unknown) => e instanceof EgressError && e.code === "no_proxy",
    );
    const c = new EgressClient(null, new TokenFile(join(tmp.dir, "token")));
    await assert.rejects(
      c.request(`https://${institution}/`),
      (e: unknown) => e instanceof EgressError && e.code === "no_proxy",
    );
    assert.throws(
      () => newEgressClient({ HTTPS_PROXY: proxy.url }),
      /OPENFIEF_EGRESS_TOKEN_FILE unset/,
    );
  });
});

test("the proxy URL carries nothing the client would override or drop", () => {
  assert.equal(parseProxyURL("http://10.96.0.20:3128").href, "http://10.96.0.20:3128/");
  assert.equal(parseProxyURL("https://10.96.0.20:3128/").href, "https://10.96.0.20:3128/");
  const bad: Record<string, RegExp> = {
    "socks5://10.0.0.1:1080": /scheme "socks5" is not http or https/,
    "http://user:pw@10.0.0.1:3128": /must not carry user info/,
    "http://10.0.0.1:3128/path": /must not have a path, query or fragment/,
    "http://10.0.0.1:3128?x=1": /must not have a path, query or fragment/,
    "http://10.0.0.1:3128#f": /must not have a path, query or fragment/,
    "10.0.0.1:3128": /is not http or https|not a URL/,
    "": /not a URL/,
  };
  for (const [raw, want] of Object.entries(bad)) assert.throws(() => parseProxyURL(raw), want, raw);
});
