/* commands.ts -- command sessions: start, follow the output stream (resuming after drops), stdin, signals, PTYs */

import {
  ConnectionError,
  SpaceError,
  StreamError,
  TimeoutError,
  UnauthorizedError,
  UnavailableError,
} from "./errors.js";
import { type Body, Transport, seg } from "./http.js";
import { fromBase64, readSse } from "./sse.js";
import type { DataPlaneGrant, SessionInfo } from "./types.js";

/** Which of a command's streams a chunk came from. A PTY's output is all `stdout`. */
export type StreamName = "stdout" | "stderr";

/** One piece of a command's output, as the data plane sent it. */
export interface OutputChunk {
  stream: StreamName;
  data: Uint8Array;
  /** The output offset after this chunk (stdout and stderr bytes together, since the start). */
  offset: number;
}

/** A terminal's size. */
export interface PtySize {
  rows: number;
  cols: number;
}

/** How a command starts and how its output is followed. */
export interface CommandOptions {
  /** Added over the template's and the sandbox's environment. */
  env?: Record<string, string>;
  /** Absolute working directory; default the user's home (or the template's workdir). */
  cwd?: string;
  /** Who runs it; default the template's default user. */
  user?: string;
  /**
   * `true`: keep stdin open for {@link Command.sendStdin}; bytes or text: sent, then stdin is
   * closed. Default: no stdin (`/dev/null`).
   */
  stdin?: boolean | string | Uint8Array;
  /** Run on a pseudo-terminal of this size: stdin open, all output `stdout`, `TERM=xterm-256color`. */
  pty?: PtySize;
  /** Seconds the data-plane token lives (1..86400); the SDK asks for a new one when it expires. */
  tokenTtlS?: number;
  /** Each piece of stdout, decoded as UTF-8 (a character split between pieces is kept whole). */
  onStdout?: (text: string) => void;
  /** Each piece of stderr, decoded as UTF-8. */
  onStderr?: (text: string) => void;
  /** Each piece of output as raw bytes with its stream and offset. */
  onOutput?: (chunk: OutputChunk) => void;
  /** Output bytes [from, to) the daemon no longer kept (its output caps); they are not in the result. */
  onDropped?: (from: number, to: number) => void;
  /** Stops following the output (the command runs on: {@link Command.kill} ends it). */
  signal?: AbortSignal;
  /** Reconnects after a dropped connection before giving up (default 8; 0: none). */
  reconnects?: number;
  /** Start following at this output offset instead of 0 (a resume from another process). */
  offset?: number;
  /**
   * Keep the output for the result (default `true`). `false` for a long or endless stream read
   * through the callbacks alone: memory stays flat and the result's output is empty.
   */
  keepOutput?: boolean;
}

/** Options of {@link Commands.run}. */
export interface RunOptions extends CommandOptions {
  /** Throw {@link CommandExitError} when the command exits non-zero or by a signal. */
  check?: boolean;
  /** Give up after this many ms: the command is killed (SIGKILL) and a TimeoutError thrown. */
  timeoutMs?: number;
}

/** How a command ended, with all its output. */
export interface CommandResult {
  /** The session's id (`ss-...`). */
  sessionId: string;
  /** The exit status; `null` when a signal ended it. */
  exitCode: number | null;
  /** The signal that ended it (9, 15, ...); `null` when it exited. */
  signal: number | null;
  /** Its stdout, decoded as UTF-8 (invalid bytes as U+FFFD). */
  stdout: string;
  /** Its stderr, decoded as UTF-8. */
  stderr: string;
  /** Its stdout as bytes. */
  stdoutBytes: Uint8Array;
  /** Its stderr as bytes. */
  stderrBytes: Uint8Array;
  /** The final output offset. */
  offset: number;
  /** Output ranges [from, to) dropped by the daemon's output caps before they were read. */
  dropped: Array<[number, number]>;
}

/** A command that exited non-zero (or by a signal) under `check: true`; `.result` has its output. */
export class CommandExitError extends SpaceError {
  readonly result: CommandResult;
  constructor(result: CommandResult, argv: string[]) {
    const how = result.signal !== null ? `was killed by signal ${result.signal}` : `exited with status ${result.exitCode}`;
    const tail = result.stderr.trim().split("\n").slice(-3).join("\n");
    super(`${JSON.stringify(argv)} ${how}${tail ? `: ${tail}` : ""}`, { code: "command_failed", status: 0 });
    this.result = result;
  }
  /** The exit status (null after a signal). */
  get exitCode(): number | null {
    return this.result.exitCode;
  }
  get stdout(): string {
    return this.result.stdout;
  }
  get stderr(): string {
    return this.result.stderr;
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function toBytes(d: string | Uint8Array): Uint8Array {
  return typeof d === "string" ? new TextEncoder().encode(d) : d;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A failure while following that a reconnect may cure: the connection broke, or the daemon asked to retry. */
function retryable(e: unknown): boolean {
  if (e instanceof ConnectionError || e instanceof UnavailableError) return true;
  if (e instanceof SpaceError) return false;
  return (e as { name?: string })?.name !== "AbortError";
}

/**
 * One command in a sandbox: a session of SPACE's (`ss-...`). Made by {@link Commands.start}; its
 * output is followed from the moment it is made, through reconnects, until it ends.
 */
export class Command {
  /** The session's id. */
  readonly id: string;
  /** The sandbox it runs in. */
  readonly sandboxId: string;
  /** The argv it runs. */
  readonly argv: string[];
  /** The output offset read so far. */
  offset: number;
  /** How many times the stream was reconnected after a drop. */
  reconnectCount = 0;
  private grant: DataPlaneGrant;
  private readonly out: Uint8Array[] = [];
  private readonly err: Uint8Array[] = [];
  private readonly dropped: Array<[number, number]> = [];
  private readonly decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  private done?: Promise<CommandResult>;

  /** @internal */
  constructor(
    private readonly t: Transport,
    info: SessionInfo,
    grant: DataPlaneGrant,
    private readonly opts: CommandOptions = {},
  ) {
    this.id = info.id;
    this.sandboxId = info.sandbox_id;
    this.argv = info.argv;
    this.grant = grant;
    this.offset = opts.offset ?? 0;
  }

  /** @internal Begins following (the first attach starts the process). */
  follow(): this {
    this.done ??= this.followLoop();
    this.done.catch(() => undefined); // the error is the caller's, through wait()
    return this;
  }

  /** Resolves when the command has ended, with its result; rejects if following failed. */
  wait(): Promise<CommandResult> {
    return this.follow().done as Promise<CommandResult>;
  }

  /** The session's record from the data plane (state, pid, exit code, output offsets). */
  info(): Promise<SessionInfo> {
    return this.dp<SessionInfo>("GET", "");
  }

  /** Sends bytes (or UTF-8 text) to its stdin; `close` closes stdin after them. */
  async sendStdin(data: string | Uint8Array, opts: { close?: boolean } = {}): Promise<void> {
    await this.dp("POST", "/stdin", { query: { close: opts.close }, body: toBytes(data) });
  }

  /** Closes its stdin (the process reads an end of file; a PTY gets ^D). */
  async closeStdin(): Promise<void> {
    await this.dp("POST", "/stdin/close");
  }

  /** Sends a signal: a name (`"SIGTERM"`, `"TERM"`) or a number. 409 ConflictError if it is not running. */
  async sendSignal(sig: string | number): Promise<void> {
    const signal = typeof sig === "number" ? sig : sig.startsWith("SIG") ? sig : `SIG${sig}`;
    await this.dp("POST", "/signal", { json: { signal } });
  }

  /** Ends it with SIGKILL. */
  kill(): Promise<void> {
    return this.sendSignal("SIGKILL");
  }

  /** A PTY's new size (its foreground process gets SIGWINCH). */
  async resize(size: PtySize): Promise<void> {
    await this.dp("POST", "/resize", { json: size });
  }

  /** Replaces the data-plane token with a fresh one (done by itself when the token is refused). */
  async renewToken(ttlS?: number): Promise<void> {
    const r = await this.t.json<{ data_plane: DataPlaneGrant }>({
      method: "POST",
      path: `/v1/sandboxes/${seg(this.sandboxId)}/sessions/${seg(this.id)}/token`,
      json: ttlS === undefined ? {} : { token_ttl_s: ttlS },
    });
    this.grant = r.data_plane;
  }

  /** A data-plane request for this session; a refused (expired) token is renewed once. */
  private async dp<T>(method: string, path: string, extra: { query?: Record<string, boolean | undefined>; json?: unknown; body?: Body } = {}): Promise<T> {
    const spec = () => ({ method, path: `/v1/sessions/${seg(this.id)}${path}`, dataPlane: this.grant, ...extra });
    try {
      return await this.t.json<T>(spec());
    } catch (e) {
      if (!(e instanceof UnauthorizedError) || e.status !== 401) throw e;
      await this.renewToken(this.opts.tokenTtlS);
      return await this.t.json<T>(spec());
    }
  }

  private deliver(stream: StreamName, data: Uint8Array, offset: number): void {
    if (this.opts.keepOutput !== false) (stream === "stdout" ? this.out : this.err).push(data);
    this.offset = offset;
    this.opts.onOutput?.({ stream, data, offset });
    const cb = stream === "stdout" ? this.opts.onStdout : this.opts.onStderr;
    if (cb) {
      const text = this.decoders[stream].decode(data, { stream: true });
      if (text) cb(text);
    }
  }

  private result(exitCode: number | null, signal: number | null): CommandResult {
    for (const s of ["stdout", "stderr"] as const) {
      const rest = this.decoders[s].decode();
      const cb = s === "stdout" ? this.opts.onStdout : this.opts.onStderr;
      if (rest && cb) cb(rest);
    }
    const stdoutBytes = concat(this.out);
    const stderrBytes = concat(this.err);
    const dec = new TextDecoder();
    return {
      sessionId: this.id,
      exitCode,
      signal,
      stdout: dec.decode(stdoutBytes),
      stderr: dec.decode(stderrBytes),
      stdoutBytes,
      stderrBytes,
      offset: this.offset,
      dropped: [...this.dropped],
    };
  }

  /** Attaches, reads events until `exit`; after a drop attaches again from the last offset seen. */
  private async followLoop(): Promise<CommandResult> {
    const max = this.opts.reconnects ?? 8;
    let failures = 0;
    let renewed = false;
    for (;;) {
      let lastError: unknown;
      const before = this.offset;
      try {
        const r = await this.attachOnce();
        if (r) return r;
        lastError = new ConnectionError(`attach ${this.id}: the stream ended before the command did`, { code: "connection_error", status: 0 });
      } catch (e) {
        if (e instanceof UnauthorizedError && e.status === 401 && !renewed) {
          renewed = true; // an expired token: a fresh one, once per successful read
          await this.renewToken(this.opts.tokenTtlS);
          continue;
        }
        if (!retryable(e)) throw e;
        lastError = e;
      }
      if (this.offset > before) failures = 0; // it got somewhere: the count is of drops in a row
      if (++failures > max) throw lastError;
      this.reconnectCount++;
      renewed = false;
      await sleep(Math.min(100 * 2 ** (failures - 1), 2000));
    }
  }

  /** One attachment: the result at `exit`, or `undefined` when the stream ended without one. */
  private async attachOnce(): Promise<CommandResult | undefined> {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (this.offset > 0) headers["Last-Event-ID"] = String(this.offset);
    const resp = await this.t.send({
      method: "POST",
      path: `/v1/sessions/${seg(this.id)}/attach`,
      headers,
      dataPlane: this.grant,
      signal: this.opts.signal,
      timeoutMs: 0,
    });
    if (!resp.body) return undefined;
    for await (const ev of readSse(resp.body)) {
      if (ev.event === "stdout" || ev.event === "stderr") {
        const data = fromBase64(ev.data);
        const to = ev.id === undefined ? this.offset + data.length : Number(ev.id);
        if (to !== this.offset + data.length)
          throw new SpaceError(`attach ${this.id}: event id ${ev.id} is not offset ${this.offset} + ${data.length} bytes`, { code: "stream_error", status: 0 });
        this.deliver(ev.event, data, to);
      } else if (ev.event === "exit") {
        const x = JSON.parse(ev.data) as { exit_code: number | null; signal: number | null };
        return this.result(x.exit_code ?? null, x.signal ?? null);
      } else if (ev.event === "dropped") {
        const d = JSON.parse(ev.data) as { from: number; to: number };
        this.dropped.push([d.from, d.to]);
        this.offset = d.to;
        this.opts.onDropped?.(d.from, d.to);
      } else if (ev.event === "error") {
        const m = (JSON.parse(ev.data) as { message?: string }).message ?? ev.data;
        throw new StreamError(`${this.id}: ${m}`, { code: "stream_error", status: 0 });
      }
    }
    return undefined;
  }
}

/** What a create of a session sends (the API's field names). */
function sessionBody(argv: string[], opts: CommandOptions): Record<string, unknown> {
  const b: Record<string, unknown> = { argv };
  if (opts.env) b.env = opts.env;
  if (opts.cwd !== undefined) b.cwd = opts.cwd;
  if (opts.user !== undefined) b.user = opts.user;
  if (opts.stdin !== undefined && opts.stdin !== false && !opts.pty) b.stdin = true;
  if (opts.pty) b.pty = opts.pty;
  if (opts.tokenTtlS !== undefined) b.token_ttl_s = opts.tokenTtlS;
  return b;
}

/** A command line as argv: a string runs through `/bin/sh -c`. */
export function toArgv(cmd: string | string[]): string[] {
  return typeof cmd === "string" ? ["/bin/sh", "-c", cmd] : cmd;
}

/** A sandbox's commands: `sandbox.commands`. */
export class Commands {
  /** @internal */
  constructor(
    private readonly t: Transport,
    readonly sandboxId: string,
  ) {}

  /**
   * Starts a command and follows its output (callbacks in `opts`) without waiting for its end;
   * `await cmd.wait()` for that.
   * @param cmd an argv (`["python3", "-c", "print(1)"]`), or a shell line run by `/bin/sh -c`.
   * @example
   * const cmd = await sb.commands.start(["cat"], { stdin: true, onStdout: (s) => process.stdout.write(s) })
   * await cmd.sendStdin("hello\n", { close: true })
   * const r = await cmd.wait()   // r.stdout === "hello\n"
   */
  async start(cmd: string | string[], opts: CommandOptions = {}): Promise<Command> {
    const argv = toArgv(cmd);
    const r = await this.t.json<{ session: SessionInfo; data_plane: DataPlaneGrant }>({
      method: "POST",
      path: `/v1/sandboxes/${seg(this.sandboxId)}/sessions`,
      json: sessionBody(argv, opts),
    });
    const c = new Command(this.t, r.session, r.data_plane, opts);
    // stdin is queued by the daemon until the process reads it, so it may go before the start.
    if (typeof opts.stdin === "string" || opts.stdin instanceof Uint8Array) await c.sendStdin(opts.stdin, { close: true });
    return c.follow();
  }

  /**
   * Runs a command to its end and returns its result. A non-zero exit is a result, not an
   * error, unless `check` is set.
   * @example
   * const r = await sb.commands.run(["python3", "-c", "print(6*7)"])   // r.stdout === "42\n", r.exitCode === 0
   */
  async run(cmd: string | string[], opts: RunOptions = {}): Promise<CommandResult> {
    const c = await this.start(cmd, opts);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = c.wait();
    const r = await (opts.timeoutMs === undefined
      ? waited
      : Promise.race([
          waited,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => {
              c.kill().catch(() => undefined);
              reject(new TimeoutError(`${JSON.stringify(c.argv)}: still running after ${opts.timeoutMs} ms; killed`, { code: "timeout", status: 0 }));
            }, opts.timeoutMs);
          }),
        ])).finally(() => clearTimeout(timer));
    if (opts.check && (r.exitCode !== 0 || r.signal !== null)) throw new CommandExitError(r, c.argv);
    return r;
  }

  /**
   * Follows a session that exists already (started by another process, or whose connection this
   * process lost), from `opts.offset` (default 0: all output still kept). A fresh token is asked for.
   */
  async connect(sessionId: string, opts: CommandOptions = {}): Promise<Command> {
    const info = await this.get(sessionId);
    const r = await this.t.json<{ data_plane: DataPlaneGrant }>({
      method: "POST",
      path: `/v1/sandboxes/${seg(this.sandboxId)}/sessions/${seg(sessionId)}/token`,
      json: opts.tokenTtlS === undefined ? {} : { token_ttl_s: opts.tokenTtlS },
    });
    return new Command(this.t, info, r.data_plane, opts).follow();
  }

  /** The sandbox's sessions. */
  async list(): Promise<SessionInfo[]> {
    const r = await this.t.json<{ sessions: SessionInfo[] }>({ method: "GET", path: `/v1/sandboxes/${seg(this.sandboxId)}/sessions` });
    return r.sessions;
  }

  /** One session's record. */
  get(sessionId: string): Promise<SessionInfo> {
    return this.t.json<SessionInfo>({ method: "GET", path: `/v1/sandboxes/${seg(this.sandboxId)}/sessions/${seg(sessionId)}` });
  }
}
