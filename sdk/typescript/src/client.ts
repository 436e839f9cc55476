/* client.ts -- the entry point: a Client and its collections (sandboxes, snapshots, templates, builds, secrets) */

import { Events, Webhooks } from "./events.js";
import { Builds } from "./builds.js";
import { type ClientOptions, resolveConfig } from "./config.js";
import { Transport, seg } from "./http.js";
import { Operations, type WaitOptions } from "./operations.js";
import { Sandbox } from "./sandbox.js";
import type {
  DaemonInfo,
  NetworkPolicy,
  OnTimeout,
  Operation,
  SandboxInfo,
  SandboxState,
  SecretInfo,
  SnapshotInfo,
  TemplateInfo,
} from "./types.js";

/** What a sandbox is made from and how. Exactly one of `template` and `snapshot`. */
export interface CreateOptions extends WaitOptions {
  /** A template ref: `minimal`, `base`, `name:tag`, `name@sha256:...`. Default `base` (without `snapshot`). */
  template?: string;
  /** A named snapshot's name or id, to start from instead of a template. */
  snapshot?: string;
  /** vCPUs (1..16); default the template's. */
  vcpus?: number;
  /** Memory in MiB (64..65536); default the template's. */
  memoryMib?: number;
  /** Environment for every command, over the template's. */
  env?: Record<string, string>;
  /** Labels to find it by (`list({metadata})`). */
  metadata?: Record<string, string>;
  /** Seconds until its timeout acts (0: never); default the daemon's (900). */
  timeoutS?: number;
  /** What the timeout does: `delete` (default), `suspend` or `suspend_idle`. */
  onTimeout?: OnTimeout;
  /** Its egress policy; default the template's, else deny all. */
  network?: NetworkPolicy;
  /** Await the create (default `true`): the sandbox is running when this resolves. */
  wait?: boolean;
}

/** Sandboxes: `client.sandboxes`. */
export class Sandboxes {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly ops: Operations,
  ) {}

  /**
   * Creates a sandbox and (unless `wait: false`) waits until it runs. A failed create rejects
   * with OperationFailedError; no room, with AtCapacityError.
   * @example
   * const sb = await new Client().sandboxes.create({ template: "base" })
   */
  async create(opts: CreateOptions = {}): Promise<Sandbox> {
    const json: Record<string, unknown> = {};
    if (opts.snapshot !== undefined) json.snapshot = opts.snapshot;
    if (opts.template !== undefined || opts.snapshot === undefined) json.template = opts.template ?? "base";
    if (opts.vcpus !== undefined) json.vcpus = opts.vcpus;
    if (opts.memoryMib !== undefined) json.memory_mib = opts.memoryMib;
    if (opts.env) json.env = opts.env;
    if (opts.metadata) json.metadata = opts.metadata;
    if (opts.timeoutS !== undefined) json.timeout_s = opts.timeoutS;
    if (opts.onTimeout !== undefined) json.on_timeout = opts.onTimeout;
    if (opts.network) json.network = opts.network;
    const r = await this.t.json<{ sandbox: SandboxInfo; operation: Operation }>({ method: "POST", path: "/v1/sandboxes", json });
    const sb = new Sandbox(this.t, r.sandbox);
    sb.operation = r.operation;
    if (opts.wait === false) return sb;
    await this.ops.wait(r.operation, opts);
    await sb.refresh();
    return sb;
  }

  /** A sandbox by id (deleted ones too, in state `deleted`). NotFoundError if unknown. */
  async get(id: string): Promise<Sandbox> {
    return new Sandbox(this.t, await this.t.json<SandboxInfo>({ method: "GET", path: `/v1/sandboxes/${seg(id)}` }));
  }

  /**
   * Sandboxes, every state but `deleted` by default; `state` picks states, `metadata` keeps
   * those whose labels all match.
   */
  async list(opts: { state?: SandboxState | SandboxState[]; metadata?: Record<string, string> } = {}): Promise<Sandbox[]> {
    const query: Record<string, string> = {};
    if (opts.state) query.state = Array.isArray(opts.state) ? opts.state.join(",") : opts.state;
    for (const [k, v] of Object.entries(opts.metadata ?? {})) query[`metadata.${k}`] = v;
    const r = await this.t.json<{ sandboxes: SandboxInfo[] }>({ method: "GET", path: "/v1/sandboxes", query });
    return r.sandboxes.map((s) => new Sandbox(this.t, s));
  }

  /** Deletes a sandbox by id and (unless `wait: false`) waits until it is gone. */
  async delete(id: string, opts: WaitOptions & { wait?: boolean } = {}): Promise<void> {
    await new Sandbox(this.t, { id } as SandboxInfo).delete(opts);
  }
}

/** Snapshots: `client.snapshots`. Named ones are made by {@link Sandbox.snapshot}. */
export class Snapshots {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Named and ready snapshots, oldest first. */
  async list(): Promise<SnapshotInfo[]> {
    return (await this.t.json<{ snapshots: SnapshotInfo[] }>({ method: "GET", path: "/v1/snapshots" })).snapshots;
  }

  /** A snapshot by id or name. */
  get(ref: string): Promise<SnapshotInfo> {
    return this.t.json<SnapshotInfo>({ method: "GET", path: `/v1/snapshots/${seg(ref)}` });
  }

  /** Deletes a named snapshot (sandboxes cloned from it run on). */
  async delete(ref: string): Promise<void> {
    await this.t.json({ method: "DELETE", path: `/v1/snapshots/${seg(ref)}` });
  }
}

/** Templates: `client.templates`. */
export class Templates {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Every template. */
  async list(): Promise<TemplateInfo[]> {
    return (await this.t.json<{ templates: TemplateInfo[] }>({ method: "GET", path: "/v1/templates" })).templates;
  }

  /** One template by ref (`name`, `name:tag`, `name@sha256:...`, `sha256:...`), with its `history`. */
  get(ref: string): Promise<TemplateInfo> {
    return this.t.json<TemplateInfo>({ method: "GET", path: `/v1/templates/${seg(ref)}` });
  }

  /**
   * Drops a tag (`name:tag`) or every tag of a name; the digests stay (sandboxes made from them
   * run on). NotFoundError when no tag matched.
   */
  async delete(ref: string): Promise<void> {
    await this.t.json({ method: "DELETE", path: `/v1/templates/${seg(ref)}` });
  }

  /** Keeps `size` VMs of the template booted for creates to claim (0 ends the pool). */
  setPool(ref: string, size: number): Promise<TemplateInfo> {
    return this.t.json<TemplateInfo>({ method: "PUT", path: `/v1/templates/${seg(ref)}/pool`, json: { size } });
  }
}

/**
 * Secrets: `client.secrets`. A secret's value is never returned; sandboxes' gateways add it to
 * requests for its hosts (an `inject` rule of their network policy), so the guest never sees it.
 */
export class Secrets {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /**
   * Creates or replaces a secret, bound to `hosts` (exact names or `*.suffix`): the only hosts
   * it may be sent to. Running gateways that use it get the new value.
   */
  put(name: string, opts: { value: string; hosts: string[] }): Promise<SecretInfo> {
    return this.t.json<SecretInfo>({ method: "PUT", path: `/v1/secrets/${seg(name)}`, json: { value: opts.value, hosts: opts.hosts } });
  }

  /** Every secret (names and hosts, never values). */
  async list(): Promise<SecretInfo[]> {
    return (await this.t.json<{ secrets: SecretInfo[] }>({ method: "GET", path: "/v1/secrets" })).secrets;
  }

  /** One secret's record. */
  get(name: string): Promise<SecretInfo> {
    return this.t.json<SecretInfo>({ method: "GET", path: `/v1/secrets/${seg(name)}` });
  }

  /** Deletes a secret. */
  async delete(name: string): Promise<void> {
    await this.t.json({ method: "DELETE", path: `/v1/secrets/${seg(name)}` });
  }
}

/**
 * A client of one SPACE daemon. Options override the environment: `SPACE_URL` (default
 * `http://127.0.0.1:7070`), `SPACE_API_KEY`, else `SPACE_API_KEY_FILE`.
 * @example
 * const client = new Client()   // SPACE_URL, SPACE_API_KEY
 * const sb = await client.sandboxes.create({ template: "base" })
 * const r = await sb.run(["python3", "-c", "print(6*7)"])   // r.stdout === "42\n"
 * await sb.delete()
 */
export class Client {
  /** Create, get, list and delete sandboxes. */
  readonly sandboxes: Sandboxes;
  /** Operations, awaited. */
  readonly operations: Operations;
  /** Named and ready snapshots. */
  readonly snapshots: Snapshots;
  /** Templates and their warm pools. */
  readonly templates: Templates;
  /** Secrets for network policies' inject rules. */
  readonly secrets: Secrets;
  /** Template builds and build contexts. */
  readonly builds: Builds;
  /** Lifecycle events of every sandbox, in order. */
  readonly events: Events;
  /** Where events are POSTed, signed. */
  readonly webhooks: Webhooks;
  private readonly t: Transport;

  /** Throws UnauthorizedError when no API key is given or set in the environment. */
  constructor(opts: ClientOptions = {}) {
    this.t = new Transport(resolveConfig(opts));
    this.operations = new Operations(this.t);
    this.sandboxes = new Sandboxes(this.t, this.operations);
    this.snapshots = new Snapshots(this.t);
    this.templates = new Templates(this.t);
    this.secrets = new Secrets(this.t);
    this.builds = new Builds(this.t);
    this.events = new Events(this.t);
    this.webhooks = new Webhooks(this.t);
  }

  /** The control plane's base URL. */
  get url(): string {
    return this.t.cfg.url;
  }

  /** `GET /v1/info`: version, accelerator, data plane URL, capacity. */
  info(): Promise<DaemonInfo> {
    return this.t.json<DaemonInfo>({ method: "GET", path: "/v1/info" });
  }
}
