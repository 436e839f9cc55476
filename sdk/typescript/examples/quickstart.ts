/* quickstart.ts -- the guide's example, type-checked by `make sdk-ts` against dist's declarations
 * (imported by the package's own name, as a user would). Run it with SPACE_URL and SPACE_API_KEY set:
 *   node --experimental-strip-types examples/quickstart.ts   (Node 22), or compile it first. */
import { Client, ConflictError, NotFoundError, type CommandResult } from "@space/sdk";

const client = new Client(); // SPACE_URL, SPACE_API_KEY or SPACE_API_KEY_FILE
const sb = await client.sandboxes.create({ template: "base" });
try {
  const r: CommandResult = await sb.run(["python3", "-c", "print(6*7)"]);
  console.log(r.stdout.trim(), r.exitCode); // 42 0

  await sb.files.write("/home/user/a.txt", "hi");
  console.log(await sb.files.read("/home/user/a.txt")); // hi

  // Streamed output, and stdin.
  const cmd = await sb.commands.start(["sh", "-c", "read name; echo hello $name; echo done >&2"], {
    stdin: true,
    onStdout: (s) => console.log("stdout:", s.trimEnd()),
    onStderr: (s) => console.log("stderr:", s.trimEnd()),
  });
  await cmd.sendStdin("world\n", { close: true });
  await cmd.wait();

  const [kid] = await sb.fork({ count: 1 });
  await kid.delete();

  try {
    await client.sandboxes.get("sb-0000000000000000");
  } catch (e) {
    if (e instanceof NotFoundError) console.log(e.code, e.status); // not_found 404
    else if (e instanceof ConflictError) console.log("conflict:", e.message);
    else throw e;
  }
} finally {
  await sb.delete();
}
