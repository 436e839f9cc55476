/* http.ts -- one request to either plane: URL, credentials, body, timeout, typed errors */

import type { ResolvedConfig } from "./config.js";
import { ConnectionError, SpaceError, TimeoutError, errorFromAnswer } from "./errors.js";

/** A query's values; `undefined` and `false` leave a parameter out, `true` sends `1`. */
export type Query = Record<string, string | number | boolean | undefined>;

/** A request body: JSON (any plain value), or bytes sent as they are. */
export type Body = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

/** One request. */
export interface RequestSpec {
  method: string;
  path: string;
  query?: Query;
  /** Sent as JSON. */
  json?: unknown;
  /** Sent as it is (`application/octet-stream` unless `headers` say otherwise). */
  body?: Body;
  headers?: Record<string, string>;
  /** The data plane's base URL and a session or files token, instead of the control plane and key. */
  dataPlane?: { url: string; token: string };
  /** Aborts the request (and a streamed answer's body). */
  signal?: AbortSignal;
  /** Overrides the request timeout; `0`: none (streams). */
  timeoutMs?: number;
}

export function buildQuery(q?: Query): string {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === false) continue;
    p.append(k, v === true ? "1" : String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : "";
}

/** Percent-encodes one path segment (an id, a name, a template ref). */
export function seg(s: string): string {
  return encodeURIComponent(s);
}

/** One signal that aborts when any of them does (AbortSignal.any, which Node 18 lacks). */
export function anySignal(signals: AbortSignal[]): AbortSignal | undefined {
  if (signals.length <= 1) return signals[0];
  const any = (AbortSignal as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (any) return any(signals);
  const ctl = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => ctl.abort(s.reason), { once: true });
  }
  return ctl.signal;
}

function isStream(b: unknown): b is ReadableStream<Uint8Array> {
  return typeof ReadableStream !== "undefined" && b instanceof ReadableStream;
}

/** Both planes, with the client's configuration. */
export class Transport {
  constructor(readonly cfg: ResolvedConfig) {}

  /** Sends a request; an answer of 400 or more becomes the typed error. Returns the Response, body unread. */
  async send(spec: RequestSpec): Promise<Response> {
    const base = spec.dataPlane ? (this.cfg.dataPlaneUrl ?? spec.dataPlane.url.replace(/\/+$/, "")) : this.cfg.url;
    const where = `${spec.method} ${spec.path}`;
    const headers: Record<string, string> = spec.dataPlane ? {} : { ...this.cfg.headers };
    headers["Authorization"] = `Bearer ${spec.dataPlane ? spec.dataPlane.token : await this.cfg.apiKey()}`;
    let body: BodyInit | undefined;
    if (spec.json !== undefined) {
      body = JSON.stringify(spec.json);
      headers["Content-Type"] = "application/json";
    } else if (spec.body !== undefined) {
      body = spec.body as BodyInit;
      headers["Content-Type"] = "application/octet-stream";
    }
    Object.assign(headers, spec.headers ?? {});
    const timeoutMs = spec.timeoutMs ?? this.cfg.requestTimeoutMs;
    const signals: AbortSignal[] = [];
    if (spec.signal) signals.push(spec.signal);
    let timer: AbortSignal | undefined;
    if (timeoutMs > 0) signals.push((timer = AbortSignal.timeout(timeoutMs)));
    const init: RequestInit & { duplex?: "half" } = {
      method: spec.method,
      headers,
      body,
      signal: anySignal(signals),
    };
    if (isStream(spec.body)) init.duplex = "half"; // fetch streams a ReadableStream body only so
    let resp: Response;
    try {
      resp = await this.cfg.fetch(base + spec.path + buildQuery(spec.query), init);
    } catch (e) {
      throw this.failure(e, where, timer, timeoutMs);
    }
    if (resp.status >= 400) {
      let text = "";
      try {
        text = await resp.text();
      } catch {
        /* the status says enough */
      }
      throw errorFromAnswer(resp.status, text, where, resp.headers.get("Retry-After"));
    }
    return resp;
  }

  /** What a failed fetch becomes: the caller's own abort as it is, a timeout, or a ConnectionError. */
  failure(e: unknown, where: string, timer: AbortSignal | undefined, timeoutMs: number): unknown {
    if (e instanceof SpaceError) return e;
    if (timer?.aborted) return new TimeoutError(`${where}: no answer within ${timeoutMs} ms`, { code: "timeout", status: 0, request: where, cause: e });
    if ((e as { name?: string })?.name === "AbortError") return e;
    const cause = (e as { cause?: { message?: string; code?: string } })?.cause;
    const why = cause?.code ?? cause?.message ?? (e as Error)?.message ?? String(e);
    return new ConnectionError(`${where}: ${why}`, { code: "connection_error", status: 0, request: where, cause: e });
  }

  /** Sends a request and parses the answer as JSON (`undefined` for 204). */
  async json<T>(spec: RequestSpec): Promise<T> {
    const resp = await this.send(spec);
    if (resp.status === 204) return undefined as T;
    const text = await this.text(resp, spec);
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new SpaceError(`${spec.method} ${spec.path}: answer is not JSON: ${text.slice(0, 200)}`, {
        code: "internal",
        status: resp.status,
        request: `${spec.method} ${spec.path}`,
        cause: e,
      });
    }
  }

  /** A body read whole; a connection broken meanwhile is a ConnectionError. */
  async text(resp: Response, spec: RequestSpec): Promise<string> {
    try {
      return await resp.text();
    } catch (e) {
      throw this.failure(e, `${spec.method} ${spec.path}`, undefined, 0);
    }
  }

  /** A body read whole as bytes (a cut-short body is a ConnectionError, never a short result). */
  async bytes(resp: Response, spec: RequestSpec): Promise<Uint8Array> {
    try {
      return new Uint8Array(await resp.arrayBuffer());
    } catch (e) {
      throw this.failure(e, `${spec.method} ${spec.path}`, undefined, 0);
    }
  }
}
