/* sandbox.ts -- one sandbox: its lifecycle verbs, fork and snapshots, network policy, commands, files, ports */

import { type CommandResult, Commands, type RunOptions } from "./commands.js";
import { Files } from "./files.js";
import { Transport, seg } from "./http.js";
import { Operations, type WaitOptions } from "./operations.js";
import { Ports } from "./ports.js";
import type { EgressRecord, NetworkPolicy, OnTimeout, Operation, SandboxInfo, SnapshotInfo } from "./types.js";

/** Options of every lifecycle verb. */
export interface LifecycleOptions extends WaitOptions {
  /** Await the operation (default `true`); `false` returns as soon as it started. */
  wait?: boolean;
}

/** What a lifecycle verb answers: the operation (done, unless `wait: false`) and the sandbox then. */
export interface LifecycleResult {
  operation: Operation;
  sandbox: SandboxInfo;
}

/** A files token: opens this sandbox's file routes on the data plane and nothing else. */
export interface FilesToken {
  token: string;
  scope: "files";
  sandbox_id: string;
  url: string;
  expires_at: string;
}

/**
 * One sandbox. Get one from `client.sandboxes.create()`, `.get()` or `.list()`; `info` is its
 * record as last seen (`refresh()` reads it again).
 */
export class Sandbox {
  /** Its id, `sb-<16 hex>`. */
  readonly id: string;
  /** Its record as last seen (after this object's latest call that returned it). */
  info: SandboxInfo;
  /** Its commands: start, run, connect, list. */
  readonly commands: Commands;
  /** Its files. */
  readonly files: Files;
  /** Its TCP ports on the data plane: public marks and tokens. */
  readonly ports: Ports;
  /**
   * The create's operation, when `client.sandboxes.create({wait: false})` made this object
   * (await it with `client.operations.wait`); else undefined.
   */
  operation?: Operation;
  private readonly ops: Operations;

  /** @internal */
  constructor(
    private readonly t: Transport,
    info: SandboxInfo,
  ) {
    this.id = info.id;
    this.info = info;
    this.commands = new Commands(t, info.id);
    this.files = new Files(t, info.id);
    this.ports = new Ports(t, info.id);
    this.ops = new Operations(t);
  }

  /** Its state as last seen. */
  get state(): SandboxInfo["state"] {
    return this.info.state;
  }

  private path(suffix = ""): string {
    return `/v1/sandboxes/${seg(this.id)}${suffix}`;
  }

  /** Reads its record again. */
  async refresh(): Promise<SandboxInfo> {
    this.info = await this.t.json<SandboxInfo>({ method: "GET", path: this.path() });
    return this.info;
  }

  /**
   * Runs a command to its end (see {@link Commands.run}; `sb.commands.start()` starts one
   * without waiting).
   * @example
   * const r = await sb.run(["python3", "-c", "print(6*7)"])   // r.stdout === "42\n", r.exitCode === 0
   */
  run(cmd: string | string[], opts: RunOptions = {}): Promise<CommandResult> {
    return this.commands.run(cmd, opts);
  }

  /** POSTs a lifecycle verb and (by default) awaits its operation. */
  private async act(verb: string, json: unknown, opts: LifecycleOptions): Promise<LifecycleResult> {
    const r = await this.t.json<{ sandbox: SandboxInfo; operation: Operation | null }>({ method: "POST", path: this.path(`/${verb}`), json });
    this.info = r.sandbox;
    if (!r.operation) return { operation: null as unknown as Operation, sandbox: r.sandbox };
    if (opts.wait === false) return { operation: r.operation, sandbox: r.sandbox };
    const op = await this.ops.wait(r.operation, opts);
    return { operation: op, sandbox: await this.refresh() };
  }

  /** Stops its vCPUs; memory stays (running → paused). */
  pause(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("pause", {}, opts);
  }
  /** Runs a paused sandbox again (paused → running). */
  resume(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("resume", {}, opts);
  }
  /** Writes memory and device state to disk and ends the VM (running or paused → suspended). */
  suspend(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("suspend", {}, opts);
  }
  /** Starts the VM from its saved state, processes and sessions as they were (suspended → running). */
  restore(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("restore", {}, opts);
  }
  /** Shuts the guest down cleanly, keeping the disk (→ stopped). */
  stop(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("stop", {}, opts);
  }
  /** Boots a stopped sandbox's kept disk (stopped → running). */
  start(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    return this.act("start", {}, opts);
  }
  /**
   * Whichever of resume, restore or start applies. A running sandbox needs none: then
   * `operation` is `null`.
   */
  async wake(opts: LifecycleOptions = {}): Promise<{ operation: Operation | null; sandbox: SandboxInfo }> {
    return this.act("wake", {}, opts);
  }

  /**
   * Forks it into `count` sandboxes (1..16) whose memory and disk are its own at one instant.
   * By default waits until every child runs.
   * @example
   * const [kid] = await sb.fork({ count: 1 })
   * await kid.delete()
   */
  async fork(opts: LifecycleOptions & { count?: number } = {}): Promise<Sandbox[]> {
    const r = await this.t.json<{ sandbox: SandboxInfo; operation: Operation; children: string[] }>({
      method: "POST",
      path: this.path("/fork"),
      json: { count: opts.count ?? 1 },
    });
    this.info = r.sandbox;
    if (opts.wait !== false) await this.ops.wait(r.operation, opts);
    return Promise.all(
      r.children.map(async (id) => new Sandbox(this.t, await this.t.json<SandboxInfo>({ method: "GET", path: `/v1/sandboxes/${seg(id)}` }))),
    );
  }

  /**
   * Takes a named snapshot of its memory and disk, which outlives it; create sandboxes from it
   * with `client.sandboxes.create({snapshot: name})`. By default waits until it is ready.
   */
  async snapshot(name: string, opts: LifecycleOptions = {}): Promise<SnapshotInfo> {
    const r = await this.t.json<{ sandbox: SandboxInfo; operation: Operation; snapshot: SnapshotInfo | null }>({
      method: "POST",
      path: this.path("/snapshots"),
      json: { name },
    });
    this.info = r.sandbox;
    if (opts.wait === false && r.snapshot) return r.snapshot;
    const op = await this.ops.wait(r.operation, opts);
    const id = (op.result?.snapshot_id as string | undefined) ?? r.snapshot?.id ?? name;
    return this.t.json<SnapshotInfo>({ method: "GET", path: `/v1/snapshots/${seg(id)}` });
  }

  /**
   * Sets when its timeout acts, `timeoutS` seconds from now (0: never), and optionally what it
   * does then (`delete`, `suspend`, `suspend_idle`).
   */
  async setTimeout(timeoutS: number, opts: { onTimeout?: OnTimeout } = {}): Promise<SandboxInfo> {
    const json: Record<string, unknown> = { timeout_s: timeoutS };
    if (opts.onTimeout) json.on_timeout = opts.onTimeout;
    this.info = await this.t.json<SandboxInfo>({ method: "POST", path: this.path("/timeout"), json });
    return this.info;
  }

  /** Its egress policy (read from its record). */
  async getNetwork(): Promise<NetworkPolicy> {
    return (await this.refresh()).network;
  }

  /** Replaces its egress policy; resolves once its gateway applies it. Returns it normalised. */
  async setNetwork(policy: NetworkPolicy): Promise<NetworkPolicy> {
    return this.t.json<NetworkPolicy>({ method: "PUT", path: this.path("/network"), json: policy });
  }

  /** Its gateway's latest decisions, newest last (`limit` 1..10000, default 1000). */
  async egress(opts: { limit?: number } = {}): Promise<EgressRecord[]> {
    const r = await this.t.json<{ records: EgressRecord[] }>({ method: "GET", path: this.path("/egress"), query: { limit: opts.limit } });
    return r.records;
  }

  /** The guest's console (the last 1 MiB). */
  async logs(): Promise<string> {
    const spec = { method: "GET", path: this.path("/logs") };
    return this.t.text(await this.t.send(spec), spec);
  }

  /** A token for this sandbox's files on the data plane (for a browser), `ttlS` seconds long. */
  filesToken(opts: { ttlS?: number } = {}): Promise<FilesToken> {
    const json: Record<string, unknown> = { scope: "files" };
    if (opts.ttlS !== undefined) json.ttl_s = opts.ttlS;
    return this.t.json<FilesToken>({ method: "POST", path: this.path("/tokens"), json });
  }

  /** Deletes it (from any state but deleting or deleted); by default waits until it is gone. */
  async delete(opts: LifecycleOptions = {}): Promise<LifecycleResult> {
    const r = await this.t.json<{ sandbox: SandboxInfo; operation: Operation }>({ method: "DELETE", path: this.path() });
    this.info = r.sandbox;
    if (opts.wait === false) return r;
    const op = await this.ops.wait(r.operation, opts);
    return { operation: op, sandbox: await this.refresh() };
  }
}
