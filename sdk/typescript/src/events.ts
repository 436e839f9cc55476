/* events.ts -- lifecycle events (pages, waits) and webhooks (docs/guides/webhooks.md) */
import type { Transport } from "./http.js";

/** One lifecycle event: `seq` is its cursor. */
export interface LifecycleEvent {
  id: string;
  seq: number;
  /** `sandbox.created`, `running`, `paused`, `resumed`, `suspended`, `restored`, `forked`,
   * `stopped`, `deleted`, `failed`, `timeout_warning`, `timeout_set`, `snapshotted`. */
  type: string;
  time: string;
  time_ms: number;
  sandbox_id: string;
  template: string;
  template_digest: string;
  /** The sandbox's state after it. */
  state: string;
  operation_id: string | null;
  reason: string | null;
  data: Record<string, unknown>;
}

/** A page of events: `cursor` is the next page's `after`. */
export interface EventPage {
  events: LifecycleEvent[];
  cursor: string;
  has_more: boolean;
}

/** What a page asks for. */
export interface EventQuery {
  /** After this cursor (default: the oldest kept). */
  after?: string | number;
  /** One sandbox's (an id). */
  sandbox?: string;
  /** Types, with or without `sandbox.`. */
  types?: string[];
  /** At most this many (1..1000, default 100). */
  limit?: number;
  /** Seconds (at most 60) to hold an empty page until the first event comes. */
  wait?: number;
}

/** A webhook: its secret is never returned. */
export interface WebhookInfo {
  id: string;
  url: string;
  name: string;
  events: string[];
  format: "space" | "e2b";
  enabled: boolean;
  created_at: string;
  /** The last event it is done with. */
  cursor: string;
  /** The event being tried again, if any. */
  pending: { attempts: number; last_error: string } | null;
}

/** One delivery attempt. */
export interface Delivery {
  event_id: string;
  seq: number;
  type: string;
  sandbox_id: string;
  attempt: number;
  ok: boolean;
  status: number | null;
  error: string | null;
  time: string;
  duration_ms: number;
  url: string;
}

/** Lifecycle events of every sandbox, in order: `client.events`. */
export class Events {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** One page of the events after `q.after` that match. */
  list(q: EventQuery = {}): Promise<EventPage> {
    return this.t.json<EventPage>({
      method: "GET",
      path: "/v1/events",
      query: {
        after: q.after === undefined ? undefined : String(q.after),
        sandbox: q.sandbox,
        types: q.types?.join(","),
        limit: q.limit,
        wait: q.wait,
      },
      timeoutMs: q.wait ? (q.wait + 30) * 1000 : undefined,
    });
  }

  /** The cursor of the newest event: `after` for what happens from now on. */
  async newest(): Promise<string> {
    let page = await this.list({ limit: 1000 });
    while (page.has_more) page = await this.list({ after: page.cursor, limit: 1000 });
    return page.cursor;
  }

  /** Long-polls until an event of `type` (of `opts.sandbox`) comes after `opts.after`
   * (default: from now); throws a TimeoutError-like Error after `opts.timeoutMs`. */
  async waitFor(type: string, opts: { sandbox?: string; after?: string; timeoutMs?: number } = {}): Promise<LifecycleEvent> {
    const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
    let cursor = opts.after ?? (await this.newest());
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${type} event within ${opts.timeoutMs ?? 60_000} ms`);
      const page = await this.list({ after: cursor, sandbox: opts.sandbox, types: [type], wait: Math.max(1, Math.min(60, Math.floor(left / 1000))) });
      if (page.events.length) return page.events[0];
      cursor = page.cursor;
    }
  }
}

/** Where events are POSTed, signed: `client.webhooks`. */
export class Webhooks {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Events from now on go to `url` (public addresses only, unless the daemon allows loopback),
   * signed with `secret` (16 or more characters). */
  async create(url: string, secret: string, opts: { events?: string[]; name?: string; enabled?: boolean } = {}): Promise<WebhookInfo> {
    const json: Record<string, unknown> = { url, secret, enabled: opts.enabled ?? true };
    if (opts.events) json.events = opts.events;
    if (opts.name !== undefined) json.name = opts.name;
    return (await this.t.json<{ webhook: WebhookInfo }>({ method: "POST", path: "/v1/webhooks", json })).webhook;
  }

  /** Every webhook. */
  async list(): Promise<WebhookInfo[]> {
    return (await this.t.json<{ webhooks: WebhookInfo[] }>({ method: "GET", path: "/v1/webhooks" })).webhooks;
  }

  /** One webhook. */
  async get(id: string): Promise<WebhookInfo> {
    return (await this.t.json<{ webhook: WebhookInfo }>({ method: "GET", path: `/v1/webhooks/${encodeURIComponent(id)}` })).webhook;
  }

  /** Changes url, secret, events, name or enabled. */
  async update(id: string, fields: { url?: string; secret?: string; events?: string[]; name?: string; enabled?: boolean }): Promise<WebhookInfo> {
    return (await this.t.json<{ webhook: WebhookInfo }>({ method: "PATCH", path: `/v1/webhooks/${encodeURIComponent(id)}`, json: fields })).webhook;
  }

  /** Deletes a webhook and its delivery log. */
  async delete(id: string): Promise<void> {
    await this.t.json({ method: "DELETE", path: `/v1/webhooks/${encodeURIComponent(id)}` });
  }

  /** Its delivery attempts, newest first. */
  async deliveries(id: string, limit = 100): Promise<Delivery[]> {
    return (await this.t.json<{ deliveries: Delivery[] }>({ method: "GET", path: `/v1/webhooks/${encodeURIComponent(id)}/deliveries`, query: { limit } })).deliveries;
  }
}

interface SubtleLike {
  importKey(f: "raw", k: Uint8Array, a: { name: "HMAC"; hash: "SHA-256" }, x: false, u: ["sign"]): Promise<unknown>;
  sign(a: "HMAC", k: unknown, d: Uint8Array): Promise<ArrayBuffer>;
}

/** True when a delivery's `X-Space-Signature` header is `secret`'s over its timestamp and `body`,
 * and the timestamp is within `toleranceS` seconds of now (a receiver's check). Web Crypto
 * (`crypto.subtle`: Node.js 19+, browsers, workers). */
export async function verifySignature(signatureHeader: string | null | undefined, body: string | Uint8Array, secret: string, toleranceS = 300): Promise<boolean> {
  if (!signatureHeader) return false;
  const parts = new Map(signatureHeader.split(",").map((p) => { const i = p.indexOf("="); return [p.slice(0, i), p.slice(i + 1)] as [string, string]; }));
  const t = Number(parts.get("t")), v1 = parts.get("v1") ?? "";
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceS) return false;
  const subtle = (globalThis as { crypto?: { subtle?: SubtleLike } }).crypto?.subtle;
  if (!subtle) throw new Error("verifySignature needs Web Crypto (crypto.subtle)");
  const enc = new TextEncoder();
  const bytes = typeof body === "string" ? enc.encode(body) : body;
  const prefix = enc.encode(`${t}.`);
  const msg = new Uint8Array(prefix.length + bytes.length);
  msg.set(prefix);
  msg.set(bytes, prefix.length);
  const key = await subtle.importKey("raw", enc.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await subtle.sign("HMAC", key, msg));
  const want = Array.from(mac, (b) => b.toString(16).padStart(2, "0")).join("");
  let diff = want.length ^ v1.length;
  for (let i = 0; i < want.length; i++) diff |= want.charCodeAt(i) ^ (v1.charCodeAt(i) || 0);
  return diff === 0;
}
