/* operations.ts -- the daemon's asynchronous operations, awaited by long-polling */

import { OperationFailedError, TimeoutError } from "./errors.js";
import { Transport, seg } from "./http.js";
import type { Operation } from "./types.js";

/** Options of {@link Operations.wait}. */
export interface WaitOptions {
  /** Give up after this many ms (TimeoutError; the operation goes on). Default: the client's `operationTimeoutMs`. */
  timeoutMs?: number;
  /** Stops waiting. */
  signal?: AbortSignal;
}

/** Operations: `client.operations`. Every lifecycle verb starts one; the SDK's methods await it by default. */
export class Operations {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** An operation's record; `waitS` (0..60) long-polls until it is done or the wait is over. */
  get(id: string, opts: { waitS?: number; signal?: AbortSignal } = {}): Promise<Operation> {
    const waitS = opts.waitS;
    return this.t.json<Operation>({
      method: "GET",
      path: `/v1/operations/${seg(id)}`,
      query: { wait: waitS },
      signal: opts.signal,
      timeoutMs: waitS ? this.t.cfg.requestTimeoutMs + waitS * 1000 : undefined,
    });
  }

  /**
   * Waits until the operation is done. Resolves with it when it succeeded; rejects with
   * {@link OperationFailedError} (its `.operation` says why) when it failed.
   */
  async wait(op: string | Operation, opts: WaitOptions = {}): Promise<Operation> {
    const id = typeof op === "string" ? op : op.id;
    let cur = typeof op === "string" ? undefined : op;
    const limit = opts.timeoutMs ?? this.t.cfg.operationTimeoutMs;
    const deadline = Date.now() + limit;
    for (;;) {
      if (cur && cur.state === "succeeded") return cur;
      if (cur && cur.state === "failed") throw new OperationFailedError(cur);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new TimeoutError(`operation ${id} (${cur?.kind ?? "?"}) still ${cur?.state ?? "pending"} after ${limit} ms`, {
          code: "timeout",
          status: 0,
        });
      cur = await this.get(id, { waitS: Math.max(1, Math.min(30, Math.floor(left / 1000))), signal: opts.signal });
    }
  }
}
