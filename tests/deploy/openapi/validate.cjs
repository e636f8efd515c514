// Validates Kubernetes objects against the OpenAPI schemas of Kubernetes v1.27.1 and v1.33.0
// (npm kubernetes-models 4.4.2 and 4.5.1, installed by tests/deploy/openapi/run.sh). No npm
// release carries v1.32's schemas; an object valid under both is valid under v1.32 for the
// stable (v1) kinds used here, whose fields only ever get added. What the schemas check: types,
// required fields, enums and formats. Unknown fields (which Kubernetes' OpenAPI allows, and
// kube-apiserver rejects while decoding, as `kubectl apply` does by default) are found by walking
// each object along the field declarations the same packages ship (their .d.ts files, generated
// from the same OpenAPI documents).
//
//   node validate.cjs <objects.json>...     (each a JSON array of objects)
//
// Prints one line per object and version; exit status 1 if any object is invalid, 2 on bad input.
"use strict";
const fs = require("fs");
const path = require("path");

const VERSIONS = [
  ["v1.27.1", "k8s-schemas-v1.27"],
  ["v1.33.0", "k8s-schemas-v1.33"],
];
// Kinds that come from CRDs, not from Kubernetes itself.
const NOT_CORE = new Set(["monitoring.coreos.com/v1"]);

function modelFor(pkg, apiVersion, kind) {
  const dir = apiVersion; // "v1", "apps/v1", "rbac.authorization.k8s.io/v1", ...
  const file = require.resolve(path.join(pkg, dir, kind));
  const mod = require(file);
  if (!mod[kind]) throw new Error(`no model ${kind} in ${file}`);
  return mod[kind];
}

// ---- unknown fields, from the packages' field declarations ----
const declCache = new Map();

// The .d.ts file a module specifier names, seen from `fromDir` inside package root `pkgRoot`.
function declFile(spec, fromDir, pkgRoot) {
  if (spec.startsWith(".")) return path.resolve(fromDir, spec) + ".d.ts";
  for (const base of [path.join(pkgRoot, "node_modules"), path.join(__dirname, "node_modules")]) {
    const f = path.join(base, spec) + ".d.ts";
    if (fs.existsSync(f)) return f;
  }
  throw new Error(`cannot find declarations of ${spec}`);
}

// { fields: Map<name, type text>, imports: Map<interface name, file> } of a model's interface.
function readDecl(file, pkgRoot) {
  if (declCache.has(file)) return declCache.get(file);
  const text = fs.readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/import \{ (\w+) \} from "([^"]+)";/g)) {
    imports.set(m[1], declFile(m[2], path.dirname(file), pkgRoot));
  }
  const body = text.match(/export interface \w+(?: extends [^{]+)? \{([\s\S]*?)\n\}/);
  const fields = new Map();
  if (body) {
    // `"name"?: <type>;` where a map type spans lines ({ [key: string]: X; }).
    const src = body[1].replace(/\/\*[\s\S]*?\*\//g, "");
    const prop = /"([^"]+)"\??:\s*/g;
    let m;
    while ((m = prop.exec(src))) {
      let depth = 0;
      let i = prop.lastIndex;
      for (; i < src.length; i++) {
        const c = src[i];
        if (c === "{" || c === "<") depth++;
        else if (c === "}" || c === ">") depth--;
        else if (c === ";" && depth === 0) break;
      }
      fields.set(m[1], src.slice(prop.lastIndex, i).replace(/\s+/g, " ").trim());
      prop.lastIndex = i + 1;
    }
  }
  const decl = { fields, imports };
  declCache.set(file, decl);
  return decl;
}

// Reports fields of `value` that the declared type does not have.
function unknownFields(value, type, decl, pkgRoot, where, out) {
  let t = type;
  let m;
  if ((m = t.match(/^Array<(.+)>$/))) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, m[1], decl, pkgRoot, `${where}/${i}`, out));
    return;
  }
  if ((m = t.match(/^\{\s*\[key: string\]: (.+?);?\s*\}$/))) {
    if (value && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) unknownFields(v, m[1], decl, pkgRoot, `${where}/${k}`, out);
    }
    return;
  }
  const file = decl.imports.get(t);
  if (!file || !value || typeof value !== "object" || Array.isArray(value)) return;
  checkObject(value, file, pkgRoot, where, out);
}

function checkObject(value, file, pkgRoot, where, out) {
  const decl = readDecl(file, pkgRoot);
  if (decl.fields.size === 0) return; // a free-form type (e.g. RawExtension)
  for (const [k, v] of Object.entries(value)) {
    if (!decl.fields.has(k)) {
      out.push(`${where}/${k}: unknown field`);
      continue;
    }
    unknownFields(v, decl.fields.get(k), decl, pkgRoot, `${where}/${k}`, out);
  }
}

let failed = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  let objects;
  try {
    objects = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    console.error(`${file}: ${e.message}`);
    process.exit(2);
  }
  if (!Array.isArray(objects) || objects.length === 0) {
    console.error(`${file}: expected a non-empty JSON array of objects`);
    process.exit(2);
  }
  for (const obj of objects) {
    const id = `${obj.apiVersion} ${obj.kind} ${(obj.metadata || {}).namespace || ""}/${(obj.metadata || {}).name}`;
    if (NOT_CORE.has(obj.apiVersion)) {
      console.log(`skip ${id} (a CRD kind, not in Kubernetes' schemas)`);
      continue;
    }
    for (const [version, pkg] of VERSIONS) {
      let Model;
      try {
        Model = modelFor(pkg, obj.apiVersion, obj.kind);
      } catch (e) {
        console.log(`FAIL ${id} against ${version}: unknown kind (${e.message})`);
        failed++;
        continue;
      }
      const problems = [];
      try {
        new Model(JSON.parse(JSON.stringify(obj))).validate();
      } catch (e) {
        problems.push(e.message);
      }
      try {
        const pkgRoot = path.join(__dirname, "node_modules", pkg);
        checkObject(obj, path.join(pkgRoot, obj.apiVersion, obj.kind) + ".d.ts", pkgRoot, "data", problems);
      } catch (e) {
        problems.push(e.message);
      }
      if (problems.length) {
        console.log(`FAIL ${id} against ${version}: ${problems.join(", ")}`);
        failed++;
      } else {
        console.log(`ok   ${id} against ${version}`);
        checked++;
      }
    }
  }
}
console.log(`${checked} validations passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
