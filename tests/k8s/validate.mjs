// validate.mjs -- every object of rendered Kubernetes YAML against the Kubernetes OpenAPI
// schemas (kubernetes-models), offline.
//
//   node tests/k8s/validate.mjs FILE...     (- or no FILE: standard input)
//
// Each file is multi-document YAML (what `kubectl kustomize` prints). An object's apiVersion and
// kind choose its kubernetes-models class (apps/v1 Deployment -> kubernetes-models/apps/v1);
// validate() checks types, enums and required fields. A kind the models do not know is a failure
// too (a typo in apiVersion or kind would otherwise pass unchecked), and so is a name the API
// server would refuse (RFC 1123). Prints `ok: N objects` and exits 0, or prints each failing
// object with its error and exits 1; 2 for unreadable input or a YAML syntax error.
import { readFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";

// RFC 1123 subdomain: what metadata.name must be for the kinds SPACE deploys.
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function modulePath(apiVersion) {
  // "v1" is the core group; "apps/v1" -> apps/v1; "networking.k8s.io/v1" likewise.
  if (typeof apiVersion !== "string" || !/^([a-z0-9.-]+\/)?v[0-9]+((alpha|beta)[0-9]+)?$/.test(apiVersion))
    return null;
  return `kubernetes-models/${apiVersion}`;
}

async function modelClass(apiVersion, kind) {
  const path = modulePath(apiVersion);
  if (!path) return { error: `apiVersion ${JSON.stringify(apiVersion)} is not group/version` };
  let mod;
  try {
    mod = await import(path);
  } catch (e) {
    return { error: `no API group/version ${apiVersion} in kubernetes-models (${e.code || e.message})` };
  }
  const cls = typeof kind === "string" && Object.hasOwn(mod, kind) ? mod[kind] : null;
  if (typeof cls !== "function" || typeof cls.prototype?.validate !== "function")
    return { error: `no kind ${JSON.stringify(kind)} in ${apiVersion}` };
  return { cls };
}

function nameError(obj) {
  const name = obj.metadata?.name;
  if (typeof name !== "string" || name.length > 253 || !SUBDOMAIN.test(name))
    return `metadata.name ${JSON.stringify(name)} is not an RFC 1123 subdomain`;
  const ns = obj.metadata?.namespace;
  if (ns !== undefined && (typeof ns !== "string" || ns.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(ns)))
    return `metadata.namespace ${JSON.stringify(ns)} is not an RFC 1123 label`;
  return null;
}

async function check(obj) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return "not an object";
  const { cls, error } = await modelClass(obj.apiVersion, obj.kind);
  if (error) return error;
  const bad = nameError(obj);
  if (bad) return bad;
  try {
    new cls(obj).validate();
  } catch (e) {
    return e.message;
  }
  return null;
}

async function main(files) {
  let count = 0;
  let failures = 0;
  for (const file of files.length ? files : ["-"]) {
    let text;
    try {
      text = readFileSync(file === "-" ? 0 : file, "utf8");
    } catch (e) {
      console.error(`${file}: ${e.message}`);
      return 2;
    }
    const docs = parseAllDocuments(text);
    for (const [i, doc] of docs.entries()) {
      if (doc.errors.length) {
        console.error(`${file}: document ${i + 1}: YAML: ${doc.errors[0].message}`);
        return 2;
      }
      const obj = doc.toJS();
      if (obj === null) continue; // an empty document (a trailing ---)
      count++;
      const err = await check(obj);
      if (err) {
        failures++;
        const what = `${obj?.apiVersion} ${obj?.kind} ${obj?.metadata?.namespace ?? ""}/${obj?.metadata?.name}`;
        console.error(`${file}: document ${i + 1}: ${what}: ${err}\n${stringify(obj)}`);
      }
    }
  }
  if (failures) {
    console.error(`failed: ${failures} of ${count} objects`);
    return 1;
  }
  if (!count) {
    console.error("no objects");
    return 1;
  }
  console.log(`ok: ${count} objects`);
  return 0;
}

process.exitCode = await main(process.argv.slice(2));
