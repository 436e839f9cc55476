/* files.ts -- a sandbox's files: read, write, list, stat, mkdir, remove, rename, tar, watch */

import { NotFoundError, SpaceError } from "./errors.js";
import { type Body, type Query, Transport, seg } from "./http.js";
import { readSse } from "./sse.js";
import type { FileEntry, FsEvent } from "./types.js";

/** What every file operation may say: who it runs as in the guest. */
export interface FileOptions {
  /** The guest user the operation runs as (the guest's permissions apply); default the template's. */
  user?: string;
  /** Aborts the transfer. */
  signal?: AbortSignal;
}

/** Options of {@link Files.read}. */
export interface ReadOptions extends FileOptions {
  /** `text` (default): UTF-8 decoded; `bytes`: a Uint8Array; `stream`: the body as a ReadableStream. */
  format?: "text" | "bytes" | "stream";
  /** Start at this byte. */
  offset?: number;
  /** At most this many bytes. */
  length?: number;
}

/** Options of {@link Files.write}. */
export interface WriteOptions extends FileOptions {
  /** Permissions, e.g. `0o600` or `"0600"`; default: a replaced file's, else 0644. */
  mode?: number | string;
  /** Create missing parent directories. */
  parents?: boolean;
}

/** Options of {@link Files.watch}. */
export interface WatchOptions extends FileOptions {
  /** Every subdirectory too, including ones created later. */
  recursive?: boolean;
  /** Each change, as it comes. */
  onEvent?: (ev: FsEvent) => void;
}

/** A running watch of a directory (`files.watch`); `stop()` ends it in the guest. */
export interface Watch {
  /** The directory watched, as the guest resolved it. */
  readonly path: string;
  /** Resolves when the watch ended: by {@link Watch.stop}, or by the guest (the directory removed). */
  readonly done: Promise<void>;
  /** Ends the watch (closes its connection; the guest stops watching). */
  stop(): Promise<void>;
  /** The events as an async iterator (each one also goes to `onEvent`). */
  [Symbol.asyncIterator](): AsyncIterator<FsEvent>;
}

/** What a tar upload extracted. */
export interface TarResult {
  path: string;
  entries: number;
  bytes: number;
}

function octal(mode: number | string | undefined): string | undefined {
  if (mode === undefined) return undefined;
  return typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode;
}

/** A sandbox's files: `sandbox.files`. Paths are absolute paths in the guest. */
export class Files {
  /** @internal */
  constructor(
    private readonly t: Transport,
    readonly sandboxId: string,
  ) {}

  private path(suffix = ""): string {
    return `/v1/sandboxes/${seg(this.sandboxId)}/files${suffix}`;
  }

  /**
   * A file's content: text by default, or `{format: "bytes"}` / `{format: "stream"}`.
   * @example
   * await sb.files.write("/home/user/a.txt", "hi")
   * await sb.files.read("/home/user/a.txt")   // "hi"
   */
  read(path: string, opts?: ReadOptions & { format?: "text" }): Promise<string>;
  read(path: string, opts: ReadOptions & { format: "bytes" }): Promise<Uint8Array>;
  read(path: string, opts: ReadOptions & { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts: ReadOptions = {}): Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    const spec = {
      method: "GET",
      path: this.path(),
      query: { path, user: opts.user, offset: opts.offset, length: opts.length } as Query,
      signal: opts.signal,
      timeoutMs: 0,
    };
    if (opts.length !== undefined && opts.offset === undefined) spec.query.offset = 0;
    const resp = await this.t.send(spec);
    if (opts.format === "stream") return resp.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    const bytes = await this.t.bytes(resp, spec);
    return opts.format === "bytes" ? bytes : new TextDecoder().decode(bytes);
  }

  /**
   * Writes a file atomically (readers see the old or the new content, never a part). `data`
   * may be text (UTF-8), bytes, a Blob or a ReadableStream (streamed, any size).
   * @returns the path and the bytes written.
   */
  async write(path: string, data: Body, opts: WriteOptions = {}): Promise<{ path: string; size: number }> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    return this.t.json({
      method: "PUT",
      path: this.path(),
      query: { path, user: opts.user, mode: octal(opts.mode), parents: opts.parents },
      body,
      signal: opts.signal,
      timeoutMs: 0,
    });
  }

  /** The entries of a directory, sorted by name; `depth` > 1 descends (a subdirectory's entries follow it). */
  async list(path: string, opts: FileOptions & { depth?: number } = {}): Promise<FileEntry[]> {
    const r = await this.t.json<{ entries: FileEntry[] }>({
      method: "GET",
      path: this.path("/list"),
      query: { path, depth: opts.depth, user: opts.user },
      signal: opts.signal,
    });
    return r.entries;
  }

  /** One entry (a symlink is reported as itself). NotFoundError if there is none. */
  stat(path: string, opts: FileOptions = {}): Promise<FileEntry> {
    return this.t.json({ method: "GET", path: this.path("/stat"), query: { path, user: opts.user }, signal: opts.signal });
  }

  /** Whether something exists at `path`. */
  async exists(path: string, opts: FileOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /**
   * Makes a directory. Without `parents`, an existing one is an AlreadyExistsError.
   * @returns whether it was created (`false`: it existed, with `parents`).
   */
  async mkdir(path: string, opts: FileOptions & { mode?: number | string; parents?: boolean } = {}): Promise<boolean> {
    const json: Record<string, unknown> = { path };
    if (opts.mode !== undefined) json.mode = octal(opts.mode);
    if (opts.parents !== undefined) json.parents = opts.parents;
    const r = await this.t.json<{ created: boolean }>({ method: "POST", path: this.path("/mkdir"), query: { user: opts.user }, json, signal: opts.signal });
    return r.created;
  }

  /** Removes a file, or a directory (empty, unless `recursive`). */
  async remove(path: string, opts: FileOptions & { recursive?: boolean } = {}): Promise<void> {
    await this.t.json({ method: "DELETE", path: this.path(), query: { path, recursive: opts.recursive, user: opts.user }, signal: opts.signal });
  }

  /** Renames `from` to `to`; `overwrite: false` refuses an existing `to` (AlreadyExistsError). */
  async rename(from: string, to: string, opts: FileOptions & { overwrite?: boolean } = {}): Promise<void> {
    const json: Record<string, unknown> = { from, to };
    if (opts.overwrite !== undefined) json.overwrite = opts.overwrite;
    await this.t.json({ method: "POST", path: this.path("/rename"), query: { user: opts.user }, json, signal: opts.signal });
  }

  /**
   * A tar (pax) of `path`, its entries named under its base name (`proj/`, `proj/a.txt`).
   * `format: "stream"` gives the body as a stream instead of bytes.
   */
  readTar(path: string, opts?: FileOptions & { format?: "bytes" }): Promise<Uint8Array>;
  readTar(path: string, opts: FileOptions & { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async readTar(path: string, opts: FileOptions & { format?: "bytes" | "stream" } = {}): Promise<Uint8Array | ReadableStream<Uint8Array>> {
    const spec = { method: "GET", path: this.path("/tar"), query: { path, user: opts.user }, signal: opts.signal, timeoutMs: 0 };
    const resp = await this.t.send(spec);
    if (opts.format === "stream") return resp.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    return this.t.bytes(resp, spec);
  }

  /**
   * Extracts a tar stream into the existing directory `dir`. Absolute names, `..` and names
   * through a symlink are refused (InvalidArgumentError) and nothing outside `dir` is written.
   */
  writeTar(dir: string, tar: Body, opts: FileOptions = {}): Promise<TarResult> {
    return this.t.json({
      method: "PUT",
      path: this.path("/tar"),
      query: { path: dir, user: opts.user },
      body: tar,
      headers: { "Content-Type": "application/x-tar" },
      signal: opts.signal,
      timeoutMs: 0,
    });
  }

  /**
   * Watches a directory. Resolves once the guest watches it (so a change made after this
   * resolves is seen); events go to `onEvent` and to the returned iterator.
   * @example
   * const w = await sb.files.watch("/tmp", { onEvent: (e) => console.log(e.type, e.path) })
   * await sb.files.write("/tmp/x", "1")
   * await w.stop()
   */
  async watch(path: string, opts: WatchOptions = {}): Promise<Watch> {
    const ctl = new AbortController();
    if (opts.signal) opts.signal.addEventListener("abort", () => ctl.abort(opts.signal?.reason), { once: true });
    const resp = await this.t.send({
      method: "GET",
      path: this.path("/watch"),
      query: { path, recursive: opts.recursive, user: opts.user },
      headers: { Accept: "text/event-stream" },
      signal: ctl.signal,
      timeoutMs: 0,
    });
    if (!resp.body) throw new SpaceError(`watch ${path}: no body`, { code: "stream_error", status: resp.status });
    const events = readSse(resp.body);
    const first = await events.next();
    if (first.done || first.value.event !== "ready") {
      ctl.abort();
      throw new SpaceError(`watch ${path}: the stream did not start with a ready event`, { code: "stream_error", status: resp.status });
    }
    const watched = (JSON.parse(first.value.data) as { path?: string }).path ?? path;
    const queue: FsEvent[] = [];
    let wake: (() => void) | undefined;
    let ended = false;
    let failure: unknown;
    const done = (async () => {
      try {
        for await (const ev of events) {
          if (ev.event === "end") break;
          if (ev.event !== "fs") continue;
          const fe = JSON.parse(ev.data) as FsEvent;
          opts.onEvent?.(fe);
          queue.push(fe);
          wake?.();
        }
      } catch (e) {
        if (!ctl.signal.aborted) failure = e;
      } finally {
        ended = true;
        wake?.();
      }
      if (failure) throw failure;
    })();
    done.catch(() => undefined);
    return {
      path: watched,
      done,
      async stop() {
        ctl.abort();
        await done.catch(() => undefined);
      },
      [Symbol.asyncIterator]() {
        return {
          async next(): Promise<IteratorResult<FsEvent>> {
            for (;;) {
              const v = queue.shift();
              if (v) return { value: v, done: false };
              if (ended) {
                if (failure) throw failure;
                return { value: undefined, done: true };
              }
              await new Promise<void>((r) => (wake = r));
              wake = undefined;
            }
          },
          async return(): Promise<IteratorResult<FsEvent>> {
            ctl.abort();
            return { value: undefined, done: true };
          },
        };
      },
    };
  }
}
