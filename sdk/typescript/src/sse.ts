/* sse.ts -- server-sent events read from a fetch body, per the WHATWG parsing rules */

/** One event: its `event:` type (`message` when none), its last `id:`, its `data:` lines joined. */
export interface SseEvent {
  event: string;
  id: string | undefined;
  data: string;
}

/**
 * The events of a `text/event-stream` body, in order. Lines end in LF, CRLF or CR; `:` lines
 * are comments (keepalives); a blank line dispatches the event gathered so far. A partial last
 * event (the stream cut mid-way) is not yielded.
 */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let event = "";
  let id: string | undefined;
  let data: string[] = [];
  let sawData = false;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += decoder.decode(value, { stream: true });
      let start = 0;
      for (;;) {
        let end = -1;
        for (let i = start; i < buf.length; i++) {
          const c = buf.charCodeAt(i);
          if (c === 10 || c === 13) {
            end = i;
            break;
          }
        }
        // A CR at the very end may be the first half of a CRLF: wait for the next chunk.
        if (end < 0 || (buf.charCodeAt(end) === 13 && end === buf.length - 1)) break;
        const line = buf.slice(start, end);
        start = end + (buf.charCodeAt(end) === 13 && buf.charCodeAt(end + 1) === 10 ? 2 : 1);
        if (line === "") {
          if (sawData) yield { event: event || "message", id, data: data.join("\n") };
          event = "";
          data = [];
          sawData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") {
          data.push(value);
          sawData = true;
        } else if (field === "id" && !value.includes("\0")) id = value;
      }
      buf = buf.slice(start);
    }
  } finally {
    // Ends the connection when the caller stops early (break, an exception in its loop).
    await reader.cancel().catch(() => undefined);
  }
}

/** The bytes of a base64 text (`Buffer` where there is one, else `atob`). */
export function fromBase64(s: string): Uint8Array {
  const B = (globalThis as { Buffer?: { from(s: string, enc: string): Uint8Array } }).Buffer;
  if (B) {
    const b = B.from(s, "base64");
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
