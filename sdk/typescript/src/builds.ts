/* builds.ts -- template builds: build contexts, a build's steps and its log stream, awaiting the result */

import { SpaceError } from "./errors.js";
import { type Body, Transport, seg } from "./http.js";
import { Operations, type WaitOptions } from "./operations.js";
import { readSse } from "./sse.js";
import type { NetworkPolicy } from "./types.js";

/** One step of a build, run in order in the builder VM (Docker's rules for env, workdir, user). */
export type BuildStep =
  | { run: string | string[] }
  | { copy: { src: string; dest: string; chown?: string } }
  | { env: Record<string, string> }
  | { workdir: string }
  | { user: string };

/** What to build (the API's field names; docs/api/reference.md, *Template builds*). */
export interface BuildSpec {
  /** The template's name. */
  name: string;
  /** Tag parts (default `["latest"]`): the template gets `name:tag` for each. */
  tags?: string[];
  /** The base: a template ref. */
  from: string;
  /** A build context's digest from {@link Builds.uploadContext}; needed by `copy` steps. */
  context?: string;
  steps?: BuildStep[];
  /** A command every sandbox of the template starts with, ready once `ready` exits 0. */
  start?: { cmd: string; ready?: string; timeout_s?: number };
  vcpus?: number;
  memory_mib?: number;
  disk_mib?: number;
  /** The builder's egress policy while the steps run (default: deny all). */
  network?: NetworkPolicy;
  expose?: number[];
  labels?: Record<string, string>;
}

/** A build's step as the build record shows it. */
export interface BuildStepInfo {
  index: number;
  kind: "run" | "copy" | "env" | "workdir" | "user";
  text: string;
  state: "pending" | "running" | "done" | "failed";
  cached: boolean;
  duration_ms: number | null;
}

/** A build record (`GET /v1/templates/builds/{id}`). */
export interface BuildInfo {
  id: string;
  name: string;
  tags: string[];
  state: "pending" | "running" | "succeeded" | "failed";
  error: string | null;
  /** The template made, once it succeeded. */
  digest: string | null;
  from: string;
  operation: string;
  steps: BuildStepInfo[];
  created_at: string;
  finished_at: string | null;
  [field: string]: unknown;
}

/** How a build's log ended. */
export interface BuildEnd {
  state: "succeeded" | "failed";
  digest: string | null;
  error: string | null;
}

/** Callbacks for a build's log. */
export interface BuildLogOptions {
  /** A `run` step's output, as it comes (stdout and stderr in order). */
  onLog?: (step: number, text: string) => void;
  /** A step's state changed. */
  onStep?: (step: BuildStepInfo) => void;
  /** Start after this event id (a resume). */
  offset?: number;
  signal?: AbortSignal;
}

/** Template builds: `client.builds`. */
export class Builds {
  private readonly ops: Operations;

  /** @internal */
  constructor(private readonly t: Transport) {
    this.ops = new Operations(t);
  }

  /** Stores a build context (a tar, plain or gzip) once under its digest; `copy` steps read it. */
  uploadContext(tar: Body): Promise<{ context: string; bytes: number }> {
    return this.t.json({ method: "PUT", path: "/v1/contexts", body: tar, headers: { "Content-Type": "application/x-tar" }, timeoutMs: 0 });
  }

  /** Starts a build; resolves at once with its record and operation (see {@link Builds.run} to await it). */
  start(spec: BuildSpec): Promise<{ build: BuildInfo; operation: string }> {
    return this.t.json({ method: "POST", path: "/v1/templates/builds", json: spec });
  }

  /**
   * Builds a template and waits for the result, its log to the callbacks. Resolves with the
   * build record once it succeeded; a failed build rejects with OperationFailedError naming the step.
   * @example
   * const b = await client.builds.run({ name: "myenv", from: "base", steps: [{ run: "pip install numpy" }] },
   *                                   { onLog: (_, s) => process.stdout.write(s) })
   * const sb = await client.sandboxes.create({ template: "myenv" })
   */
  async run(spec: BuildSpec, opts: BuildLogOptions & WaitOptions = {}): Promise<BuildInfo> {
    const { build, operation } = await this.start(spec);
    if (opts.onLog || opts.onStep) await this.logs(build.id, opts);
    await this.ops.wait(operation, opts);
    return this.get(build.id);
  }

  /** Starts a template from a running sandbox's disk (its operation is a build). */
  fromSandbox(sandboxId: string, opts: { name: string; tags?: string[] }): Promise<{ build: BuildInfo; operation: string }> {
    return this.t.json({ method: "POST", path: `/v1/sandboxes/${seg(sandboxId)}/template`, json: opts });
  }

  /** Builds, newest first. */
  async list(): Promise<BuildInfo[]> {
    return (await this.t.json<{ builds: BuildInfo[] }>({ method: "GET", path: "/v1/templates/builds" })).builds;
  }

  /** One build. */
  get(id: string): Promise<BuildInfo> {
    return this.t.json<BuildInfo>({ method: "GET", path: `/v1/templates/builds/${seg(id)}` });
  }

  /** Follows a build's log to its end: each step's state and output to the callbacks. */
  async logs(id: string, opts: BuildLogOptions = {}): Promise<BuildEnd> {
    const resp = await this.t.send({
      method: "GET",
      path: `/v1/templates/builds/${seg(id)}/logs`,
      query: { offset: opts.offset },
      headers: { Accept: "text/event-stream" },
      signal: opts.signal,
      timeoutMs: 0,
    });
    if (resp.body) {
      for await (const ev of readSse(resp.body)) {
        const data = JSON.parse(ev.data) as Record<string, unknown>;
        if (ev.event === "log") opts.onLog?.(data.step as number, data.data as string);
        else if (ev.event === "step") opts.onStep?.(data as unknown as BuildStepInfo);
        else if (ev.event === "end") return data as unknown as BuildEnd;
      }
    }
    throw new SpaceError(`build ${id}: the log ended without an end event`, { code: "connection_error", status: 0 });
  }
}
