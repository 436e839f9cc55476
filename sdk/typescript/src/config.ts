/* config.ts -- where the client finds the daemon and its key: options, then SPACE_* variables */

import { SpaceError, UnauthorizedError } from "./errors.js";

/** The control plane's address when neither `url` nor `SPACE_URL` names one. */
export const DEFAULT_URL = "http://127.0.0.1:7070";

/** How a {@link Client} is set up. Every field is optional; the environment fills the gaps. */
export interface ClientOptions {
  /** The control plane's base URL. Default: `SPACE_URL`, else `http://127.0.0.1:7070`. */
  url?: string;
  /** The API key. Default: `SPACE_API_KEY`, else the file named by `apiKeyFile`. */
  apiKey?: string;
  /**
   * A file holding the API key (one line), owned by this user or root with mode 600 or
   * stricter, as `spacectl` requires. Default: `SPACE_API_KEY_FILE`. Node.js only.
   */
  apiKeyFile?: string;
  /**
   * The data plane's base URL for command streams, in place of the one the daemon names in each
   * session's grant (a proxy or tunnel in between). Default: the daemon's.
   */
  dataPlaneUrl?: string;
  /** The `fetch` to use. Default: the global one. */
  fetch?: typeof fetch;
  /** How long one plain request may take, in ms (streams and long-polls excepted). Default 60000. */
  requestTimeoutMs?: number;
  /** How long awaiting an operation (create, fork, ...) may take, in ms. Default 600000. */
  operationTimeoutMs?: number;
  /** Headers sent with every control-plane request. */
  headers?: Record<string, string>;
}

/** The options with every default applied. */
export interface ResolvedConfig {
  url: string;
  dataPlaneUrl?: string;
  fetch: typeof fetch;
  requestTimeoutMs: number;
  operationTimeoutMs: number;
  headers: Record<string, string>;
  /** Resolves to the API key (read from its file on first use). */
  apiKey: () => Promise<string>;
}

function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const v = proc?.env?.[name];
  return v === undefined || v === "" ? undefined : v;
}

/** The first line without trailing blanks; it must be one word of printable ASCII (as spacectl). */
function parseKey(path: string, text: string): string {
  const nl = text.indexOf("\n");
  const first = (nl < 0 ? text : text.slice(0, nl)).replace(/[ \t\r]+$/, "");
  if (nl >= 0 && text.slice(nl + 1).trim() !== "") throw keyError(`key file ${path}: more than one line`);
  if (first === "") throw keyError(`key file ${path} is empty`);
  if (!/^[\x21-\x7e]+$/.test(first)) throw keyError(`key file ${path}: the key must be one word of printable ASCII`);
  return first;
}

function keyError(message: string, cause?: unknown): SpaceError {
  return new UnauthorizedError(message, { code: "unauthorized", status: 0, cause });
}

interface NodeFs {
  open(path: string, flags: string): Promise<{
    stat(): Promise<{ mode: number; uid: number; isFile(): boolean }>;
    readFile(opts: { encoding: "utf8" }): Promise<string>;
    close(): Promise<void>;
  }>;
}

/** Reads the key file with spacectl's checks: a regular file, ours or root's, no group or other access. */
async function readKeyFile(path: string): Promise<string> {
  const fsName = "node:fs/promises";
  let fs: NodeFs;
  try {
    fs = (await import(fsName)) as NodeFs;
  } catch (e) {
    throw keyError(`SPACE_API_KEY_FILE ${path}: no file system here (Node.js only); pass apiKey`, e);
  }
  let fh;
  try {
    fh = await fs.open(path, "r");
  } catch (e) {
    throw keyError(`opening key file ${path}: ${(e as Error).message}`, e);
  }
  try {
    const st = await fh.stat();
    const proc = (globalThis as { process?: { getuid?: () => number } }).process;
    const uid = proc?.getuid?.();
    if (!st.isFile()) throw keyError(`key file ${path} is not a regular file`);
    if (uid !== undefined && st.uid !== uid && st.uid !== 0)
      throw keyError(`key file ${path} belongs to uid ${st.uid}, not to us (uid ${uid}) or root`);
    if (st.mode & 0o077)
      throw keyError(
        `key file ${path} has mode ${(st.mode & 0o7777).toString(8).padStart(4, "0")}: group and others must have no access (chmod 600 ${path})`,
      );
    return parseKey(path, await fh.readFile({ encoding: "utf8" }));
  } finally {
    await fh.close();
  }
}

/** Applies the defaults: options first, then `SPACE_URL`, `SPACE_API_KEY`, `SPACE_API_KEY_FILE`. */
export function resolveConfig(opts: ClientOptions = {}): ResolvedConfig {
  const url = (opts.url ?? env("SPACE_URL") ?? DEFAULT_URL).replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]/.test(url)) throw new SpaceError(`bad control plane URL ${JSON.stringify(url)}: want http(s)://host[:port]`, { code: "bad_request", status: 0 });
  const direct = opts.apiKey ?? (opts.apiKeyFile ? undefined : env("SPACE_API_KEY"));
  const file = opts.apiKeyFile ?? env("SPACE_API_KEY_FILE");
  if (direct === undefined && file === undefined)
    throw keyError("no API key: set SPACE_API_KEY or SPACE_API_KEY_FILE, or pass apiKey");
  let pending: Promise<string> | undefined;
  const apiKey = () => {
    if (direct !== undefined) return Promise.resolve(direct);
    pending ??= readKeyFile(file as string).catch((e) => {
      pending = undefined;
      throw e;
    });
    return pending;
  };
  const f = opts.fetch ?? globalThis.fetch;
  if (typeof f !== "function") throw new SpaceError("no fetch here: pass options.fetch", { code: "bad_request", status: 0 });
  return {
    url,
    dataPlaneUrl: opts.dataPlaneUrl?.replace(/\/+$/, ""),
    fetch: (input, init) => f(input, init), // unbound: browsers refuse fetch called on another object
    requestTimeoutMs: opts.requestTimeoutMs ?? 60_000,
    operationTimeoutMs: opts.operationTimeoutMs ?? 600_000,
    headers: { ...(opts.headers ?? {}) },
    apiKey,
  };
}
