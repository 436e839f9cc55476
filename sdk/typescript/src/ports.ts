/* ports.ts -- a sandbox's TCP ports on the data plane: what listens, public marks, port tokens */

import { Transport, seg } from "./http.js";

/** One port: what listens in the guest and what is exposed. */
export interface PortInfo {
  port: number;
  /** Whether something listens on it in the guest; `null` while the sandbox does not run. */
  listening: boolean | null;
  /** The address it is bound to in the guest. */
  address?: string;
  /** `false` for a port bound to loopback alone (unreachable from outside the guest). */
  reachable?: boolean;
  /** Open to anyone who has its URL, with no token. */
  public: boolean;
  /** How many live tokens open it. */
  tokens: number;
  /** Its URL on the data plane, `http://{port}-{id}.localhost:7071/`. */
  url: string;
}

/** `GET /v1/sandboxes/{id}/ports`. */
export interface PortsInfo {
  sandbox_id: string;
  /** The URL of any port: `{port}` stands for its number. */
  pattern: string;
  public_all: boolean;
  ports: PortInfo[];
}

/** A token that opens one port (send it as the `X-Space-Token` header, or open `browser_url` once). */
export interface PortToken {
  token: string;
  /** The token's id, to revoke it alone. */
  id: string;
  sandbox_id: string;
  port: number;
  header: string;
  url: string;
  browser_url: string;
  /** The WebSocket that carries one TCP connection to the port (`spacectl port-forward`). */
  tunnel_url: string;
  expires_at: string;
}

/** A sandbox's ports: `sandbox.ports`. Private by default: a token or a public mark opens one. */
export class Ports {
  /** @internal */
  constructor(
    private readonly t: Transport,
    readonly sandboxId: string,
  ) {}

  private path(suffix = ""): string {
    return `/v1/sandboxes/${seg(this.sandboxId)}/ports${suffix}`;
  }

  /** What listens in the guest and what is exposed, by port. */
  list(): Promise<PortsInfo> {
    return this.t.json<PortsInfo>({ method: "GET", path: this.path() });
  }

  /** Marks a port public (anyone with its URL, no token) or private again. */
  setPublic(port: number, isPublic: boolean): Promise<{ sandbox_id: string; port: number; public: boolean; url: string }> {
    return this.t.json({ method: "PUT", path: this.path(`/${port}`), json: { public: isPublic } });
  }

  /** A token for one port, `ttlS` seconds long (default the daemon's token TTL, at most 86400). */
  token(port: number, opts: { ttlS?: number } = {}): Promise<PortToken> {
    return this.t.json<PortToken>({ method: "POST", path: this.path(`/${port}/tokens`), json: opts.ttlS === undefined ? {} : { ttl_s: opts.ttlS } });
  }

  /** Revokes one of a port's tokens by id, or all of them; returns how many. */
  async revoke(port: number, tokenId?: string): Promise<number> {
    const r = await this.t.json<{ revoked: number }>({
      method: "DELETE",
      path: this.path(`/${port}/tokens${tokenId === undefined ? "" : `/${seg(tokenId)}`}`),
    });
    return r.revoked;
  }
}
