/* types.ts -- the API's records as the daemon answers them (docs/api/reference.md), typed */

/** A sandbox's state. `failed` only leads to `deleting`. */
export type SandboxState =
  | "creating"
  | "running"
  | "pausing"
  | "paused"
  | "suspending"
  | "suspended"
  | "restoring"
  | "stopping"
  | "stopped"
  | "deleting"
  | "deleted"
  | "failed";

/** What happens when a sandbox's timeout runs out. */
export type OnTimeout = "delete" | "suspend" | "suspend_idle";

/** An allow entry that relays TLS untouched instead of intercepting it. */
export interface AllowEntry {
  /** The entry's text, as a plain allow entry (`pinned.example.com`, `*.example.org:443`). */
  name: string;
  /** `passthrough`: TLS is relayed, the gateway sees no request inside. */
  tls: "passthrough" | "intercept";
}

/** A rule adding a secret's value as a header to requests for a host (the guest never sees it). */
export interface InjectRule {
  /** An exact host or `*.suffix`. */
  host: string;
  /** The header to set, e.g. `Authorization`. */
  header: string;
  /** The secret's name (see {@link Secrets}). */
  secret: string;
  /** Put before the value, e.g. `Bearer `. */
  prefix?: string;
  /** Inject into plain HTTP too (default false). */
  plain_http?: boolean;
}

/**
 * A sandbox's egress policy. Entries: an exact name, `*.suffix`, `*`, an IPv4 CIDR or address,
 * each optionally `:port`. Deny wins; nothing is allowed by default.
 */
export interface NetworkPolicy {
  allow?: Array<string | AllowEntry>;
  deny?: string[];
  inject?: InjectRule[];
}

/** A sandbox record (`GET /v1/sandboxes/{id}`). */
export interface SandboxInfo {
  id: string;
  state: SandboxState;
  /** The template ref as the create named it. */
  template: string;
  template_digest: string;
  vcpus: number;
  memory_mib: number;
  env: Record<string, string>;
  metadata: Record<string, string>;
  timeout_s: number;
  on_timeout: OnTimeout;
  created_at: string;
  updated_at: string;
  /** When the timeout acts; `null` for never. */
  expires_at: string | null;
  /** Why it failed, else `null`. */
  error: string | null;
  /** How its VM first came up: `boot`, `clone`, `pool` or `fork`. */
  start_kind: string;
  /** The sandbox it was forked from. */
  parent_id: string | null;
  /** The snapshot it was cloned from. */
  snapshot: string | null;
  /** In state `suspended`, the bytes its saved state takes on disk. */
  suspended_bytes: number | null;
  network: NetworkPolicy;
  [field: string]: unknown;
}

/** An operation's kind: a lifecycle verb, `create`, `delete` or `build`. */
export type OperationKind =
  | "create"
  | "pause"
  | "resume"
  | "suspend"
  | "restore"
  | "fork"
  | "snapshot"
  | "stop"
  | "start"
  | "delete"
  | "build";

/** An operation record (`GET /v1/operations/{id}`). */
export interface Operation {
  id: string;
  kind: OperationKind;
  sandbox_id: string | null;
  state: "pending" | "running" | "succeeded" | "failed";
  /** Why it failed, else `null`. */
  error: string | null;
  created_at: string;
  updated_at: string;
  /** What it made: fork `{children, snapshot_id}`, snapshot `{snapshot_id, name}`, else `null`. */
  result: Record<string, unknown> | null;
}

/** A snapshot record (`GET /v1/snapshots/{ref}`). */
export interface SnapshotInfo {
  id: string;
  /** A named snapshot's name; `null` for the daemon's own. */
  name: string | null;
  kind: "ready" | "named" | "suspend" | "fork";
  state: "creating" | "ready" | "failed";
  sandbox_id: string;
  template: string;
  template_digest: string;
  vcpus: number;
  memory_mib: number;
  bytes: number;
  created_at: string;
  error: string | null;
  [field: string]: unknown;
}

/** A template record (`GET /v1/templates/{ref}`). */
export interface TemplateInfo {
  name: string;
  digest: string;
  tags: string[];
  vcpus: number;
  memory_mib: number;
  default_user: string;
  env: Record<string, string>;
  image_bytes: number;
  created_at: string;
  pool: { size: number; ready: number };
  ready_snapshot: string | null;
  workdir: string | null;
  labels: Record<string, string>;
  [field: string]: unknown;
}

/** A command session record (`GET /v1/sandboxes/{id}/sessions/{sid}`). */
export interface SessionInfo {
  id: string;
  sandbox_id: string;
  kind: "process" | "pty";
  pty: { rows: number; cols: number } | null;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  user: string;
  stdin: boolean;
  state: "created" | "running" | "exited" | "failed";
  pid: number | null;
  exit_code: number | null;
  signal: number | null;
  error: string | null;
  /** The output offset so far: stdout and stderr bytes since the session began. */
  output_bytes: number;
  /** The first offset still kept (older output was dropped by the output caps). */
  output_start: number;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  [field: string]: unknown;
}

/** Where and how to reach a session on the data plane. */
export interface DataPlaneGrant {
  url: string;
  token: string;
  expires_at: string;
}

/** A secret's record; its value is never returned. */
export interface SecretInfo {
  name: string;
  /** The only hosts the secret may be sent to. */
  hosts: string[];
  created_at: string;
  updated_at: string;
}

/** One egress decision of a sandbox's gateway. */
export interface EgressRecord {
  time: string;
  sandbox: string;
  proto: "dns" | "tcp" | "tls" | "http" | "https";
  dst: string;
  name: string;
  verdict: "allow" | "deny";
  reason: string;
  bytes_out: number;
  bytes_in: number;
  injected: string[];
  [field: string]: unknown;
}

/** A file or directory in a sandbox (`stat`, `list`). A symlink is reported as itself. */
export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  /** `st_mode & 07777`, e.g. 420 (0644). */
  mode: number;
  /** `ls` style, e.g. `-rw-r--r--`. */
  permissions: string;
  uid: number;
  gid: number;
  owner: string;
  group: string;
  /** Unix seconds with a fractional part. */
  mtime: number;
  symlink_target?: string;
}

/** A change seen by {@link Files.watch}. `overflow`: the guest's queue overflowed, events were lost. */
export interface FsEvent {
  type: "create" | "write" | "remove" | "rename" | "chmod" | "overflow";
  path: string;
  dir: boolean;
}

/** `GET /v1/info`. */
export interface DaemonInfo {
  version: string;
  accelerator: string;
  data_plane_url: string;
  capacity: Record<string, number>;
  uptime_s: number;
  [field: string]: unknown;
}
