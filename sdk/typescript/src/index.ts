/* index.ts -- the package's exports: SPACE's TypeScript SDK (docs/guides/sdk-typescript.md) */

export { Client, Sandboxes, Snapshots, Templates, Secrets, type CreateOptions } from "./client.js";
export { DEFAULT_URL, type ClientOptions } from "./config.js";
export { Sandbox, type LifecycleOptions, type LifecycleResult, type FilesToken } from "./sandbox.js";
export {
  Command,
  Commands,
  CommandExitError,
  toArgv,
  type CommandOptions,
  type RunOptions,
  type CommandResult,
  type OutputChunk,
  type PtySize,
  type StreamName,
} from "./commands.js";
export { Files, type FileOptions, type ReadOptions, type WriteOptions, type WatchOptions, type Watch, type TarResult } from "./files.js";
export { Operations, type WaitOptions } from "./operations.js";
export {
  Builds,
  type BuildSpec,
  type BuildStep,
  type BuildStepInfo,
  type BuildInfo,
  type BuildEnd,
  type BuildLogOptions,
} from "./builds.js";
export { Ports, type PortInfo, type PortsInfo, type PortToken } from "./ports.js";
export {
  Events,
  Webhooks,
  verifySignature,
  type LifecycleEvent,
  type EventPage,
  type EventQuery,
  type WebhookInfo,
  type Delivery,
} from "./events.js";
export * from "./errors.js";
export type * from "./types.js";
